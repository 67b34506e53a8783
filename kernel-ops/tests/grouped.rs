//! `kernel_ops::grouped::GroupedMatmul` on the CPU emulator: ragged groups
//! (an empty one, partial row blocks, a tail of N and K) against the CPU
//! under 4 schedules (the block-scaled FP8 kernel under 2) and a wrapping
//! persistent grid; the sizes check done by the kernel; the host's shape
//! errors. The GPU run is in `tests/gpu.rs`.
use kernel_device::f16;
use kernel_host::emulate::Emulator;
use kernel_host::{randn_f16, rel_frobenius_error, Device};
use kernel_ops::grouped::{grouped_reference, GroupedMatmul, Tiles};

fn check(dev: &Device, tiles: Tiles, sizes: &[u32], n: usize, k: usize) {
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    let g = sizes.len();
    let a = randn_f16(m * k, 1);
    let b = randn_f16(g * n * k, 2);
    let (da, db, ds) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap(), dev.upload(sizes).unwrap());
    let mut dc = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    let gm = GroupedMatmul::new(dev).unwrap();
    gm.run_with(tiles, &da, &db, &ds, &mut dc, (m, n, k), g).unwrap();
    gm.status().unwrap();
    let got = dev.download(&dc).unwrap();
    let want = grouped_reference(&a, &b, sizes, n, k);
    assert!(got.iter().all(|x| x.is_finite()), "an element of C was never written");
    let err = rel_frobenius_error(&got, &want);
    assert!(err < 2e-3, "{} tiles, sizes {sizes:?}, N {n}, K {k}: relative error {err}", tiles.name());
}

#[test]
fn ragged_groups_match_the_cpu_on_the_emulator() {
    // An empty group, groups shorter than a 128-row block, one spanning two
    // blocks with a partial second; N = 136 (a partial column block), K =
    // 72 (a partial K step); 4 emulated SMs: CTAs take several tiles.
    for emu in Emulator::schedules(11, 4) {
        check(&Device::emulator_with(emu.sms(4)), Tiles::Narrow, &[37, 0, 200, 5, 128], 136, 72);
    }
    // The wide tiles, N = 264: a full 256-column block and a partial one.
    check(&Device::emulator_with(Emulator::new(5).sms(4)), Tiles::Wide, &[130, 0, 126], 264, 64);
}

#[test]
fn bf16_groups_match_the_cpu_on_the_emulator() {
    use kernel_device::bf16;
    let dev = Device::emulator_with(Emulator::new(3).sms(4));
    let sizes = [70u32, 0, 140];
    let (m, n, k, g) = (210usize, 136usize, 72usize, 3usize);
    let a: Vec<bf16> = randn_f16(m * k, 5).iter().map(|x| bf16::from_f32(x.to_f32())).collect();
    let b: Vec<bf16> = randn_f16(g * n * k, 6).iter().map(|x| bf16::from_f32(x.to_f32())).collect();
    let (da, db, ds) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap(), dev.upload(&sizes).unwrap());
    let mut dc = dev.upload(&vec![bf16::NAN; m * n]).unwrap();
    let gm = GroupedMatmul::new(&dev).unwrap();
    gm.run_with(Tiles::Narrow, &da, &db, &ds, &mut dc, (m, n, k), g).unwrap();
    gm.status().unwrap();
    let got: Vec<f32> = dev.download(&dc).unwrap().iter().map(|x| x.to_f32()).collect();
    let want = grouped_reference(&a, &b, &sizes, n, k);
    let err = kernel_host::rel_frobenius_error_f32(&got, &want);
    // bf16 output rounding (8 bits of mantissa): ~2e-3.
    assert!(err < 8e-3, "bf16: relative error {err}");
}

#[test]
fn sizes_that_do_not_add_up_compute_nothing_and_say_so() {
    let dev = Device::emulator_with(Emulator::new(1).sms(2));
    let (m, n, k) = (64usize, 64usize, 64usize);
    let da = dev.upload(&randn_f16(m * k, 1)).unwrap();
    let db = dev.upload(&randn_f16(2 * n * k, 2)).unwrap();
    let ds = dev.upload(&[40u32, 40]).unwrap(); // 80 rows, A has 64
    let mut dc = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    let gm = GroupedMatmul::new(&dev).unwrap();
    gm.run(&da, &db, &ds, &mut dc, (m, n, k), 2).unwrap();
    let e = gm.status().unwrap_err().to_string();
    assert!(e.contains("do not add up to M"), "{e}");
    assert!(dev.download(&dc).unwrap().iter().all(|x| x.is_nan()), "C was written");
    // Sizes whose u32 sum wraps around to M (a negative int32 size read as
    // u32): refused too.
    let wraps = dev.upload(&[u32::MAX, 65]).unwrap();
    gm.run(&da, &db, &wraps, &mut dc, (m, n, k), 2).unwrap();
    let e = gm.status().unwrap_err().to_string();
    assert!(e.contains("do not add up to M"), "{e}");
    assert!(dev.download(&dc).unwrap().iter().all(|x| x.is_nan()), "C was written");
}

