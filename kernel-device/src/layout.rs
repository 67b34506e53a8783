//! Shared-memory tile layouts: tiling and swizzling as types.
//!
//! One type, [`Tile<T, R, C, L>`], is the single source of truth for a 2-D
//! tile of `R x C` elements of `T` in shared memory with layout `L`:
//!
//! * the kernel's SMEM addressing ([`Tile::offset_of`]),
//! * the wgmma shared-memory descriptors (`crate::wgmma::SmemDescriptor`),
//! * the host's TMA descriptor (box size and swizzle mode, in
//!   `kernel_host::tma`),
//!
//! all derive from it, so they cannot disagree.
//!
//! # The layouts
//!
//! With a swizzle span of `S` bytes (128, 64 or 32), a row of the tile is cut
//! into blocks of `S` bytes ("column blocks"); each column block is stored as
//! `R` consecutive rows of `S` bytes, and the blocks follow each other. This
//! is Pallas's `TilingTransform((8, S / size_of::<T>()))` +
//! `SwizzleTransform(S)` for a tile whose rows fit one block, and it is
//! exactly what one TMA box of `(S / size_of::<T>(), R)` elements writes with
//! swizzle mode `S`, and the canonical K-major layout wgmma reads. Inside the
//! tile, the 16-byte chunk index of each byte offset is XORed with its row
//! within the 8-row pattern (PTX ISA §5.5.6, "Tensor swizzling modes"):
//!
//! ```text
//! swizzled(o) = o ^ (((o >> 7) & (S / 16 - 1)) << 4)      // bits [4, 4+log2(S/16)) ^= bits [7, ..)
//! ```
//!
//! which needs the tile to start on a multiple of the pattern (`8 * S`
//! bytes; tiles are 1024-byte aligned). [`Unswizzled`] is plain row-major.
//!
//! ```text
//! 128B swizzle, f16, row r, 16-byte chunk c (8 elements): stored at chunk c ^ (r % 8)
//! r\c  0 1 2 3 4 5 6 7
//!  0   0 1 2 3 4 5 6 7
//!  1   1 0 3 2 5 4 7 6
//!  2   2 3 0 1 6 7 4 5
//!  ...
//!  7   7 6 5 4 3 2 1 0
//! ```
use core::marker::PhantomData;

/// The swizzle modes and `find_swizzle` are defined in [`kernel_spec::swizzle`]
/// (the emulator and the host's tensor maps use them too).
pub use kernel_spec::swizzle::{find_swizzle, Swizzle};

/// A tile layout: its swizzle mode.
pub trait Layout: 'static {
    const SWIZZLE: Swizzle;
}

/// Tiling `(8, BYTES / size_of::<T>())` + `BYTES`-byte swizzle.
#[derive(Clone, Copy, Debug)]
pub struct Swizzled<const BYTES: usize>;

impl<const BYTES: usize> Layout for Swizzled<BYTES> {
    const SWIZZLE: Swizzle = match Swizzle::from_bytes(BYTES) {
        Some(s) => s,
        None => panic!("Swizzled<BYTES>: BYTES must be 128, 64, 32 or 16"),
    };
}

/// Plain row-major, no swizzle.
#[derive(Clone, Copy, Debug)]
pub struct Unswizzled;

impl Layout for Unswizzled {
    const SWIZZLE: Swizzle = Swizzle::None;
}

/// A 2-D tile of `R x C` elements of `T` in shared memory, laid out by `L`.
/// Used as `Smem<Tile<..>>` (or `Smem<[Tile<..>; STAGES]>`) kernel scratch.
///
/// Rules (compile-time, checked when the layout is used): `R` is a multiple
/// of 8; with a swizzle of `S` bytes, a row (`C * size_of::<T>()` bytes) is a
/// multiple of `S`.
#[repr(C, align(1024))]
pub struct Tile<T, const R: usize, const C: usize, L: Layout> {
    data: [[T; C]; R],
    _layout: PhantomData<L>,
}

