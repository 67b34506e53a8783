//! What every side of the project must agree on, defined once: the
//! `#[kernel]` macro, the CPU emulator, the device API and the host runtime
//! all depend on this crate, and none of them defines a hardware limit, an
//! encoding or a rule of its own.
//!
//! `no_std`, no dependencies: it builds for `nvptx64-nvidia-cuda`, for the
//! host and inside the proc-macro.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod swizzle;
pub mod desc_wgmma;
pub mod desc_tcgen05;
