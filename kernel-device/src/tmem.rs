//! Tensor memory (TMEM, sm_100a; PTX ISA §9.7.16.1): 128 lanes x 512
//! columns of 32-bit cells per CTA, the tensor core's accumulator (and
//! optionally its A operand) store.
//!
//! [`Tmem<T, ROWS, COLS, PACKED>`] is a `#[scratch]` kernel parameter
//! (Pallas's `plgpu.TMEM((rows, cols), dtype, packed=..)`): `ROWS` 128 or
//! 64 lanes, `COLS` elements per row; 16-bit data is *packed* (two elements
//! per cell) or unpacked (one per cell, padded). `#[kernel]` allocates all
//! TMEM scratch of a kernel in one allocation (each `Tmem` rounded up to a
//! power of two of at least 32 columns, at most 512 in total: a compile
//! error past it) by warp 0 in the prologue (`tcgen05.alloc` into SMEM,
//! `tcgen05.relinquish_alloc_permit`), hands every thread the address after
//! a CTA barrier (with `tcgen05.fence::after_thread_sync`), and frees it
//! (`tcgen05.dealloc`) at the end after `tcgen05.fence::before_thread_sync`
//! and a CTA barrier. Kernels with TMEM scratch must be `arch = sm_100a`.
//! [`TmemScope`] allocates more for a region of the kernel (Pallas's
//! `run_scoped`), and `tcgen05::tcgen05_cp` fills TMEM from SMEM.
//!
//! Loads and stores ([`Tmem::load_32x32b`], [`Tmem::store_32x32b`], and
//! the 16-lane shapes below) are warp-collective: lane `l` of warp `w` reaches TMEM lane `32 (w % 4) + l`
//! of the tile ("lane quarters", §9.7.16.8.1), so a warpgroup together
//! reads all 128 rows. They are asynchronous. A load returns a
//! [`TmemLoad`]: its registers are valid only after the issuing thread's
//! `tcgen05.wait::ld`, so they are reachable only through
//! [`TmemLoad::wait`] (or [`wait_loads`] for several loads), which issues
//! the wait first — reading them early is not expressible. The wait also
//! ends the load's reads of its cells, which must happen before the cells
//! are overwritten (by a store or an MMA). [`commit_tmem`] must follow
//! stores before an MMA reads them.
//!
//! Fragment layout of a `32x32b.xN` load ([`Tmem::load_32x32b`]): thread
//! `(w, l)` gets row `32 (w % 4) + l`, columns `col .. col + N` of the tile,
//! register `i` holding column `col + i`.
//!
//! The 16-lane shapes (PTX ISA, tcgen05 chapter, "Matrix fragments for
//! shape .16x64b / .16x128b / .16x256b / .16x32bx2") move half a lane
//! quarter: [`Tmem::load_16x64b`], [`load_16x128b`](Tmem::load_16x128b),
//! [`load_16x256b`](Tmem::load_16x256b),
//! [`load_16x32bx2`](Tmem::load_16x32bx2) and their stores. Register `r`
//! of warp lane `l` holds the cell [`Shape::cell`]`(l, r)` of the warp's
//! 16-lane block (row offset, column offset from `col`):
//!
//! | shape | registers | row | column |
//! |---|---|---|---|
//! | `16x64b.xN` | `N` | `l/4 + 8 (l%2)` | `(l/2)%2 + 2r` |
//! | `16x128b.xN` | `2N` | `l/4 + 8 (r%2)` | `l%4 + 4 (r/2)` |
//! | `16x256b.xN` | `4N` | `l/4 + 8 ((r/2)%2)` | `2 (l%4) + r%2 + 8 (r/4)` |
//! | `16x32bx2.xN`, split `S` | `N` | `l%16` | `S (l/16) + r` |
//!
//! They are how a **64-row tile** is read and written: an M = 64
//! accumulator (`Tmem<D, 64, N>`, written by an M = 64 `tcgen05.mma`)
//! takes, by the ISA's M = 64 data path, lanes `32 q .. 32 q + 16` of each
//! lane quarter `q` (row `16 q + i` in lane `32 q + i`), so warp `w` reads
//! its rows `16 (w % 4) .. + 16` with a 16-lane shape. On a 128-row tile a
//! 16-lane method reads the first half of the warp's quarter; the raw
//! traits ([`LdSt16x64b`], [`LdSt16x128b`], [`LdSt16x256b`],
//! [`LdSt16x32bx2`]) take any TMEM address whose lane is `32 (w % 4)` or
//! `32 (w % 4) + 16`.
use core::marker::PhantomData;

use crate::tcgen05::{Cta1, CtaGroup};

/// TMEM lanes per CTA (`kernel_spec::limits::TMEM_LANES`).
pub const TMEM_LANES: usize = kernel_spec::limits::TMEM_LANES as usize;
/// TMEM columns per CTA (`kernel_spec::limits::MAX_TMEM_COLS`).
pub const TMEM_COLS: usize = kernel_spec::limits::MAX_TMEM_COLS as usize;

/// An element type TMEM holds.
pub trait TmemElem: Copy + 'static {
    const BITS: usize;
}
impl TmemElem for f32 {
    const BITS: usize = 32;
}
impl TmemElem for i32 {
    const BITS: usize = 32;
}
impl TmemElem for half::f16 {
    const BITS: usize = 16;
}
impl TmemElem for half::bf16 {
    const BITS: usize = 16;
}

/// 32-bit columns `COLS` elements of `T` take (packed 16-bit: half).
pub const fn physical_cols(bits: usize, cols: usize, packed: bool) -> usize {
    if bits < 32 && packed {
        cols * bits / 32
    } else {
        cols
    }
}

/// The allocation unit of `cols` physical columns: a power of two, at least 32.
pub const fn alloc_cols(cols: usize) -> usize {
    let p = cols.next_power_of_two();
    if p < 32 {
        32
    } else {
        p
    }
}

