//! Register arrays to and from shared and global memory.
//!
//! Each thread reads and writes only its own elements, so these are plain
//! `ld`/`st` (vectorized where the layout gives a thread consecutive
//! elements): no synchronization is implied. Order them with the other
//! threads' accesses as any SMEM/GMEM access (a barrier before another
//! thread reads what was stored; [`crate::commit_smem`] before a TMA store
//! or a wgmma reads it).
//!
//! | layout | SMEM | GMEM |
//! |---|---|---|
//! | `Wgmma<N>` | [`Array::store_tile`]: any `Tile` (swizzled or not); 16-bit types as `stmatrix .x4` (16 x 16 per warp and instruction) where the block's 16-byte row pieces are whole in the tile, else pairs of adjacent columns as one 4-byte (16-bit types) or 8-byte (f32) store. [`Array::load_tile`]: pair loads | `store_gmem` / `load_gmem` with a leading dimension: a row-major matrix, pair accesses |
//! | `WgmmaCol<N>`, `WgmmaRow` | — | [`Array::load_cols`], [`Array::load_rows`]: a vector, each value read once per thread |
//! | `WgStrided<VECS, VEC>`, `Strided<THREADS, VECS, VEC>` | [`Array::load_smem`], [`Array::store_smem`] | [`Array::load_gmem`], [`Array::store_gmem`]: `VEC` elements per access (16 bytes for 8 x f16); [`Array::load_gmem_masked`], [`Array::store_gmem_masked`] for a vector shorter than the layout (a multiple of `VEC`) |
use super::layout::{ArrayLayout, Strided, Wgmma, WgmmaCol, WgmmaRow};
use super::regs::{unroll, RegStorage};
use super::{Array, Scalar};
use crate::gmem::{Gmem, GmemRef};
use crate::ptr::{Bounds, GmemPtr, Ptr};

/// A global-memory vector arrays load from: a [`Gmem<T>`] or a read-only
/// [`GmemRef<T>`] (which the host passes as `&[T]` / `&CudaSlice<T>`).
pub trait GmemSrc<T>: Copy {
    /// Elements of the view.
    fn len(&self) -> usize;
    /// Pointer to element `start`, after checking that `start .. start + n`
    /// lies in the view (a trap on the GPU, a reported misuse on the
    /// emulator), bounded by those `n` elements: on the emulator every
    /// access through it is checked against them and race-recorded
    /// ([`crate::ptr`]).
    #[track_caller]
    fn checked(&self, start: usize, n: usize) -> GmemPtr<T>;
}

/// The pointer to element `start` of the view at `base`, bounded by
/// `start .. start + n` (checked against `len` by the caller).
#[inline(always)]
fn range_ptr<T>(base: *mut T, start: usize, n: usize) -> GmemPtr<T> {
    // SAFETY: `start + n <= len` (checked by the caller).
    let p = unsafe { base.add(start) };
    Ptr::within(p, p as *const u8, n.wrapping_mul(core::mem::size_of::<T>()))
}
impl<T: Copy> GmemSrc<T> for Gmem<T> {
    #[inline(always)]
    fn len(&self) -> usize {
        Gmem::len(self)
    }
    #[inline(always)]
    #[track_caller]
    fn checked(&self, start: usize, n: usize) -> GmemPtr<T> {
        crate::gmem::check_range(start, n, Gmem::len(self));
        range_ptr(self.as_ptr(), start, n)
    }
}
impl<T: Copy> GmemSrc<T> for GmemRef<T> {
    #[inline(always)]
    fn len(&self) -> usize {
        GmemRef::len(self)
    }
    #[inline(always)]
    #[track_caller]
    fn checked(&self, start: usize, n: usize) -> GmemPtr<T> {
        crate::gmem::check_range(start, n, GmemRef::len(self));
        range_ptr(self.as_ptr() as *mut T, start, n)
    }
}
use crate::layout::{Layout, Tile};
use crate::smem::Smem;