#[test]
fn grouped_shape_errors_name_the_rule() {
    let dev = Device::emulator();
    let gm = GroupedMatmul::new(&dev).unwrap();
    let a = dev.zeros::<f16>(64 * 64).unwrap();
    let b = dev.zeros::<f16>(2 * 64 * 64).unwrap();
    let s = dev.upload(&[32u32, 32]).unwrap();
    let mut c = dev.zeros::<f16>(64 * 64).unwrap();
    let e = gm.run(&a, &b, &s, &mut c, (64, 64, 64), 3).unwrap_err().to_string();
    assert!(e.contains("`b` holds 8192 elements; G x N x K = 12288 expected"), "{e}");
    let a2 = dev.zeros::<f16>(64 * 60).unwrap();
    let b2 = dev.zeros::<f16>(2 * 64 * 60).unwrap();
    let e = gm.run(&a2, &b2, &s, &mut c, (64, 64, 60), 2).unwrap_err().to_string();
    assert!(e.contains("K = 60: must be a multiple of 8"), "{e}");
    // No rows at all: nothing to compute, and the status says so.
    let (a0, mut c0) = (dev.zeros::<f16>(0).unwrap(), dev.zeros::<f16>(0).unwrap());
    let s0 = dev.upload(&[0u32, 0]).unwrap();
    gm.run(&a0, &b, &s0, &mut c0, (0, 64, 64), 2).unwrap();
    gm.status().unwrap();
}

/// The grouped block-scaled FP8 GEMM against
/// `grouped_reference_blockscaled` on the emulator: an empty group, a group
/// shorter than a 128-row block, one spanning two blocks with a partial
/// second, a group of exactly 128; N = 264 (a full 256-column tile and a
/// partial one whose second B scale block lies past N); K = 272 (two
/// 128-blocks and a partial one of 16); rows, K blocks and experts whose
/// magnitudes differ by up to 2^12 (so a scale of the wrong row, block or
/// expert is a large error); 2 emulated SMs (each CTA runs several tiles
/// through the 4 stage slots and the `tiles_at` ring); 2 schedules, one per
/// test so that the test threads share them.
#[test]
fn blockscaled_fp8_groups_match_the_cpu_on_the_emulator() {
    blockscaled_fp8_groups_under_schedule(21);
}

/// Another schedule of the case above.
#[test]
fn blockscaled_fp8_groups_match_the_cpu_under_another_schedule() {
    blockscaled_fp8_groups_under_schedule(22);
}

/// The case above: its quantized operands and scales, group sizes, shape
/// and the CPU's result.
struct BlockscaledCase {
    qa: Vec<kernel_device::E4M3>,
    sa: Vec<f32>,
    qb: Vec<kernel_device::E4M3>,
    sb: Vec<f32>,
    sizes: [u32; 5],
    mnk: (usize, usize, usize),
    want: Vec<f32>,
}