/// Compile-time facts about a tile type, for code generic over tiles (TMA,
/// wgmma descriptors, the host).
pub trait TileLayout {
    type Elem: Copy;
    const ROWS: usize;
    const COLS: usize;
    const SWIZZLE: Swizzle;
    /// Bytes of one element.
    const ELEM_BYTES: usize;
    /// Bytes of the whole tile.
    const BYTES: usize;
    /// Bytes of one row of one column block: the swizzle span, or the whole
    /// row without swizzle.
    const BLOCK_ROW_BYTES: usize;
    /// Elements per row of one column block (the TMA box's inner size).
    const BLOCK_COLS: usize;
    /// Column blocks per row (TMA boxes per tile).
    const BLOCKS: usize;
    /// Bytes of one column block (`ROWS * BLOCK_ROW_BYTES`).
    const BLOCK_BYTES: usize;
}

impl<T: Copy, const R: usize, const C: usize, L: Layout> TileLayout for Tile<T, R, C, L> {
    type Elem = T;
    const ROWS: usize = R;
    const COLS: usize = C;
    const SWIZZLE: Swizzle = L::SWIZZLE;
    const ELEM_BYTES: usize = core::mem::size_of::<T>();
    const BYTES: usize = R * C * core::mem::size_of::<T>();
    const BLOCK_ROW_BYTES: usize = {
        let row = C * core::mem::size_of::<T>();
        let s = L::SWIZZLE.bytes();
        assert!(R > 0 && R % 8 == 0, "Tile<T, R, C, L>: R (rows) must be a non-zero multiple of 8");
        assert!(row > 0, "Tile<T, R, C, L>: C must be non-zero");
        if s == 0 {
            row
        } else {
            assert!(
                row % s == 0,
                "Tile<T, R, C, Swizzled<S>>: a row (C * size_of::<T>() bytes) must be a multiple of the swizzle span S; use find_swizzle or a smaller S"
            );
            s
        }
    };
    const BLOCK_COLS: usize = Self::BLOCK_ROW_BYTES / core::mem::size_of::<T>();
    const BLOCKS: usize = C / Self::BLOCK_COLS;
    const BLOCK_BYTES: usize = R * Self::BLOCK_ROW_BYTES;
}

impl<T: Copy, const R: usize, const C: usize, L: Layout> Tile<T, R, C, L> {
    /// Byte offset of element `(row, col)` from the tile's start, swizzle
    /// applied.
    pub const fn offset_of(row: usize, col: usize) -> usize {
        let e = core::mem::size_of::<T>();
        let block = col / <Self as TileLayout>::BLOCK_COLS;
        let in_block = (col % <Self as TileLayout>::BLOCK_COLS) * e;
        let linear = block * <Self as TileLayout>::BLOCK_BYTES + row * <Self as TileLayout>::BLOCK_ROW_BYTES + in_block;
        // Blocks are whole patterns, so swizzling the offset from the tile
        // start equals swizzling it from the block start.
        L::SWIZZLE.apply(linear)
    }
}