impl<T: Scalar, const N: usize> Array<T, Wgmma<N>>
where
    Wgmma<N>: ArrayLayout,
{
    /// Converts to `U` and writes the `64 x N` block into `dst` at
    /// `(row0, col0)` (swizzle applied). `col0` is even. Every thread of the
    /// warpgroup calls it (all 32 lanes of each warp, together: with 16-bit
    /// `U` it may be warp-collective).
    ///
    /// For 16-bit `U` (`cvt.rn.f16x2.f32` for f16), when `N` is a multiple
    /// of 16, `col0` of 8 and the tile's rows come in whole 16-byte pieces
    /// (every swizzle keeps them whole), each warp stores its 16 rows with
    /// `N / 16` `stmatrix .x4` (`crate::ldst_matrix`; 16 x 16 elements
    /// each: the fragment of four 8 x 8 matrices is the WGMMA layout's, and
    /// each lane names the address of one 16-byte row piece). Otherwise:
    /// one 4-byte store per pair of adjacent columns (8 bytes for f32).
    #[inline(always)]
    #[track_caller]
    pub fn store_tile<U: Scalar, const R: usize, const C: usize, L: Layout>(&self, dst: Smem<Tile<U, R, C, L>>, row0: usize, col0: usize) {
        assert!(row0 + 64 <= R && col0 + N <= C && col0 % 2 == 0, "Array::store_tile: the 64 x N block at (row0, col0) is outside the tile (or col0 is odd)");
        let t = crate::index::thread_in_warpgroup() as usize;
        let whole_pieces = <Tile<U, R, C, L> as crate::layout::TileLayout>::BLOCK_ROW_BYTES % 16 == 0;
        if U::pair_word(0.0, 0.0).is_some() && N % 16 == 0 && col0 % 8 == 0 && whole_pieces {
            // Lane l names row l % 8 (+ 8 for lanes 8-15 and 24-31) of its
            // warp's 16, in the left (lanes 0-15) or right 8 columns of each
            // 16: matrix i = l / 8 of the fragment's four.
            let (w, l) = (t / 32, t % 32);
            let row = row0 + 16 * w + l % 8 + 8 * ((l / 8) % 2);
            let base = dst.smem_addr();
            let first = base + Tile::<U, R, C, L>::offset_of(row, col0 + 8 * (l / 16)) as u32;
            // When the N columns are one aligned power-of-two run inside a
            // block row, group q's pieces differ from group 0's only in the
            // offset bits of 32 q (below the row bits the swizzle reads):
            // one XOR instead of a swizzled offset per group.
            let block_row = <Tile<U, R, C, L> as crate::layout::TileLayout>::BLOCK_ROW_BYTES;
            let xor_groups = N.is_power_of_two() && block_row % (2 * N) == 0 && col0 % N == 0;
            unroll(N / 16, |q| {
                let addr = if xor_groups { first ^ (32 * q) as u32 } else { base + Tile::<U, R, C, L>::offset_of(row, col0 + 16 * q + 8 * (l / 16)) as u32 };
                // Register pairs 4 q .. 4 q + 4: rows + 0 / + 8 of columns
                // 16 q .. + 8, then of columns 16 q + 8 .. + 8.
                let word = |k: usize| {
                    let p = 4 * q + k;
                    U::pair_word(self.regs.get(2 * p).to_f32(), self.regs.get(2 * p + 1).to_f32()).unwrap_or(0)
                };
                crate::ldst_matrix::stmatrix::<4>(addr, [word(0), word(1), word(2), word(3)]);
            });
            return;
        }
        self.store_tile_pairs(dst, row0, col0);
    }

    /// [`Array::store_tile`] without `stmatrix`: one 4-byte store per pair
    /// of adjacent columns for 16-bit `U` (8 bytes for f32), each thread on
    /// its own (not warp-collective). For kernels where the `stmatrix`
    /// fragments' groups of four consecutive registers cost spills.
    #[inline(always)]
    #[track_caller]
    pub fn store_tile_pairs<U: Scalar, const R: usize, const C: usize, L: Layout>(&self, dst: Smem<Tile<U, R, C, L>>, row0: usize, col0: usize) {
        assert!(row0 + 64 <= R && col0 + N <= C && col0 % 2 == 0, "Array::store_tile_pairs: the 64 x N block at (row0, col0) is outside the tile (or col0 is odd)");
        let t = crate::index::thread_in_warpgroup() as usize;
        let base = dst.ptr().cast::<u8>();
        unroll(N / 4, |p| {
            let (r, c) = Wgmma::<N>::coords(t, 2 * p);
            let off = Tile::<U, R, C, L>::offset_of(row0 + r, col0 + c);
            // SAFETY: inside the tile (asserted); pair-aligned (even column,
            // swizzle moves 16-byte chunks). The emulator sees the pair as
            // this thread's write.
            unsafe { U::write_pair(base.add(off).cast::<U>(), self.regs.get(2 * p).to_f32(), self.regs.get(2 * p + 1).to_f32()) };
        });
    }

    /// The `64 x N` block of `src` at `(row0, col0)`, converted to `T`
    /// (inverse of [`Array::store_tile`]).
    #[inline(always)]
    #[track_caller]
    pub fn load_tile<U: Scalar, const R: usize, const C: usize, L: Layout>(src: Smem<Tile<U, R, C, L>>, row0: usize, col0: usize) -> Self {
        assert!(row0 + 64 <= R && col0 + N <= C && col0 % 2 == 0, "Array::load_tile: the 64 x N block at (row0, col0) is outside the tile (or col0 is odd)");
        let t = crate::index::thread_in_warpgroup() as usize;
        let base = src.ptr().cast::<u8>();
        let mut out = Self::splat(T::default());
        unroll(N / 4, |p| {
            let (r, c) = Wgmma::<N>::coords(t, 2 * p);
            let off = Tile::<U, R, C, L>::offset_of(row0 + r, col0 + c);
            // SAFETY: as `store_tile`.
            let (a, b) = unsafe { U::read_pair(base.add(off).cast::<U>()) };
            out.regs.set(2 * p, T::from_f32(a));
            out.regs.set(2 * p + 1, T::from_f32(b));
        });
        out
    }
}