/// Column offsets of TMEM scratch items (each `cols[i]` a power of two or
/// 0) and the total allocation (0 if none): each item aligned to its own
/// size, in declaration order; the total rounded to a power of two. Evaluated
/// at compile time by `#[kernel]`.
pub const fn tmem_layout<const K: usize>(cols: [usize; K]) -> ([usize; K], usize) {
    let mut offsets = [0usize; K];
    let mut end = 0usize;
    let mut i = 0;
    while i < K {
        let c = cols[i];
        if c > 0 {
            let start = (end + c - 1) / c * c;
            offsets[i] = start;
            end = start + c;
        }
        i += 1;
    }
    (offsets, if end == 0 { 0 } else { alloc_cols(end) })
}

/// A `ROWS x COLS` tile of `T` in tensor memory (see the module docs),
/// allocated and written by tensor-core work of CTA group `G`
/// ([`Cta1`], or [`crate::tcgen05::Cta2`] for collective TMEM: the same
/// columns of both CTAs of a pair, [`crate::collective::TmemPair`]).
pub struct Tmem<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool = false, G: CtaGroup = Cta1> {
    addr: u32,
    _t: PhantomData<(T, G)>,
}

impl<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool, G: CtaGroup> Clone for Tmem<T, ROWS, COLS, PACKED, G> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool, G: CtaGroup> Copy for Tmem<T, ROWS, COLS, PACKED, G> {}

impl<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool, G: CtaGroup> core::fmt::Debug for Tmem<T, ROWS, COLS, PACKED, G> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Tmem<{}, {ROWS}, {COLS}, packed={PACKED}, cta_group::{}>@lane {} col {}", core::any::type_name::<T>(), G::CTAS, self.addr >> 16, self.addr & 0xFFFF)
    }
}

impl<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool, G: CtaGroup> Tmem<T, ROWS, COLS, PACKED, G> {
    /// 32-bit columns the tile occupies.
    pub const PHYS_COLS: usize = {
        assert!(ROWS == 128 || ROWS == 64, "Tmem<T, ROWS, COLS>: ROWS must be 128 or 64 (TMEM lanes a tile spans)");
        assert!(COLS > 0, "Tmem<T, ROWS, COLS>: COLS must be non-zero");
        assert!(!PACKED || T::BITS == 16, "Tmem<T, ROWS, COLS, PACKED>: only 16-bit data (f16, bf16) can be packed");
        let p = physical_cols(T::BITS, COLS, PACKED);
        assert!(p * 32 == COLS * if PACKED { T::BITS } else { 32 }, "Tmem: packed tiles need an even number of columns");
        assert!(alloc_cols(p) <= TMEM_COLS, "Tmem<T, ROWS, COLS>: a tile spans at most 512 32-bit columns (TMEM has 512 per CTA)");
        p
    };
    /// Columns allocated for this tile (a power of two in 32..=512).
    pub const ALLOC_COLS: usize = alloc_cols(Self::PHYS_COLS);

    /// # Safety
    /// `taddr` is this CTA's TMEM address (`lane << 16 | column`) of an
    /// allocation of at least [`Self::PHYS_COLS`] columns.
    #[inline(always)]
    pub unsafe fn from_addr(taddr: u32) -> Self {
        let _ = Self::PHYS_COLS;
        Tmem { addr: taddr, _t: PhantomData }
    }

    /// The TMEM address (`lane << 16 | column`) of the tile's first cell.
    #[inline(always)]
    pub fn addr(&self) -> u32 {
        self.addr
    }

    /// Columns `OFF .. OFF + W` as their own tile (checked at compile time).
    #[inline(always)]
    pub fn cols<const OFF: usize, const W: usize>(&self) -> Tmem<T, ROWS, W, PACKED, G> {
        const { assert!(OFF + W <= COLS, "Tmem::cols::<OFF, W>: the slice must lie inside the tile's COLS") };
        Tmem { addr: self.addr + physical_cols(T::BITS, OFF, PACKED) as u32, _t: PhantomData }
    }

    /// Columns `off .. off + W` (traps if outside the tile).
    #[inline(always)]
    #[track_caller]
    pub fn cols_at<const W: usize>(&self, off: usize) -> Tmem<T, ROWS, W, PACKED, G> {
        assert!(off + W <= COLS, "Tmem::cols_at: the slice must lie inside the tile's columns");
        Tmem { addr: self.addr + physical_cols(T::BITS, off, PACKED) as u32, _t: PhantomData }
    }

    /// The TMEM address of this warp's lane quarter at 32-bit column `col`.
    #[inline(always)]
    fn quarter_addr(&self, col: usize) -> u32 {
        let q = crate::index::warp_idx() % 4;
        self.addr + ((32 * q) << 16) + col as u32
    }

    /// `tcgen05.ld.sync.aligned.32x32b.xN.b32` (Pallas's `async_load_tmem`):
    /// this thread's row (lane quarter of its warp + lane), `N` 32-bit
    /// columns from physical column `col`. Warp-collective and asynchronous:
    /// the registers come out of the returned [`TmemLoad`] by its
    /// [`wait`](TmemLoad::wait) (`tcgen05.wait::ld`).
    #[inline(always)]
    #[track_caller]
    pub fn load_32x32b<const N: usize>(&self, col: usize) -> TmemLoad<u32, N>
    where
        Rep<N>: LdSt32x32b<N>,
    {
        const { assert!(ROWS == 128, "Tmem::load_32x32b: the 32x32b lane-quarter shape reads 128-row tiles (a 64-row tile, the M = 64 data path, is read with the 16-lane shapes: load_16x64b, load_16x128b, load_16x256b, load_16x32bx2)") };
        <Rep<N>>::ld(self.quarter_addr(col))
    }

