//! Shared memory: the dynamic shared-memory window, typed handles into it,
//! and the scratch layout `#[kernel]` computes.
//!
//! Every scratch parameter of a kernel (`#[scratch] buf: Smem<[f32; 128]>`,
//! `#[scratch(arrivals = 2)] ready: Barrier`) is placed by `#[kernel]` in the
//! dynamic shared memory of the CTA, at an offset computed at compile time by
//! [`scratch_layout`] from each type's [`Scratch::BYTES`] and
//! [`Scratch::ALIGN`]. The total is the kernel's `KernelSpec::SMEM_BYTES`,
//! which the host launch passes as the dynamic shared memory size.
//!
//! Ordering: shared memory is shared by all threads of the CTA. Plain reads
//! and writes through [`Smem`] are not atomic; a barrier ([`crate::sync_threads`],
//! an mbarrier wait, a named barrier) must order a write and a read of the
//! same element by different threads. On the CPU emulator every access
//! through `Smem::load`/`store`/`read`/`write`, the 16-byte
//! `read_v4`/`write_v4`, the tile accessors (`get`/`set`, `get_v4`/`set_v4`)
//! and the raw-pointer loads and stores of [`raw`] is checked for races
//! (happens-before). The pointer escape hatches, [`Smem::ptr`],
//! [`Smem::elem_ptr`] and a tile's [`Smem::elem_ptr_2d`], give an
//! [`SmemPtr<T>`](crate::ptr::SmemPtr): the bare pointer on the GPU, which
//! on the emulator carries the allocation's bounds (the scratch region, or
//! the slot of [`Smem::at`]), so that every `read`/`write` through it is
//! bounds-, alignment- and race-checked at the kernel's line
//! ([`crate::ptr`]); [`Smem::map_rank`] gives the handle of the same
//! allocation in another CTA of the cluster. The bare pointer is reachable
//! only through the explicitly unchecked
//! [`Ptr::as_raw_unchecked`](crate::ptr::Ptr::as_raw_unchecked).
use core::marker::PhantomData;

use crate::pack::Pack16;

pub mod raw;

/// Alignment of the dynamic shared-memory base (1024 bytes: what 128-byte
/// swizzled TMA/MMA tiles need).
pub const DYNAMIC_SMEM_ALIGN: usize = 1024;

#[cfg(target_arch = "nvptx64")]
#[repr(C, align(1024))]
struct DynSmemBase([u8; 0]);

/// Generic pointer to the start of the CTA's dynamic shared memory
/// (`extern __shared__` in CUDA), aligned to [`DYNAMIC_SMEM_ALIGN`].
///
/// Built on `core::intrinsics::gpu::gpu_launch_sized_workgroup_mem`, which
/// emits `.extern .shared .align 1024 .b8 ...[]`; loads and stores through
/// pointers derived from it compile to `ld.shared`/`st.shared`. (Not a
/// `#[link_section = ".shared"]` static: that silently lands in global memory.)
#[inline(always)]
pub fn dynamic_smem_base() -> *mut u8 {
    device!("dynamic shared memory", {
        core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<DynSmemBase>() as *mut u8
    }, host: { kernel_emu::smem_base() })
}

/// `cvta.to.shared.u64`: the 32-bit `.shared::cta` address of a generic
/// pointer into shared memory (what mbarrier, TMA and MMA operands take).
/// On the emulator a pointer outside this CTA's shared memory is reported,
/// at the caller's line.
#[inline(always)]
#[track_caller]
pub fn shared_addr<T>(ptr: *const T) -> u32 {
    device!("cvta.to.shared", {
        let a: u64;
        // SAFETY: address conversion only.
        unsafe {
            core::arch::asm!("cvta.to.shared.u64 {0}, {1};", out(reg64) a, in(reg64) ptr as u64,
                options(pure, nomem, nostack, preserves_flags))
        };
        a as u32
    }, host: { kernel_emu::smem_addr(ptr as *const u8) })
}

