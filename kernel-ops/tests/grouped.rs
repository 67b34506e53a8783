//! `kernel_ops::grouped::GroupedMatmul` on the CPU emulator: ragged groups
//! (an empty one, partial row blocks, a tail of N and K) against the CPU
//! under 2 schedules and a wrapping persistent grid; the sizes check done by
//! the kernel; the host's shape errors. The GPU run is in `tests/gpu.rs`.
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
    for emu in Emulator::schedules(11, 2) {
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