    /// `tcgen05.st.sync.aligned.32x32b.xN.b32` (Pallas's `async_store_tmem`):
    /// writes this thread's row. Warp-collective; [`commit_tmem`] before an
    /// MMA (or another thread) reads the cells.
    #[inline(always)]
    #[track_caller]
    pub fn store_32x32b<const N: usize>(&self, col: usize, v: [u32; N])
    where
        Rep<N>: LdSt32x32b<N>,
    {
        const { assert!(ROWS == 128, "Tmem::store_32x32b: the 32x32b lane-quarter shape writes 128-row tiles (a 64-row tile is written with the 16-lane shapes: store_16x64b, store_16x128b, store_16x256b, store_16x32bx2)") };
        <Rep<N>>::st(self.quarter_addr(col), v)
    }

    // The 16-lane shapes: a warp moves the 16-lane block at its lane
    // quarter plus the tile's lane offset. For a 64-row tile (the M = 64
    // data path: rows 16 (w % 4) .. + 16 in lanes 32 (w % 4) + lane(tile)
    // .. + 16) that block is its 16 rows; for a 128-row tile, rows
    // 32 (w % 4) .. + 16 (the other half: the raw `LdSt16x*` traits at
    // lane + 16). Register `r` of warp lane `l` holds row
    // `16 (w % 4) + shape.cell(l, r).0` of a 64-row tile, physical column
    // `col + shape.cell(l, r).1` ([`Shape::cell`]).

    /// `tcgen05.ld.sync.aligned.16x64b.xN.b32`: `N` registers, the
    /// `.16x64b` fragment ([`Shape::cell`]) of this warp's 16-lane block
    /// (see above) from physical column `col`. Warp-collective,
    /// asynchronous: the registers come out of the [`TmemLoad`] by its
    /// wait.
    #[inline(always)]
    #[track_caller]
    pub fn load_16x64b<const N: usize>(&self, col: usize) -> TmemLoad<u32, N>
    where
        Rep<N>: LdSt16x64b<N>,
    {
        <Rep<N> as LdSt16x64b<N>>::ld(self.quarter_addr(col))
    }

    /// `tcgen05.st.sync.aligned.16x64b.xN.b32`: writes the `.16x64b`
    /// fragment of this warp's 16-lane block. Warp-collective;
    /// [`commit_tmem`] before an MMA (or another warp) reads the cells.
    #[inline(always)]
    #[track_caller]
    pub fn store_16x64b<const N: usize>(&self, col: usize, v: [u32; N])
    where
        Rep<N>: LdSt16x64b<N>,
    {
        <Rep<N> as LdSt16x64b<N>>::st(self.quarter_addr(col), v)
    }

    /// `tcgen05.ld.sync.aligned.16x128b.xN.b32`: `R = 2 N` registers
    /// (`load_16x128b::<N, _>`), the `.16x128b` fragment of this warp's
    /// 16-lane block from physical column `col`.
    #[inline(always)]
    #[track_caller]
    pub fn load_16x128b<const N: usize, const R: usize>(&self, col: usize) -> TmemLoad<u32, R>
    where
        Rep<N>: LdSt16x128b<N, R>,
    {
        <Rep<N> as LdSt16x128b<N, R>>::ld(self.quarter_addr(col))
    }

    /// `tcgen05.st.sync.aligned.16x128b.xN.b32`: writes `R = 2 N`
    /// registers as the `.16x128b` fragment of this warp's 16-lane block.
    #[inline(always)]
    #[track_caller]
    pub fn store_16x128b<const N: usize, const R: usize>(&self, col: usize, v: [u32; R])
    where
        Rep<N>: LdSt16x128b<N, R>,
    {
        <Rep<N> as LdSt16x128b<N, R>>::st(self.quarter_addr(col), v)
    }

    /// `tcgen05.ld.sync.aligned.16x256b.xN.b32`: `R = 4 N` registers
    /// (`load_16x256b::<N, _>`), the `.16x256b` fragment (the `mma.m16n8`
    /// accumulator pattern) of this warp's 16-lane block from column `col`.
    #[inline(always)]
    #[track_caller]
    pub fn load_16x256b<const N: usize, const R: usize>(&self, col: usize) -> TmemLoad<u32, R>
    where
        Rep<N>: LdSt16x256b<N, R>,
    {
        <Rep<N> as LdSt16x256b<N, R>>::ld(self.quarter_addr(col))
    }

    /// `tcgen05.st.sync.aligned.16x256b.xN.b32`: writes `R = 4 N`
    /// registers as the `.16x256b` fragment of this warp's 16-lane block.
    #[inline(always)]
    #[track_caller]
    pub fn store_16x256b<const N: usize, const R: usize>(&self, col: usize, v: [u32; R])
    where
        Rep<N>: LdSt16x256b<N, R>,
    {
        <Rep<N> as LdSt16x256b<N, R>>::st(self.quarter_addr(col), v)
    }

    /// `tcgen05.ld.sync.aligned.16x32bx2.xN.b32 .., SPLIT`: `N` registers;
    /// warp lanes 0..16 read lane `l` of the 16-lane block, columns
    /// `col .. col + N`, lanes 16..32 lane `l - 16`, columns
    /// `col + SPLIT .. col + SPLIT + N` (the instruction's
    /// `immHalfSplitoff`).
    #[inline(always)]
    #[track_caller]
    pub fn load_16x32bx2<const N: usize, const SPLIT: u32>(&self, col: usize) -> TmemLoad<u32, N>
    where
        Rep<N>: LdSt16x32bx2<N>,
    {
        <Rep<N> as LdSt16x32bx2<N>>::ld::<SPLIT>(self.quarter_addr(col))
    }

