//! `#[kernel]`: a Rust function becomes a GPU kernel.
//!
//! ```
//! use kernel_device::prelude::*;
//!
//! #[kernel(block = warpgroups(2), cluster = 1)]
//! pub fn pipe(x: *const f32, y: *mut f32,
//!             #[scratch] buf: Smem<[f32; 128]>,
//!             #[scratch(arrivals = 128)] ready: Barrier) { /* ... */ }
//! ```
//!
//! For the kernel `pipe` the macro emits:
//!
//! * on `nvptx64`: the PTX entry point `pipe` (`extern "ptx-kernel"`, taking
//!   only the non-scratch parameters), whose prologue places every scratch
//!   parameter in dynamic shared memory, initializes scratch barriers with
//!   their arrival counts (one thread), issues `fence.mbarrier_init` and a CTA
//!   barrier (a cluster barrier when the cluster has more than one CTA), then
//!   runs the body; a cluster kernel also ends with a cluster barrier, so every
//!   CTA's shared memory stays valid while others may read it;
//! * on every target: a type `pipe` implementing
//!   `kernel_device::KernelSpec` (entry name, block shape, cluster shape,
//!   dynamic shared memory bytes, parameter types) that the host launches, and
//!   the body as a hidden function (type-checked on the host too).
//!
//! # Options
//!
//! | option | meaning | default |
//! |---|---|---|
//! | `block = warpgroups(N)` / `threads(N)` / `(x, y, z)` | threads per CTA | `warpgroups(1)` |
//! | `cluster = N` / `(x, y, z)` | CTAs per cluster (at most 8; 16 with `non_portable_cluster`) | `1` |
//! | `non_portable_cluster` | opt in to clusters of 9 to 16 CTAs: the host sets `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` on the kernel when it loads it, and refuses a launch the GPU cannot co-schedule (`Error::ClusterNotSchedulable`) | off (at most 8 CTAs, the portable size) |
//! | `instances((a, b, ..), ..)` | const-generic values to compile, one entry point each | required iff the kernel has const generics |
//! | `arch = sm_90a` / `sm_100a` | build the entry point only for that architecture (wgmma is sm_90a-only, tcgen05 sm_100a-only) | every architecture |
//!
//! # Rules (each is a compile error naming the rule)
//!
//! * no `async`, no return type, no type or lifetime generics, no `extern` ABI,
//!   no `self`, no variadics, no `where` clause;
//! * parameters are plain identifiers whose types can cross to the device
//!   (`kernel_device::DeviceParam`): integers, floats, raw pointers; never
//!   references, slices or `impl Trait`;
//! * `#[scratch]` parameters implement `kernel_device::Scratch`;
//!   `#[scratch(arrivals = N)]` (1 <= N < 2^20) only on barrier types;
//! * a `ClusterBarrier<Axes>` scratch needs `cluster = ..` with more than one
//!   CTA, more than one CTA along each named axis, and no `arrivals` (its
//!   count is derived: the CTAs along its axes);
//! * options are known and given once; the block has 1..=1024 threads; the
//!   cluster 1..=8 CTAs, or 1..=16 with `non_portable_cluster` (never more);
//! * the scratch total fits in 227 KB (checked when the layout is evaluated).
use proc_macro::TokenStream;

mod kernel;
mod options;
mod warp_specialize;

/// Turns a function into a GPU kernel; see the crate documentation.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into()).into()
}

/// Declares warp roles. It goes on a `match` over the role index *inside* a
/// `#[kernel]` body, which expands it:
///
/// ```
/// # use kernel_device::prelude::*;
/// # #[kernel(block = warpgroups(3))]
/// # pub fn roles() {
/// #[warp_specialize(warpgroups, registers = [232, 232, 40])]
/// match warpgroup_idx() {
///     0 | 1 => { /* compute warpgroups: setmaxnreg.inc 232 is inserted */ }
///     2 => { /* memory warpgroup: setmaxnreg.dec 40 is inserted */ }
///     _ => {}
/// }
/// #[warp_specialize(warps)]
/// match warp_in_warpgroup() { 0 => { /* TMA warp */ } 1 => { /* MMA warp */ } _ => {} }
/// # }
/// ```
///
/// Rules (compile errors): the match is on `warpgroup_idx()` (roles by
/// warpgroup) or `warp_in_warpgroup()` (roles by warp); arms are integers,
/// `a | b`, ranges or `_`; no role in two arms; roles inside the block;
/// `registers` has one count per warpgroup, each a multiple of 8 in 24..=256,
/// at most 65536 in total (128 threads each), equal within an arm. Used on a
/// function, this attribute is an error saying where it goes.
#[proc_macro_attribute]
pub fn warp_specialize(_attr: TokenStream, item: TokenStream) -> TokenStream {
    warp_specialize::misplaced(item.into()).into()
}
