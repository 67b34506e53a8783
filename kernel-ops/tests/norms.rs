//! The norm kernels on the CPU emulator against the CPU (float64)
//! references: a few rows of every row length of the list
//! (`norms::BENCH_COLS`: 768 .. 16384 and odd multiples of 8) in f16 and
//! f32, each row shape (a warp, a warpgroup, 4 warpgroups per row, a
//! cluster of 4 CTAs per row up to 65536 columns), widths that are not a
//! multiple of 8 (peeled 16-byte accesses, rows at every alignment), all
//! three element types, through the same entry points a GPU program calls
//! (`tests/gpu.rs` runs them there); the fused residual norms with `y` and
//! with each FP8 scaling.
mod common;

use common::{check_all, check_bwd};
use kernel_device::{bf16, f16, E4M3};
use kernel_host::emulate::Emulator;
use kernel_host::{uniform_f32 as inputs, Device};
use kernel_ops::norms::{self, FusedNormElem, Fp8Scale, NormElem, NormOut, RowAccess, RowKernel, RowShape};

#[test]
fn f16_norms_match_the_cpu_reference_at_every_listed_width() {
    let dev = Device::emulator();
    for cols in norms::BENCH_COLS {
        // 5 rows: a partial CTA of the one-row-per-warp kernels.
        let rows = if cols <= 2048 { 5 } else { 1 };
        check_all::<f16>(f16::TOLERANCE, rows, cols, &dev);
    }
    for emu in Emulator::schedules(1, 2) {
        check_all::<f16>(f16::TOLERANCE, 2, 1024, &Device::emulator_with(emu));
    }
}

#[test]
fn bf16_norms_match_the_cpu_reference_on_each_row_shape() {
    let dev = Device::emulator();
    for cols in [8, 776, 2048, 8200, 16384] {
        check_all::<bf16>(bf16::TOLERANCE, 2, cols, &dev);
    }
}

#[test]
fn f32_norms_match_the_f64_reference_at_every_listed_width() {
    let dev = Device::emulator();
    for cols in norms::BENCH_COLS {
        let rows = if cols <= 2048 { 3 } else { 1 };
        check_all::<f32>(f32::TOLERANCE, rows, cols, &dev);
    }
}

#[test]
fn odd_widths_move_their_bodies_in_16_byte_accesses_and_stay_in_their_rows() {
    // Rows of these widths start at every alignment (row r at element r *
    // cols): 16-byte accesses for each row's body, its partial chunks at
    // both ends by element, gamma and beta shifted to the row's alignment;
    // `check_all` sees no read or write past the buffers.
    let dev = Device::emulator();
    for cols in [1, 7, 13, 1001] {
        check_all::<f16>(f16::TOLERANCE, 5, cols, &dev);
        check_all::<bf16>(bf16::TOLERANCE, 3, cols, &dev);
        check_all::<f32>(f32::TOLERANCE, 3, cols, &dev);
    }
    // 16-byte accesses for f32 (a multiple of 4), peeled for f16.
    check_all::<f32>(f32::TOLERANCE, 2, 1004, &dev);
    check_all::<f16>(f16::TOLERANCE, 2, 1004, &dev);
    // A warpgroup and 4 warpgroups per row (7001: a warpgroup's `V` of 7
    // goes to 4 warpgroups).
    check_all::<bf16>(bf16::TOLERANCE, 2, 4099, &dev);
    check_all::<bf16>(bf16::TOLERANCE, 2, 7001, &dev);
    check_all::<f32>(f32::TOLERANCE, 1, 9001, &dev);
    // One element per access where it was measured faster than the peel:
    // f32 at a warpgroup's `V` of 7, 16-bit rows whose peel would need a
    // cluster.
    check_all::<f32>(f32::TOLERANCE, 1, 7001, &dev);
    check_all::<f16>(f16::TOLERANCE, 1, 16383, &dev);
}

#[test]
fn rows_wider_than_one_cta_are_split_over_a_cluster() {
    let dev = Device::emulator();
    check_all::<bf16>(bf16::TOLERANCE, 1, 32768, &dev);
    check_all::<f32>(f32::TOLERANCE, 1, 65536, &dev);
    check_all::<f16>(f16::TOLERANCE, 2, 16385, &dev);
    check_all::<f32>(f32::TOLERANCE, 1, 65535, &dev);
}