    /// `tcgen05.st.sync.aligned.16x32bx2.xN.b32 [..], SPLIT, ..`: writes
    /// the `.16x32bx2` fragment of this warp's 16-lane block.
    #[inline(always)]
    #[track_caller]
    pub fn store_16x32bx2<const N: usize, const SPLIT: u32>(&self, col: usize, v: [u32; N])
    where
        Rep<N>: LdSt16x32bx2<N>,
    {
        <Rep<N> as LdSt16x32bx2<N>>::st::<SPLIT>(self.quarter_addr(col), v)
    }
}

impl<const ROWS: usize, const COLS: usize, G: CtaGroup> Tmem<f32, ROWS, COLS, false, G> {
    /// This thread's row, `N` f32 columns from column `col`
    /// ([`Tmem::load_32x32b`] as f32; `.wait()` yields `[f32; N]`).
    #[inline(always)]
    #[track_caller]
    pub fn load_f32<const N: usize>(&self, col: usize) -> TmemLoad<f32, N>
    where
        Rep<N>: LdSt32x32b<N>,
    {
        self.load_32x32b::<N>(col).cast()
    }
}

// SAFETY: no shared memory; the TMEM columns are declared by `TMEM_COLS`
// and bound by `#[kernel]` through `bind_tmem`; a `Cta2` tile is
// allocated with `cta_group::2` (`TMEM_COLLECTIVE`).
unsafe impl<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool, G: CtaGroup> crate::smem::Scratch for Tmem<T, ROWS, COLS, PACKED, G> {
    const BYTES: usize = 0;
    const ALIGN: usize = 1;
    const TMEM_COLS: usize = Self::ALLOC_COLS;
    const TMEM_COLLECTIVE: bool = G::CTAS == 2;
    unsafe fn from_smem(_ptr: *mut u8) -> Self {
        let _ = Self::PHYS_COLS;
        Tmem { addr: 0, _t: PhantomData }
    }
    unsafe fn bind_tmem(&mut self, taddr: u32) {
        self.addr = taddr;
    }
}

/// Tensor memory allocated for a region of a kernel (Pallas's
/// `pl.run_scoped` of a `plgpu.TMEM`): a `#[scratch] mut scope: TmemScope`
/// parameter holds the SMEM slot `tcgen05.alloc` writes the address to, and
/// [`TmemScope::run`] allocates a `Tmem` tile, runs a closure with it and
/// frees it. Columns a scope frees can be allocated again by the next one
/// (two phases of a kernel that each need a large accumulator), and do not
/// count against the `#[kernel]`'s TMEM scratch budget, which is allocated
/// for the whole kernel beside them (a kernel with a `TmemScope` keeps its
/// allocation permit: no `tcgen05.relinquish_alloc_permit`).
///
/// `run` is **CTA-collective**: every thread of the CTA calls it, in the
/// same order (it holds two CTA barriers). Warp 0 allocates (blocking while
/// the columns are in use by another CTA on the SM, as on the GPU) and
/// frees. Before the free, every thread's tcgen05 work is ordered before a
/// CTA barrier (`tcgen05.fence::before_thread_sync`): the closure must have
/// waited for its MMAs and copies (their commit's barrier) and its loads
/// (`TmemLoad::wait`). A nested scope needs its own `TmemScope` (`run`
/// borrows it mutably, so reusing one inside its own closure does not
/// compile). On the emulator, a use of the tile after its scope
/// ("TMEM used after tcgen05.dealloc") and a free while an MMA, copy or load
/// on it is in flight are reported; freeing one scope's columns while an
/// MMA runs on other columns is not a conflict.
pub struct TmemScope {
    slot: *mut u32,
}

impl TmemScope {
    /// Allocates a `ROWS x COLS` tile of `T` ([`Tmem::ALLOC_COLS`] columns),
    /// runs `body` with it on every thread of the CTA, frees it, and
    /// returns what `body` returned. CTA-collective (see the type's docs).
    #[inline(always)]
    #[track_caller]
    pub fn run<T: TmemElem, const ROWS: usize, const COLS: usize, const PACKED: bool, R>(&mut self, body: impl FnOnce(Tmem<T, ROWS, COLS, PACKED>) -> R) -> R {
        let cols = Tmem::<T, ROWS, COLS, PACKED>::ALLOC_COLS as u32;
        if crate::index::warp_idx() == 0 {
            // SAFETY: warp 0, converged (every thread of the CTA calls
            // `run`); a power of two in 32..=512; the 4-byte SMEM slot.
            unsafe { crate::tcgen05::raw::alloc::<Cta1>(crate::smem::shared_addr(self.slot), cols) };
        }
        crate::sync::sync_threads();
        crate::tcgen05::raw::fence_after_thread_sync();
        // SAFETY: written by `tcgen05.alloc` before the barrier above; the
        // next write (a later `run`) comes after this scope's last barrier.
        let taddr = unsafe { core::ptr::read_volatile(self.slot) };
        // SAFETY: `taddr` is the allocation of `ALLOC_COLS` columns made above.
        let r = body(unsafe { Tmem::from_addr(taddr) });
        // Every thread's tcgen05 work on the tile is ordered before the free.
        crate::tcgen05::raw::fence_before_thread_sync();
        crate::sync::sync_threads();
        if crate::index::warp_idx() == 0 {
            crate::tcgen05::raw::fence_after_thread_sync();
            // SAFETY: warp 0 frees the allocation it made; no thread uses it
            // after the barrier above.
            unsafe { crate::tcgen05::raw::dealloc::<Cta1>(taddr, cols) };
        }
        r
    }
}

// SAFETY: 4 bytes of SMEM, 16-aligned, used only by `run` (the
// `tcgen05.alloc` destination); `TMEM_SCOPED` keeps the permit.
unsafe impl crate::smem::Scratch for TmemScope {
    const BYTES: usize = 4;
    const ALIGN: usize = 16;
    const TMEM_SCOPED: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        TmemScope { slot: ptr as *mut u32 }
    }
}

