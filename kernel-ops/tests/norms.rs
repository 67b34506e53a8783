//! The norm kernels on the CPU emulator against the CPU references: a few
//! rows of each row length and element type, under 2 schedules, through the
//! same entry points a GPU program calls (`tests/gpu.rs` runs them there).
mod common;

use common::check_all;
use kernel_device::{bf16, f16};
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernel_ops::norms;

#[test]
fn f16_norms_match_the_cpu_reference_on_the_emulator() {
    for emu in Emulator::schedules(1, 2) {
        check_all::<f16>(4e-3, 2, 1024, &Device::emulator_with(emu));
    }
    check_all::<f16>(4e-3, 1, 8192, &Device::emulator_with(Emulator::new(3)));
}

#[test]
fn bf16_norms_match_the_cpu_reference_on_the_emulator() {
    check_all::<bf16>(2e-2, 2, 2048, &Device::emulator());
}

#[test]
fn unsupported_row_lengths_and_short_buffers_are_errors_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let x = dev.zeros::<f16>(1000).unwrap();
    let mut y = dev.zeros::<f16>(1000).unwrap();
    let e = norms::softmax(&ops, &x, &mut y, 1, 1000).unwrap_err().to_string();
    assert!(e.contains("cols = 1000") && e.contains("1024"), "{e}");
    let e = norms::softmax(&ops, &x, &mut y, 1, 1024).unwrap_err().to_string();
    assert!(e.contains("`x` holds 1000 elements; 1024 needed"), "{e}");
}