impl<T: Scalar, const N: usize> Array<T, WgmmaCol<N>>
where
    WgmmaCol<N>: ArrayLayout,
{
    /// Elements `col0 .. col0 + N` of the vector `src` (a bias or scale per
    /// output column), converted to `T`: each thread reads its `N / 4`
    /// values once, as `N / 8` pair loads. `col0` is even; checked against
    /// `src`'s length once.
    #[inline(always)]
    #[track_caller]
    pub fn load_cols<U: Scalar>(src: impl GmemSrc<U>, col0: usize) -> Self {
        let p = src.checked(col0, N);
        assert!(col0 % 2 == 0, "Array::load_cols: col0 must be even (pair loads)");
        let t = crate::index::thread_in_warpgroup() as usize;
        let mut out = Self::splat(T::default());
        unroll(N / 8, |q| {
            let c = WgmmaCol::<N>::coords(t, 2 * q).1;
            // SAFETY: in bounds (checked); pair-aligned (even index of a
            // device allocation).
            let (a, b) = unsafe { U::read_pair(p.add(c)) };
            out.regs.set(2 * q, T::from_f32(a));
            out.regs.set(2 * q + 1, T::from_f32(b));
        });
        out
    }
}

impl<U: Scalar, const N: usize> Array<U, WgmmaCol<N>>
where
    WgmmaCol<N>: ArrayLayout,
{
    /// As [`Array::load_cols`], without converting: the elements stay `U`
    /// (16-bit types: half the registers of f32), for a vector loaded long
    /// before it is used (a bias prefetched before a matmul's mainloop).
    #[inline(always)]
    #[track_caller]
    pub fn load_cols_raw(src: impl GmemSrc<U>, col0: usize) -> Self {
        let p = src.checked(col0, N);
        assert!(col0 % 2 == 0, "Array::load_cols_raw: col0 must be even (pair loads)");
        let t = crate::index::thread_in_warpgroup() as usize;
        let mut out = Self::splat(U::default());
        unroll(N / 8, |q| {
            let c = WgmmaCol::<N>::coords(t, 2 * q).1;
            // SAFETY: as `load_cols`.
            let [a, b] = unsafe { U::read_pair_raw(p.add(c)) };
            out.regs.set(2 * q, a);
            out.regs.set(2 * q + 1, b);
        });
        out
    }
}

impl<T: Scalar> Array<T, WgmmaRow> {
    /// Elements `row0 .. row0 + 64` of the vector `src` (one per row of a
    /// `Wgmma` block), converted to `T`; checked against `src`'s length once.
    #[inline(always)]
    #[track_caller]
    pub fn load_rows<U: Scalar>(src: impl GmemSrc<U>, row0: usize) -> Self {
        let p = src.checked(row0, 64);
        let t = crate::index::thread_in_warpgroup() as usize;
        let mut out = Self::splat(T::default());
        unroll(2, |i| {
            // SAFETY: in bounds (checked).
            out.regs.set(i, T::from_f32(unsafe { p.add(WgmmaRow::coords(t, i).0).read() }.to_f32()))
        });
        out
    }
}