/// A repetition count `N` of the `32x32b` load/store shape.
pub struct Rep<const N: usize>;

/// A 32-bit register type a TMEM load yields (`u32`, `f32`).
pub trait Reg32: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn from_reg(bits: u32) -> Self;
}
impl Reg32 for u32 {
    #[inline(always)]
    fn from_reg(bits: u32) -> u32 {
        bits
    }
}
impl Reg32 for f32 {
    #[inline(always)]
    fn from_reg(bits: u32) -> f32 {
        f32::from_bits(bits)
    }
}
mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for f32 {}
}

/// The registers of a `tcgen05.ld` still in flight.
///
/// The PTX ISA makes `tcgen05.ld` asynchronous (its `tcgen05.ld` and
/// `tcgen05.wait` sections, §9.7.16): its destination registers are
/// written by the tensor-memory unit after the instruction issues, and
/// `tcgen05.wait::ld` is what waits for every prior `tcgen05.ld` of the
/// thread to complete. Reading them
/// before that wait is outside what the ISA defines, so this type holds
/// them where the kernel cannot reach them: the only way out is
/// [`TmemLoad::wait`] (or [`wait_loads`]), which issues the wait and then
/// passes each register through an empty `asm!` operand ordered after it,
/// so the compiler cannot hoist a use above the wait either. No
/// instruction beyond the wait is emitted.
///
/// Dropping one without waiting leaves the load in flight: its cells are
/// still being read (the emulator reports a store or MMA over them).
#[must_use = "a TMEM load's registers are valid only after tcgen05.wait::ld: get them with `.wait()` (or `tmem::wait_loads`)"]
pub struct TmemLoad<T: Reg32, const N: usize> {
    regs: [u32; N],
    _t: PhantomData<T>,
}

impl<T: Reg32, const N: usize> TmemLoad<T, N>
where
    Rep<N>: LdSt32x32b<N>,
{
    /// Waits for this thread's TMEM loads (`tcgen05.wait::ld.sync.aligned`,
    /// warp-collective) and yields the registers: `N` columns of this
    /// thread's row, register `i` holding column `col + i`.
    #[inline(always)]
    #[track_caller]
    pub fn wait(self) -> [T; N] {
        wait_load_tmem();
        self.after_wait()
    }

    /// The registers, once a wait that follows this load has been issued
    /// (the tie orders every use after it).
    #[inline(always)]
    fn after_wait(self) -> [T; N] {
        let mut r = self.regs;
        <Rep<N>>::tie(&mut r);
        r.map(T::from_reg)
    }

    #[inline(always)]
    fn cast<U: Reg32>(self) -> TmemLoad<U, N> {
        TmemLoad { regs: self.regs, _t: PhantomData }
    }
}

/// Several TMEM loads waited for by one `tcgen05.wait::ld`: a tuple of
/// 2 to 4 [`TmemLoad`]s in, the tuple of their register arrays out
/// (`let (a, b) = wait_loads((acc.load_f32::<32>(0), acc.load_f32::<32>(32)));`).
#[inline(always)]
#[track_caller]
pub fn wait_loads<L: WaitLoads>(loads: L) -> L::Regs {
    wait_load_tmem();
    loads.after_wait()
}

/// A tuple of [`TmemLoad`]s [`wait_loads`] takes.
pub trait WaitLoads {
    type Regs;
    #[doc(hidden)]
    fn after_wait(self) -> Self::Regs;
}

macro_rules! wait_loads_tuple {
    ($(($t:ident, $n:ident, $v:ident)),+) => {
        impl<$($t: Reg32, const $n: usize),+> WaitLoads for ($(TmemLoad<$t, $n>,)+)
        where
            $(Rep<$n>: LdSt32x32b<$n>),+
        {
            type Regs = ($([$t; $n],)+);
            #[inline(always)]
            fn after_wait(self) -> Self::Regs {
                let ($($v,)+) = self;
                ($($v.after_wait(),)+)
            }
        }
    };
}
wait_loads_tuple!((A, NA, a), (B, NB, b));
wait_loads_tuple!((A, NA, a), (B, NB, b), (C, NC, c));
wait_loads_tuple!((A, NA, a), (B, NB, b), (C, NC, c), (D, ND, d));

/// `tcgen05.ld` / `tcgen05.st` `.32x32b.xN.b32` for the implemented `N`.
#[diagnostic::on_unimplemented(
    message = "tcgen05.ld/st .32x32b.x{N} is not implemented",
    note = "implemented repetition counts: 1, 2, 4, 8, 16, 32, 64 (the hardware also has 128)"
)]
pub trait LdSt32x32b<const N: usize> {
    /// Issues the load at the raw TMEM address `taddr` (lane in the high
    /// half, column in the low half); the registers come out of the
    /// [`TmemLoad`] by its wait.
    fn ld(taddr: u32) -> TmemLoad<u32, N>;
    /// Issues the store of `v` at the raw TMEM address `taddr`.
    fn st(taddr: u32, v: [u32; N]);
    /// Orders every later use of `regs` after the preceding (side-effecting)
    /// `tcgen05.wait::ld` asm: an empty asm with each register as an
    /// in-out operand. Emits no instruction.
    #[doc(hidden)]
    fn tie(regs: &mut [u32; N]);
}

#[allow(unused_macros)]
macro_rules! reg_tpl {
    ($i:literal) => {
        ", {}"
    };
}

