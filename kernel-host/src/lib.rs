//! Host side of the kernel toolkit.
//!
//! * [`build`]: compiles a kernels crate for `nvptx64-nvidia-cuda` once per
//!   architecture from a `build.rs`, assembles it with ptxas when ptxas is
//!   found, and writes the `device_code.rs` that `kernel_device::device_code!`
//!   embeds; it warns (`cargo:warning`) about a kernel with a stack frame
//!   or spills in local memory.
//! * [`ptxas`]: reads ptxas's `-v` report (registers, static shared memory,
//!   stack frame and spills per entry point).
//! * `runtime` (feature `runtime`, on by default): a CUDA context and stream
//!   on cudarc, module loading, typed launches with clusters and dynamic
//!   shared memory, and errors as values.
//! * [`emulate`] (feature `emulate`, part of `runtime`): runs a kernel on
//!   the CPU emulator (`kernel-emu`). Without features only [`build`] and
//!   [`ptxas`] are compiled: what a kernels crate's `build.rs` needs.
//! * [`device`] (feature `runtime`): ONE launch path over both backends:
//!   [`Device`] (a GPU or the emulator), [`Buffer`], [`TileMap`],
//!   [`Program`] and [`Launcher`]. Host programs written against it run on
//!   either; this is what examples, `kernel-ops` and users write.
//! * [`group`] (feature `runtime`): several devices of one host (GPUs with
//!   peer access, or emulated devices in one run): peer buffers, group
//!   launches, cross-device semaphores.
/// Invokes `$m!` once per tuple arity from 0 to 16, with one
/// `(ArgType, ParamType, binding)` triple per element: the impls of the
/// argument-tuple traits (GPU launches and emulator launches).
#[cfg(feature = "emulate")]
macro_rules! for_each_tuple_arity {
    ($m:ident) => {
        for_each_tuple_arity!(@ $m []
            (A0, P0, a0) (A1, P1, a1) (A2, P2, a2) (A3, P3, a3) (A4, P4, a4) (A5, P5, a5)
            (A6, P6, a6) (A7, P7, a7) (A8, P8, a8) (A9, P9, a9) (A10, P10, a10) (A11, P11, a11)
            (A12, P12, a12) (A13, P13, a13) (A14, P14, a14) (A15, P15, a15));
    };
    (@ $m:ident [$($done:tt)*]) => {
        $m!($($done),*);
    };
    (@ $m:ident [$($done:tt)*] $next:tt $($rest:tt)*) => {
        $m!($($done),*);
        for_each_tuple_arity!(@ $m [$($done)* $next] $($rest)*);
    };
}

pub mod build;
pub mod ptxas;
#[cfg(feature = "emulate")]
pub mod emulate;

#[cfg(feature = "runtime")]
pub mod device;
#[cfg(feature = "runtime")]
pub mod group;
#[cfg(feature = "runtime")]
pub mod nccl;
#[cfg(feature = "runtime")]
pub mod occupancy;
#[cfg(feature = "runtime")]
pub use device::{Arg, Args, Buffer, Device, Launched, Launcher, MapArg, Program, TileMap};
#[cfg(feature = "runtime")]
pub use occupancy::Occupancy;

#[cfg(feature = "runtime")]
pub mod runtime;

#[cfg(feature = "runtime")]
pub use runtime::*;