#[test]
fn row_shapes_cover_each_width_with_the_fewest_pieces() {
    assert_eq!(RowShape::of(8), RowShape::Warp(1));
    assert_eq!(RowShape::of(768), RowShape::Warp(3));
    assert_eq!(RowShape::of(1016), RowShape::Warp(4));
    assert_eq!(RowShape::of(1024), RowShape::Warpgroup(1));
    assert_eq!(RowShape::of(2560), RowShape::Warpgroup(3));
    assert_eq!(RowShape::of(8192), RowShape::Warpgroup(8));
    assert_eq!(RowShape::of(8200), RowShape::Wide(3));
    assert_eq!(RowShape::of(12288), RowShape::Wide(3));
    assert_eq!(RowShape::of(16384), RowShape::Wide(4));
    assert_eq!(RowShape::of(16392), RowShape::Cluster(2));
    assert_eq!(RowShape::of(32768), RowShape::Cluster(2));
    assert_eq!(RowShape::of(32776), RowShape::Cluster(4));
    assert_eq!(RowShape::of(65536), RowShape::Cluster(4));
    // 16-byte accesses where the width is a multiple of 16 bytes, else
    // peeled ones (the shape of the width plus 7 elements for 16-bit
    // types, 3 for f32), or one element per access where a cluster's
    // slice has no room for the peel or the peel was measured slower.
    let (vec16, peel, single) = (RowAccess::Vec16, RowAccess::Peel, RowAccess::Single);
    assert_eq!(RowKernel::of::<f16>(1000), RowKernel { shape: RowShape::Warp(4), access: vec16 });
    assert_eq!(RowKernel::of::<f32>(1004), RowKernel { shape: RowShape::Warp(4), access: vec16 });
    assert_eq!(RowKernel::of::<bf16>(1004), RowKernel { shape: RowShape::Warp(4), access: peel });
    assert_eq!(RowKernel::of::<f32>(515), RowKernel { shape: RowShape::Warp(3), access: peel });
    assert_eq!(RowKernel::of::<bf16>(1017), RowKernel { shape: RowShape::Warpgroup(1), access: peel });
    assert_eq!(RowKernel::of::<f16>(1025), RowKernel { shape: RowShape::Warpgroup(2), access: peel });
    assert_eq!(RowKernel::of::<f16>(5001), RowKernel { shape: RowShape::Warpgroup(5), access: peel });
    assert_eq!(RowKernel::of::<bf16>(7001), RowKernel { shape: RowShape::Wide(3), access: peel });
    assert_eq!(RowKernel::of::<f32>(9001), RowKernel { shape: RowShape::Wide(3), access: peel });
    assert_eq!(RowKernel::of::<f32>(7001), RowKernel { shape: RowShape::Warpgroup(8), access: single });
    assert_eq!(RowKernel::of::<f32>(12291), RowKernel { shape: RowShape::Wide(4), access: single });
    assert_eq!(RowKernel::of::<f16>(16383), RowKernel { shape: RowShape::Wide(4), access: single });
    assert_eq!(RowKernel::of::<f16>(16385), RowKernel { shape: RowShape::Cluster(2), access: peel });
    assert_eq!(RowKernel::of::<f16>(40001), RowKernel { shape: RowShape::Cluster(4), access: peel });
    assert_eq!(RowKernel::of::<bf16>(65501), RowKernel { shape: RowShape::Cluster(4), access: peel });
    assert_eq!(RowKernel::of::<bf16>(65505), RowKernel { shape: RowShape::Cluster(4), access: single });
    assert_eq!(RowKernel::of::<f32>(65535), RowKernel { shape: RowShape::Cluster(4), access: single });
}

