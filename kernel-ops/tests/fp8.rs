//! The FP8 GEMM (`kernel_ops::fp8::matmul_fp8`, e4m3 in, f16 out, per-tensor
//! scales; `kernel_ops_kernels::matmul_fp8`, one-operand `gemm_multi` on
//! FP8 tiles) on the CPU emulator through the entry point, race checks on,
//! against `kernel_ops::fp8::reference`: a ragged shape (partial last tiles
//! in M and N, a partial last K step of 16) with each persistent CTA of 2
//! running 2 tiles of 3 K steps, so the 4 stage slots are reused, under 2
//! schedules (these Hopper kernels also run on the GPU, `tests/gpu.rs`;
//! the Blackwell kernels, which only the emulator runs, take 4); and every
//! bad input refused with its rule, C untouched.
use kernel_device::{f16, E4M3};
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernel_ops::fp8::{matmul_fp8, quantize, reference};

fn randn(len: usize, seed: u64) -> Vec<f32> {
    kernel_host::randn_f16(len, seed).iter().map(|x| x.to_f32()).collect()
}

/// Relative Frobenius error of `got` (f16) against `want`; a NaN (an
/// element never written) fails.
fn rel_err(got: &[f16], want: &[f32]) -> f64 {
    assert!(got.iter().all(|v| !v.is_nan()), "an output element was not written");
    kernel_host::rel_frobenius_error(got, want)
}

#[test]
fn matmul_fp8_matches_the_cpu_reference_on_the_emulator() {
    let (m, n, k) = (200, 264, 272); // 2 x 2 tiles of 128 x 256, K steps 128 + 128 + 16
    let (a, sa) = quantize(&randn(m * k, 31));
    let (b, sb) = quantize(&randn(n * k, 32));
    let want = reference(&a, &b, (sa, sb), m, n, k);
    for seed in 0..2 {
        let dev = Device::emulator_with(Emulator::new(seed).sms(2));
        let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
        let (da, db, ds) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap(), dev.upload(&[sa, sb]).unwrap());
        let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8(&dev, &ops, &da, &db, &ds, &mut c, (m, n, k)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let err = rel_err(&dev.download(&c).unwrap(), &want);
        // Exact products summed in f32, then one f16 rounding (2^-11).
        assert!(err < 1e-3, "seed {seed}: relative Frobenius error {err:.2e}");
    }
}

/// e5m2 with e4m3 in either order (the FP8 training backward's
/// `m64nNk32.f32.e5m2.e4m3` and `.e4m3.e5m2` wgmmas), each operand decoded
/// as its own type: a kernel reading e5m2 bytes as e4m3 would be off by
/// orders of magnitude.
#[test]
fn matmul_fp8_mixes_e5m2_with_e4m3_on_the_emulator() {
    use kernel_device::E5M2;
    use kernel_ops::fp8::quantize_to;
    let (m, n, k) = (136, 264, 144); // partial tiles in M and N, K steps 128 + 16
    let (a4, sa4) = quantize(&randn(m * k, 41));
    let (b4, sb4) = quantize(&randn(n * k, 42));
    let (a5, sa5) = quantize_to::<E5M2>(&randn(m * k, 43));
    let (b5, sb5) = quantize_to::<E5M2>(&randn(n * k, 44));
    let dev = Device::emulator_with(Emulator::new(5).sms(2));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    // A e5m2, B e4m3.
    let want = reference(&a5, &b4, (sa5, sb4), m, n, k);
    let (da, db, ds) = (dev.upload(&a5).unwrap(), dev.upload(&b4).unwrap(), dev.upload(&[sa5, sb4]).unwrap());
    let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    matmul_fp8(&dev, &ops, &da, &db, &ds, &mut c, (m, n, k)).unwrap();
    let err = rel_err(&dev.download(&c).unwrap(), &want);
    assert!(err < 1e-3, "e5m2 x e4m3: relative Frobenius error {err:.2e}");
    // A e4m3, B e5m2.
    let want = reference(&a4, &b5, (sa4, sb5), m, n, k);
    let (da, db, ds) = (dev.upload(&a4).unwrap(), dev.upload(&b5).unwrap(), dev.upload(&[sa4, sb5]).unwrap());
    let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    matmul_fp8(&dev, &ops, &da, &db, &ds, &mut c, (m, n, k)).unwrap();
    let err = rel_err(&dev.download(&c).unwrap(), &want);
    assert!(err < 1e-3, "e4m3 x e5m2: relative Frobenius error {err:.2e}");
    // e5m2 keeps 2 mantissa bits: its quantization error is what sets it
    // apart from e4m3 (about 4x e4m3's), not the GEMM.
    let x = randn(4096, 45);
    let q_err = |q: Vec<f32>| (q.iter().zip(&x).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>() / x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>()).sqrt();
    let (q4, s4) = quantize(&x);
    let (q5, s5) = quantize_to::<E5M2>(&x);
    let (e4, e5) = (q_err(q4.iter().map(|v| v.to_f32() * s4).collect()), q_err(q5.iter().map(|v| v.to_f32() * s5).collect()));
    assert!(e5 > 2.0 * e4 && e5 < 0.1, "quantization errors: e4m3 {e4:.2e}, e5m2 {e5:.2e}");
}