macro_rules! ldst {
    ($n:literal, [$i0:literal $(, $i:literal)*]) => {
        impl LdSt32x32b<$n> for Rep<$n> {
            #[inline(always)]
            #[track_caller]
            fn ld(taddr: u32) -> TmemLoad<u32, $n> {
                #[allow(unused_mut)]
                let mut r = [0u32; $n];
                device!("tcgen05.ld.32x32b", {
                    // SAFETY: warp-collective load of this warp's lane quarter
                    // (the typed handle's contract); reads TMEM (memory clobber).
                    // The registers stay inside the `TmemLoad` until its wait.
                    unsafe {
                        core::arch::asm!(
                            concat!("tcgen05.ld.sync.aligned.32x32b.x", $n, ".b32 {{{}", $(reg_tpl!($i),)* "}}, [{t}];"),
                            out(reg32) r[$i0], $(out(reg32) r[$i],)*
                            t = in(reg32) taddr,
                            options(nostack, preserves_flags)
                        )
                    }
                }, host: { kernel_emu::tmem::ld_32x32b(taddr, &mut r) });
                TmemLoad { regs: r, _t: PhantomData }
            }
            #[inline(always)]
            #[track_caller]
            fn st(taddr: u32, v: [u32; $n]) {
                device!("tcgen05.st.32x32b", {
                    // SAFETY: warp-collective store of this warp's lane quarter.
                    unsafe {
                        core::arch::asm!(
                            concat!("tcgen05.st.sync.aligned.32x32b.x", $n, ".b32 [{t}], {{{}", $(reg_tpl!($i),)* "}};"),
                            in(reg32) v[$i0], $(in(reg32) v[$i],)*
                            t = in(reg32) taddr,
                            options(nostack, preserves_flags)
                        )
                    }
                }, host: { kernel_emu::tmem::st_32x32b(taddr, &v) })
            }
            #[inline(always)]
            fn tie(_regs: &mut [u32; $n]) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: an empty template: no instruction, no memory
                // access; each register is an in-out operand, so its later
                // uses depend on this asm, which (not `pure`) stays after the
                // `tcgen05.wait::ld` asm issued before it.
                unsafe {
                    core::arch::asm!(
                        concat!("// TMEM load registers tied after their wait: {}", $(reg_tpl!($i),)*),
                        inout(reg32) _regs[$i0], $(inout(reg32) _regs[$i],)*
                        options(nostack, preserves_flags)
                    )
                };
            }
        }
    };
}

ldst!(1, [0]);
ldst!(2, [0, 1]);
ldst!(4, [0, 1, 2, 3]);
ldst!(8, [0, 1, 2, 3, 4, 5, 6, 7]);
ldst!(16, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
ldst!(32, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
ldst!(64, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]);

// ----- the 16-lane shapes ------------------------------------------------------

/// The data-movement shapes and their fragment maps (`kernel-spec`).
pub use kernel_spec::tmem_frag::Shape;

/// `tcgen05.ld` / `tcgen05.st` `.16x64b.xN.b32` for the implemented `N`
/// (`N` registers per thread).
#[diagnostic::on_unimplemented(
    message = "tcgen05.ld/st .16x64b.x{N} is not implemented",
    note = "implemented repetition counts: 1, 2, 4, 8, 16, 32, 64 (N registers; the hardware also has 128)"
)]
pub trait LdSt16x64b<const N: usize> {
    /// Issues the load at the raw TMEM address `taddr` (its lane a half of
    /// the warp's lane quarter).
    fn ld(taddr: u32) -> TmemLoad<u32, N>;
    /// Issues the store of `v` at the raw TMEM address `taddr`.
    fn st(taddr: u32, v: [u32; N]);
}

/// `tcgen05.ld` / `tcgen05.st` `.16x128b.xN.b32` for the implemented `N`
/// (`R = 2 N` registers per thread).
#[diagnostic::on_unimplemented(
    message = "tcgen05.ld/st .16x128b.x{N} is not implemented",
    note = "implemented repetition counts: 1, 2, 4, 8, 16, 32 (2 N registers; the hardware also has 64); the second parameter is 2 N, or `_`"
)]
pub trait LdSt16x128b<const N: usize, const R: usize> {
    /// Issues the load at the raw TMEM address `taddr`.
    fn ld(taddr: u32) -> TmemLoad<u32, R>;
    /// Issues the store of `v` at the raw TMEM address `taddr`.
    fn st(taddr: u32, v: [u32; R]);
}

/// `tcgen05.ld` / `tcgen05.st` `.16x256b.xN.b32` for the implemented `N`
/// (`R = 4 N` registers per thread).
#[diagnostic::on_unimplemented(
    message = "tcgen05.ld/st .16x256b.x{N} is not implemented",
    note = "implemented repetition counts: 1, 2, 4, 8, 16 (4 N registers; the hardware also has 32); the second parameter is 4 N, or `_`"
)]
pub trait LdSt16x256b<const N: usize, const R: usize> {
    /// Issues the load at the raw TMEM address `taddr`.
    fn ld(taddr: u32) -> TmemLoad<u32, R>;
    /// Issues the store of `v` at the raw TMEM address `taddr`.
    fn st(taddr: u32, v: [u32; R]);
}

/// `tcgen05.ld` / `tcgen05.st` `.16x32bx2.xN.b32` for the implemented `N`
/// (`N` registers per thread); `SPLIT` is the `immHalfSplitoff` column
/// offset of the second half-warp's columns.
#[diagnostic::on_unimplemented(
    message = "tcgen05.ld/st .16x32bx2.x{N} is not implemented",
    note = "implemented repetition counts: 1, 2, 4, 8, 16, 32, 64 (N registers; the hardware also has 128)"
)]
pub trait LdSt16x32bx2<const N: usize> {
    /// Issues the load at the raw TMEM address `taddr`.
    fn ld<const SPLIT: u32>(taddr: u32) -> TmemLoad<u32, N>;
    /// Issues the store of `v` at the raw TMEM address `taddr`.
    fn st<const SPLIT: u32>(taddr: u32, v: [u32; N]);
}

