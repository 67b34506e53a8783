//! Device code of the ready kernels of [`kernel-ops`]: the kernels behind
//! its host entry points, compiled for the GPU (nvptx64) and, for their
//! launch metadata and the CPU emulator, for the host.
//!
//! | module | kernels | host entry point |
//! |---|---|---|
//! | [`matmul`] | `matmul_persistent_ws`, `matmul_persistent_ws_cluster` | `kernel_ops::matmul` |
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod matmul;

kernel_device::device_code!();