#[test]
fn matmul_fp8_refuses_bad_inputs_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let buf8 = |len: usize| dev.upload(&vec![E4M3::from_f32(1.0); len]).unwrap();
    let cases: [((usize, usize, usize), [usize; 4], &str); 6] = [
        ((64, 64, 40), [64 * 40, 64 * 40, 64 * 64, 2], "K = 40: must be a multiple of 16"),
        ((64, 60, 64), [64 * 64, 60 * 64, 64 * 60, 2], "N = 60: must be a multiple of 8"),
        ((0, 64, 64), [0, 64 * 64, 0, 2], "every dimension must be at least 1"),
        ((64, 64, 64), [64 * 63, 64 * 64, 64 * 64, 2], "`a` holds 4032 elements; M x K = 4096 expected"),
        ((64, 64, 64), [64 * 64, 64 * 64, 64 * 65, 2], "`c` holds 4160 elements; M x N = 4096 expected"),
        ((64, 64, 64), [64 * 64, 64 * 64, 64 * 64, 1], "`scales` holds 1 elements; 2 (scale_a, scale_b) = 2 expected"),
    ];
    for (shape, [la, lb, lc, ls], rule) in cases {
        let (a, b) = (buf8(la), buf8(lb));
        let scales = dev.upload(&vec![1f32; ls]).unwrap();
        let mut c = dev.upload(&vec![f16::from_f32(7.0); lc]).unwrap();
        let e = matmul_fp8(&dev, &ops, &a, &b, &scales, &mut c, shape).expect_err(rule).to_string();
        assert!(e.contains("matmul_fp8") && e.contains(rule), "{shape:?}: {e}");
        assert!(dev.download(&c).unwrap().iter().all(|v| v.to_f32() == 7.0), "{shape:?}: c was written");
    }
}

#[test]
fn quantize_maps_the_largest_magnitude_to_e4m3_max() {
    let (q, s) = quantize(&[-3.5, 0.0, 1.75, 7.0]);
    assert_eq!(s, 7.0 / 448.0);
    assert_eq!(q.iter().map(|v| v.to_f32() * s).collect::<Vec<_>>(), vec![-3.5, 0.0, 1.75, 7.0]);
    assert_eq!(quantize(&[0.0; 4]).1, 1.0);
}

/// The block-scaled FP8 GEMM (`kernel_ops::fp8::matmul_fp8_blockscaled`:
/// 1 x 128 and 128 x 128 scales, promotion every 128 of K) on the emulator
/// against `reference_blockscaled`: ragged shapes (partial tiles in M and
/// N, a partial last K block of 16) whose rows and K blocks have scales
/// that differ by up to 2^12 (so a wrong scale index is a large error),
/// 2 persistent CTAs running 2 tiles each (128 x 256; the second tile's
/// second B scale block lies past N) through the 4 stage slots;
/// K in 3 steps and in 4, a schedule each. And the scale buffers'
/// length rules.
#[test]
fn blockscaled_fp8_matches_the_cpu_reference_on_the_emulator() {
    use kernel_ops::fp8::{matmul_fp8_blockscaled, quantize_128x128, quantize_1x128, reference_blockscaled};
    // 2 x 2 tiles of 128 x 256; K blocks 128 + 128 + 16, then 3 x 128 + 16.
    for (k, seeds) in [(272, 0..1), (400, 1..2)] {
        let (m, n) = (200, 264);
        // Magnitudes varying by row and K block (A) and by block (B), within
        // f16's range in the output.
        let a: Vec<f32> = randn(m * k, 33).iter().enumerate().map(|(i, v)| v * 2f32.powi(((i / k) % 7) as i32 - 4 + ((i % k) / 128 % 3) as i32 * 2)).collect();
        let b: Vec<f32> = randn(n * k, 34).iter().enumerate().map(|(i, v)| v * 2f32.powi(((i / k) / 128) as i32 * 3 - ((i % k) / 128) as i32)).collect();
        let (qa, sa) = quantize_1x128(&a, m, k);
        let (qb, sb) = quantize_128x128(&b, n, k);
        let want = reference_blockscaled(&qa, &sa, &qb, &sb, m, n, k);
        for seed in seeds {
            let dev = Device::emulator_with(Emulator::new(seed).sms(2));
            let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
            let (da, dsa, db, dsb) = (dev.upload(&qa).unwrap(), dev.upload(&sa).unwrap(), dev.upload(&qb).unwrap(), dev.upload(&sb).unwrap());
            let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
            matmul_fp8_blockscaled(&dev, &ops, &da, &dsa, &db, &dsb, &mut c, (m, n, k)).unwrap_or_else(|e| panic!("K {k} seed {seed}: {e}"));
            let err = rel_err(&dev.download(&c).unwrap(), &want);
            assert!(err < 1e-3, "K {k} seed {seed}: relative Frobenius error {err:.2e}");
            if seed == 0 {
                let short = dev.upload(&sa[1..]).unwrap();
                let e = matmul_fp8_blockscaled(&dev, &ops, &da, &short, &db, &dsb, &mut c, (m, n, k)).expect_err("a_scales too short").to_string();
                assert!(e.contains("`a_scales` holds 599 elements; ceil(K / 128) x M = 600 expected"), "{e}");
            }
        }
    }
}

