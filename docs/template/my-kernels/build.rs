//! Compiles this crate for the GPU (nvptx64, sm_90a and sm_100a), runs
//! ptxas on the PTX when it is found, and writes `device_code.rs`, which
//! `kernel_device::device_code!()` embeds as `DEVICE_CODE`.
fn main() {
    kernel_host::build::DeviceBuild::from_build_script().run_in_build_script();
}
