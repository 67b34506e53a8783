//! Running kernels on the CPU emulator (crate `kernel-emu`): the same kernel
//! source, compiled for the host, run with one emulated thread per GPU
//! thread under a seeded, deterministic scheduler that checks the
//! synchronization protocol (deadlocks, mbarrier misuse).
//!
//! ```
//! use kernel_device::prelude::*;
//! use kernel_host::emulate::Emulator;
//!
//! #[kernel(block = threads(128))]
//! pub fn increment(x: GmemRef<f32>, y: Gmem<f32>) {
//!     let i = (block_idx().x * 128 + thread_idx().x) as usize;
//!     if i < y.len() {
//!         y.write(i, x.read(i) + 1.0);
//!     }
//! }
//!
//! let x = vec![1.0f32; 256];
//! let mut y = vec![0.0f32; 256];
//! Emulator::new(7).launch::<increment, _>(2u32, (&x[..], &mut y[..]))?;
//! assert!(y.iter().all(|&v| v == 2.0));
//! # Ok::<(), kernel_host::emulate::EmuError>(())
//! ```
//!
//! Arguments are host memory: `&[T]` for a `*const T` parameter, `&mut [T]`
//! for `*mut T`, `&mut [u32]` for a `Semaphore`, scalars as themselves.
//! A `Tma<Tl, RANK>` parameter takes `&EmuTensorMap<Tl, RANK>` (the
//! emulator's tensor map). TMA copies run as asynchronous operations with
//! lifetimes and wgmma completes when issued (see `kernel_emu::tma`,
//! `kernel_emu::wgmma` and `kernel_emu::race` for what is modeled); the
//! run stops at the first data race, with both accesses named
//! ([`EmuError::Race`]).
use kernel_device::launch::{Dim3, HostEntry};
use kernel_device::layout::TileLayout;
use kernel_device::tma::TensorMapParam;
use kernel_emu::tma as emu_map;
use kernel_device::Semaphore;
use std::marker::PhantomData;

pub use kernel_emu::{EmuError, RunReport, MAX_CTAS, MAX_THREADS};

/// A host value passed for a kernel parameter of type `P` on the emulator.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to the emulator for a kernel parameter of type `{P}`",
    note = "pass `&[T]` for `*const T` and `GmemRef<T>`, `&mut [T]` for `*mut T` and `Gmem<T>`, `&mut [u32]` for `Semaphore`, and a value of exactly the parameter's type for a scalar"
)]
pub trait HostArg<P> {
    fn into_param(self) -> P;
}

macro_rules! scalar_host_args {
    ($($t:ty),*) => {$(
        impl HostArg<$t> for $t {
            fn into_param(self) -> $t { self }
        }
    )*};
}
scalar_host_args!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool);

impl<T> HostArg<*const T> for &[T] {
    fn into_param(self) -> *const T {
        self.as_ptr()
    }
}
impl<T> HostArg<*const T> for &mut [T] {
    fn into_param(self) -> *const T {
        self.as_ptr()
    }
}
impl<T> HostArg<*mut T> for &mut [T] {
    fn into_param(self) -> *mut T {
        self.as_mut_ptr()
    }
}
impl<T: Copy> HostArg<kernel_device::Gmem<T>> for &mut [T] {
    fn into_param(self) -> kernel_device::Gmem<T> {
        // SAFETY: the slice is live and exclusively lent for the launch.
        unsafe { kernel_device::Gmem::from_raw_parts(self.as_mut_ptr(), self.len()) }
    }
}
/// A read-only bounds-checked view: `&[T]` (or `&mut [T]`).
impl<T: Copy> HostArg<kernel_device::gmem::GmemRef<T>> for &[T] {
    fn into_param(self) -> kernel_device::gmem::GmemRef<T> {
        // SAFETY: a live slice, borrowed for the launch.
        unsafe { kernel_device::gmem::GmemRef::from_raw_parts(self.as_ptr(), self.len()) }
    }
}
impl<T: Copy> HostArg<kernel_device::gmem::GmemRef<T>> for &mut [T] {
    fn into_param(self) -> kernel_device::gmem::GmemRef<T> {
        // SAFETY: a live slice, borrowed for the launch.
        unsafe { kernel_device::gmem::GmemRef::from_raw_parts(self.as_ptr(), self.len()) }
    }
}
impl HostArg<Semaphore> for &mut [u32] {
    fn into_param(self) -> Semaphore {
        assert!(
            !self.is_empty(),
            "a Semaphore argument needs at least one u32"
        );
        // SAFETY: a live, aligned u32 the caller lends for the launch.
        unsafe { Semaphore::from_ptr(self.as_mut_ptr()) }
    }
}

