//! The output tile of a warpgroup's matmul, as handed to a fused epilogue.
//!
//! A matmul kernel that takes an epilogue (e.g.
//! `kernels::hopper::matmul_warp_specialized_with`) calls it once per
//! compute warpgroup, after the last MMA completed and before the tile is
//! converted and stored, with an [`AccTile`]: the warpgroup's `BLOCKS` row
//! blocks of `64 x N` f32 accumulators ([`Wgmma<N>`] arrays) and the global
//! coordinates of its first element. The epilogue changes the values in
//! registers; the kernel then stores them as it always does.
//!
//! An epilogue is either a closure over the tile, run after the mainloop:
//!
//! ```text
//! |tile: &mut AccTile<128, 2>| tile.map(|x| x * alpha)
//! ```
//!
//! or a [`Prefetch`]: a closure run *before* the mainloop with the tile's
//! coordinates ([`TileAt`]), which issues the loads of per-column or
//! per-row vectors there (their latency hides under the MMAs; the values
//! wait in registers) and returns the closure run on the tile:
//!
//! ```text
//! // relu(A·Bᵀ + bias): the bias is read once per warpgroup, in the layout it is used in.
//! Prefetch(|at: TileAt| {
//!     let bias = at.load_cols(bias);                 // Array<f16, WgmmaCol<128>>: 16 pair loads per thread
//!     move |tile: &mut AccTile<128, 2>| tile.map_cols(&bias, |x, b| (x + b).max(0.0))
//! })
//! ```
use super::layout::{ArrayLayout, Wgmma, WgmmaCol};
use super::regs::unroll;
use super::{Array, Scalar};

/// Where a warpgroup's output tile lies (global row and column of its
/// first element): known before the mainloop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileAt {
    pub row: usize,
    pub col: usize,
}

impl TileAt {
    /// Entries `col .. col + N` of a per-column vector, read once per
    /// thread in the WGMMA_COL layout, unconverted (16-bit elements hold
    /// half the registers of f32 while they wait for the mainloop; see
    /// [`Array::load_cols_raw`]). [`AccTile::map_cols`] converts them.
    #[inline(always)]
    #[track_caller]
    pub fn load_cols<const N: usize, U: Scalar>(&self, v: impl GmemSrc<U>) -> Array<U, WgmmaCol<N>>
    where
        WgmmaCol<N>: ArrayLayout,
    {
        Array::load_cols_raw(v, self.col)
    }
}

/// A matmul epilogue: [`Epilogue::prepare`] runs in each compute warpgroup
/// before the mainloop, with the tile's coordinates; what it returns runs
/// on the tile after the last MMA. Implemented by closures over the tile
/// (nothing to prepare) and by [`Prefetch`].
pub trait Epilogue<const N: usize, const BLOCKS: usize>
where
    Wgmma<N>: ArrayLayout,
{
    type Apply: FnOnce(&mut AccTile<N, BLOCKS>);
    fn prepare(self, at: TileAt) -> Self::Apply;
}

impl<F, const N: usize, const BLOCKS: usize> Epilogue<N, BLOCKS> for F
where
    Wgmma<N>: ArrayLayout,
    F: FnOnce(&mut AccTile<N, BLOCKS>),
{
    type Apply = F;
    #[inline(always)]
    fn prepare(self, _: TileAt) -> F {
        self
    }
}

/// A two-phase epilogue: `Prefetch(|at: TileAt| { loads; move |tile| .. })`
/// (see the [module docs](self)).
pub struct Prefetch<P>(pub P);

impl<P, A, const N: usize, const BLOCKS: usize> Epilogue<N, BLOCKS> for Prefetch<P>
where
    Wgmma<N>: ArrayLayout,
    P: FnOnce(TileAt) -> A,
    A: FnOnce(&mut AccTile<N, BLOCKS>),
{
    type Apply = A;
    #[inline(always)]
    fn prepare(self, at: TileAt) -> A {
        (self.0)(at)
    }
}
use super::mem::GmemSrc;

/// `BLOCKS` row blocks of `64 x N` f32 (row block `i` holds rows
/// `row + 64 i .. row + 64 i + 64`, columns `col .. col + N` of the
/// output), in the WGMMA layout.
pub struct AccTile<const N: usize, const BLOCKS: usize>
where
    Wgmma<N>: ArrayLayout,
{
    /// The row blocks.
    pub blocks: [Array<f32, Wgmma<N>>; BLOCKS],
    /// Global row of the tile's first row.
    pub row: usize,
    /// Global column of the tile's first column.
    pub col: usize,
}

impl<const N: usize, const BLOCKS: usize> AccTile<N, BLOCKS>
where
    Wgmma<N>: ArrayLayout,
    WgmmaCol<N>: ArrayLayout,
{
    /// Rows of the tile.
    pub const ROWS: usize = 64 * BLOCKS;

    /// `f(block, global row of the block's first row)` for every row block,
    /// unrolled (the blocks are only indexed by constants).
    #[inline(always)]
    pub fn for_each_block(&mut self, mut f: impl FnMut(&mut Array<f32, Wgmma<N>>, usize)) {
        let row = self.row;
        unroll(BLOCKS, |i| f(&mut self.blocks[i], row + 64 * i));
    }

    /// `x = f(x)` for every element.
    #[inline(always)]
    pub fn map(&mut self, f: impl Fn(f32) -> f32) {
        self.for_each_block(|b, _| *b = b.map(&f));
    }

    /// `x = f(global row, global column, x)` for every element.
    #[inline(always)]
    pub fn map_indexed(&mut self, f: impl Fn(usize, usize, f32) -> f32) {
        let col = self.col;
        self.for_each_block(|b, row| *b = b.map_indexed(|r, c, x| f(row + r, col + c, x)));
    }

    /// The `N` entries `col .. col + N` of a per-column vector (a bias, a
    /// scale), read once per thread in the layout the tile uses them in
    /// (`WgmmaCol<N>`: `N / 8` pair loads per thread).
    #[inline(always)]
    #[track_caller]
    pub fn load_cols<U: Scalar>(&self, v: impl GmemSrc<U>) -> Array<f32, WgmmaCol<N>> {
        Array::load_cols(v, self.col)
    }

    /// `x = f(x, v[column of x])` for every element, with `v` from
    /// [`AccTile::load_cols`] or [`TileAt::load_cols`] (converted to f32
    /// here; the broadcast moves no data).
    #[inline(always)]
    pub fn map_cols<U: Scalar>(&mut self, v: &Array<U, WgmmaCol<N>>, f: impl Fn(f32, f32) -> f32)
    where
        WgmmaCol<N>: super::BroadcastTo<Wgmma<N>>,
    {
        let v = *v;
        self.for_each_block(|b, _| *b = b.zip_broadcast(v, |x, c| f(x, c.to_f32())));
    }
}
