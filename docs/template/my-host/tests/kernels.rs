//! The template's kernels on the device `Device::gpu_or_emulator` picks
//! (the CPU emulator where there is no GPU, as in CI).
use kernel_host::Device;

#[test]
fn axpy_matches_the_cpu_reference() {
    let dev = Device::gpu_or_emulator().expect("a device");
    let c = my_host::axpy(&dev, 300).expect("axpy ran");
    assert!(c.passed(), "{c:?}");
}

#[test]
fn row_sums_match_the_cpu_reference() {
    let dev = Device::gpu_or_emulator().expect("a device");
    let c = my_host::row_sums(&dev, 9, 70).expect("row_sums ran");
    assert!(c.passed(), "{c:?}");
}