/// `VEC` elements as one access when they make 4, 8 or 16 aligned bytes.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct A16<X>(X);
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct A8<X>(X);
#[repr(C, align(4))]
#[derive(Clone, Copy)]
struct A4<X>(X);

/// Reads `VEC` elements at `p` with one `ld.v4.b32` / `ld.v2.b32` /
/// `ld.b32` when they are 16 / 8 / 4 bytes.
///
/// # Safety
/// `p` is valid for `VEC` elements and aligned to their total size when it
/// is 4, 8 or 16 bytes.
#[inline(always)]
unsafe fn read_vec<U: Copy, const VEC: usize>(p: *const U) -> [U; VEC] {
    // SAFETY: the caller's contract, for each branch's alignment.
    unsafe {
        match VEC * core::mem::size_of::<U>() {
            16 => (p as *const A16<[U; VEC]>).read().0,
            8 => (p as *const A8<[U; VEC]>).read().0,
            4 => (p as *const A4<[U; VEC]>).read().0,
            _ => (p as *const [U; VEC]).read(),
        }
    }
}

/// As [`read_vec`], writing.
///
/// # Safety
/// As [`read_vec`], for writing.
#[inline(always)]
unsafe fn write_vec<U: Copy, const VEC: usize>(p: *mut U, v: [U; VEC]) {
    // SAFETY: the caller's contract.
    unsafe {
        match VEC * core::mem::size_of::<U>() {
            16 => (p as *mut A16<[U; VEC]>).write(A16(v)),
            8 => (p as *mut A8<[U; VEC]>).write(A8(v)),
            4 => (p as *mut A4<[U; VEC]>).write(A4(v)),
            _ => (p as *mut [U; VEC]).write(v),
        }
    }
}

/// The emulator's checks (bounds, alignment) and race record of the
/// `VEC`-element access [`read_vec`] / [`write_vec`] makes at `p`, as every
/// [`Ptr`] access gets them. (The GPU path keeps the bare pointer: the
/// vector moves exactly as the instruction list above says.)
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
#[track_caller]
fn emu_vec<U: Copy, const VEC: usize>(b: Bounds, p: *const U, write: bool) {
    match VEC * core::mem::size_of::<U>() {
        16 => b.check(p as *const A16<[U; VEC]>, write),
        8 => b.check(p as *const A8<[U; VEC]>, write),
        4 => b.check(p as *const A4<[U; VEC]>, write),
        _ => b.check(p as *const [U; VEC], write),
    }
}

/// The alignment a `VEC`-element access of `U` needs.
const fn vec_align<U, const VEC: usize>() -> usize {
    match VEC * core::mem::size_of::<U>() {
        16 => 16,
        8 => 8,
        4 => 4,
        _ => core::mem::align_of::<U>(),
    }
}

#[cold]
#[track_caller]
fn misaligned(what: &'static str, addr: usize, align: usize) -> ! {
    panic!("{what}: address {addr:#x} is not aligned to {align} bytes (the vector access of VEC elements needs it): make the offset a multiple of VEC")
}

impl<T: Copy + Default, const THREADS: usize, const VECS: usize, const VEC: usize> Array<T, Strided<THREADS, VECS, VEC>> {
    /// Elements in the layout (`THREADS * VECS * VEC`).
    const LEN: usize = Strided::<THREADS, VECS, VEC>::LEN;

