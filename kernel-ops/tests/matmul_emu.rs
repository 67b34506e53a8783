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
    // 4 emulated SMs: the persistent grids wrap over the tiles.
    let dev = Device::emulator_with(Emulator::new(1).sms(4));
    check_matmul(&dev, (200, 136, 72), true);
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