#[test]
fn unsupported_row_lengths_and_short_buffers_are_errors_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let x = dev.zeros::<f16>(1004).unwrap();
    let mut y = dev.zeros::<f16>(1004).unwrap();
    let e = norms::softmax(&ops, &x, &mut y, 1, 0).unwrap_err().to_string();
    assert!(e.contains("cols = 0") && e.contains("1 to 65536 columns"), "{e}");
    let e = norms::softmax(&ops, &x, &mut y, 1, 65537).unwrap_err().to_string();
    assert!(e.contains("cols = 65537") && e.contains("1 to 65536 columns"), "{e}");
    let e = norms::softmax(&ops, &x, &mut y, 1, 1024).unwrap_err().to_string();
    assert!(e.contains("`x` holds 1004 elements; 1024 needed"), "{e}");
    let e = norms::softmax(&ops, &x, &mut y, 0, 8).unwrap_err().to_string();
    assert!(e.contains("rows = 0"), "{e}");
    // The fused norms: multiples of 8 up to 16384.
    let mut r = dev.zeros::<f16>(1004).unwrap();
    let e = norms::add_rms_norm(&ops, &x, &x, &x, &mut r, NormOut::Y(&mut y), 1e-5, 1, 1004).unwrap_err().to_string();
    assert!(e.contains("cols = 1004") && e.contains("multiple of 8") && e.contains("pad the rows to 1008"), "{e}");
    let e = norms::add_rms_norm(&ops, &x, &x, &x, &mut r, NormOut::Y(&mut y), 1e-5, 1, 16392).unwrap_err().to_string();
    assert!(e.contains("cols = 16392") && e.contains("at most 16384"), "{e}");
}

/// `x` and `residual` rounded to `T`, as f32.
fn input<T: FusedNormElem>(n: usize, seed: u64) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = inputs(n, seed).into_iter().map(|v| T::from_f32(4.0 * v)).collect();
    let f = t.iter().map(|v| v.to_f32()).collect();
    (t, f)
}

/// `max |got - want| / max |want|`.
fn rel(got: &[f32], want: &[f32]) -> f64 {
    let scale = want.iter().fold(0f64, |m, &w| m.max(w.abs() as f64));
    got.iter().zip(want).fold(0f64, |m, (&g, &w)| m.max(((g - w) as f64).abs())) / scale
}

/// The fused norm (layer norm when `layer`) at `rows x cols` with `y`
/// out and with each FP8 scaling, against [`norms::add_norm_reference`].
fn check_fused<T: FusedNormElem>(tol: f64, rows: usize, cols: usize, layer: bool, dev: &Device) {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let n = rows * cols;
    let ((xh, xf), (rh, rf)) = (input::<T>(n, 1), input::<T>(n, 2));
    let (gh, gf) = input::<T>(cols, 3);
    let (bh, bf) = input::<T>(cols, 4);
    let eps = 1e-5;
    let (x, r, g, b) = (dev.upload(&xh).unwrap(), dev.upload(&rh).unwrap(), dev.upload(&gh).unwrap(), dev.upload(&bh).unwrap());
    let round = |v: f32| T::from_f32(v).to_f32();
    let (want_s, want_y) = norms::add_norm_reference(&xf, &rf, &gf, layer.then_some(&bf[..]), eps, cols, round);
    let what = format!("{} {cols} cols", if layer { "add_layer_norm" } else { "add_rms_norm" });
    let run = |new_r: &mut kernel_host::Buffer<T>, out: NormOut<'_, T>| {
        if layer {
            norms::add_layer_norm(&ops, &x, &r, &g, &b, new_r, out, eps, rows, cols).unwrap()
        } else {
            norms::add_rms_norm(&ops, &x, &r, &g, new_r, out, eps, rows, cols).unwrap()
        }
    };
    let back = |v: Vec<T>| v.into_iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let mut new_r = dev.upload(&vec![T::from_f32(f32::NAN); n]).unwrap();
    let mut y = dev.upload(&vec![T::from_f32(f32::NAN); n]).unwrap();
    run(&mut new_r, NormOut::Y(&mut y));
    assert_eq!(back(dev.download(&new_r).unwrap()), want_s, "{what}: new_residual is round(x + residual)");
    let e = rel(&back(dev.download(&y).unwrap()), &want_y);
    assert!(e < tol, "{what}: y's max rel error {e}");

    // FP8: dequantized q against the reference y (e4m3: 3 mantissa bits,
    // a relative rounding of 2^-4 at most, of the row's or tensor's amax).
    let amax = |v: &[f32]| v.iter().fold(0f32, |m, &x| m.max(x.abs()));
    for scale in [Fp8Scale::PerRow, Fp8Scale::PerTensor(amax(&want_y) / 400.0), Fp8Scale::PerTensorDynamic] {
        let mut q = dev.upload(&vec![E4M3::from_f32(f32::NAN); n]).unwrap();
        let mut scales = dev.upload(&vec![f32::NAN; if scale == Fp8Scale::PerRow { rows } else { 1 }]).unwrap();
        dev.write(&mut new_r, &vec![T::from_f32(f32::NAN); n]).unwrap();
        run(&mut new_r, NormOut::Fp8 { q: &mut q, scales: &mut scales, scale });
        assert_eq!(back(dev.download(&new_r).unwrap()), want_s, "{what} {scale:?}: new_residual");
        let (q, s) = (dev.download(&q).unwrap(), dev.download(&scales).unwrap());
        for row in 0..rows {
            let want = &want_y[row * cols..(row + 1) * cols];
            let sc = match scale {
                Fp8Scale::PerRow => amax(want) / 448.0,
                Fp8Scale::PerTensor(s) => s,
                Fp8Scale::PerTensorDynamic => amax(&want_y) / 448.0,
            };
            let got_scale = s[if scale == Fp8Scale::PerRow { row } else { 0 }];
            assert!((got_scale / sc - 1.0).abs() < 1e-2, "{what} {scale:?} row {row}: scale {got_scale}, want {sc}");
            let deq: Vec<f32> = q[row * cols..(row + 1) * cols].iter().map(|v| v.to_f32() * got_scale).collect();
            let e = rel(&deq, want);
            assert!(e < 0.07, "{what} {scale:?} row {row}: dequantized max rel error {e}");
        }
    }
}

