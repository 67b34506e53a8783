//! `kernel_ops::Matmul` on the CPU emulator: the entry point a GPU program
//! calls (`tests/gpu.rs` runs the same calls on a GPU), at small ragged
//! shapes, every instance, f16 and bf16, race detector on, against the CPU
//! reference.
mod common;

use common::{check_matmul, check_matmul_of};
use kernel_device::{bf16, f16};
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernel_ops::{Matmul, MatmulError};

#[test]
fn ragged_shapes_match_the_cpu_for_every_instance_on_the_emulator() {
    // 4 emulated SMs. 120 columns: a partial column block in every tile
    // width, and at most 10 CTAs (the emulator's 4096 threads) for the
    // split-K kernels' one CTA per 64 x 64 tile.
    let dev = Device::emulator_with(Emulator::new(1).sms(4));
    check_matmul(&dev, (200, 120, 72), true);
}

#[test]
fn bf16_ragged_shapes_match_the_cpu_for_every_instance_on_the_emulator() {
    // The bf16 kernels are the f16 ones' body: a smaller ragged shape (a
    // partial row block, column block and K step) through every instance.
    let dev = Device::emulator_with(Emulator::new(2).sms(4));
    check_matmul_of::<bf16>(&dev, (136, 72, 72), true);
}

#[test]
fn the_default_instance_is_correct_under_two_schedules() {
    for emu in Emulator::schedules(5, 2) {
        check_matmul(&Device::emulator_with(emu.sms(4)), (264, 264, 136), false);
    }
}

#[test]
fn refused_shapes_and_tuning_are_errors_on_the_emulator() {
    let dev = Device::emulator();
    let mm = Matmul::with_cache(&dev, std::env::temp_dir().join("kernel-ops-emu-test-unused.tsv")).unwrap();
    let a = dev.zeros::<f16>(64 * 64).unwrap();
    let b = dev.zeros::<f16>(64 * 64).unwrap();
    let mut c = dev.zeros::<f16>(64 * 64).unwrap();
    let e = mm.matmul(&a, (64, 64), &b, (64, 32), &mut c).unwrap_err();
    assert!(matches!(e, MatmulError::KMismatch { a_k: 64, b_k: 32 }), "{e}");
    // bf16: the same checks, naming its type.
    let (a16, b16) = (dev.zeros::<bf16>(64 * 64).unwrap(), dev.zeros::<bf16>(64 * 64).unwrap());
    let e = mm.matmul(&a16, (64, 64), &b16, (64, 64), &mut dev.zeros::<bf16>(64 * 63).unwrap()).unwrap_err();
    assert!(matches!(e, MatmulError::BufferLength { name: "c", dtype: "bf16", .. }), "{e}");
    assert!(e.to_string().contains("4096 bf16 elements"), "{e}");
    let e = mm.tune_elem::<bf16>(64, 64, 64, true, 1, 1).unwrap_err();
    assert!(matches!(e, MatmulError::Cuda(kernel_host::Error::GpuOnly { .. })), "{e}");
    let e = mm.tune(64, 64, 64, true, 1, 1).unwrap_err();
    assert!(matches!(e, MatmulError::Cuda(kernel_host::Error::GpuOnly { .. })), "{e}");
    assert!(e.to_string().contains("needs a CUDA GPU"), "{e}");
}

/// The split-K kernels, K split over 3 CTAs per tile (13 K steps: 5, 4,
/// 4) on 16 emulated SMs, partial row and column blocks, each against the
/// CPU, and the same bits under another schedule (the CTA that sums the
/// partials differs; the sum's order does not).
fn check_split_k(name: &str, (m, n, k): (usize, usize, usize)) {
    use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error};
    use kernel_ops::matmul::{instance, launch_dims};
    let inst = instance(name).unwrap();
    let tiles = n.div_ceil(inst.bn) as u32;
    assert_eq!(launch_dims(inst, m, n, k, 16, kernel_ops::Ctas::default()).0, 3 * tiles, "{name}: {tiles} tiles x 3 splits");
    let (ah, bh) = (randn_f16(m * k, 3), randn_f16(n * k, 4));
    let reference = reference_gemm_nt(m, n, k, &ah, &bh);
    let mut bits: Option<Vec<u16>> = None;
    for emu in Emulator::schedules(31, 2) {
        let dev = Device::emulator_with(emu.sms(16));
        let mm = Matmul::with_cache(&dev, std::env::temp_dir().join("kernel-ops-emu-test-unused.tsv")).unwrap();
        let (a, b) = (dev.upload(&ah).unwrap(), dev.upload(&bh).unwrap());
        let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
        mm.matmul_with(inst, &a, &b, &mut c, m, n, k).unwrap();
        let got = dev.download(&c).unwrap();
        let err = rel_frobenius_error(&got, &reference);
        assert!(err < 2e-3, "{name} at {m}x{n}x{k} on {}: relative Frobenius error {err}", dev.describe());
        let got: Vec<u16> = got.iter().map(|x| x.to_bits()).collect();
        match &bits {
            None => bits = Some(got),
            Some(first) => assert!(first == &got, "{name}: another schedule gave other bits"),
        }
    }
}

/// `splitk 128x128` and `splitk 128x64` (two 64-row warpgroups) at M = 72.
/// (The split-K tests are four, so that the test threads share them.)
#[test]
fn split_k_128_row_tiles_are_correct_and_deterministic_on_the_emulator() {
    assert_eq!(kernel_ops::matmul::splitk_splits(2, 13, 16), 3);
    for name in ["splitk 128x128 s6", "splitk 128x64 s8"] {
        check_split_k(name, (72, 136, 776));
    }
}

/// `splitk 64x128` (two 64-column warpgroups) at M = 40.
#[test]
fn split_k_64x128_tile_is_correct_and_deterministic_on_the_emulator() {
    check_split_k("splitk 64x128 s8", (40, 136, 776));
}

/// `splitk 64x64` (two 32-column warpgroups, one shared epilogue
/// sub-tile) at M = 40.
#[test]
fn split_k_64x64_tile_is_correct_and_deterministic_on_the_emulator() {
    check_split_k("splitk 64x64 s13", (40, 136, 776));
}

/// The entry point splits K from 64 K steps on: a 64-row shape of K = 4096
/// takes the 64-row kernel; and bf16 runs through the same kernel bodies.
#[test]
fn split_k_is_chosen_for_few_tiles_and_runs_bf16_on_the_emulator() {
    let dev = Device::emulator_with(Emulator::new(7).sms(16));
    let mm = Matmul::with_cache(&dev, std::env::temp_dir().join("kernel-ops-emu-test-unused.tsv")).unwrap();
    assert_eq!(mm.instance_for(40, 136, 4096).name, "splitk 64x64 s13");
    assert_eq!(mm.instance_for(72, 136, 4096).name, "splitk 128x128 s6");
    assert_eq!(mm.instance_for(72, 136, 776).name, "ws 128x128 s4 w8", "K = 776 is too short to split");
    // bf16 on the entry point (8 SMs: 2 tiles x 4 splits, within the
    // emulator's 4096 threads).
    check_matmul_of::<bf16>(&Device::emulator_with(Emulator::new(7).sms(8)), (40, 136, 4096), false);
}