/// One 16-lane shape's load and store for one repetition count: `$tr` the
/// trait (with its const arguments), `$shape` the PTX shape, the two
/// operations' names, `$emu` the emulator's [`Shape`], `$n` the repetition
/// count, `$r` the register count, then the register indices.
macro_rules! ldst16 {
    ($tr:ty, $shape:literal, $ldn:literal, $stn:literal, $emu:expr, $n:literal, $r:literal, [$i0:literal $(, $i:literal)*]) => {
        impl $tr for Rep<$n> {
            #[inline(always)]
            #[track_caller]
            fn ld(taddr: u32) -> TmemLoad<u32, $r> {
                #[allow(unused_mut)]
                let mut r = [0u32; $r];
                device!($ldn, {
                    // SAFETY: warp-collective load of a half of this warp's
                    // lane quarter (the typed handle's contract, or the raw
                    // caller's); reads TMEM (memory clobber). The registers
                    // stay inside the `TmemLoad` until its wait.
                    unsafe {
                        core::arch::asm!(
                            concat!("tcgen05.ld.sync.aligned.", $shape, ".x", $n, ".b32 {{{}", $(reg_tpl!($i),)* "}}, [{t}];"),
                            out(reg32) r[$i0], $(out(reg32) r[$i],)*
                            t = in(reg32) taddr,
                            options(nostack, preserves_flags)
                        )
                    }
                }, host: { kernel_emu::tmem::ld($emu, taddr, &mut r) });
                TmemLoad { regs: r, _t: PhantomData }
            }
            #[inline(always)]
            #[track_caller]
            fn st(taddr: u32, v: [u32; $r]) {
                device!($stn, {
                    // SAFETY: warp-collective store to a half of this warp's
                    // lane quarter (the typed handle's or the raw caller's
                    // contract); writes TMEM (memory clobber).
                    unsafe {
                        core::arch::asm!(
                            concat!("tcgen05.st.sync.aligned.", $shape, ".x", $n, ".b32 [{t}], {{{}", $(reg_tpl!($i),)* "}};"),
                            in(reg32) v[$i0], $(in(reg32) v[$i],)*
                            t = in(reg32) taddr,
                            options(nostack, preserves_flags)
                        )
                    }
                }, host: { kernel_emu::tmem::st($emu, taddr, &v) })
            }
        }
    };
}

/// `.16x32bx2` for one repetition count (its split offset an immediate).
macro_rules! ldst16x2 {
    ($n:literal, [$i0:literal $(, $i:literal)*]) => {
        impl LdSt16x32bx2<$n> for Rep<$n> {
            #[inline(always)]
            #[track_caller]
            fn ld<const SPLIT: u32>(taddr: u32) -> TmemLoad<u32, $n> {
                #[allow(unused_mut)]
                let mut r = [0u32; $n];
                device!("tcgen05.ld.16x32bx2", {
                    // SAFETY: as the other 16-lane loads.
                    unsafe {
                        core::arch::asm!(
                            concat!("tcgen05.ld.sync.aligned.16x32bx2.x", $n, ".b32 {{{}", $(reg_tpl!($i),)* "}}, [{t}], {s};"),
                            out(reg32) r[$i0], $(out(reg32) r[$i],)*
                            t = in(reg32) taddr,
                            s = const SPLIT,
                            options(nostack, preserves_flags)
                        )
                    }
                }, host: { kernel_emu::tmem::ld(Shape::S16x32bx2 { split: SPLIT }, taddr, &mut r) });
                TmemLoad { regs: r, _t: PhantomData }
            }
            #[inline(always)]
            #[track_caller]
            fn st<const SPLIT: u32>(taddr: u32, v: [u32; $n]) {
                device!("tcgen05.st.16x32bx2", {
                    // SAFETY: as the other 16-lane stores.
                    unsafe {
                        core::arch::asm!(
                            concat!("tcgen05.st.sync.aligned.16x32bx2.x", $n, ".b32 [{t}], {s}, {{{}", $(reg_tpl!($i),)* "}};"),
                            in(reg32) v[$i0], $(in(reg32) v[$i],)*
                            t = in(reg32) taddr,
                            s = const SPLIT,
                            options(nostack, preserves_flags)
                        )
                    }
                }, host: { kernel_emu::tmem::st(Shape::S16x32bx2 { split: SPLIT }, taddr, &v) })
            }
        }
    };
}