#[test]
fn fused_residual_norms_match_the_f64_reference_with_y_and_fp8_outputs() {
    let dev = Device::emulator();
    for cols in [24, 768, 2560, 12288] {
        let rows = if cols <= 2560 { 3 } else { 1 };
        check_fused::<bf16>(bf16::TOLERANCE, rows, cols, false, &dev);
        check_fused::<f16>(f16::TOLERANCE, rows, cols, true, &dev);
    }
    check_fused::<f16>(f16::TOLERANCE, 2, 1000, false, &dev);
    check_fused::<bf16>(bf16::TOLERANCE, 2, 1024, true, &dev);
}

// ------------------------------------------------------------- backward

#[test]
fn backward_kernels_match_the_f64_reference_on_each_row_shape() {
    let dev = Device::emulator();
    // 1 row; 3 rows (one group); 17 rows (5 groups of up to 4 rows: each
    // group's loop adds to its partial row).
    // (f16 and bf16 share every line but the conversions: the widest rows,
    // slow on the emulator, run in bf16 only.)
    for (rows, cols) in [(17, 8), (3, 768), (1, 1000), (5, 1024), (3, 2056), (3, 4096), (1, 8192), (2, 12288), (1, 16384)] {
        if cols < 8192 {
            check_bwd::<f16>(rows, cols, &dev);
        }
        check_bwd::<bf16>(rows, cols, &dev);
        if cols <= norms::BWD_MAX_COLS_F32 {
            check_bwd::<f32>(rows, cols, &dev);
        }
    }
    // f32 rows of a multiple of 4 (16-byte accesses of 4 f32).
    check_bwd::<f32>(17, 100, &dev);
    check_bwd::<f32>(3, 8188, &dev);
    for emu in Emulator::schedules(1, 2) {
        check_bwd::<f16>(9, 264, &Device::emulator_with(emu));
    }
}