fn blockscaled_case() -> BlockscaledCase {
    use kernel_ops::fp8::quantize_1x128;
    use kernel_ops::grouped::{grouped_reference_blockscaled, quantize_experts_128x128};
    let sizes = [37u32, 0, 200, 128, 5];
    let (n, k, g) = (264usize, 272usize, sizes.len());
    let m: usize = sizes.iter().map(|&s| s as usize).sum();
    let randn = |len: usize, seed: u64| -> Vec<f32> { randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    let a: Vec<f32> = randn(m * k, 41).iter().enumerate().map(|(i, v)| v * 2f32.powi(((i / k) % 7) as i32 - 4 + ((i % k) / 128 % 3) as i32 * 2)).collect();
    let b: Vec<f32> = randn(g * n * k, 42).iter().enumerate().map(|(i, v)| v * 2f32.powi((i / (n * k)) as i32 - 2 + ((i / k) % n / 128) as i32 * 3 - ((i % k) / 128) as i32)).collect();
    let (qa, sa) = quantize_1x128(&a, m, k);
    let (qb, sb) = quantize_experts_128x128(&b, g, n, k);
    let want = grouped_reference_blockscaled(&qa, &sa, &qb, &sb, &sizes, n, k);
    BlockscaledCase { qa, sa, qb, sb, sizes, mnk: (m, n, k), want }
}

/// The case under the schedule of seed `seed`.
fn blockscaled_fp8_groups_under_schedule(seed: u64) {
    let BlockscaledCase { qa, sa, qb, sb, sizes, mnk: (m, n, k), want } = blockscaled_case();
    let g = sizes.len();
    let dev = Device::emulator_with(Emulator::new(seed).sms(2));
    let gm = GroupedMatmul::new(&dev).unwrap();
    let (da, dsa, db, dsb, ds) = (dev.upload(&qa).unwrap(), dev.upload(&sa).unwrap(), dev.upload(&qb).unwrap(), dev.upload(&sb).unwrap(), dev.upload(&sizes).unwrap());
    let mut dc = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    gm.run_fp8_blockscaled(&da, &dsa, &db, &dsb, &ds, &mut dc, (m, n, k), g).unwrap();
    gm.status().unwrap();
    let got = dev.download(&dc).unwrap();
    assert!(got.iter().all(|x| x.is_finite()), "an element of C was never written");
    let err = rel_frobenius_error(&got, &want);
    // Exact products, f32 promotion, one f16 rounding (2^-11).
    assert!(err < 1e-3, "{}: relative Frobenius error {err:.2e}", dev.describe());
}

/// The block-scaled grouped GEMM's rules, each refused before anything
/// runs, C untouched; and sizes that do not add up.
#[test]
fn blockscaled_fp8_groups_refuse_bad_inputs() {
    use kernel_device::E4M3;
    let BlockscaledCase { qa, sa, qb, sb, sizes, mnk: (m, n, k), .. } = blockscaled_case();
    let g = sizes.len();
    let dev = Device::emulator_with(Emulator::new(1).sms(2));
    let gm = GroupedMatmul::new(&dev).unwrap();
    let (da, dsa, db, dsb, ds) = (dev.upload(&qa).unwrap(), dev.upload(&sa).unwrap(), dev.upload(&qb).unwrap(), dev.upload(&sb).unwrap(), dev.upload(&sizes).unwrap());
    let mut dc = dev.upload(&vec![f16::from_f32(7.0); m * n]).unwrap();
    let short = dev.upload(&sb[1..]).unwrap();
    let e = gm.run_fp8_blockscaled(&da, &dsa, &db, &short, &ds, &mut dc, (m, n, k), g).unwrap_err().to_string();
    assert!(e.contains("grouped_matmul_fp8_blockscaled") && e.contains(&format!("`b_scales` holds {} elements; G x ceil(N / 128) x ceil(K / 128) = {} expected", sb.len() - 1, sb.len())), "{e}");
    let short = dev.upload(&sa[1..]).unwrap();
    let e = gm.run_fp8_blockscaled(&da, &short, &db, &dsb, &ds, &mut dc, (m, n, k), g).unwrap_err().to_string();
    assert!(e.contains(&format!("`a_scales` holds {} elements; ceil(K / 128) x M = {} expected", sa.len() - 1, sa.len())), "{e}");
    let (a8, b8) = (dev.upload(&vec![E4M3::from_f32(1.0); m * 264]).unwrap(), dev.upload(&vec![E4M3::from_f32(1.0); g * n * 264]).unwrap());
    let e = gm.run_fp8_blockscaled(&a8, &dsa, &b8, &dsb, &ds, &mut dc, (m, n, 264), g).unwrap_err().to_string();
    assert!(e.contains("K = 264: must be a multiple of 16"), "{e}");
    assert!(dev.download(&dc).unwrap().iter().all(|x| x.to_f32() == 7.0), "C was written");
    // Sizes that do not add up: nothing computed, and the status says so.
    let wrong = dev.upload(&[37u32, 0, 200, 128, 6]).unwrap();
    gm.run_fp8_blockscaled(&da, &dsa, &db, &dsb, &wrong, &mut dc, (m, n, k), g).unwrap();
    let e = gm.status().unwrap_err().to_string();
    assert!(e.contains("do not add up to M"), "{e}");
    assert!(dev.download(&dc).unwrap().iter().all(|x| x.to_f32() == 7.0), "C was written");
}
