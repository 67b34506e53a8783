//! Host side of the kernel toolkit.
//!
//! * [`build`]: compiles a kernels crate for `nvptx64-nvidia-cuda` once per
//!   architecture from a `build.rs`, assembles it with ptxas when ptxas is
//!   found, and writes the `device_code.rs` that `kernel_device::device_code!`
//!   embeds.
//! * `runtime` (feature `runtime`, on by default): a CUDA context and stream
//!   on cudarc, module loading, typed launches with clusters and dynamic
//!   shared memory, and errors as values.
//! * [`emulate`]: runs a kernel on the CPU emulator (`kernel-emu`).
pub mod build;
pub mod emulate;

#[cfg(feature = "runtime")]
pub mod runtime;

#[cfg(feature = "runtime")]
pub use runtime::*;