#[test]
fn block_quantizers_round_trip_within_e4m3_precision() {
    use kernel_ops::fp8::{quantize_128x128, quantize_1x128};
    let (m, k) = (3, 200);
    let x: Vec<f32> = randn(m * k, 35).iter().enumerate().map(|(i, v)| v * if i % k < 128 { 1e-3 } else { 1e3 }).collect();
    let (q, s) = quantize_1x128(&x, m, k);
    assert_eq!(s.len(), 2 * m);
    for (i, (&v, q)) in x.iter().zip(&q).enumerate() {
        let back = q.to_f32() * s[(i % k) / 128 * m + i / k];
        assert!((back - v).abs() <= v.abs() / 16.0 + 1e-9 * s[(i % k) / 128 * m + i / k], "{i}: {v} -> {back}");
    }
    let (_, s) = quantize_128x128(&x, m, k);
    assert_eq!(s.len(), 2);
    assert!(s[1] / s[0] > 1e5, "the two K blocks have their own scales: {s:?}");
}

/// The row-wise FP8 GEMM on the emulator against `reference_rowwise`:
/// a ragged shape (partial tiles in M and N: 2 x 2 tiles of 128 x 256 on
/// 2 persistent CTAs, so the SMEM scale buffer is refilled for a second
/// tile), rows of A and of B whose magnitudes differ by up to 2^12 (so a
/// row or column scale applied to the wrong element is a large error), K in
/// 3 steps (one partial), 2 schedules. And the scale buffers' length rules.
#[test]
fn rowwise_fp8_matches_the_cpu_reference_on_the_emulator() {
    use kernel_ops::fp8::{matmul_fp8_rowwise, quantize_rowwise, reference_rowwise};
    let (m, n, k) = (200, 264, 272);
    let a: Vec<f32> = randn(m * k, 36).iter().enumerate().map(|(i, v)| v * 2f32.powi(((i / k) % 13) as i32 - 9)).collect();
    let b: Vec<f32> = randn(n * k, 37).iter().enumerate().map(|(i, v)| v * 2f32.powi(((i / k) % 11) as i32 - 8)).collect();
    let (qa, sa) = quantize_rowwise(&a, m, k);
    let (qb, sb) = quantize_rowwise(&b, n, k);
    let want = reference_rowwise(&qa, &sa, &qb, &sb, m, n, k);
    for seed in 0..2 {
        let dev = Device::emulator_with(Emulator::new(seed).sms(2));
        let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
        let (da, dsa, db, dsb) = (dev.upload(&qa).unwrap(), dev.upload(&sa).unwrap(), dev.upload(&qb).unwrap(), dev.upload(&sb).unwrap());
        let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
        matmul_fp8_rowwise(&dev, &ops, &da, &dsa, &db, &dsb, &mut c, (m, n, k)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let err = rel_err(&dev.download(&c).unwrap(), &want);
        assert!(err < 1e-3, "seed {seed}: relative Frobenius error {err:.2e}");
        if seed == 0 {
            let short = dev.upload(&sb[1..]).unwrap();
            let e = matmul_fp8_rowwise(&dev, &ops, &da, &dsa, &db, &short, &mut c, (m, n, k)).expect_err("b_scales too short").to_string();
            assert!(e.contains("`b_scales` holds 263 elements; N = 264 expected"), "{e}");
        }
    }
}