/// A tuple of host arguments for a kernel whose parameters are `Params`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not match the kernel's parameters `{Params}`",
    note = "pass one argument per kernel parameter, as a tuple in order: `(&x[..], &mut y[..], n)`"
)]
pub trait HostArgs<Params> {
    fn pack(self) -> Params;
}

macro_rules! host_tuple {
    ($(($A:ident, $P:ident, $a:ident)),*) => {
        impl<$($A: HostArg<$P>, $P),*> HostArgs<($($P,)*)> for ($($A,)*) {
            #[allow(clippy::unused_unit)]
            fn pack(self) -> ($($P,)*) {
                let ($($a,)*) = self;
                ($($a.into_param(),)*)
            }
        }
    };
}
for_each_tuple_arity!(host_tuple);

/// The parameter values, shared by the emulated threads (which run one at a
/// time; the emulator's baton orders their accesses).
struct Shared<P>(P);
// SAFETY: the values are plain data (raw pointers into memory the caller
// lends for the launch); only one emulated thread runs at a time.
unsafe impl<P> Sync for Shared<P> {}

/// Runs kernels on the CPU, deterministically for a given seed.
#[derive(Clone, Debug)]
pub struct Emulator {
    seed: u64,
    max_steps: u64,
    sms: Option<u32>,
}

impl Emulator {
    /// An emulator whose scheduler is seeded with `seed`: the same seed gives
    /// the same interleaving of threads.
    pub fn new(seed: u64) -> Self {
        // About a minute of emulation (~30 us a step) before a spinning
        // kernel is reported.
        Emulator {
            seed,
            max_steps: 2_000_000,
            sms: None,
        }
    }

    /// `n` emulators with different seeds (`seed`, `seed + 1`, ...): run the
    /// same kernel under each to explore `n` schedules.
    pub fn schedules(seed: u64, n: usize) -> impl Iterator<Item = Emulator> {
        (0..n as u64).map(move |i| Emulator::new(seed.wrapping_add(i)))
    }

    /// The scheduler's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Scheduling steps after which a run that has not finished is reported
    /// as making no progress (spinning).
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    /// Emulates a device of `sms` SMs: only `sms / cluster size` clusters
    /// (at least one) run at once, the others start as running clusters
    /// finish, and cluster launch control can cancel them
    /// (`kernel_emu::clc`). Default: every cluster resident.
    pub fn sms(mut self, sms: u32) -> Self {
        self.sms = Some(sms);
        self
    }

    /// Runs kernel `K` over `grid` CTAs with `args` (host memory).
    pub fn launch<K, A>(&self, grid: impl Into<Dim3>, args: A) -> Result<RunReport, EmuError>
    where
        K: HostEntry,
        A: HostArgs<K::Params>,
    {
        self.launch_params::<K>(grid.into(), args.pack())
    }

    /// The emulated SM count set by [`Emulator::sms`], if any.
    pub fn sm_count(&self) -> Option<u32> {
        self.sms
    }

