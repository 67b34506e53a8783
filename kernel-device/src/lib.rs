//! Device API for writing Hopper (sm_90a) and Blackwell (sm_100a) kernels in Rust.
//!
//! Every hardware operation lives in the module of its hardware unit and has
//! two bodies:
//!
//! * on `nvptx64` an `asm!` (or `core::arch::nvptx` intrinsic) body whose doc
//!   line is the exact PTX string and the PTX ISA section it implements;
//! * elsewhere (the host), the CPU emulator's body, which calls crate
//!   `kernel-emu` (TMA copies and wgmma included: see [`tma::emu_map`] and
//!   [`wgmma`]). The host build also lets kernels crates type-check on stable
//!   Rust and `#[kernel]` emit host launch metadata from the same source.
//!
//! Layers, as in CUTLASS/CuTe and Pallas:MGPU:
//!
//! | layer | what | examples |
//! |---|---|---|
//! | raw | one `unsafe fn` per PTX form | [`mbarrier::raw::try_wait_parity`], [`cluster::raw::mapa`] |
//! | typed | handles that own their invariants | [`Barrier`], [`Barriers`], [`Smem`], [`Semaphore`] |
//! | kernel | `#[kernel]` scratch layout, launch metadata | [`launch::KernelSpec`], [`smem::Scratch`] |
//!
//! Scope of each operation (who issues it) is written in its docs: "every
//! thread of the block", "all 32 lanes of a warp", "one thread".
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        asm_experimental_arch,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![deny(unsafe_op_in_unsafe_fn)]
// The host stand-ins ignore the operands of the PTX bodies.
#![cfg_attr(not(target_arch = "nvptx64"), allow(unused_variables))]

pub use kernel_macros::{kernel, warp_specialize};

#[macro_use]
mod host;

pub mod cluster;
pub mod fence;
pub mod gmem;
pub mod index;
pub mod launch;
pub mod layout;
pub mod mbarrier;
pub mod pipeline;
pub mod semaphore;
pub mod smem;
pub mod sync;
pub mod tcgen05;
pub mod tma;
pub mod tmem;
pub mod warp;
pub mod wgmma;
pub mod grid;
pub mod collective;
pub mod clc;

pub use cluster::{cluster_arrive, cluster_sync, cluster_wait};
pub use gmem::Gmem;
pub use index::*;
pub use launch::{DeviceParam, Dim3, KernelSpec};
pub use layout::{Swizzle, Swizzled, Tile, TileLayout, Unswizzled};
pub use mbarrier::{Barrier, BarrierRef, Barriers};
pub use semaphore::Semaphore;
pub use smem::{Scratch, Smem};
pub use sync::{sync_threads, NamedBarrier};
pub use tma::{commit_smem, Tma};
pub use warp::{elect_one, lane_id};
pub use half::{bf16, f16};

/// What kernels usually import: `use kernel_device::prelude::*;`.
pub mod prelude {
    pub use crate::cluster::{cluster_arrive, cluster_sync, cluster_wait};
    pub use crate::gmem::Gmem;
    pub use crate::index::*;
    pub use crate::{kernel, warp_specialize};
    pub use crate::layout::{Swizzled, Tile, TileLayout, Unswizzled};
    pub use crate::mbarrier::{Barrier, BarrierRef, Barriers};
    pub use crate::semaphore::Semaphore;
    pub use crate::smem::Smem;
    pub use crate::sync::{sync_threads, NamedBarrier};
    pub use crate::tma::{commit_smem, Tma};
    pub use crate::warp::{elect_one, lane_id};
}

/// On nvptx64 a panic (failed bounds check, `unwrap` on `None`, explicit
/// `panic!`) executes `trap`: the launch fails with
/// `CUDA_ERROR_ILLEGAL_INSTRUCTION`/`LAUNCH_FAILED`, reported by the host
/// runtime with the kernel's name. The device build uses
/// `-C panic=immediate-abort`, so no formatting code reaches the PTX.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no operands.
    unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
}

/// Embeds the device code that a kernels crate's `build.rs` produced (see
/// `kernel_host::build`), as `pub static DEVICE_CODE: DeviceCode`.
///
/// Put `kernel_device::device_code!();` at the root of the kernels crate. On
/// nvptx64 it expands to nothing.
#[macro_export]
macro_rules! device_code {
    () => {
        #[cfg(not(target_arch = "nvptx64"))]
        /// PTX (and, when ptxas was found at build time, cubins) for every
        /// architecture this crate was built for.
        pub static DEVICE_CODE: $crate::launch::DeviceCode =
            include!(concat!(env!("OUT_DIR"), "/device_code.rs"));
    };
}
