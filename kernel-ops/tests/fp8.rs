//! The FP8 GEMM (`kernel_ops::fp8::matmul_fp8`, e4m3 in, f16 out, per-tensor
//! scales; `kernel_ops_kernels::matmul_fp8`, one-operand `gemm_multi` on
//! FP8 tiles) on the CPU emulator through the entry point, race checks on,
//! against `kernel_ops::fp8::reference`: a ragged shape (partial last tiles
//! in M and N, a partial last K step of 16) with each persistent CTA of 2
//! running 2 tiles of 3 K steps, so the 4 stage slots are reused, under 4
//! schedules; and every bad input refused with its rule, C untouched.
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
    for seed in 0..4 {
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