    /// Runs kernel `K` over `grid` CTAs with its parameter values already
    /// made (what [`Emulator::launch`] does after converting the host
    /// arguments; `kernel_host::Device` launches through it).
    pub fn launch_params<K: HostEntry>(&self, grid: Dim3, params: K::Params) -> Result<RunReport, EmuError> {
        let (block, cluster) = (K::BLOCK, K::CLUSTER);
        // `kernel_emu::run` checks the launch (grid, block, cluster, shared
        // memory) with `kernel_spec::launch::check_launch`, the check a GPU
        // launch runs, then the emulator's own capacity.
        let cfg = kernel_emu::LaunchConfig {
            kernel: K::NAME.to_string(),
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            cluster: [cluster.x, cluster.y, cluster.z],
            smem_bytes: K::SMEM_BYTES as usize,
            seed: self.seed,
            max_steps: self.max_steps,
            resident_clusters: self.sms.map_or(0, |s| (s / cluster.volume().max(1)).max(1)),
            non_portable_cluster: K::NON_PORTABLE_CLUSTER,
            devices: 1,
        };
        let params = Shared(params);
        // The kernel's `#[global_scratch]`: zeroed for this launch, freed
        // when it returns.
        let alloc = GlobalScratchAlloc::new(K::GLOBAL_SCRATCH_BYTES);
        let global = Shared(alloc.ptr());
        // Capture the whole `&Shared` (Sync), not the field (a move closure
        // captures up to the first dereference).
        let (shared, global) = (&params, &global);
        kernel_emu::run(&cfg, &move || K::run_thread(&shared.0, global.0))
    }

    /// Runs kernel `K` over `grid` CTAs on `params.len()` emulated devices
    /// at once, device `d` with `params[d]`, in one run: their threads
    /// interleave under one scheduler, and the race detector sees accesses
    /// of every device (peer memory is host memory here). Every cluster is
    /// resident (the emulated SM count is not used).
    pub fn launch_devices_params<K: HostEntry>(&self, grid: Dim3, params: Vec<K::Params>) -> Result<RunReport, EmuError> {
        let (block, cluster) = (K::BLOCK, K::CLUSTER);
        let cfg = kernel_emu::LaunchConfig {
            kernel: K::NAME.to_string(),
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            cluster: [cluster.x, cluster.y, cluster.z],
            smem_bytes: K::SMEM_BYTES as usize,
            seed: self.seed,
            max_steps: self.max_steps,
            resident_clusters: 0,
            non_portable_cluster: K::NON_PORTABLE_CLUSTER,
            devices: u32::try_from(params.len()).unwrap_or(u32::MAX),
        };
        let params = Shared(params);
        // One global scratch per device, as each GPU's launch has its own.
        let allocs: Vec<GlobalScratchAlloc> = (0..cfg.devices).map(|_| GlobalScratchAlloc::new(K::GLOBAL_SCRATCH_BYTES)).collect();
        let globals = Shared(allocs.iter().map(GlobalScratchAlloc::ptr).collect::<Vec<_>>());
        let (shared, globals) = (&params, &globals);
        kernel_emu::run(&cfg, &move || {
            let d = kernel_emu::device_id() as usize;
            K::run_thread(&shared.0[d], globals.0[d])
        })
    }
}

/// The emulator's global scratch of one launch (`#[global_scratch]`,
/// [`kernel_device::global`]): `bytes` zeroed bytes of host memory,
/// aligned as a device allocation (256 bytes), freed on drop. Null when
/// `bytes` is 0.
struct GlobalScratchAlloc {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl GlobalScratchAlloc {
    /// The alignment of a `cuMemAlloc` allocation.
    const ALIGN: usize = 256;

    fn new(bytes: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), Self::ALIGN).expect("a global scratch size below isize::MAX");
        if bytes == 0 {
            return GlobalScratchAlloc { ptr: std::ptr::null_mut(), layout };
        }
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        GlobalScratchAlloc { ptr, layout }
    }

    fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for GlobalScratchAlloc {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) }
        }
    }
}

// ----- TMA tensor maps on the emulator ----------------------------------------

/// A TMA tensor map for the CPU emulator: what a `Tma<Tl, RANK>` kernel
/// parameter takes on [`Emulator::launch`] (pass `&map`), over a row-major
/// tensor in host memory borrowed for `'a`.
///
/// Its 128 bytes are the emulator's own encoding
/// ([`kernel_emu::tma`]: magic word, global address, element
/// bytes, rank, dims, byte strides, box, swizzle, writable flag), not a
/// driver `CUtensorMap`; a GPU `TensorMap` cannot be used on the emulator nor
/// this one on a GPU. As in `kernel_host::TensorMap`, the box
/// (`Tl::BLOCK_COLS x Tl::ROWS`, 1 in the outer dimensions) and the swizzle
/// (`Tl::SWIZZLE`) come from the tile type. Maps built from a shared slice
/// ([`EmuTensorMap::new_2d`]) are read-only: a TMA store through one panics;
/// build store destinations with the `_mut` constructors.
pub struct EmuTensorMap<'a, Tl: TileLayout, const RANK: usize = 2> {
    param: TensorMapParam<Tl, RANK>,
    _data: PhantomData<&'a mut [Tl::Elem]>,
}

