//! Compiles this crate for nvptx64 and embeds the PTX (and cubins, when
//! ptxas is found) as `kernel_ops_kernels::DEVICE_CODE`.
fn main() {
    kernel_host::build::DeviceBuild::from_build_script().run_in_build_script();
}
