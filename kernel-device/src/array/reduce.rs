//! Reductions of register arrays, and f32 math on them.
//!
//! | from | method | to | how |
//! |---|---|---|---|
//! | `Wgmma<N>` | [`Array::row_reduce`] (`row_sum`, `row_max`) | `WgmmaRow` (one value per row) | each thread combines its `N / 4` values per row, then the 4 lanes of its quad (`shfl.sync.bfly` 1, 2): no SMEM, no barrier |
//! | `Wgmma<N>` | [`Array::col_reduce`] | `WgmmaCol<N>` (one value per column) | each thread combines its 2 rows, then the 8 lanes sharing `l % 4` (`shfl.sync.bfly` 4, 8, 16), then the 4 warps through SMEM (`4 x N` f32) and a named barrier of the warpgroup, twice |
//! | `WgStrided<VECS, VEC>`, `Strided<THREADS, VECS, VEC>` | [`Array::reduce`] (`sum`, `max_all`) | one `f32` in every thread of the group (a `WgSplat`) | each thread combines its registers, a warp butterfly, then (groups of more than one warp) the `THREADS / 32` warps through SMEM (one f32 each) and a named barrier of the group, twice |
//!
//! The operator is [`crate::reduce::Sum`], [`Max`](crate::reduce::Max) or
//! [`Min`](crate::reduce::Min) (`f32` max/min follow `max.f32`: a NaN operand
//! is ignored). Sums are reassociated (a tree), so they differ from a
//! sequential sum by rounding. All are warpgroup-collective: the 128 threads
//! of the warpgroup call them together (converged warps).
use super::layout::{ArrayLayout, Strided, Wgmma, WgmmaCol, WgmmaRow};
use super::regs::{unroll, RegStorage};
use super::Array;
use crate::math::F32Ext;
use crate::reduce::ReduceOp;
use crate::smem::Smem;
use crate::sync::NamedBarrier;
use crate::warp::shfl_xor;

impl<const N: usize> Array<f32, Wgmma<N>>
where
    Wgmma<N>: ArrayLayout,
{
    /// Reduces each row over its `N` columns: one value per row, in the
    /// WGMMA_ROW layout (`shfl.sync.bfly` within quads). Warpgroup-collective.
    #[inline(always)]
    #[track_caller]
    pub fn row_reduce<Op: ReduceOp<f32>>(&self) -> Array<f32, WgmmaRow> {
        let mut acc = [Op::IDENTITY; 2];
        // Register i is pair i / 2, on row half (i / 2) % 2.
        unroll(N / 2, |i| acc[(i / 2) % 2] = Op::combine(acc[(i / 2) % 2], self.regs.get(i)));
        let mut out = Array::<f32, WgmmaRow>::splat(0.0);
        unroll(2, |h| {
            let v = Op::combine(acc[h], shfl_xor(acc[h], 1));
            out.regs.set(h, Op::combine(v, shfl_xor(v, 2)));
        });
        out
    }
    /// The sum of each row (see [`Array::row_reduce`]).
    #[inline(always)]
    #[track_caller]
    pub fn row_sum(&self) -> Array<f32, WgmmaRow> {
        self.row_reduce::<crate::reduce::Sum>()
    }
    /// The maximum of each row (see [`Array::row_reduce`]).
    #[inline(always)]
    #[track_caller]
    pub fn row_max(&self) -> Array<f32, WgmmaRow> {
        self.row_reduce::<crate::reduce::Max>()
    }

    /// Reduces each column over its 64 rows: one value per column, in the
    /// WGMMA_COL layout. Goes through `scratch` (one row of `N` per warp)
    /// and `bar` (a named barrier of the 128 threads of this warpgroup),
    /// which it syncs twice, so `scratch` may be reused on return.
    /// Warpgroup-collective.
    #[inline(always)]
    #[track_caller]
    pub fn col_reduce<Op: ReduceOp<f32>>(&self, scratch: Smem<[[f32; N]; 4]>, bar: NamedBarrier) -> Array<f32, WgmmaCol<N>>
    where
        WgmmaCol<N>: ArrayLayout,
    {
        let t = crate::index::thread_in_warpgroup() as usize;
        let (w, l) = (t / 32, t % 32);
        // Pairs 2q and 2q + 1 hold rows r and r + 8 of the same 2 columns:
        // WgmmaCol register 2 (p / 2) + j = Wgmma register 2 p + j.
        let mut part = Array::<f32, WgmmaCol<N>>::splat(Op::IDENTITY);
        unroll(N / 2, |i| {
            let c = 2 * (i / 4) + i % 2;
            part.regs.set(c, Op::combine(part.regs.get(c), self.regs.get(i)));
        });
        unroll(N / 4, |c| {
            let mut v = part.regs.get(c);
            v = Op::combine(v, shfl_xor(v, 4));
            v = Op::combine(v, shfl_xor(v, 8));
            v = Op::combine(v, shfl_xor(v, 16));
            part.regs.set(c, v);
        });
        // Lanes 0..4 of each warp now hold the warp's 16-row partials of all N columns.
        let row = scratch.at(w);
        if l < 4 {
            unroll(N / 4, |c| row.write(WgmmaCol::<N>::coords(t, c).1, part.regs.get(c)));
        }
        bar.sync();
        let mut out = Array::<f32, WgmmaCol<N>>::splat(Op::IDENTITY);
        unroll(N / 4, |c| {
            let col = WgmmaCol::<N>::coords(t, c).1;
            let mut v = Op::IDENTITY;
            unroll(4, |k| v = Op::combine(v, scratch.at(k).read(col)));
            out.regs.set(c, v);
        });
        bar.sync();
        out
    }
}

