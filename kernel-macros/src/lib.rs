//! `#[kernel]` and `#[warp_specialize]`: a Rust function becomes a GPU
//! kernel.
//!
//! Use them through `kernel_device` (`kernel_device::kernel`,
//! `kernel_device::warp_specialize`, both in `kernel_device::prelude`): the
//! attributes' own documentation below, which rustdoc shows on the
//! re-exports, is the reference (every option, every rule, what the macro
//! emits, the PTX entry names).
use proc_macro::TokenStream;

mod kernel;
mod options;
mod warp_specialize;

/// Turns a Rust function into a GPU kernel.
///
/// ```
/// use kernel_device::prelude::*;
///
/// #[kernel(block = warpgroups(2), cluster = 1)]
/// pub fn pipe(x: *const f32, y: *mut f32,
///             #[scratch] buf: Smem<[f32; 128]>,
///             #[scratch(arrivals = 128)] ready: Barrier) { /* ... */ }
/// ```
///
/// For the kernel `pipe` the macro emits:
///
/// * on `nvptx64`: the PTX entry point `pipe` (`extern "ptx-kernel"`, taking
///   only the non-scratch parameters), whose prologue places every scratch
///   parameter in dynamic shared memory, allocates the kernel's tensor memory
///   (`Tmem` scratch, sm_100a), initializes scratch barriers with their
///   arrival counts (one thread), issues `fence.mbarrier_init` and a CTA
///   barrier (a cluster barrier when the cluster has more than one CTA),
///   then runs the body; the epilogue frees the tensor memory, and a cluster
///   kernel ends with a cluster barrier, so every CTA's shared memory stays
///   valid while others may read it;
/// * on every target: a type `pipe` (a unit-like struct with the function's
///   doc comment) implementing `kernel_device::KernelSpec` (entry name,
///   block shape, cluster shape, dynamic shared memory bytes, parameter
///   types, architectures) that the host launches, `HostEntry` (one
///   emulated thread's run, for the CPU emulator), and the body as a hidden
///   function (type-checked on the host too).
///
/// # Options
///
/// | option | meaning | default |
/// |---|---|---|
/// | `block = warpgroups(N)` / `warps(N)` / `threads(N)` / `(x, y, z)` | threads per CTA (`warpgroups(N)` is `128 N`, `warps(N)` is `32 N`; `(x, y)` and `(x)` fill in 1) | `warpgroups(1)` |
/// | `cluster = N` / `(x, y, z)` | CTAs per cluster (at most 8; 16 with `non_portable_cluster`) | `1` |
/// | `non_portable_cluster` (or `= true` / `= false`) | opt in to clusters of 9 to 16 CTAs: the host sets `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` on the kernel when it loads it, and refuses a launch the GPU cannot co-schedule (`Error::ClusterNotSchedulable`) | off (at most 8 CTAs, the portable size) |
/// | `instances((a, b, ..), ..)`, `instances(E = [t, u], (a, ..), ..)` | the generic values to compile, one entry point each: a type for a type parameter, an integer or `bool` literal for a const one, in declaration order (`(a)` or `a` for one parameter); parameters given by name (`E = [f16, bf16]`) take each listed value with every tuple, which then lists the other parameters (see below) | required iff the kernel has generics |
/// | `arch = sm_90a` / `sm_100a` (or a string) | build the entry point only for that architecture (wgmma is sm_90a-only, tcgen05 and `Tmem` sm_100a-only); `KernelSpec::ARCHS` lists it, and the host refuses to launch on another | every architecture |
/// | `min_blocks_per_sm = N` | PTX `.minnctapersm N`: ptxas keeps the registers per thread low enough for N CTAs of this block size per SM (`1..=32`, at most 2048 threads per SM; N blocks' shared memory must fit the SM's 228 KiB, with 1 KiB reserved per block) | none |
/// | `max_registers = R` | PTX `.maxnreg R`: at most R registers per thread (a multiple of 8 in `24..=248`, or 255; below what the block size already gives; it must allow `min_blocks_per_sm` when both are given); ptxas spills what does not fit. Not with `#[warp_specialize(.., registers = [..])]` | none |
/// | `allow_spills = "reason"` | no build warning for this kernel's stack frame or spills in local memory (the device build warns about every other kernel with either); the reason is required | warn |
///
/// Options are separated by commas and each given at most once.
///
/// # Parameters
///
/// * A plain parameter (`name: Type`) is passed by the host at launch: its
///   type implements `kernel_device::DeviceParam` (integers, floats, raw
///   pointers `*const T` / `*mut T`, `Gmem<T>`, `GmemRef<T>`, `Tma<Tile>`,
///   `Semaphore`). `KernelSpec::Params` is the tuple of their ABI types, in
///   order.
/// * `#[scratch] name: Type` is not passed by the host: the prologue places
///   it in dynamic shared memory (in parameter order, each at its
///   alignment; `KernelSpec::SMEM_BYTES` is the total). Its type implements
///   `kernel_device::Scratch`: `Smem<T>`, `Barrier`, `Barriers<N>`,
///   `ClusterBarrier<Axes>`, and on sm_100a `Tmem<..>`, `TmemPair<..>`,
///   the barrier kinds `Barrier<TensorCore>`, `Barriers<N, TensorCore>`,
///   `Barriers<N, PairTma>`, and `ClcResponse`.
/// * `#[global_scratch] name: Type` is not passed by the host either: it
///   is grid-wide scratch in global memory (Pallas's `pl.get_global`),
///   shared by every CTA of the launch. Its type implements
///   `kernel_device::global::GlobalScratch` (`Semaphore`, `[Semaphore; N]`,
///   `GlobalBuf<T, N>`); the items are laid out in parameter order
///   (`KernelSpec::GLOBAL_SCRATCH_BYTES` is the total). The host launcher
///   (GPU and emulator) allocates and zeroes it before each launch, passes
///   its address as a hidden last parameter of the PTX entry, and frees it
///   after the launch.
/// * `#[scratch(arrivals = N)]` gives a barrier scratch (`Barrier`,
///   `Barriers<N>`, of any kind) its arrival count, the
///   number of `arrive`s that complete one phase (`1 <= N < 2^20`; default
///   1). Count the threads that arrive: e.g. `arrivals = 256` for a
///   `consumed` barrier that two compute warpgroups release together
///   (`kernel_device::pipeline::emit_pipeline_warp_specialized`). A count
///   smaller than the arriving threads completes a phase early; the CPU
///   emulator reports a pipeline barrier whose count does not match. A
///   `ClusterBarrier`'s count is derived from the cluster shape (the CTAs
///   along its axes), so it takes no `arrivals`.
///
/// # Generics, `instances` and `where`
///
/// A kernel may have const generic parameters and type parameters (no
/// lifetime parameters); `instances` lists the values to compile. Type
/// parameters make one kernel serve several element types (f16, bf16,
/// e4m3, ...) instead of one twin per type; their bounds (`E: GemmElem`)
/// and a `where` clause are allowed. The `where` clause bounds the
/// generics (e.g. `where Cols<BN>: WgmmaShape`, so the body can use
/// `Acc<BN>`), stays on the generated body and entry functions, and every
/// listed instance must satisfy it and the type parameters' bounds (an
/// instance that does not is a compile error at that instance in
/// `instances(..)`, naming the unsatisfied bound). An instance that is not
/// listed has no `KernelSpec` ("`k<3>` is not a compiled kernel").
///
/// `instances` takes two forms, which may be mixed:
///
/// * a plain list of tuples, one per instance, each giving every generic
///   parameter in declaration order, types and literals mixed:
///   `instances((f16, 128, 4), (bf16, 128, 4), (f16, 256, 3))`;
/// * parameters given by name with their values, `E = [f16, bf16]` (or
///   `E = f16` for one), before the tuples: each tuple then gives only the
///   other parameters, in declaration order, and the instances are every
///   combination of the named values and the tuples (the first named
///   parameter varies slowest, the tuples fastest), so
///   `instances(E = [f16, bf16], (128, 4), (256, 3))` is the four
///   instances `(f16, 128, 4)`, `(f16, 256, 3)`, `(bf16, 128, 4)`,
///   `(bf16, 256, 3)`. With every parameter named, no tuple is needed:
///   `instances(E = [f16, bf16])`.
///
/// A type parameter inside a parameter's type (`Tma<Tile<E, BM, 64>>`,
/// `<E as Trait>::Acc`) is replaced by the instance's type in the host
/// metadata; write an associated type as `<E as Trait>::Acc`, not `E::Acc`.
///
/// ```
/// use kernel_device::prelude::*;
/// use kernel_device::KernelSpec;
///
/// pub struct Stages<const N: usize>;
/// /// The stage counts this kernel supports.
/// pub trait Supported {}
/// impl Supported for Stages<2> {}
/// impl Supported for Stages<4> {}
///
/// #[kernel(block = warpgroups(1), instances((2), (4)))]
/// pub fn staged<const S: usize>(y: *mut f32, #[scratch] bufs: Smem<[[f32; 128]; S]>, #[scratch] full: Barriers<S>)
/// where
///     Stages<S>: Supported,
/// {
///     let _ = (y, bufs, full.len());
/// }
///
/// assert_eq!(<staged<4> as KernelSpec>::NAME, "staged__4");
/// assert_eq!(<staged<4> as KernelSpec>::SMEM_BYTES, 4 * 512 + 4 * 8);
///
/// /// One kernel for two element types: 2 types x 2 stage counts.
/// #[kernel(block = warpgroups(1), instances(E = [f32, u16], (2), (4)))]
/// pub fn copy_rows<E: Copy, const S: usize>(x: GmemRef<E>, y: Gmem<E>, #[scratch] bufs: Smem<[[E; 128]; S]>) {
///     let _ = (x, y, bufs);
/// }
///
/// assert_eq!(<copy_rows<u16, 4> as KernelSpec>::NAME, "copy_rows__u16_4");
/// assert_eq!(<copy_rows<u16, 4> as KernelSpec>::SMEM_BYTES, 4 * 256);
/// assert_eq!(<copy_rows<f32, 4> as KernelSpec>::SMEM_BYTES, 4 * 512);
/// ```
///
/// # PTX entry names
///
/// `KernelSpec::NAME` is the PTX entry point (`.visible .entry NAME`), the
/// name the host loads, the ptxas report lists and profilers show:
///
/// * a kernel without generics: the function's name (`pipe`);
/// * an instance: the name, two underscores, and the instance's values in
///   declaration order, joined by one underscore: a literal in decimal (a
///   `bool` as `true`/`false`; a literal's suffix or base is dropped:
///   `0x10usize` gives `16`), a type by its last path segment, with any
///   character other than a letter, digit or `_` made an underscore
///   (`kernel_device::bf16` gives `bf16`): `swiglu::<3>` is `swiglu__3`,
///   `matmul::<4, 8>` is `matmul__4_8`, `k::<128, true>` is
///   `k__128_true`, `matmul::<bf16, 128, 256>` is `matmul__bf16_128_256`.
///
/// The entry names of a crate are one PTX namespace (`#[no_mangle]`): a
/// kernel named like another's instance (`k__1` beside `k` with instance
/// `(1)`) is a duplicate-symbol error of the build. The host finds an
/// instance's entry through its type (`Kernel<swiglu<3>>`), never by the
/// string.
///
/// # Rules (each is a compile error naming the rule)
///
/// * a free function: no `async`, no `const`, no return type, no
///   lifetime generics, no `extern` ABI, no `self`, no variadics (an
///   `unsafe fn` is allowed, and `where` is, see above);
/// * parameters are plain identifiers whose types can cross to the device
///   (`kernel_device::DeviceParam`): never references, slices, `impl Trait`,
///   trait objects, function pointers or `!`;
/// * `#[scratch]` parameters implement `kernel_device::Scratch`;
///   `#[scratch(arrivals = N)]` (1 <= N < 2^20) only on barrier types; no
///   other `#[scratch(..)]` option; `#[scratch]` at most once per parameter;
/// * `#[global_scratch]` parameters implement
///   `kernel_device::global::GlobalScratch`; it takes no options, appears
///   at most once per parameter and never together with `#[scratch]`;
/// * a `ClusterBarrier<Axes>` scratch needs `cluster = ..` with more than one
///   CTA, more than one CTA along each named axis, and no `arrivals`;
/// * options are known and given once; the block has 1..=1024 threads (every
///   dimension at least 1); the cluster 1..=8 CTAs, or 1..=16 with
///   `non_portable_cluster` (never more);
/// * `instances` is given iff there are generics; each instance gives
///   one value per parameter not given by name, a type for a type
///   parameter and a literal for a const one; a parameter given by name is one
///   of the kernel's generic parameters, given once, with at least one
///   value; no instance is listed twice;
/// * with `arch = sm_100a` no `wgmma*` op in the kernel's body; with
///   `arch = sm_90a` no `tcgen05*`, `Tmem`, `TmemPair`, `TensorCore`,
///   `PairTma`, `Cta2` or
///   cluster-launch-control op (an op reached through a helper function is
///   caught by ptxas instead); `Tmem` scratch needs `arch = sm_100a`, and a
///   `TmemPair` a cluster whose x extent is even and no `Tmem` (of one
///   CTA) beside it;
/// * the scratch total fits in 227 KB and the `Tmem` scratch in 512
///   columns (checked when the layout is evaluated, per instance).
///
/// Roles inside the body: [`macro@warp_specialize`].
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
/// Options: `warpgroups` (roles by warpgroup: the match is on
/// `warpgroup_idx()`) or `warps` (roles by warp inside a warpgroup: the
/// match is on `warp_in_warpgroup()`), exactly one; with `warpgroups`,
/// optionally `registers = [r0, r1, ..]`, one count per warpgroup of the
/// block: `#[kernel]` inserts `setmaxnreg.inc` (an arm whose count is above
/// the entry count, the per-thread share `65536 / threads` capped at 256 and
/// rounded down to a multiple of 8: `kernel_spec::registers::entry_registers`),
/// `setmaxnreg.dec` (below it) or nothing (equal) at the start of each arm.
///
/// Rules (compile errors): the match is on the function its kind names;
/// arms are integers, `a | b`, ranges or `_`; no role in two arms; roles
/// inside the block; `registers` only with `warpgroups`, one count per
/// warpgroup, each a multiple of 8 in 24..=256, equal within an arm, and
/// summing to at most the CTA's register pool, `warpgroups x entry count`
/// (504 for 3 warpgroups: `setmaxnreg` only moves registers within the
/// pool the CTA was launched with, and a `setmaxnreg.inc` the pool cannot
/// serve waits forever, so 240 + 240 + 32 is an error and 240 + 240 + 24
/// fits). Used on a function, this attribute is an error saying where it
/// goes.
#[proc_macro_attribute]
pub fn warp_specialize(_attr: TokenStream, item: TokenStream) -> TokenStream {
    warp_specialize::misplaced(item.into()).into()
}
