//! The CUDA host runtime, on cudarc: open a [`Gpu`], move data with
//! [`Gpu::upload`] / [`Gpu::zeros`] / [`Gpu::download`] (buffers are cudarc's
//! [`CudaSlice`]), load a kernels crate's [`DeviceCode`] with [`Gpu::load`],
//! and launch its kernels with typed arguments:
//!
//! ```ignore
//! use kernel_host::{Gpu, Error};
//! use my_kernels::{DEVICE_CODE, axpy};
//!
//! let gpu = match Gpu::new(0) {
//!     Err(e) if e.is_no_gpu() => return Ok(()), // skip: no GPU here
//!     r => r?,
//! };
//! let module = gpu.load(&DEVICE_CODE)?;
//! let kernel = module.kernel::<axpy>()?;          // block, cluster, smem from #[kernel]
//! let x = gpu.upload(&[1.0f32; 4096])?;
//! let mut y = gpu.zeros::<f32>(4096)?;
//! kernel.launch_sync(4096 / 128, (&x, &mut y, 2.0f32, 4096u32))?;
//! let y = gpu.download(&y)?;
//! ```
//!
//! Everything that can fail returns an [`Error`] whose message names the rule,
//! the values and the fix; a machine without a GPU gives [`Error::NoGpu`]
//! rather than a panic.
//!
//! | module | what |
//! |---|---|
//! | `gpu` | [`Gpu`]: context, stream, device facts, buffers |
//! | `module` | [`Module`], [`Kernel`]: loading images, `cuLaunchKernelEx` |
//! | `args` | [`KernelArg`], [`KernelArgs`], [`ParamList`]: typed arguments |
//! | `validate` | [`check_launch`]: launch rules checked before CUDA |
//! | `error` | [`Error`], [`CudaError`], [`LaunchProblem`] |

mod args;
mod error;
mod gpu;
mod module;
mod validate;

#[cfg(test)]
mod gpu_tests;

pub use args::{ArgSink, KernelArg, KernelArgs, ParamList};
pub use error::{CudaError, Error, LaunchProblem, Result};
pub use gpu::{arch_for, Gpu};
pub use module::{Kernel, Module, DEFAULT_MAX_DYNAMIC_SMEM};
pub use validate::{check_launch, MAX_BLOCK_Z, MAX_GRID_X, MAX_GRID_YZ};

/// cudarc, for what this runtime does not wrap (streams, events, cuBLAS).
pub use cudarc;
pub use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr, ValidAsZeroBits};
pub use kernel_device::launch::{DeviceCode, DeviceImage};
pub use kernel_device::{Dim3, KernelSpec};