impl<'a, Tl: TileLayout, const RANK: usize> EmuTensorMap<'a, Tl, RANK> {
    /// The map of a tensor of `dims` (outermost first, e.g. `[rows, cols]`
    /// or `[batch, rows, cols]`), row-major and contiguous, at `data`
    /// (`len` elements), checked as `cuTensorMapEncodeTiled` checks it, plus
    /// the emulator's own rule that the tensor fits in `len`.
    pub(crate) fn build(
        data: *const Tl::Elem,
        len: usize,
        dims_outer_first: &[usize],
        writable: bool,
    ) -> Result<Self, EmuError> {
        let e = Tl::ELEM_BYTES;
        let mut problems = Vec::new();
        // The emulator's own rules: the dims match the map's rank, tile
        // copies are of rank 2..=5, the tensor fits in the slice.
        if dims_outer_first.len() != RANK {
            problems.push(format!(
                "{} dimensions ({dims_outer_first:?}) for a map of rank {RANK}: give one extent \
                 per dimension, outermost first",
                dims_outer_first.len()
            ));
        }
        if !(2..=emu_map::MAX_RANK).contains(&RANK) {
            problems.push(format!(
                "rank {RANK}: tile copies need a rank in 2..={}",
                emu_map::MAX_RANK
            ));
        }
        let addr = data as u64;
        let mut dims = [1u64; emu_map::MAX_RANK];
        let mut strides = [0u64; emu_map::MAX_RANK];
        for (d, &x) in dims_outer_first
            .iter()
            .rev()
            .enumerate()
            .take(emu_map::MAX_RANK)
        {
            dims[d] = x as u64;
        }
        // Row-major and contiguous: each stride is the span of the dimension
        // below (`strides[0]` is the element size).
        let rank = RANK.min(emu_map::MAX_RANK);
        let mut stride = e as u64;
        for d in 0..rank {
            strides[d] = stride;
            stride = stride.saturating_mul(dims[d]);
        }
        let total_bytes = stride;
        if total_bytes > (len * e) as u64 {
            problems.push(format!(
                "the tensor needs {total_bytes} bytes; the slice has {} ({len} elements)",
                len * e
            ));
        }
        let mut box_dims = [1u32; emu_map::MAX_RANK];
        box_dims[0] = u32::try_from(Tl::BLOCK_COLS).unwrap_or(u32::MAX);
        box_dims[1] = u32::try_from(Tl::ROWS).unwrap_or(u32::MAX);
        // The driver's rules, checked as `TensorMap` (GPU) checks them: one
        // validator for both (`kernel_spec::tensor_map`).
        let desc = kernel_spec::tensor_map::MapDesc {
            elem_bytes: e as u64,
            global_address: addr,
            dims: &dims[..rank],
            strides_bytes: &strides[1..rank.max(1)],
            box_dims: &box_dims[..rank],
            element_strides: &[1; emu_map::MAX_RANK][..rank],
            swizzle: Tl::SWIZZLE,
        };
        kernel_spec::tensor_map::check_map(&desc, |p| problems.push(p.to_string()));
        if !problems.is_empty() {
            return Err(EmuError::Misuse {
                kernel: "EmuTensorMap".into(),
                rule: format!("tensor map rules ({})", kernel_spec::tensor_map::SOURCE),
                where_: "host".into(),
                detail: format!(
                    "EmuTensorMap<{}, {RANK}> over dims {dims_outer_first:?} (outermost first), \
                     described innermost first as dims = {:?}, strides_bytes = {:?}, box_dims = \
                     {:?}, swizzle = {:?}: {}",
                    std::any::type_name::<Tl>(),
                    desc.dims,
                    desc.strides_bytes,
                    desc.box_dims,
                    desc.swizzle,
                    problems.join("; ")
                ),
            });
        }
        let map = emu_map::EmuMap {
            global: addr,
            elem_bytes: e as u32,
            rank: RANK as u32,
            dims,
            strides,
            box_dims,
            swizzle: Tl::SWIZZLE,
            writable,
        };
        Ok(EmuTensorMap {
            param: TensorMapParam::from_bytes(map.encode()),
            _data: PhantomData,
        })
    }