#[test]
fn backward_of_odd_widths_moves_one_element_per_access() {
    // Rows at every alignment (one element per access, as the forward):
    // each row shape, and the f32 partial rows with the same map. (Not 1
    // column: there dx is 0 for the layer norm and all cancellation for
    // the RMS norm, `eps / (x² + eps)`, no normwise relative error.)
    let dev = Device::emulator();
    for (rows, cols) in [(5, 3), (9, 7), (3, 13), (5, 1001), (2, 1025)] {
        check_bwd::<f16>(rows, cols, &dev);
        check_bwd::<bf16>(rows, cols, &dev);
        check_bwd::<f32>(rows, cols, &dev);
    }
    check_bwd::<bf16>(2, 4095, &dev);
    check_bwd::<f16>(1, 1004, &dev); // f16: not a multiple of 8; f32: 16-byte accesses
    check_bwd::<f32>(3, 1004, &dev);
    assert_eq!(norms::backward_kernel::<f16>(13), RowKernel { shape: RowShape::Warp(1), access: RowAccess::Single });
    assert_eq!(norms::backward_kernel::<f16>(1025), RowKernel { shape: RowShape::Warpgroup(2), access: RowAccess::Single });
    assert_eq!(norms::backward_kernel::<f16>(768), RowKernel { shape: RowShape::Warp(4), access: RowAccess::Vec16 });
    assert_eq!(norms::backward_kernel::<f32>(3072), RowKernel { shape: RowShape::Warpgroup(4), access: RowAccess::Vec16 });
}

#[test]
fn backward_groups_take_every_row_once() {
    // 31 groups of 7 or 8 rows (8 CTAs of 4 warps, the last with 3).
    let dev = Device::emulator();
    assert_eq!(norms::backward_groups(243), 31);
    check_bwd::<bf16>(243, 16, &dev);
    check_bwd::<f32>(243, 16, &dev);
    assert_eq!(norms::backward_groups(1), 1);
    assert_eq!(norms::backward_groups(17), 3);
    // Beyond 8 x 4096 rows the groups stop growing and take more rows each
    // (a grid the emulator does not run: the GPU tests do).
    assert_eq!(norms::backward_groups(8 * norms::BWD_MAX_GROUPS + 5), norms::BWD_MAX_GROUPS);
}

/// The f64 reference's gradients against central differences of the f64
/// forward (the loss `sum(y * dy)`), on a tiny problem.
#[test]
fn backward_references_match_finite_differences() {
    let (rows, cols, eps) = (2, 5, 1e-3f32);
    let x: Vec<f32> = inputs(rows * cols, 41).into_iter().map(|v| 2.0 * v + 0.3).collect();
    let g: Vec<f32> = inputs(cols, 42).into_iter().map(|v| 1.0 + v / 2.0).collect();
    let b: Vec<f32> = inputs(cols, 43);
    let dy: Vec<f32> = inputs(rows * cols, 44);
    // The forwards in f64 (the f32 references round their outputs).
    let rms = |x: &[f64], g: &[f64]| -> f64 {
        x.chunks(cols).zip(dy.chunks(cols)).map(|(r, d)| {
            let s = 1.0 / (r.iter().map(|v| v * v).sum::<f64>() / cols as f64 + eps as f64).sqrt();
            (0..cols).map(|i| r[i] * s * g[i] * d[i] as f64).sum::<f64>()
        }).sum()
    };
    let ln = |x: &[f64], g: &[f64], b: &[f64]| -> f64 {
        x.chunks(cols).zip(dy.chunks(cols)).map(|(r, d)| {
            let m = r.iter().sum::<f64>() / cols as f64;
            let s = 1.0 / (r.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / cols as f64 + eps as f64).sqrt();
            (0..cols).map(|i| ((r[i] - m) * s * g[i] + b[i]) * d[i] as f64).sum::<f64>()
        }).sum()
    };
    let f64s = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let (xd, gd, bd) = (f64s(&x), f64s(&g), f64s(&b));
    let h = 1e-6;
    // d loss / d v[i] by central differences of `f` over `v`.
    let diff = |v: &[f64], i: usize, f: &dyn Fn(&[f64]) -> f64| {
        let (mut p, mut m) = (v.to_vec(), v.to_vec());
        p[i] += h;
        m[i] -= h;
        (f(&p) - f(&m)) / (2.0 * h)
    };
    let close = |what: &str, got: &[f32], want: Vec<f64>| {
        for (i, (&a, w)) in got.iter().zip(&want).enumerate() {
            assert!((a as f64 - w).abs() < 1e-5 * (1.0 + w.abs()), "{what}[{i}]: reference {a}, finite difference {w}");
        }
    };
    let (dx, dg) = norms::rms_norm_backward_reference(&x, &g, &dy, eps, cols);
    close("rms dx", &dx, (0..rows * cols).map(|i| diff(&xd, i, &|v| rms(v, &gd))).collect());
    close("rms dgamma", &dg, (0..cols).map(|i| diff(&gd, i, &|v| rms(&xd, v))).collect());
    let (dx, dg, db) = norms::layer_norm_backward_reference(&x, &g, &dy, eps, cols);
    close("layer dx", &dx, (0..rows * cols).map(|i| diff(&xd, i, &|v| ln(v, &gd, &bd))).collect());
    close("layer dgamma", &dg, (0..cols).map(|i| diff(&gd, i, &|v| ln(&xd, v, &bd))).collect());
    close("layer dbeta", &db, (0..cols).map(|i| diff(&bd, i, &|v| ln(&xd, &gd, v))).collect());
}