impl<T: Copy, const R: usize, const C: usize, L: Layout> crate::smem::Smem<Tile<T, R, C, L>> {
    /// A pointer to element `(row, col)` (swizzle applied; panics, i.e.
    /// traps, out of bounds), bounded by the tile
    /// ([`SmemPtr`](crate::ptr::SmemPtr): bounds-, alignment- and
    /// race-checked on the emulator).
    #[inline(always)]
    #[track_caller]
    pub fn elem_ptr_2d(&self, row: usize, col: usize) -> crate::ptr::SmemPtr<T> {
        let p = self.raw_elem_2d(row, col);
        crate::ptr::Ptr::within(p, self.as_ptr() as *const u8, <Tile<T, R, C, L> as TileLayout>::BYTES)
    }
    #[inline(always)]
    #[track_caller]
    fn raw_elem_2d(&self, row: usize, col: usize) -> *mut T {
        assert!(row < R && col < C, "tile index out of bounds");
        // SAFETY: in bounds of the tile.
        unsafe { (self.as_ptr() as *mut u8).add(Tile::<T, R, C, L>::offset_of(row, col)).cast() }
    }
    /// Read element `(row, col)`.
    #[inline(always)]
    #[track_caller]
    pub fn get(&self, row: usize, col: usize) -> T {
        let p = self.raw_elem_2d(row, col);
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::smem_access(p as *const u8, core::mem::size_of::<T>(), false);
        // SAFETY: `elem_ptr_2d` checked bounds; ordering per `Smem` docs.
        unsafe { p.read() }
    }
    /// Write element `(row, col)`.
    #[inline(always)]
    #[track_caller]
    pub fn set(&self, row: usize, col: usize, v: T) {
        let p = self.raw_elem_2d(row, col);
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::smem_access(p as *const u8, core::mem::size_of::<T>(), true);
        // SAFETY: as `get`.
        unsafe { p.write(v) }
    }
}

impl<T: crate::Pack16, const R: usize, const C: usize, L: Layout> crate::smem::Smem<Tile<T, R, C, L>> {
    /// `ld.shared.v4.b32 {d0, d1, d2, d3}, [a];` (PTX ISA §9.7.9.8): the 16
    /// bytes of elements `(row, col .. col + T::LANES)` (4 f32, 8 f16/bf16,
    /// 16 FP8: [`Pack16`](crate::Pack16)) in one load, at
    /// [`Tile::offset_of`]`(row, col)`. A 16-byte chunk is contiguous in
    /// every layout (the swizzle permutes whole chunks). `col` a multiple of
    /// `T::LANES`, in bounds (checked: a trap on the GPU, a reported misuse
    /// on the emulator, which tracks the 16 bytes as one read); a row of a
    /// column block is whole 16-byte chunks (checked at compile time).
    #[inline(always)]
    #[track_caller]
    pub fn get_v4(&self, row: usize, col: usize) -> T::Pack {
        let (addr, p) = self.pack_at(row, col);
        // SAFETY: in bounds and 16-byte aligned (checked by `pack_at`).
        unsafe { crate::smem::raw::load_at(addr, p) }
    }
    /// `st.shared.v4.b32 [a], {v0, v1, v2, v3};` (PTX ISA §9.7.9.10): `v`
    /// to elements `(row, col .. col + T::LANES)` in one store, checked as
    /// [`Smem::get_v4`](crate::Smem::get_v4).
    #[inline(always)]
    #[track_caller]
    pub fn set_v4(&self, row: usize, col: usize, v: T::Pack) {
        let (addr, p) = self.pack_at(row, col);
        // SAFETY: in bounds and 16-byte aligned (checked by `pack_at`).
        unsafe { crate::smem::raw::store_at(addr, p, v) }
    }
    /// The shared address and the pointer of the pack at `(row, col)`,
    /// checked (one branch on the GPU).
    #[inline(always)]
    #[track_caller]
    fn pack_at(&self, row: usize, col: usize) -> (u32, *mut T::Pack) {
        const {
            assert!(
                <Tile<T, R, C, L> as TileLayout>::BLOCK_ROW_BYTES % 16 == 0,
                "Smem<Tile<T, R, C, L>>::get_v4/set_v4: a row of a column block must be whole 16-byte chunks \
                 (C * size_of::<T>() a multiple of 16 when unswizzled); use get/set"
            )
        };
        if row >= R || col >= C || col % T::LANES != 0 {
            tile_pack_misuse(row, col, R, C, T::LANES);
        }
        let off = Tile::<T, R, C, L>::offset_of(row, col);
        (self.smem_addr().wrapping_add(off as u32), (self.as_ptr() as *mut u8).wrapping_add(off).cast())
    }
}

