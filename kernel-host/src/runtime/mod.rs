//! The CUDA host runtime, on cudarc: open a [`Gpu`], move data with
//! [`Gpu::upload`] / [`Gpu::zeros`] / [`Gpu::download`] (buffers are cudarc's
//! [`CudaSlice`]), load a kernels crate's [`DeviceCode`] with [`Gpu::load`],
//! and launch its kernels with typed arguments:
//!
//! ```no_run
//! # use kernel_device::prelude::*;
//! # #[kernel(block = threads(128))]
//! # pub fn axpy(x: GmemRef<f32>, y: Gmem<f32>, a: f32, n: u32) {}
//! # static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "my_kernels", images: &[] };
//! # fn main() -> Result<(), kernel_host::Error> {
//! use kernel_host::{Gpu, Error};
//! // use my_kernels::{DEVICE_CODE, axpy};  (a kernels crate: `device_code!()` and `#[kernel] fn axpy`)
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
//! # Ok(()) }
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
//! | `validate` | [`check_launch`], [`check_launch_with`] (non-portable clusters), [`check_kernel_launch`] (a kernel's shapes and shared memory): `kernel_spec`'s launch rules, checked before CUDA |
//! | `tma` | [`TensorMap`], [`TensorMapSpec`]: TMA tensor maps, validated, for `Tma<Tl>` parameters |
//! | `error` | [`Error`], [`CudaError`], [`LaunchProblem`] |
//! | `blas` | [`Blas`]: cuBLAS f16 GEMM baseline on row-major matrices |
//! | `bench` | [`time_kernel`] (on a [`Gpu`] or a GPU [`Device`](crate::Device): [`Timed`]), [`randn`] (every element type, on [`SplitMix64`]), CPU reference GEMMs, [`rel_frobenius_error`] |

mod args;
mod bench;
mod blas;
mod error;
mod gpu;
mod module;
mod tma;
mod validate;

#[cfg(test)]
mod gpu_tests;

pub use args::{ArgSink, KernelArg, KernelArgs, ParamList};
pub use bench::{
    parse_clock_power, time_at_steady_clock, warm_up, ClockPower, ClockSampler, randn, randn_bf16, randn_f16, randn_f32, Randn, Timed, reference_gemm_nn, reference_gemm_nt, rel_frobenius_error,
    rel_frobenius_error_f32, tflops, time_kernel, uniform_f32, SplitMix64, Timing,
};
pub use blas::{Blas, BlasElem};
pub use error::{CudaError, Error, LaunchProblem, Result};
pub use gpu::{arch_for, Gpu};
pub use module::{kernel_runs_on, Kernel, Module, DEFAULT_MAX_DYNAMIC_SMEM};
pub use tma::{
    swizzle_to_cu, L2Promotion, OobFill, TensorMap, TensorMapSpec, TmaDtype, TmaElement,
    BOX_INNER_ALIGN, GLOBAL_ALIGN, GLOBAL_STRIDE_LIMIT, MAX_BOX_DIM, MAX_ELEMENT_STRIDE,
    MAX_GLOBAL_DIM, MAX_RANK,
};
pub use validate::{
    check_kernel_launch, check_launch, check_launch_with, MAX_BLOCK_Z, MAX_GRID_X, MAX_GRID_YZ,
};

/// cudarc, for what this runtime does not wrap (streams, events, cuBLAS).
pub use cudarc;
pub use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr, ValidAsZeroBits};
pub use kernel_device::launch::{DeviceCode, DeviceImage};
pub use kernel_device::tma::TensorMapParam;
pub use kernel_device::{Dim3, KernelSpec};
