//! Ready kernels with host entry points, like Pallas's `ops/gpu` package:
//! each entry point takes device buffers, checks its inputs (an error names
//! the constraint and the values), picks and caches what it needs (kernel
//! instance, tensor maps), and launches. The examples crates stay the
//! teaching ladder; this crate is what an application calls.
//!
//! | module | entry point | kernels |
//! |---|---|---|
//! | [`matmul`] | [`Matmul::matmul`] (`c = a · bᵀ`, f16, autotuned per shape) | `kernel_ops_kernels::matmul` |
//! | [`blaslt`] | [`blaslt::BlasLt`] (the cuBLASLt baseline of the `bench` binary) | cuBLASLt |

pub mod args;
pub mod blaslt;
pub mod matmul;

pub use matmul::{check_problem, Matmul, MatmulError};