/// A kernel scratch allocation in dynamic shared memory.
///
/// # Safety
/// `BYTES`/`ALIGN` must cover what `from_smem` and the value's methods touch;
/// `ALIGN` is a power of two.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[scratch]` parameter",
    label = "not a Scratch type",
    note = "scratch parameters are placed in shared (or tensor) memory: use `Smem<T>`, `Barrier`, `Barriers<N>` (of a kind: `Barrier<TensorCore>`, `Barriers<N, PairTma>`), `ClusterBarrier<Axes>`, `Tmem<T, ROWS, COLS>`, `TmemPair<T, ROWS, COLS>` or `ClcResponse`"
)]
pub unsafe trait Scratch: Sized {
    /// Bytes reserved.
    const BYTES: usize;
    /// Alignment of the start, a power of two.
    const ALIGN: usize;
    /// Whether `#[scratch(arrivals = N)]` applies (mbarrier types).
    const TAKES_ARRIVALS: bool = false;
    /// For a [`crate::ClusterBarrier`]: its axes
    /// ([`crate::cluster_barrier::ClusterAxes::MASK`]), from which `#[kernel]`
    /// derives the arrival count; 0 for every other type.
    const CLUSTER_AXES: u8 = 0;
    /// Build the handle for the allocation at `ptr` (a generic pointer into
    /// dynamic shared memory, aligned to `ALIGN`).
    ///
    /// # Safety
    /// `ptr..ptr + BYTES` is this allocation, used by nothing else.
    unsafe fn from_smem(ptr: *mut u8) -> Self;
    /// One-time initialization by one thread before the kernel body runs
    /// (mbarrier init). Default: nothing.
    ///
    /// # Safety
    /// Called once, by one thread, before any other use; followed by a fence
    /// and a CTA (or cluster) barrier.
    unsafe fn init(&self, _arrivals: u32) {}
    /// TMEM columns this scratch item needs (a power of two in 32..=512;
    /// 0: none). `#[kernel]` allocates the sum for the CTA.
    const TMEM_COLS: usize = 0;
    /// Receives the item's TMEM address after `#[kernel]`'s allocation.
    ///
    /// # Safety
    /// `taddr` is the start of `TMEM_COLS` columns allocated for this item.
    unsafe fn bind_tmem(&mut self, _taddr: u32) {}
    /// Whether the item is collective tensor memory (`cta_group::2`, shared
    /// by a CTA pair: `Tmem<.., Cta2>`, `collective::TmemPair`): `#[kernel]`
    /// then allocates and frees with `cta_group::2`, requires an even
    /// cluster x extent and no cta_group::1 TMEM beside it.
    const TMEM_COLLECTIVE: bool = false;
    /// Whether the item allocates tensor memory itself, in scopes
    /// ([`crate::tmem::TmemScope`]): `#[kernel]` then does not relinquish
    /// the CTA's allocation permit after its own allocation, and requires
    /// `arch = sm_100a`.
    const TMEM_SCOPED: bool = false;
}

/// Offsets of scratch allocations `(bytes, align)` laid out in order, each
/// aligned, and the total size. Evaluated at compile time by `#[kernel]`.
pub const fn scratch_layout<const K: usize>(items: [(usize, usize); K]) -> ([usize; K], usize) {
    let mut offsets = [0usize; K];
    let mut end = 0usize;
    let mut i = 0;
    while i < K {
        let (bytes, align) = items[i];
        assert!(align.is_power_of_two(), "scratch alignment must be a power of two");
        let start = (end + align - 1) & !(align - 1);
        offsets[i] = start;
        end = start + bytes;
        i += 1;
    }
    (offsets, end)
}

/// The arrival count `#[kernel]` initializes scratch barrier `T` with:
/// `arrivals` (from `#[scratch(arrivals = N)]`, default 1), or, for a
/// [`crate::ClusterBarrier`], the CTAs along its axes of a cluster of shape
/// `cluster`.
pub const fn scratch_arrivals<T: Scratch>(arrivals: u32, cluster: [u32; 3]) -> u32 {
    if T::CLUSTER_AXES != 0 {
        crate::cluster_barrier::cluster_barrier_arrivals(T::CLUSTER_AXES, cluster)
    } else {
        arrivals
    }
}

