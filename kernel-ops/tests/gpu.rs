//! `kernel_ops::Matmul` on a GPU (ignored without one: run with
//! `cargo test -p kernel-ops --test gpu -- --ignored` on a Hopper machine).
//! Ragged shapes (TMA's out-of-bounds fill), every instance, the documented
//! errors with real buffers, and the autotuner's cache.
mod common;

use kernel_device::{bf16, f16};
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, Buffer, Device, Gpu};
use kernel_ops::matmul::{instance, Grid, Instance, INSTANCES};
use kernel_ops::norms::NormElem;
use kernel_ops::{Matmul, MatmulError};

fn gpu_device() -> Device {
    Device::gpu(Gpu::new(0).unwrap())
}

fn problem(gpu: &Device, m: usize, n: usize, k: usize) -> (Vec<f16>, Vec<f16>, Buffer<f16>, Buffer<f16>, Buffer<f16>) {
    let a = randn_f16(m * k, 11);
    let b = randn_f16(n * k, 12);
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let dc = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
    (a, b, da, db, dc)
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn ragged_1000_cubed_and_other_edges_match_the_cpu_for_every_instance() {
    let gpu = gpu_device();
    let cache = std::env::temp_dir().join(format!("kernel-ops-gpu-test-{}.tsv", std::process::id()));
    let mm = Matmul::with_cache(&gpu, cache).unwrap();
    for (m, n, k) in [(1000, 1000, 1000), (1, 8, 8), (257, 136, 72), (130, 264, 4104)] {
        let (a, b, da, db, _) = problem(&gpu, m, n, k);
        let mut dc;
        let reference = reference_gemm_nt(m, n, k, &a, &b);
        for inst in INSTANCES {
            dc = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
            mm.matmul_with(inst, &da, &db, &mut dc, m, n, k).unwrap();
            let err = rel_frobenius_error(&gpu.download(&dc).unwrap(), &reference);
            assert!(err < 2e-3, "{} at {m}x{n}x{k}: relative Frobenius error {err}", inst.name);
        }
        // The entry point (default instance) too.
        dc = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        mm.matmul(&da, (m, k), &db, (n, k), &mut dc).unwrap();
        let err = rel_frobenius_error(&gpu.download(&dc).unwrap(), &reference);
        assert!(err < 2e-3, "matmul at {m}x{n}x{k}: {err}");
    }
}

/// The split-K kernels at decode rows (M = 64, N = 4096, K = 8192: 32
/// tiles of 128 x 128, 4 splits on 132 SMs; 64 tiles of 64 x 64 or
/// 128 x 64, 2 splits): each matches the CPU, and five runs give the same bits (the partials are summed in split
/// order whichever CTA sums them).
#[test]
#[ignore = "needs a Hopper GPU"]
fn split_k_at_decode_rows_matches_the_cpu_and_repeats_bit_for_bit() {
    let gpu = gpu_device();
    let mm = Matmul::with_cache(&gpu, std::env::temp_dir().join("kernel-ops-gpu-test-unused.tsv")).unwrap();
    let (m, n, k) = (64, 4096, 8192);
    let (a, b, da, db, mut dc) = problem(&gpu, m, n, k);
    let reference = reference_gemm_nt(m, n, k, &a, &b);
    let split: Vec<&Instance> = INSTANCES.iter().filter(|i| i.grid == Grid::SplitK).collect();
    assert!(split.len() >= 4, "the split-K instances: {split:?}");
    for splitk in split {
        let name = splitk.name;
        let mut first: Option<Vec<u16>> = None;
        for _ in 0..5 {
            gpu.write(&mut dc, &vec![f16::NAN; m * n]).unwrap();
            mm.matmul_with(splitk, &da, &db, &mut dc, m, n, k).unwrap();
            let got = gpu.download(&dc).unwrap();
            let err = rel_frobenius_error(&got, &reference);
            assert!(err < 2e-3, "{name} at {m}x{n}x{k}: relative Frobenius error {err}");
            let bits: Vec<u16> = got.iter().map(|x| x.to_bits()).collect();
            match &first {
                None => first = Some(bits),
                Some(f) => assert!(f == &bits, "{name}: a second run gave other bits"),
            }
        }
    }
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn refused_shapes_return_the_documented_error_and_launch_nothing() {
    let gpu = gpu_device();
    let mm = Matmul::with_cache(&gpu, std::env::temp_dir().join("kernel-ops-gpu-test-unused.tsv")).unwrap();
    let (_, _, da, db, mut dc) = problem(&gpu, 64, 64, 64);
    let before = gpu.download(&dc).unwrap();
    let e = mm.matmul(&da, (64, 64), &db, (64, 32), &mut dc).unwrap_err();
    assert!(matches!(e, MatmulError::KMismatch { a_k: 64, b_k: 32 }), "{e}");
    let e = mm.matmul(&da, (32, 64), &db, (64, 64), &mut dc).unwrap_err();
    assert!(matches!(e, MatmulError::BufferLength { name: "a", .. }), "{e}");
    let e = mm.matmul(&da, (64, 64), &db, (64, 64), &mut gpu.upload(&vec![f16::ZERO; 100]).unwrap()).unwrap_err();
    assert!(matches!(e, MatmulError::BufferLength { name: "c", .. }), "{e}");
    let (_, _, da2, db2, mut dc2) = problem(&gpu, 64, 60, 60);
    let e = mm.matmul(&da2, (64, 60), &db2, (60, 60), &mut dc2).unwrap_err();
    assert!(matches!(e, MatmulError::MisalignedStride { dim: "K", value: 60, .. }), "{e}");
    gpu.synchronize().unwrap();
    let after = gpu.download(&dc).unwrap();
    assert!(before.iter().zip(&after).all(|(x, y)| x.to_bits() == y.to_bits()), "C was written by a refused call");
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn tuning_caches_the_winner_and_the_entry_point_uses_it() {
    let gpu = gpu_device();
    let path = std::env::temp_dir().join(format!("kernel-ops-tune-test-{}.tsv", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let (m, n, k) = (1024, 1024, 512);
    {
        let mm = Matmul::with_cache(&gpu, path.clone()).unwrap();
        let all = mm.tune(m, n, k, true, 1, 3).unwrap();
        assert_eq!(all.len(), INSTANCES.len());
        let best = all.iter().max_by(|x, y| x.1.total_cmp(&y.1)).unwrap().0;
        assert_eq!(mm.instance_for(m, n, k).name, best.name);
        // Without --retune the cached winner comes back alone.
        assert_eq!(mm.tune(m, n, k, false, 1, 3).unwrap().len(), 1);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(gpu.as_gpu().unwrap().name()) && text.contains("\t1024\t1024\t512\t"), "{text}");
    let mm = Matmul::with_cache(&gpu, path.clone()).unwrap();
    assert!(instance(mm.instance_for(m, n, k).name).is_some());
    let _ = std::fs::remove_file(path);
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn the_emulator_tests_host_code_passes_on_the_gpu() {
    // The same functions as tests/norms.rs and tests/matmul_emu.rs, on a GPU
    // and at larger shapes.
    let gpu = gpu_device();
    common::check_all::<f16>(4e-3, 64, 1024, &gpu);
    common::check_all::<f16>(4e-3, 16, 8192, &gpu);
    common::check_all::<bf16>(2e-2, 64, 2048, &gpu);
    // f32, a width that is not a multiple of 8, rows split over a cluster.
    common::check_all::<f32>(f32::TOLERANCE, 16, 4096, &gpu);
    common::check_all::<f16>(f16::TOLERANCE, 33, 1001, &gpu);
    common::check_all::<bf16>(bf16::TOLERANCE, 8, 65536, &gpu);
    common::check_all::<f32>(f32::TOLERANCE, 8, 50257, &gpu);
    common::check_matmul(&gpu, (200, 136, 72), true);
    common::check_matmul(&gpu, (2048, 1024, 512), true);
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn bf16_matmul_matches_the_cpu_for_every_instance_and_tunes_apart_from_f16() {
    let gpu = gpu_device();
    for shape in [(136, 72, 72), (1000, 1000, 1000), (1, 8, 8), (257, 136, 72), (2048, 1024, 512)] {
        common::check_matmul_of::<bf16>(&gpu, shape, true);
    }
    // The bf16 winner is cached under bf16: f16's entry is not it.
    let path = std::env::temp_dir().join(format!("kernel-ops-tune-bf16-test-{}.tsv", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let (m, n, k) = (1024, 1024, 512);
    let mm = Matmul::with_cache(&gpu, path.clone()).unwrap();
    let all = mm.tune_elem::<bf16>(m, n, k, true, 1, 3).unwrap();
    assert_eq!(all.len(), INSTANCES.len());
    let best = all.iter().max_by(|x, y| x.1.total_cmp(&y.1)).unwrap().0;
    assert_eq!(mm.instance_for_elem::<bf16>(m, n, k).name, best.name);
    assert_eq!(mm.tune_elem::<bf16>(m, n, k, false, 1, 3).unwrap().len(), 1, "the bf16 winner is cached");
    assert_eq!(mm.tune(m, n, k, false, 1, 3).unwrap().len(), INSTANCES.len(), "f16 was tuned afresh, not given bf16's winner");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().any(|l| l.ends_with("\tbf16")) && text.lines().any(|l| l.ends_with("\tf16")), "{text}");
    let _ = std::fs::remove_file(path);
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn a_device_loads_each_kernels_crate_once() {
    let dev = gpu_device();
    let first = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let again = dev.clone().load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let module = |p: &kernel_host::Program| p.as_module().expect("a GPU program").cu_module();
    assert_eq!(module(&first), module(&again), "the second load returned another module");
    // Another Device loads its own.
    let other = gpu_device().load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    assert_ne!(module(&first), module(&other));
}

/// The FP8 GEMM on the GPU at ragged shapes (partial tiles, a partial last
/// K step of 16, one row): against the CPU reference within the bound of
/// f16 rounding plus the FP8 MMA's narrower accumulation.
#[test]
#[ignore = "needs a Hopper GPU"]
fn fp8_matmul_matches_the_cpu_at_ragged_shapes() {
    use kernel_ops::fp8::{matmul_fp8, quantize, reference};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let randn = |len: usize, seed: u64| -> Vec<f32> { randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    for (m, n, k) in [(1000, 1000, 1008), (1, 8, 16), (257, 264, 272), (130, 520, 4112)] {
        let (a, sa) = quantize(&randn(m * k, 51));
        let (b, sb) = quantize(&randn(n * k, 52));
        let (da, db, ds) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&[sa, sb]).unwrap());
        let mut c = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8(&gpu, &ops, &da, &db, &ds, &mut c, (m, n, k)).unwrap();
        let got = gpu.download(&c).unwrap();
        assert!(got.iter().all(|v| !v.is_nan()), "{m}x{n}x{k}: an element was not written");
        let err = rel_frobenius_error(&got, &reference(&a, &b, (sa, sb), m, n, k));
        eprintln!("matmul_fp8 {m}x{n}x{k}: relative Frobenius error {err:.2e}");
        assert!(err < 5e-3, "{m}x{n}x{k}: relative Frobenius error {err:.2e}");
    }
}

/// The FP8 GEMM with e5m2 mixed with e4m3, both orders (the backward GEMMs
/// of FP8 training), on the GPU at ragged shapes: against the CPU
/// reference over each operand's own type.
#[test]
#[ignore = "needs a Hopper GPU"]
fn fp8_matmul_mixes_e5m2_with_e4m3_at_ragged_shapes() {
    use kernel_device::E5M2;
    use kernel_ops::fp8::{matmul_fp8, quantize, quantize_to, reference};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let randn = |len: usize, seed: u64| -> Vec<f32> { randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    for (m, n, k) in [(1000, 1000, 1008), (1, 8, 16), (257, 264, 4112)] {
        let (a5, sa5) = quantize_to::<E5M2>(&randn(m * k, 61));
        let (b4, sb4) = quantize(&randn(n * k, 62));
        let (da, db, ds) = (gpu.upload(&a5).unwrap(), gpu.upload(&b4).unwrap(), gpu.upload(&[sa5, sb4]).unwrap());
        let mut c = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8(&gpu, &ops, &da, &db, &ds, &mut c, (m, n, k)).unwrap();
        let err = rel_frobenius_error(&gpu.download(&c).unwrap(), &reference(&a5, &b4, (sa5, sb4), m, n, k));
        eprintln!("matmul_fp8 e5m2 x e4m3 {m}x{n}x{k}: relative Frobenius error {err:.2e}");
        assert!(err < 5e-3, "e5m2 x e4m3 {m}x{n}x{k}: relative Frobenius error {err:.2e}");
        let (a4, sa4) = quantize(&randn(m * k, 63));
        let (b5, sb5) = quantize_to::<E5M2>(&randn(n * k, 64));
        let (da, db, ds) = (gpu.upload(&a4).unwrap(), gpu.upload(&b5).unwrap(), gpu.upload(&[sa4, sb5]).unwrap());
        let mut c = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8(&gpu, &ops, &da, &db, &ds, &mut c, (m, n, k)).unwrap();
        let err = rel_frobenius_error(&gpu.download(&c).unwrap(), &reference(&a4, &b5, (sa4, sb5), m, n, k));
        eprintln!("matmul_fp8 e4m3 x e5m2 {m}x{n}x{k}: relative Frobenius error {err:.2e}");
        assert!(err < 5e-3, "e4m3 x e5m2 {m}x{n}x{k}: relative Frobenius error {err:.2e}");
    }
}

/// The block-scaled FP8 GEMM on the GPU at ragged shapes, against its CPU
/// reference (promotion every 128 of K keeps the error near f16 rounding
/// even at large K).
#[test]
#[ignore = "needs a Hopper GPU"]
fn blockscaled_fp8_matmul_matches_the_cpu_at_ragged_shapes() {
    use kernel_ops::fp8::{matmul_fp8_blockscaled, quantize_128x128, quantize_1x128, reference_blockscaled};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let randn = |len: usize, seed: u64| -> Vec<f32> { randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    for (m, n, k) in [(1000, 1000, 1008), (1, 8, 16), (257, 264, 272), (130, 520, 4112)] {
        let (a, sa) = quantize_1x128(&randn(m * k, 53), m, k);
        let (b, sb) = quantize_128x128(&randn(n * k, 54), n, k);
        let (da, dsa, db, dsb) = (gpu.upload(&a).unwrap(), gpu.upload(&sa).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&sb).unwrap());
        let mut c = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8_blockscaled(&gpu, &ops, &da, &dsa, &db, &dsb, &mut c, (m, n, k)).unwrap();
        let got = gpu.download(&c).unwrap();
        assert!(got.iter().all(|v| !v.is_nan()), "{m}x{n}x{k}: an element was not written");
        let err = rel_frobenius_error(&got, &reference_blockscaled(&a, &sa, &b, &sb, m, n, k));
        eprintln!("matmul_fp8_blockscaled {m}x{n}x{k}: relative Frobenius error {err:.2e}");
        assert!(err < 2e-3, "{m}x{n}x{k}: relative Frobenius error {err:.2e}");
    }
}

/// The row-wise FP8 GEMM on the GPU at ragged shapes (partial tiles, a
/// single row, several tiles per CTA at 1000 x 1000), against its CPU
/// reference.
#[test]
#[ignore = "needs a Hopper GPU"]
fn rowwise_fp8_matmul_matches_the_cpu_at_ragged_shapes() {
    use kernel_ops::fp8::{matmul_fp8_rowwise, quantize_rowwise, reference_rowwise};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let randn = |len: usize, seed: u64| -> Vec<f32> { randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    for (m, n, k) in [(1000, 1000, 1008), (1, 8, 16), (257, 264, 272), (130, 520, 4112)] {
        let (a, sa) = quantize_rowwise(&randn(m * k, 55), m, k);
        let (b, sb) = quantize_rowwise(&randn(n * k, 56), n, k);
        let (da, dsa, db, dsb) = (gpu.upload(&a).unwrap(), gpu.upload(&sa).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&sb).unwrap());
        let mut c = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8_rowwise(&gpu, &ops, &da, &dsa, &db, &dsb, &mut c, (m, n, k)).unwrap();
        let got = gpu.download(&c).unwrap();
        assert!(got.iter().all(|v| !v.is_nan()), "{m}x{n}x{k}: an element was not written");
        let err = rel_frobenius_error(&got, &reference_rowwise(&a, &sa, &b, &sb, m, n, k));
        eprintln!("matmul_fp8_rowwise {m}x{n}x{k}: relative Frobenius error {err:.2e}");
        assert!(err < 5e-3, "{m}x{n}x{k}: relative Frobenius error {err:.2e}");
    }
}

/// Attention forward on the GPU against the f64 CPU reference: ragged
/// sequence lengths (partial Q and K/V blocks), causal and not, GQA, both
/// head dims, every ring depth, f16 and bf16.
#[test]
#[ignore = "needs a Hopper GPU"]
fn attention_matches_the_cpu_at_ragged_shapes() {
    use kernel_ops::attention::{attention_with, configs, reference, Options, Shape};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let cases = [
        (Shape { batch: 2, seq: 1000, heads: 4, kv_heads: 4, head_dim: 64 }, true),
        (Shape { batch: 1, seq: 777, heads: 8, kv_heads: 2, head_dim: 128 }, false),
        (Shape { batch: 3, seq: 1, heads: 2, kv_heads: 1, head_dim: 128 }, true),
        (Shape { batch: 1, seq: 1024, heads: 2, kv_heads: 2, head_dim: 128 }, true),
        (Shape { batch: 2, seq: 555, heads: 4, kv_heads: 2, head_dim: 256 }, true),
        (Shape { batch: 1, seq: 1000, heads: 2, kv_heads: 2, head_dim: 256 }, false),
    ];
    for (shape, causal) in cases {
        let opts = Options { causal, scale: None };
        let (q, k, v) = (randn_f16(shape.q_len(), 61), randn_f16(shape.kv_len(), 62), randn_f16(shape.kv_len(), 63));
        let f = |x: &[f16]| -> Vec<f32> { x.iter().map(|v| v.to_f32()).collect() };
        let (want_o, want_lse) = reference(&f(&q), &f(&k), &f(&v), shape, opts);
        for stages in configs(shape.head_dim) {
            // f16
            let (dq, dk, dv) = (gpu.upload(&q).unwrap(), gpu.upload(&k).unwrap(), gpu.upload(&v).unwrap());
            let mut o = gpu.upload(&vec![f16::NAN; shape.q_len()]).unwrap();
            let mut lse = gpu.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
            attention_with(&gpu, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts, stages).unwrap();
            let got = gpu.download(&o).unwrap();
            assert!(got.iter().all(|v| !v.is_nan()), "{shape:?}: an element was not written");
            let err = rel_frobenius_error(&got, &want_o);
            let lse_err = gpu.download(&lse).unwrap().iter().zip(&want_lse).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            eprintln!("attention f16 {shape:?} causal {causal} {stages:?}: O error {err:.2e}, lse error {lse_err:.2e}");
            assert!(err < 5e-3 && lse_err < 5e-3, "{shape:?} {stages:?}: O error {err:.2e}, lse error {lse_err:.2e}");
            // bf16 (three consumer warpgroups are built for f16 only)
            if stages.consumers == 3 {
                continue;
            }
            let h = |x: &[f16]| -> Vec<bf16> { x.iter().map(|v| bf16::from_f32(v.to_f32())).collect() };
            let (bq, bk, bv) = (h(&q), h(&k), h(&v));
            let g = |x: &[bf16]| -> Vec<f32> { x.iter().map(|v| v.to_f32()).collect() };
            let (want_b, _) = reference(&g(&bq), &g(&bk), &g(&bv), shape, opts);
            let (dq, dk, dv) = (gpu.upload(&bq).unwrap(), gpu.upload(&bk).unwrap(), gpu.upload(&bv).unwrap());
            let mut o = gpu.upload(&vec![bf16::NAN; shape.q_len()]).unwrap();
            attention_with(&gpu, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts, stages).unwrap();
            let got = g(&gpu.download(&o).unwrap());
            let (num, den) = got.iter().zip(&want_b).fold((0f64, 0f64), |(n, d), (a, b)| (n + f64::from(a - b).powi(2), d + f64::from(*b).powi(2)));
            let err = (num / den).sqrt();
            eprintln!("attention bf16 {shape:?} causal {causal} {stages:?}: O error {err:.2e}");
            assert!(err < 2e-2, "bf16 {shape:?} {stages:?}: O error {err:.2e}");
        }
    }
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn grouped_matmul_matches_the_cpu_on_the_gpu() {
    use kernel_ops::grouped::{grouped_reference, GroupedMatmul};
    let gpu = gpu_device();
    let gm = GroupedMatmul::new(&gpu).unwrap();
    // 8 groups, an empty one, partial row blocks; N and K with tails.
    let sizes = [300u32, 0, 128, 1, 517, 64, 1000, 190];
    let (n, k) = (264usize, 200usize);
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    let a = randn_f16(m * k, 21);
    let b = randn_f16(sizes.len() * n * k, 22);
    let (da, db, ds) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&sizes).unwrap());
    let reference = grouped_reference(&a, &b, &sizes, n, k);
    for tiles in [kernel_ops::grouped::Tiles::Wide, kernel_ops::grouped::Tiles::Narrow] {
        let mut dc = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        gm.run_with(tiles, &da, &db, &ds, &mut dc, (m, n, k), sizes.len()).unwrap();
        gm.status().unwrap();
        let err = rel_frobenius_error(&gpu.download(&dc).unwrap(), &reference);
        assert!(err < 2e-3, "grouped {} tiles, 8 groups: relative Frobenius error {err}", tiles.name());
    }
    let mut dc = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
    // bf16, both tile shapes.
    let a16: Vec<kernel_device::bf16> = a.iter().map(|x| kernel_device::bf16::from_f32(x.to_f32())).collect();
    let b16: Vec<kernel_device::bf16> = b.iter().map(|x| kernel_device::bf16::from_f32(x.to_f32())).collect();
    let reference16 = grouped_reference(&a16, &b16, &sizes, n, k);
    let (da16, db16) = (gpu.upload(&a16).unwrap(), gpu.upload(&b16).unwrap());
    for tiles in [kernel_ops::grouped::Tiles::Wide, kernel_ops::grouped::Tiles::Narrow] {
        let mut dc16 = gpu.upload(&vec![kernel_device::bf16::NAN; m * n]).unwrap();
        gm.run_with(tiles, &da16, &db16, &ds, &mut dc16, (m, n, k), sizes.len()).unwrap();
        gm.status().unwrap();
        let got: Vec<f32> = gpu.download(&dc16).unwrap().iter().map(|x| x.to_f32()).collect();
        let err = kernel_host::rel_frobenius_error_f32(&got, &reference16);
        assert!(err < 8e-3, "grouped bf16 {} tiles: relative Frobenius error {err}", tiles.name());
    }
    // Sizes adding up to less than M: nothing computed, the status says so.
    let bad = gpu.upload(&[300u32, 0, 128, 1, 517, 64, 1000, 189]).unwrap();
    gm.run(&da, &db, &bad, &mut dc, (m, n, k), sizes.len()).unwrap();
    assert!(gm.status().unwrap_err().to_string().contains("do not add up to M"));
}

/// The grouped block-scaled FP8 GEMM on the GPU against its CPU
/// reference: 8 groups (an empty one, one of a single row, partial row
/// blocks, one of exactly 128), N and K with tails (a partial 256-column
/// tile, a partial last K block), then a larger K (several K blocks per
/// tile, every CTA several tiles); and sizes that do not add up.
#[test]
#[ignore = "needs a Hopper GPU"]
fn grouped_blockscaled_fp8_matches_the_cpu_on_the_gpu() {
    use kernel_ops::fp8::quantize_1x128;
    use kernel_ops::grouped::{grouped_reference_blockscaled, quantize_experts_128x128, GroupedMatmul};
    let gpu = gpu_device();
    let gm = GroupedMatmul::new(&gpu).unwrap();
    let randn = |len: usize, seed: u64| -> Vec<f32> { randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    let sizes = [300u32, 0, 128, 1, 517, 64, 1000, 190];
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    for (n, k) in [(264usize, 272usize), (520, 2064)] {
        let g = sizes.len();
        let (a, sa) = quantize_1x128(&randn(m * k, 57), m, k);
        let (b, sb) = quantize_experts_128x128(&randn(g * n * k, 58), g, n, k);
        let (da, dsa, db, dsb, ds) = (gpu.upload(&a).unwrap(), gpu.upload(&sa).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&sb).unwrap(), gpu.upload(&sizes).unwrap());
        let mut dc = gpu.upload(&vec![f16::NAN; m * n]).unwrap();
        gm.run_fp8_blockscaled(&da, &dsa, &db, &dsb, &ds, &mut dc, (m, n, k), g).unwrap();
        gm.status().unwrap();
        let got = gpu.download(&dc).unwrap();
        assert!(got.iter().all(|v| !v.is_nan()), "N {n} K {k}: an element was not written");
        let err = rel_frobenius_error(&got, &grouped_reference_blockscaled(&a, &sa, &b, &sb, &sizes, n, k));
        eprintln!("grouped_matmul_fp8_blockscaled 8 groups, M {m} N {n} K {k}: relative Frobenius error {err:.2e}");
        assert!(err < 2e-3, "N {n} K {k}: relative Frobenius error {err:.2e}");
        if k == 272 {
            let bad = gpu.upload(&[300u32, 0, 128, 1, 517, 64, 1000, 189]).unwrap();
            gm.run_fp8_blockscaled(&da, &dsa, &db, &dsb, &bad, &mut dc, (m, n, k), g).unwrap();
            assert!(gm.status().unwrap_err().to_string().contains("do not add up to M"));
        }
    }
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn attention_backward_matches_the_cpu_at_ragged_shapes() {
    use kernel_ops::attention::{attention, attention_backward, reference_backward, Options, Shape};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let rel = |g: &[f16], w: &[f32]| {
        let (n, d) = g.iter().zip(w).fold((0f64, 0f64), |(n, d), (g, w)| (n + (f64::from(g.to_f32()) - f64::from(*w)).powi(2), d + f64::from(*w).powi(2)));
        (n / d).sqrt()
    };
    // Ragged (partial Q and key blocks), GQA, both head dims, causal and not;
    // 700 rows: 11 Q blocks and 6 key blocks, so the Q/dO ring wraps.
    for (shape, causal) in [
        (Shape { batch: 2, seq: 700, heads: 4, kv_heads: 2, head_dim: 64 }, true),
        (Shape { batch: 1, seq: 333, heads: 2, kv_heads: 2, head_dim: 128 }, false),
        (Shape { batch: 1, seq: 520, heads: 4, kv_heads: 1, head_dim: 128 }, true),
    ] {
        let opts = Options { causal, scale: None };
        let (q, k, v, d_o) = (randn_f16(shape.q_len(), 21), randn_f16(shape.kv_len(), 22), randn_f16(shape.kv_len(), 23), randn_f16(shape.q_len(), 24));
        let fl = |x: &[f16]| -> Vec<f32> { x.iter().map(|v| v.to_f32()).collect() };
        let (wq, wk, wv) = reference_backward(&fl(&q), &fl(&k), &fl(&v), &fl(&d_o), shape, opts);
        let up = |x: &[f16]| gpu.upload(x).unwrap();
        let (bq, bk, bv, bdo) = (up(&q), up(&k), up(&v), up(&d_o));
        let mut o = gpu.zeros::<f16>(shape.q_len()).unwrap();
        let mut lse = gpu.zeros::<f32>(shape.lse_len()).unwrap();
        attention(&gpu, &ops, &bq, &bk, &bv, &mut o, &mut lse, shape, opts).unwrap();
        let nan = |n: usize| up(&vec![f16::NAN; n]);
        let (mut dq, mut dk, mut dv) = (nan(shape.q_len()), nan(shape.kv_len()), nan(shape.kv_len()));
        // Twice: the second call must not see the first's dQ accumulator.
        for _ in 0..2 {
            attention_backward(&gpu, &ops, &bq, &bk, &bv, &o, &lse, &bdo, &mut dq, &mut dk, &mut dv, shape, opts).unwrap();
        }
        let e = [rel(&gpu.download(&dq).unwrap(), &wq), rel(&gpu.download(&dk).unwrap(), &wk), rel(&gpu.download(&dv).unwrap(), &wv)];
        eprintln!("attention backward {shape:?} causal {causal}: dq, dk, dv errors {e:?}");
        assert!(e.iter().all(|x| *x < 1e-2), "{shape:?} causal {causal}: {e:?}");
    }
}

/// The forward's variants (sliding window, soft-cap, sinks; GQA, causal and
/// not; head dims 64 and 128) on the GPU at ragged shapes against
/// `reference_variant`, and at head dim 64 their backward (dQ, dK, dV, the sinks' gradient; twice, so the second call
/// must not see the first's scratch) against `reference_variant_backward`.
#[test]
#[ignore = "needs a Hopper GPU"]
fn attention_variants_match_the_cpu_reference_on_the_gpu() {
    use kernel_ops::attention::{attention_variant, attention_variant_backward, reference_variant, reference_variant_backward, Options, Shape, Variant};
    let gpu = gpu_device();
    let ops = gpu.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let f = |x: &[f16]| x.iter().map(|v| v.to_f32()).collect::<Vec<f32>>();
    for (shape, causal, window, softcap) in [
        (Shape { batch: 2, seq: 1000, heads: 4, kv_heads: 2, head_dim: 64 }, false, Some((300, 40)), Some(1.5)),
        (Shape { batch: 1, seq: 1037, heads: 2, kv_heads: 2, head_dim: 64 }, true, Some((255, 0)), Some(30.0)),
        (Shape { batch: 1, seq: 777, heads: 2, kv_heads: 1, head_dim: 64 }, true, None, None),
        (Shape { batch: 1, seq: 901, heads: 4, kv_heads: 2, head_dim: 128 }, true, Some((200, 0)), Some(20.0)),
    ] {
        let (q, k, v) = (randn_f16(shape.q_len(), 71), randn_f16(shape.kv_len(), 72), randn_f16(shape.kv_len(), 73));
        let sinks: Vec<f32> = (0..shape.heads).map(|h| h as f32 - 1.0).collect();
        let opts = Options { causal, scale: None };
        let (want_o, want_lse) = reference_variant(&f(&q), &f(&k), &f(&v), shape, opts, window, softcap, Some(&sinks));
        let (dq, dk, dv, ds) = (gpu.upload(&q).unwrap(), gpu.upload(&k).unwrap(), gpu.upload(&v).unwrap(), gpu.upload(&sinks).unwrap());
        let mut o = gpu.upload(&vec![f16::NAN; shape.q_len()]).unwrap();
        let mut lse = gpu.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
        attention_variant(&gpu, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts, Variant { window, softcap, sinks: Some(&ds) }).unwrap();
        let got = gpu.download(&o).unwrap();
        let err = rel_frobenius_error(&got, &want_o);
        let lse_err = gpu.download(&lse).unwrap().iter().zip(&want_lse).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        eprintln!("attention_variant {shape:?} causal {causal} window {window:?} softcap {softcap:?}: O error {err:.2e}, lse error {lse_err:.2e}");
        assert!(err < 4e-3 && lse_err < 2e-3, "{shape:?}: O error {err:.2e}, lse error {lse_err:.2e}");
        // The backward, from this forward's o and lse (built at head dim 64).
        if shape.head_dim != 64 {
            continue;
        }
        let d_o = randn_f16(shape.q_len(), 74);
        let (wq, wk, wv, wds) = reference_variant_backward(&f(&q), &f(&k), &f(&v), &f(&d_o), shape, opts, window, softcap, Some(&sinks));
        let bdo = gpu.upload(&d_o).unwrap();
        let nan = |n: usize| gpu.upload(&vec![f16::NAN; n]).unwrap();
        let (mut gq, mut gk, mut gv) = (nan(shape.q_len()), nan(shape.kv_len()), nan(shape.kv_len()));
        let mut gds = gpu.upload(&vec![f32::NAN; shape.heads]).unwrap();
        for _ in 0..2 {
            let variant = Variant { window, softcap, sinks: Some(&ds) };
            attention_variant_backward(&gpu, &ops, &dq, &dk, &dv, &o, &lse, &bdo, &mut gq, &mut gk, &mut gv, Some(&mut gds), shape, opts, variant).unwrap();
        }
        let e = [rel_frobenius_error(&gpu.download(&gq).unwrap(), &wq), rel_frobenius_error(&gpu.download(&gk).unwrap(), &wk), rel_frobenius_error(&gpu.download(&gv).unwrap(), &wv)];
        let big = wds.iter().fold(0f32, |m, x| m.max(x.abs()));
        let ds_err = gpu.download(&gds).unwrap().iter().zip(&wds).map(|(a, b)| (a - b).abs() / big).fold(0f32, f32::max);
        eprintln!("attention_variant_backward {shape:?} causal {causal} window {window:?} softcap {softcap:?}: dq, dk, dv errors {:.2e} {:.2e} {:.2e}, d_sinks {ds_err:.2e}", e[0], e[1], e[2]);
        assert!(e.iter().all(|x| *x < 1e-2) && ds_err < 1e-2, "{shape:?}: dq, dk, dv errors {e:?}, d_sinks {ds_err:.2e}");
    }
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn norm_backwards_match_the_f64_reference_on_the_gpu() {
    // The emulator tests' check (tests/norms.rs) at the GPU's sizes: every
    // row shape, and enough rows that the groups stop at 1024 and loop.
    let gpu = gpu_device();
    for (rows, cols) in [(17, 8), (3, 768), (4100, 1000), (300, 2056), (5000, 4096), (64, 8192), (9, 12288), (4099, 16384)] {
        common::check_bwd::<f16>(rows, cols, &gpu);
        common::check_bwd::<bf16>(rows, cols, &gpu);
        if cols <= kernel_ops::norms::BWD_MAX_COLS_F32 {
            common::check_bwd::<f32>(rows, cols, &gpu);
        }
    }
}