#[cold]
#[track_caller]
fn tile_pack_misuse(row: usize, col: usize, rows: usize, cols: usize, lanes: usize) -> ! {
    device!("tile v4 check", {
        let _ = (row, col, rows, cols, lanes);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "tile 16-byte access (get_v4/set_v4) out of bounds or misaligned",
            format_args!(
                "element ({row}, {col}) of a {rows} x {cols} tile: 16 bytes hold {lanes} elements, so the column must be a \
                 multiple of {lanes} below {cols} and the row below {rows}"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type F16 = u16; // a 2-byte element for address math

    #[test]
    fn tile_of_one_block_is_row_major_then_swizzled() {
        type T = Tile<F16, 64, 64, Swizzled<128>>;
        assert_eq!(<T as TileLayout>::BLOCKS, 1);
        assert_eq!(<T as TileLayout>::BLOCK_COLS, 64);
        assert_eq!(<T as TileLayout>::BYTES, 8192);
        // (row 1, col 8): linear 128 + 16 = chunk 1 of row 1 -> chunk 0.
        assert_eq!(T::offset_of(1, 8), 128);
        assert_eq!(T::offset_of(0, 0), 0);
        assert_eq!(T::offset_of(9, 63), 9 * 128 + ((7 ^ 1) * 16) + 14);
    }

    #[test]
    fn wide_tile_is_split_into_column_blocks() {
        // 128 x 128 f16 with 128B swizzle: two blocks of 128 rows x 128 bytes.
        type T = Tile<F16, 128, 128, Swizzled<128>>;
        assert_eq!(<T as TileLayout>::BLOCKS, 2);
        assert_eq!(<T as TileLayout>::BLOCK_BYTES, 16384);
        // Column 64 starts the second block.
        assert_eq!(T::offset_of(0, 64), 16384);
        assert_eq!(T::offset_of(2, 64 + 8), 16384 + 2 * 128 + ((1 ^ 2) * 16));
    }

    #[test]
    fn unswizzled_is_row_major() {
        type T = Tile<f32, 8, 40, Unswizzled>;
        assert_eq!(<T as TileLayout>::BLOCKS, 1);
        assert_eq!(T::offset_of(3, 5), (3 * 40 + 5) * 4);
    }

    /// What `get_v4`/`set_v4` rely on: in every layout, the `LANES`
    /// elements of a pack at a column that is a multiple of `LANES` are 16
    /// contiguous bytes starting on a 16-byte boundary.
    #[test]
    fn packs_are_whole_16_byte_chunks_in_every_layout() {
        fn check<T: crate::Pack16, const R: usize, const C: usize, L: Layout>() {
            let e = core::mem::size_of::<T>();
            for r in 0..R {
                for c in (0..C).step_by(T::LANES) {
                    let o = Tile::<T, R, C, L>::offset_of(r, c);
                    assert_eq!(o % 16, 0, "({r}, {c})");
                    for k in 0..T::LANES {
                        assert_eq!(Tile::<T, R, C, L>::offset_of(r, c + k), o + k * e, "({r}, {c} + {k})");
                    }
                }
            }
        }
        check::<half::bf16, 8, 64, Swizzled<128>>();
        check::<half::f16, 16, 128, Swizzled<128>>();
        check::<half::f16, 8, 32, Swizzled<64>>();
        check::<crate::E4M3, 8, 32, Swizzled<32>>();
        check::<f32, 8, 12, Unswizzled>();
    }

    #[test]
    fn tiles_are_pattern_aligned() {
        assert_eq!(core::mem::align_of::<Tile<F16, 8, 64, Swizzled<128>>>(), 1024);
        assert_eq!(<crate::Smem<[Tile<F16, 64, 64, Swizzled<128>>; 3]> as crate::Scratch>::ALIGN, 1024);
    }
}