/// A typed handle to a `T` in this CTA's shared memory: `Smem<[f32; 128]>`,
/// `Smem<u32>`. Declared as kernel scratch (`#[scratch] buf: Smem<[f32; 128]>`).
pub struct Smem<T> {
    ptr: *mut T,
    _t: PhantomData<T>,
}

impl<T> Clone for Smem<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Smem<T> {}

impl<T> core::fmt::Debug for Smem<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Smem<{}>@{:p}", core::any::type_name::<T>(), self.ptr)
    }
}

// SAFETY: reserves size_of::<T>() bytes aligned to at least align_of::<T>().
unsafe impl<T> Scratch for Smem<T> {
    const BYTES: usize = core::mem::size_of::<T>();
    const ALIGN: usize = if core::mem::align_of::<T>() > 16 { core::mem::align_of::<T>() } else { 16 };
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        Smem { ptr: ptr.cast(), _t: PhantomData }
    }
}

impl<T> Smem<T> {
    /// # Safety
    /// `ptr` points to a `T` in this CTA's shared memory, valid for the
    /// kernel's lifetime.
    #[inline(always)]
    pub unsafe fn from_ptr(ptr: *mut T) -> Self {
        Smem { ptr, _t: PhantomData }
    }
    /// A pointer to the value, bounded by this allocation
    /// ([`SmemPtr`](crate::ptr::SmemPtr)): on the emulator every access
    /// through it (and through pointers computed from it) is bounds-,
    /// alignment- and race-checked at the kernel's line; on the GPU it is
    /// the bare generic pointer (`ld.shared`/`st.shared` once the compiler
    /// sees its address space).
    #[inline(always)]
    pub fn ptr(&self) -> crate::ptr::SmemPtr<T> {
        crate::ptr::Ptr::within(self.ptr, self.ptr as *const u8, core::mem::size_of::<T>())
    }
    /// Generic pointer to the value, for the crate's own instructions that
    /// take an address.
    #[inline(always)]
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.ptr
    }
    /// The 32-bit `.shared::cta` address (for mbarrier/TMA/MMA operands).
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        shared_addr(self.ptr)
    }
    /// The `U` at `byte_offset` inside this allocation (e.g. one half of a
    /// tile, for a partitioned copy).
    ///
    /// # Safety
    /// `byte_offset + size_of::<U>() <= size_of::<T>()`, and the address is
    /// aligned for `U` (and for its swizzle pattern if `U` is a tile).
    #[inline(always)]
    pub unsafe fn cast_at<U>(&self, byte_offset: usize) -> Smem<U> {
        // SAFETY: forwarded contract.
        Smem { ptr: unsafe { (self.ptr as *mut u8).add(byte_offset) }.cast(), _t: PhantomData }
    }
    /// The same allocation in CTA `rank` of this cluster (distributed
    /// shared memory, `mapa` on its generic address): its accessors
    /// (`read`, `write`, [`Smem::ptr`]) reach the other CTA's copy, and the
    /// emulator checks them for races as it does local ones. Instructions
    /// that take a `.shared::cta` address ([`Smem::smem_addr`]: barriers,
    /// TMA) do not take it: they use `mapa.shared::cluster` addresses.
    ///
    /// # Safety
    /// `rank < cluster_size()`; access it only while CTA `rank` runs, and
    /// order the accesses with a cluster barrier (or a cluster-scope
    /// mbarrier).
    #[inline(always)]
    pub unsafe fn map_rank(&self, rank: u32) -> Smem<T> {
        // SAFETY: forwarded contract.
        Smem { ptr: unsafe { crate::cluster::map_shared_rank(self.ptr, rank) }, _t: PhantomData }
    }
}

