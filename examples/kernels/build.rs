//! Compiles this crate for nvptx64 (sm_90a and sm_100a) and embeds the PTX
//! (and cubins, when ptxas is found) as `kernels::DEVICE_CODE`.
fn main() {
    kernel_host::build::DeviceBuild::from_build_script().run_in_build_script();
}