/// The register index lists of 1 to 64 registers, for the macros above.
macro_rules! with_regs {
    ($m:ident ! ($($pre:tt)*) 1) => { $m!($($pre)* [0]); };
    ($m:ident ! ($($pre:tt)*) 2) => { $m!($($pre)* [0, 1]); };
    ($m:ident ! ($($pre:tt)*) 4) => { $m!($($pre)* [0, 1, 2, 3]); };
    ($m:ident ! ($($pre:tt)*) 8) => { $m!($($pre)* [0, 1, 2, 3, 4, 5, 6, 7]); };
    ($m:ident ! ($($pre:tt)*) 16) => { $m!($($pre)* [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]); };
    ($m:ident ! ($($pre:tt)*) 32) => {
        $m!($($pre)* [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
    };
    ($m:ident ! ($($pre:tt)*) 64) => {
        $m!($($pre)* [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]);
    };
}

with_regs!(ldst16!(LdSt16x64b<1>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 1, 1,) 1);
with_regs!(ldst16!(LdSt16x64b<2>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 2, 2,) 2);
with_regs!(ldst16!(LdSt16x64b<4>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 4, 4,) 4);
with_regs!(ldst16!(LdSt16x64b<8>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 8, 8,) 8);
with_regs!(ldst16!(LdSt16x64b<16>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 16, 16,) 16);
with_regs!(ldst16!(LdSt16x64b<32>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 32, 32,) 32);
with_regs!(ldst16!(LdSt16x64b<64>, "16x64b", "tcgen05.ld.16x64b", "tcgen05.st.16x64b", Shape::S16x64b, 64, 64,) 64);
with_regs!(ldst16!(LdSt16x128b<1, 2>, "16x128b", "tcgen05.ld.16x128b", "tcgen05.st.16x128b", Shape::S16x128b, 1, 2,) 2);
with_regs!(ldst16!(LdSt16x128b<2, 4>, "16x128b", "tcgen05.ld.16x128b", "tcgen05.st.16x128b", Shape::S16x128b, 2, 4,) 4);
with_regs!(ldst16!(LdSt16x128b<4, 8>, "16x128b", "tcgen05.ld.16x128b", "tcgen05.st.16x128b", Shape::S16x128b, 4, 8,) 8);
with_regs!(ldst16!(LdSt16x128b<8, 16>, "16x128b", "tcgen05.ld.16x128b", "tcgen05.st.16x128b", Shape::S16x128b, 8, 16,) 16);
with_regs!(ldst16!(LdSt16x128b<16, 32>, "16x128b", "tcgen05.ld.16x128b", "tcgen05.st.16x128b", Shape::S16x128b, 16, 32,) 32);
with_regs!(ldst16!(LdSt16x128b<32, 64>, "16x128b", "tcgen05.ld.16x128b", "tcgen05.st.16x128b", Shape::S16x128b, 32, 64,) 64);
with_regs!(ldst16!(LdSt16x256b<1, 4>, "16x256b", "tcgen05.ld.16x256b", "tcgen05.st.16x256b", Shape::S16x256b, 1, 4,) 4);
with_regs!(ldst16!(LdSt16x256b<2, 8>, "16x256b", "tcgen05.ld.16x256b", "tcgen05.st.16x256b", Shape::S16x256b, 2, 8,) 8);
with_regs!(ldst16!(LdSt16x256b<4, 16>, "16x256b", "tcgen05.ld.16x256b", "tcgen05.st.16x256b", Shape::S16x256b, 4, 16,) 16);
with_regs!(ldst16!(LdSt16x256b<8, 32>, "16x256b", "tcgen05.ld.16x256b", "tcgen05.st.16x256b", Shape::S16x256b, 8, 32,) 32);
with_regs!(ldst16!(LdSt16x256b<16, 64>, "16x256b", "tcgen05.ld.16x256b", "tcgen05.st.16x256b", Shape::S16x256b, 16, 64,) 64);
with_regs!(ldst16x2!(1,) 1);
with_regs!(ldst16x2!(2,) 2);
with_regs!(ldst16x2!(4,) 4);
with_regs!(ldst16x2!(8,) 8);
with_regs!(ldst16x2!(16,) 16);
with_regs!(ldst16x2!(32,) 32);
with_regs!(ldst16x2!(64,) 64);

/// `tcgen05.wait::ld.sync.aligned;` (Pallas's `wait_load_tmem`): this
/// thread's TMEM loads have read their cells and written their registers.
/// Warp-collective. [`TmemLoad::wait`] and [`wait_loads`] issue it; on its
/// own it ends loads whose registers are not needed.
#[inline(always)]
#[track_caller]
pub fn wait_load_tmem() {
    device!("tcgen05.wait::ld", {
        // SAFETY: waits only; memory clobber.
        unsafe { core::arch::asm!("tcgen05.wait::ld.sync.aligned;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::tmem::wait_ld() })
}

/// `tcgen05.wait::st.sync.aligned;` then `tcgen05.fence::before_thread_sync`
/// (Pallas's `commit_tmem`): this thread's TMEM stores are complete and
/// ordered before a following thread sync, after which an MMA may read them.
/// Warp-collective.
#[inline(always)]
#[track_caller]
pub fn commit_tmem() {
    device!("tcgen05.wait::st", {
        // SAFETY: waits only; memory clobber.
        unsafe { core::arch::asm!("tcgen05.wait::st.sync.aligned;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::tmem::wait_st() });
    crate::tcgen05::raw::fence_before_thread_sync();
}

/// Converts `vals` (this thread's columns `col0 .. col0 + N` of row `row`)
/// to f16 and writes them into the swizzled SMEM tile `dst` (the epilogue
/// path to a TMA store). `N` and `col0` even.
#[inline(always)]
#[track_caller]
pub fn store_row_f16<const N: usize, const R: usize, const C: usize, L: crate::layout::Layout>(
    vals: &[f32; N],
    dst: crate::smem::Smem<crate::layout::Tile<half::f16, R, C, L>>,
    row: usize,
    col0: usize,
) {
    const { assert!(N % 2 == 0, "store_row_f16: an even number of columns") };
    assert!(row < R && col0 + N <= C && col0 % 2 == 0, "store_row_f16: the row segment lies outside the tile");
    let base = dst.ptr().cast::<u8>();
    let mut i = 0;
    while i < N {
        let off = crate::layout::Tile::<half::f16, R, C, L>::offset_of(row, col0 + i);
        // SAFETY: inside the tile (asserted); 4-byte aligned (even column).
        // The emulator sees the word as this thread's write.
        unsafe { base.add(off).cast::<u32>().write(crate::wgmma::pack_f16x2(vals[i], vals[i + 1])) };
        i += 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_rounding() {
        assert_eq!(alloc_cols(1), 32);
        assert_eq!(alloc_cols(128), 128);
        assert_eq!(alloc_cols(129), 256);
        assert_eq!(physical_cols(16, 128, true), 64);
        assert_eq!(physical_cols(16, 128, false), 128);
        assert_eq!(tmem_layout([128, 0, 32, 256]), ([0, 0, 128, 256], 512));
        assert_eq!(tmem_layout([32]), ([0], 32));
        assert_eq!(tmem_layout::<2>([0, 0]), ([0, 0], 0));
        assert_eq!(Tmem::<f32, 128, 256>::ALLOC_COLS, 256);
        assert_eq!(Tmem::<half::f16, 128, 64, true>::ALLOC_COLS, 32);
        assert_eq!(Tmem::<half::f16, 128, 64, true>::PHYS_COLS, 32);
    }
}
