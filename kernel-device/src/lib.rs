//! Device API for writing Hopper (sm_90a) and Blackwell (sm_100a) kernels in Rust.
//!
//! Every hardware operation lives in the module of its hardware unit and has
//! two bodies:
//!
//! * on `nvptx64` an `asm!` (or `core::arch::nvptx` intrinsic) body whose doc
//!   line is the exact PTX string and the PTX ISA section it implements;
//! * elsewhere (the host), the CPU emulator's body, which calls crate
//!   `kernel-emu`, which owns the emulator's semantics (`kernel_emu::tma`,
//!   `kernel_emu::wgmma`, `kernel_emu::tcgen05`). The host build also lets kernels crates type-check on stable
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
//!
//! A kernel is a function with [`#[kernel]`](macro@kernel): its
//! documentation is the reference for every option (`block`, `cluster`,
//! `non_portable_cluster`, `instances`, `arch`), the `#[scratch]` parameters
//! and their `arrivals`, `where` clauses, the rules it checks and the PTX
//! entry names (`swiglu__3`); roles inside a kernel:
//! [`#[warp_specialize]`](macro@warp_specialize).
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

pub mod array;
pub mod cluster;
pub mod cluster_barrier;
pub mod fence;
pub mod gmem;
pub mod global;
pub mod index;
pub mod launch;
pub mod layout;
pub mod ldst_matrix;
pub mod mbarrier;
pub mod mma;
pub mod pack;
pub mod pipeline;
pub mod peer;
pub mod ptr;
pub mod semaphore;
pub mod smem;
pub mod sync;
pub mod tcgen05;
pub mod tcgen05_view;
pub mod tma;
pub mod tmem;
pub mod warp;
pub mod wgmma;
pub mod math;
pub mod cvt;
pub mod reduce;
pub mod grid;
pub mod collective;
pub mod clc;

pub use cluster::{cluster_arrive, cluster_sync, cluster_wait};
pub use cluster_barrier::ClusterBarrier;
pub use gmem::{Gmem, GmemRef};
pub use global::{GlobalBuf, GlobalScratch};
pub use index::*;
pub use launch::{DeviceParam, Dim3, KernelSpec};
pub use layout::{Swizzle, Swizzled, Tile, TileLayout, Unswizzled};
pub use mbarrier::{Barrier, BarrierRef, Barriers};
pub use pack::Pack16;
pub use ptr::{GmemPtr, SmemPtr};
pub use semaphore::Semaphore;
pub use smem::{Scratch, Smem};
pub use sync::{sync_threads, NamedBarrier};
pub use tma::{commit_smem, Tma};
pub use warp::{elect_one, lane_id};
pub use half::{bf16, f16};
/// FP8 element types (`.e4m3`: bias 7, no infinities, `S.1111.111` NaN;
/// `.e5m2`: the top byte of an f16), for wgmma's `k32` shapes and
/// `tcgen05.mma` `kind::f8f6f4`: the `float8` crate's, which cudarc moves to
/// and from the GPU (`Device::upload`).
pub use float8::{F8E4M3 as E4M3, F8E5M2 as E5M2};

/// The CPU emulator's API (crate `kernel-emu`), for the host bodies of
/// user-defined operations ([`device_op!`]): `emu::yield_point`,
/// `emu::misuse`, `emu::warp_exchange`, `emu::smem_ptr`, the thread indices.
/// Host builds only.
#[cfg(not(target_arch = "nvptx64"))]
pub use kernel_emu as emu;

/// Pairs a PTX body (compiled for `nvptx64`) with a host body (the CPU
/// emulator's): the public form of the pattern every operation of this
/// crate uses.
///
/// `device_op!("ptx.op", { nvptx64 body }, host: { emulator body })`
/// expands to the first block on `nvptx64` and to the second elsewhere;
/// both blocks have the same type. The string names the operation. Write
/// the PTX body as one `asm!` with precise operands and `options` (no
/// `nomem` on anything that touches memory or synchronizes); write the host
/// body with ordinary Rust and [`emu`] (a scheduling point such as
/// `emu::yield_point` for anything another thread could observe, a warp
/// collective through `emu::warp_exchange`, errors through `emu::misuse`).
/// The kernels crate needs `#![cfg_attr(target_arch = "nvptx64",
/// feature(asm_experimental_arch))]` for `asm!`.
///
/// ```
/// /// `brev.b32 d, a;` (PTX ISA §9.7.1.15): the bits of `a` reversed.
/// #[inline(always)]
/// pub fn brev(a: u32) -> u32 {
///     kernel_device::device_op!("brev.b32", {
///         let d: u32;
///         // SAFETY: register-only.
///         unsafe { core::arch::asm!("brev.b32 {0}, {1};", out(reg32) d, in(reg32) a,
///             options(pure, nomem, nostack, preserves_flags)) };
///         d
///     }, host: { a.reverse_bits() })
/// }
/// assert_eq!(brev(1), 0x8000_0000);
///
/// /// A warp collective of one's own: the lowest `a` of the warp, with the
/// /// emulator's convergence check (every lane at the same call site).
/// #[inline(always)]
/// #[track_caller]
/// pub fn warp_min_lane_value(a: u32) -> u32 {
///     kernel_device::device_op!("redux.sync.min.u32", {
///         let d: u32;
///         // SAFETY: a register-only warp collective; all 32 lanes call it.
///         unsafe { core::arch::asm!("redux.sync.min.u32 {0}, {1}, 0xffffffff;", out(reg32) d, in(reg32) a,
///             options(nomem, nostack, preserves_flags)) };
///         d
///     }, host: {
///         let lanes = kernel_device::emu::warp_exchange("redux.sync.min.u32", a as u64);
///         lanes.iter().map(|&v| v as u32).min().unwrap()
///     })
/// }
/// ```
#[macro_export]
macro_rules! device_op {
    ($op:literal, $body:block, host: $host:block) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            $body
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            $host
        }
    }};
}

/// What kernels usually import: `use kernel_device::prelude::*;`.
pub mod prelude {
    pub use crate::cluster::{cluster_arrive, cluster_sync, cluster_wait};
    pub use crate::cluster_barrier::{ClusterBarrier, WholeCluster, X, XY, XZ, Y, YZ, Z};
    pub use crate::gmem::{Gmem, GmemRef};
    pub use crate::global::GlobalBuf;
    pub use crate::index::*;
    pub use crate::{kernel, warp_specialize};
    pub use crate::layout::{Swizzled, Tile, TileLayout, Unswizzled};
    pub use crate::mbarrier::{Barrier, BarrierRef, Barriers};
    pub use crate::semaphore::Semaphore;
    pub use crate::smem::Smem;
    pub use crate::sync::{sync_threads, NamedBarrier};
    pub use crate::tma::{commit_smem, GatherRow, Tma};
    pub use crate::warp::{elect_one, lane_id};
    pub use crate::math::F32Ext;
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