impl<T: Copy> Smem<T> {
    /// Read the whole value.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self) -> T {
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::smem_access(self.ptr as *const u8, core::mem::size_of::<T>(), false);
        // SAFETY: the allocation is valid for the kernel; races are ordered by
        // the kernel's barriers (module docs).
        unsafe { self.ptr.read() }
    }
    /// Write the whole value.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, v: T) {
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::smem_access(self.ptr as *const u8, core::mem::size_of::<T>(), true);
        // SAFETY: as `load`.
        unsafe { self.ptr.write(v) }
    }
}

impl<T, const N: usize> Smem<[T; N]> {
    /// Slot `i` of a multi-stage buffer (`Smem<[Tile<..>; STAGES]>`) as its
    /// own handle (panics, i.e. traps, if `i >= N`).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> Smem<T> {
        assert!(i < N, "Smem::at: slot out of range");
        // SAFETY: in bounds; same allocation.
        Smem { ptr: unsafe { self.ptr.cast::<T>().add(i) }, _t: PhantomData }
    }
}

impl<E: Copy, const N: usize> Smem<[E; N]> {
    /// Number of elements.
    pub const fn len(&self) -> usize {
        N
    }
    pub const fn is_empty(&self) -> bool {
        N == 0
    }
    /// A pointer to element `i` (panics, i.e. traps, if `i >= N`), bounded
    /// by the whole array (as [`Smem::ptr`]).
    #[inline(always)]
    #[track_caller]
    pub fn elem_ptr(&self, i: usize) -> crate::ptr::SmemPtr<E> {
        let p = self.raw_elem(i);
        crate::ptr::Ptr::within(p, self.ptr as *const u8, core::mem::size_of::<[E; N]>())
    }
    /// Generic pointer to element `i` (panics, i.e. traps, if `i >= N`).
    #[inline(always)]
    #[track_caller]
    fn raw_elem(&self, i: usize) -> *mut E {
        assert!(i < N, "Smem index out of bounds");
        // SAFETY: in bounds.
        unsafe { self.ptr.cast::<E>().add(i) }
    }
    /// Read element `i` (bounds-checked).
    #[inline(always)]
    #[track_caller]
    pub fn read(&self, i: usize) -> E {
        let p = self.raw_elem(i);
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::smem_access(p as *const u8, core::mem::size_of::<E>(), false);
        // SAFETY: `elem_ptr` checked the index; see `load` for ordering.
        unsafe { p.read() }
    }
    /// Read element `i` of this allocation in CTA `rank` of this cluster
    /// (distributed shared memory through `mapa`: `self.map_rank(rank).read(i)`).
    ///
    /// # Safety
    /// As [`Smem::map_rank`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_rank(&self, rank: u32, i: usize) -> E {
        // SAFETY: forwarded contract.
        unsafe { self.map_rank(rank) }.read(i)
    }
    /// Write element `i` of this allocation in CTA `rank` of this cluster
    /// (see [`Smem::read_rank`]).
    ///
    /// # Safety
    /// As [`Smem::map_rank`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_rank(&self, rank: u32, i: usize, v: E) {
        // SAFETY: forwarded contract.
        unsafe { self.map_rank(rank) }.write(i, v)
    }
    /// Write element `i` (bounds-checked).
    #[inline(always)]
    #[track_caller]
    pub fn write(&self, i: usize, v: E) {
        let p = self.raw_elem(i);
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::smem_access(p as *const u8, core::mem::size_of::<E>(), true);
        // SAFETY: as `read`.
        unsafe { p.write(v) }
    }
}