    /// Elements `off .. off + LEN` of `src` (`LEN = THREADS * VECS * VEC`):
    /// thread `g` of the group reads vectors `off + (THREADS j + g) * VEC`
    /// for `j < VECS`, `VEC` elements per access, so each access
    /// instruction of the group reads `THREADS * VEC` consecutive elements.
    /// Checked against `src`'s length once; the address must be aligned to
    /// the vector (checked).
    #[inline(always)]
    #[track_caller]
    pub fn load_gmem(src: impl GmemSrc<T>, off: usize) -> Self {
        let (p, b) = src.checked(off, Self::LEN).split();
        // SAFETY: in bounds (checked); `strided_read` checks the alignment.
        unsafe { Self::strided_read(p, b, Self::LEN, T::default(), "Array::load_gmem") }
    }
    /// Elements `off .. off + len` of `src`, `len <= LEN` a multiple of
    /// `VEC`: as [`Array::load_gmem`], with the vectors that start at or
    /// beyond `len` not read and set to `fill` (a row shorter than the
    /// layout: `-inf` for a maximum, 0 for a sum). Checked against `src`'s
    /// length for the `len` elements only.
    #[inline(always)]
    #[track_caller]
    pub fn load_gmem_masked(src: impl GmemSrc<T>, off: usize, len: usize, fill: T) -> Self {
        assert!(len <= Self::LEN && len % VEC == 0, "Array::load_gmem_masked: len must be a multiple of VEC and at most THREADS * VECS * VEC");
        let (p, b) = src.checked(off, len).split();
        // SAFETY: the vectors below `len` are in bounds (checked); alignment checked by `strided_read`.
        unsafe { Self::strided_read(p, b, len, fill, "Array::load_gmem_masked") }
    }
    /// Writes the array to `dst[off .. off + LEN]` (as [`Array::load_gmem`]).
    #[inline(always)]
    #[track_caller]
    pub fn store_gmem(&self, dst: Gmem<T>, off: usize) {
        let (p, b) = GmemSrc::checked(&dst, off, Self::LEN).split();
        // SAFETY: in bounds (checked); `strided_write` checks the alignment.
        unsafe { self.strided_write(p, b, Self::LEN, "Array::store_gmem") }
    }
    /// Writes the elements below `len` (a multiple of `VEC`, at most
    /// `LEN`) to `dst[off .. off + len]`: the vectors of
    /// [`Array::load_gmem_masked`].
    #[inline(always)]
    #[track_caller]
    pub fn store_gmem_masked(&self, dst: Gmem<T>, off: usize, len: usize) {
        assert!(len <= Self::LEN && len % VEC == 0, "Array::store_gmem_masked: len must be a multiple of VEC and at most THREADS * VECS * VEC");
        let (p, b) = GmemSrc::checked(&dst, off, len).split();
        // SAFETY: the vectors below `len` are in bounds (checked); `strided_write` checks the alignment.
        unsafe { self.strided_write(p, b, len, "Array::store_gmem_masked") }
    }
    /// Elements `off .. off + LEN` of an SMEM vector (as [`Array::load_gmem`]).
    #[inline(always)]
    #[track_caller]
    pub fn load_smem<const M: usize>(src: Smem<[T; M]>, off: usize) -> Self {
        assert!(off + Self::LEN <= M, "Array::load_smem: elements off .. off + LEN outside the SMEM vector");
        // SAFETY: in bounds (asserted); alignment checked by `strided_read`.
        let (p, b) = src.ptr().cast::<T>().split();
        // SAFETY: as above.
        unsafe { Self::strided_read(p.add(off), b, Self::LEN, T::default(), "Array::load_smem") }
    }
    /// Writes the array to an SMEM vector at `off` (as [`Array::load_gmem`]).
    #[inline(always)]
    #[track_caller]
    pub fn store_smem<const M: usize>(&self, dst: Smem<[T; M]>, off: usize) {
        assert!(off + Self::LEN <= M, "Array::store_smem: elements off .. off + LEN outside the SMEM vector");
        // SAFETY: as `load_smem`.
        let (p, b) = dst.ptr().cast::<T>().split();
        // SAFETY: as above.
        unsafe { self.strided_write(p.add(off), b, Self::LEN, "Array::store_smem") }
    }
    /// Elements at or beyond `len` of the layout set to `fill` (this
    /// thread's vectors that start there; `len` a multiple of `VEC`): what
    /// a reduction over a row shorter than the layout must not see.
    #[inline(always)]
    pub fn mask_beyond(self, len: usize, fill: T) -> Self {
        let _ = Strided::<THREADS, VECS, VEC>::GROUP_OK;
        let g = crate::index::thread_linear() as usize % THREADS;
        let mut out = self;
        unroll(VECS, |j| {
            if (THREADS * j + g) * VEC >= len {
                out.regs.0[j] = [fill; VEC];
            }
        });
        out
    }