    /// The decoded map (for tests and messages).
    pub fn map(&self) -> emu_map::EmuMap {
        emu_map::EmuMap::decode(&self.param.bytes).expect("an EmuTensorMap holds an emulator map")
    }
}

impl<'a, Tl: TileLayout> EmuTensorMap<'a, Tl, 2> {
    /// A read-only map of a `rows x cols` row-major matrix (TMA loads only).
    pub fn new_2d(data: &'a [Tl::Elem], rows: usize, cols: usize) -> Result<Self, EmuError> {
        Self::build(data.as_ptr(), data.len(), &[rows, cols], false)
    }
    /// A writable map of a `rows x cols` row-major matrix (loads and stores).
    pub fn new_2d_mut(
        data: &'a mut [Tl::Elem],
        rows: usize,
        cols: usize,
    ) -> Result<Self, EmuError> {
        Self::build(data.as_mut_ptr(), data.len(), &[rows, cols], true)
    }
}

impl<'a, Tl: TileLayout> EmuTensorMap<'a, Tl, 3> {
    /// A read-only map of `batch` row-major `rows x cols` matrices stored
    /// one after another (coordinates `[col, row, batch]`).
    pub fn new_batched(
        data: &'a [Tl::Elem],
        batch: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Self, EmuError> {
        Self::build(data.as_ptr(), data.len(), &[batch, rows, cols], false)
    }
    /// As [`EmuTensorMap::new_batched`], writable.
    pub fn new_batched_mut(
        data: &'a mut [Tl::Elem],
        batch: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Self, EmuError> {
        Self::build(data.as_mut_ptr(), data.len(), &[batch, rows, cols], true)
    }
}

impl<Tl: TileLayout, const RANK: usize> HostArg<TensorMapParam<Tl, RANK>>
    for &EmuTensorMap<'_, Tl, RANK>
{
    fn into_param(self) -> TensorMapParam<Tl, RANK> {
        self.param
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TensorMapSpec;
    use kernel_device::f16;
    use kernel_device::layout::{Swizzled, Tile};

    type T = Tile<f16, 64, 64, Swizzled<128>>;

    #[repr(C, align(16))]
    struct Aligned([f16; 64 * 100]);

    #[test]
    fn emulator_maps_are_checked_by_the_drivers_rules() {
        let buf = Box::new(Aligned([f16::ZERO; 64 * 100]));
        assert!(EmuTensorMap::<T>::new_2d(&buf.0[..64 * 64], 64, 64).is_ok());

        // Rows of 100 f16 = 200 bytes: not a multiple of 16, as the GPU's
        // TensorMap reports it, word for word (one validator).
        let e = EmuTensorMap::<T>::new_2d(&buf.0, 64, 100).err().expect("a 200-byte row stride is refused");
        let msg = e.to_string();
        let gpu = TensorMapSpec::for_tile_2d::<T>(buf.0.as_ptr() as u64, 64, 100, 200).problems();
        assert_eq!(gpu.len(), 1, "{gpu:#?}");
        assert!(msg.contains(&gpu[0]), "{msg}\nvs the GPU map's: {}", gpu[0]);
        assert!(msg.contains("`strides_bytes[0]` = 200") && msg.contains("dims [64, 100] (outermost first)"), "{msg}");

        // The emulator's own rule: the tensor fits in the slice.
        let e = EmuTensorMap::<T>::new_2d(&buf.0[..100], 64, 64).err().expect("a short slice is refused");
        assert!(e.to_string().contains("the tensor needs 8192 bytes; the slice has 200"), "{e}");
    }
}