impl<E: Pack16, const N: usize> Smem<[E; N]> {
    /// `ld.shared.v4.b32 {d0, d1, d2, d3}, [a];` (PTX ISA §9.7.9.8): the 16
    /// bytes of elements `i .. i + E::LANES` (4 f32, 8 f16/bf16, 16 FP8:
    /// [`Pack16`]) in one load. `i` a multiple of `E::LANES` with the pack
    /// below `N`, the buffer 16-byte aligned (checked: a trap on the GPU, a
    /// reported misuse on the emulator, which tracks the 16 bytes as one
    /// read).
    #[inline(always)]
    #[track_caller]
    pub fn read_v4(&self, i: usize) -> E::Pack {
        let (addr, p) = self.pack_at(i);
        // SAFETY: in bounds and 16-byte aligned (checked by `pack_at`).
        unsafe { raw::load_at(addr, p) }
    }
    /// `st.shared.v4.b32 [a], {v0, v1, v2, v3};` (PTX ISA §9.7.9.10): writes
    /// `v` to elements `i .. i + E::LANES` as one 16-byte store (a warp's 32
    /// such stores to consecutive 16-byte slots take the minimum 4
    /// shared-memory wavefronts; four scalar f32 stores at a 16-byte stride
    /// would conflict 4 ways). Checked as [`Smem::read_v4`].
    #[inline(always)]
    #[track_caller]
    pub fn write_v4(&self, i: usize, v: E::Pack) {
        let (addr, p) = self.pack_at(i);
        // SAFETY: in bounds and 16-byte aligned (checked by `pack_at`).
        unsafe { raw::store_at(addr, p, v) }
    }
    /// The shared address and the pointer of the pack at element `i`,
    /// checked (one branch on the GPU).
    #[inline(always)]
    #[track_caller]
    fn pack_at(&self, i: usize) -> (u32, *mut E::Pack) {
        let addr = self.smem_addr().wrapping_add((i * core::mem::size_of::<E>()) as u32);
        if i % E::LANES != 0 || i >= N || N - i < E::LANES || addr % 16 != 0 {
            misaligned_v4(i, E::LANES, N, addr);
        }
        (addr, self.ptr.cast::<E>().wrapping_add(i).cast())
    }
}

/// A 4-byte store to shared memory at a byte pointer (a packed pair of
/// 16-bit values at a swizzled offset the kernel computed:
/// `write_word(tile.ptr().cast::<u8>().add(off), w)`), which is
/// `ptr.cast::<u32>().write(v)`: on the GPU exactly `st.shared.b32` (no
/// check), on the emulator bounds-, alignment- and race-checked as every
/// [`SmemPtr`](crate::ptr::SmemPtr) access. For fragment stores that
/// [`crate::array::Array::store_tile`] does not cover.
///
/// # Safety
/// `ptr` points into its shared-memory allocation, 4-byte aligned, and the
/// word is this thread's to write (ordered with other threads' accesses by
/// the kernel's barriers).
#[inline(always)]
#[track_caller]
pub unsafe fn write_word(ptr: crate::ptr::SmemPtr<u8>, v: u32) {
    // SAFETY: the caller's contract (checked on the emulator).
    unsafe { ptr.cast::<u32>().write(v) }
}

#[cold]
#[track_caller]
fn misaligned_v4(i: usize, lanes: usize, n: usize, addr: u32) -> ! {
    device!("smem v4 check", {
        let _ = (i, lanes, n, addr);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "Smem 16-byte access (read_v4/write_v4) out of bounds or misaligned",
            format_args!(
                "elements {i}..{} of {n} at shared address {addr:#x}: 16 bytes hold {lanes} elements, so the index must \
                 be a multiple of {lanes} with the pack inside the {n} elements, and the address a multiple of 16",
                i + lanes
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_aligns_each_item_and_sums() {
        let (off, total) = scratch_layout([(512, 16), (8, 8), (3, 1), (16, 1024), (24, 8)]);
        assert_eq!(off, [0, 512, 520, 1024, 1040]);
        assert_eq!(total, 1064);
    }

    #[test]
    fn layout_empty() {
        let (off, total) = scratch_layout::<0>([]);
        assert_eq!(off, []);
        assert_eq!(total, 0);
    }

    #[test]
    fn scratch_sizes() {
        assert_eq!(<Smem<[f32; 128]> as Scratch>::BYTES, 512);
        assert_eq!(<Smem<[f32; 128]> as Scratch>::ALIGN, 16);
        assert_eq!(<crate::Barriers<4> as Scratch>::BYTES, 32);
        assert!(<crate::Barrier as Scratch>::TAKES_ARRIVALS);
        assert!(!<Smem<u32> as Scratch>::TAKES_ARRIVALS);
    }
}