    /// # Safety
    /// `p` is valid for `len` elements (`len` a multiple of `VEC`).
    #[inline(always)]
    #[track_caller]
    unsafe fn strided_read(p: *const T, b: Bounds, len: usize, fill: T, what: &'static str) -> Self {
        // `len == LEN` (a constant at every unmasked call) reads every vector.
        let masked = len != Self::LEN;
        let _ = Strided::<THREADS, VECS, VEC>::GROUP_OK;
        let align = vec_align::<T, VEC>();
        if p as usize % align != 0 {
            misaligned(what, p as usize, align);
        }
        let g = crate::index::thread_linear() as usize % THREADS;
        let mut out = Self::splat(fill);
        unroll(VECS, |j| {
            let e = (THREADS * j + g) * VEC;
            if !masked || e < len {
                #[cfg(not(target_arch = "nvptx64"))]
                emu_vec::<T, VEC>(b, p.wrapping_add(e), false);
                // SAFETY: vector j of thread g lies inside the `len` elements; aligned (checked).
                out.regs.0[j] = unsafe { read_vec::<T, VEC>(p.add(e)) };
            }
        });
        #[cfg(target_arch = "nvptx64")]
        let _ = b;
        out
    }
    /// # Safety
    /// `p` is valid for writing `len` elements (`len` a multiple of `VEC`).
    #[inline(always)]
    #[track_caller]
    unsafe fn strided_write(&self, p: *mut T, b: Bounds, len: usize, what: &'static str) {
        let masked = len != Self::LEN;
        let _ = Strided::<THREADS, VECS, VEC>::GROUP_OK;
        let align = vec_align::<T, VEC>();
        if p as usize % align != 0 {
            misaligned(what, p as usize, align);
        }
        let g = crate::index::thread_linear() as usize % THREADS;
        unroll(VECS, |j| {
            let e = (THREADS * j + g) * VEC;
            if !masked || e < len {
                #[cfg(not(target_arch = "nvptx64"))]
                emu_vec::<T, VEC>(b, p.wrapping_add(e), true);
                // SAFETY: as `strided_read`.
                unsafe { write_vec::<T, VEC>(p.add(e), self.regs.0[j]) };
            }
        });
        #[cfg(target_arch = "nvptx64")]
        let _ = b;
    }
}

impl<T: Scalar, const N: usize> Array<T, Wgmma<N>>
where
    Wgmma<N>: ArrayLayout,
{
    /// Converts to `U` and writes the `64 x N` block to the row-major
    /// matrix `dst` (leading dimension `ld` elements) at `(row0, col0)`:
    /// one 4-byte (16-bit `U`) or 8-byte (f32) store per pair of adjacent
    /// columns. Checked against `dst`'s length once; `ld` and `col0` even.
    #[inline(always)]
    #[track_caller]
    pub fn store_gmem<U: Scalar>(&self, dst: Gmem<U>, ld: usize, row0: usize, col0: usize) {
        assert!(ld % 2 == 0 && col0 % 2 == 0 && col0 + N <= ld, "Array::store_gmem: ld and col0 must be even (pair stores) and col0 + N <= ld");
        let base = GmemSrc::checked(&dst, row0 * ld + col0, 63 * ld + N);
        let t = crate::index::thread_in_warpgroup() as usize;
        unroll(N / 4, |p| {
            let (r, c) = Wgmma::<N>::coords(t, 2 * p);
            // SAFETY: inside the checked range; pair-aligned (even offsets of a device allocation).
            unsafe { U::write_pair(base.add(r * ld + c), self.regs.get(2 * p).to_f32(), self.regs.get(2 * p + 1).to_f32()) };
        });
    }
    /// The `64 x N` block of the row-major matrix `src` (leading dimension
    /// `ld`) at `(row0, col0)`, converted to `T` (inverse of
    /// [`Array::store_gmem`]).
    #[inline(always)]
    #[track_caller]
    pub fn load_gmem<U: Scalar>(src: impl GmemSrc<U>, ld: usize, row0: usize, col0: usize) -> Self {
        assert!(ld % 2 == 0 && col0 % 2 == 0 && col0 + N <= ld, "Array::load_gmem: ld and col0 must be even (pair loads) and col0 + N <= ld");
        let base = src.checked(row0 * ld + col0, 63 * ld + N);
        let t = crate::index::thread_in_warpgroup() as usize;
        let mut out = Self::splat(T::default());
        unroll(N / 4, |p| {
            let (r, c) = Wgmma::<N>::coords(t, 2 * p);
            // SAFETY: as `store_gmem`.
            let (a, b) = unsafe { U::read_pair(base.add(r * ld + c)) };
            out.regs.set(2 * p, T::from_f32(a));
            out.regs.set(2 * p + 1, T::from_f32(b));
        });
        out
    }
}