#[test]
fn backward_refusals_name_the_rule_and_launch_nothing() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let x = dev.zeros::<f16>(2 * 1004).unwrap();
    let g = dev.zeros::<f16>(1004).unwrap();
    let mut dx = dev.upload(&vec![f16::from_f32(f32::NAN); 2 * 1004]).unwrap();
    let mut dg = dev.upload(&vec![f32::NAN; 16392]).unwrap();
    let mut db = dev.upload(&vec![f32::NAN; 16392]).unwrap();
    let untouched = |dx: &kernel_host::Buffer<f16>, dg: &kernel_host::Buffer<f32>| {
        assert!(dev.download(dx).unwrap().iter().all(|v| v.to_f32().is_nan()), "dx written on an error");
        assert!(dev.download(dg).unwrap().iter().all(|v| v.is_nan()), "dgamma written on an error");
    };
    let xf = dev.zeros::<f32>(2 * 1004).unwrap();
    let mut dxf = dev.zeros::<f32>(2 * 1004).unwrap();
    let e = norms::rms_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, 1e-5, 2, 0).unwrap_err().to_string();
    assert!(e.contains("rms_norm_backward") && e.contains("cols = 0"), "{e}");
    // Odd widths above 4096 (one element per access would spill).
    let e = norms::rms_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, 1e-5, 1, 4099).unwrap_err().to_string();
    assert!(e.contains("cols = 4099") && e.contains("wider than 4096 columns only at a multiple of 8") && e.contains("pad the rows to 4104"), "{e}");
    // Too wide, zero rows, short buffers.
    let e = norms::layer_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, &mut db, 1e-5, 1, 16392).unwrap_err().to_string();
    assert!(e.contains("cols = 16392") && e.contains("at most 16384"), "{e}");
    let e = norms::rms_norm_backward(&dev, &ops, &xf, &xf, &xf, &mut dxf, &mut dg, 1e-5, 1, 8196).unwrap_err().to_string();
    assert!(e.contains("cols = 8196") && e.contains("f32 rows of at most 8192"), "{e}");
    let e = norms::rms_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, 1e-5, 0, 8).unwrap_err().to_string();
    assert!(e.contains("rows = 0"), "{e}");
    let e = norms::rms_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, 1e-5, 3, 1000).unwrap_err().to_string();
    assert!(e.contains("`x` holds 2008 elements; 3000 needed for 3 x 1000"), "{e}");
    let e = norms::rms_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, 1e-5, 1, 1008).unwrap_err().to_string();
    assert!(e.contains("`gamma` holds 1004 elements; 1008 needed"), "{e}");
    let mut short = dev.zeros::<f32>(8).unwrap();
    let e = norms::layer_norm_backward(&dev, &ops, &x, &g, &x, &mut dx, &mut dg, &mut short, 1e-5, 2, 1000).unwrap_err().to_string();
    assert!(e.contains("`dbeta` holds 8 elements; 1000 needed"), "{e}");
    untouched(&dx, &dg);
}