impl<const THREADS: usize, const VECS: usize, const VEC: usize> Array<f32, Strided<THREADS, VECS, VEC>> {
    /// Reduces all `THREADS * VECS * VEC` elements to one value, returned
    /// in every thread of the group. A warp (`THREADS = 32`) reduces by
    /// shuffles alone and touches neither `scratch` nor `bar`; a group of
    /// `W = THREADS / 32` warps goes through `scratch` (one value per warp:
    /// `[f32; W]`, checked at compile time) and `bar` (a named barrier of
    /// the group's `THREADS` threads), which it syncs twice, so `scratch`
    /// may be reused on return. Collective over the group.
    #[inline(always)]
    #[track_caller]
    pub fn reduce<Op: ReduceOp<f32>, const W: usize>(&self, scratch: Smem<[f32; W]>, bar: NamedBarrier) -> f32 {
        const { assert!(THREADS == 32 || W * 32 == THREADS, "Array<f32, Strided<THREADS, ..>>::reduce: the scratch holds one f32 per warp of the group: [f32; THREADS / 32]") };
        // A tree over the registers (shorter dependency chains than a fold).
        let mut part = [Op::IDENTITY; 8];
        unroll(VECS * VEC, |i| part[i % 8] = Op::combine(part[i % 8], self.regs.get(i)));
        let (a, b) = (Op::combine(part[0], part[1]), Op::combine(part[2], part[3]));
        let (c, d) = (Op::combine(part[4], part[5]), Op::combine(part[6], part[7]));
        let v = Op::warp(Op::combine(Op::combine(a, b), Op::combine(c, d)));
        if THREADS == 32 {
            return v;
        }
        let g = crate::index::thread_linear() as usize % THREADS;
        if g % 32 == 0 {
            scratch.write(g / 32, v);
        }
        bar.sync();
        // Four partials (for 4 warps: the warps' values themselves), then a tree.
        let mut w = [Op::IDENTITY; 4];
        unroll(W, |k| w[k % 4] = if k < 4 { scratch.read(k) } else { Op::combine(w[k % 4], scratch.read(k)) });
        let r = Op::combine(Op::combine(w[0], w[1]), Op::combine(w[2], w[3]));
        bar.sync();
        r
    }
    /// The sum of all elements (see [`Array::reduce`]).
    #[inline(always)]
    #[track_caller]
    pub fn sum<const W: usize>(&self, scratch: Smem<[f32; W]>, bar: NamedBarrier) -> f32 {
        self.reduce::<crate::reduce::Sum, W>(scratch, bar)
    }
    /// The maximum of all elements (see [`Array::reduce`]).
    #[inline(always)]
    #[track_caller]
    pub fn max_all<const W: usize>(&self, scratch: Smem<[f32; W]>, bar: NamedBarrier) -> f32 {
        self.reduce::<crate::reduce::Max, W>(scratch, bar)
    }
}

/// f32 math elementwise ([`crate::math`]: the approximate PTX forms and
/// their documented error bounds).
impl<L: ArrayLayout> Array<f32, L> {
    /// `e^x` (`ex2.approx.f32` of `x log2 e`).
    #[inline(always)]
    pub fn exp(self) -> Self {
        self.map(F32Ext::exp)
    }
    /// `2^x` (`ex2.approx.f32`).
    #[inline(always)]
    pub fn exp2(self) -> Self {
        self.map(F32Ext::exp2)
    }
    /// `1 / x` (`rcp.rn.f32`).
    #[inline(always)]
    pub fn rcp(self) -> Self {
        self.map(F32Ext::rcp)
    }
    /// `1 / sqrt(x)` (`rsqrt.approx.f32`).
    #[inline(always)]
    pub fn rsqrt(self) -> Self {
        self.map(F32Ext::rsqrt)
    }
    /// `tanh(x)` (`tanh.approx.f32`).
    #[inline(always)]
    pub fn tanh(self) -> Self {
        self.map(F32Ext::tanh)
    }
    /// `a * b + c` elementwise with scalars (`fma.rn.f32`).
    #[inline(always)]
    pub fn fma(self, b: f32, c: f32) -> Self {
        self.map(|x| F32Ext::fma(x, b, c))
    }
}
