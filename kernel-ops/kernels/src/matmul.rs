//! The ready matmul's kernels: `C = A · Bᵀ` (A `M x K`, B `N x K`, C
//! `M x N`, row-major f16, f32 accumulation) — the last two steps of the
//! Hopper ladder (`examples/kernels/src/hopper_ladder`, steps 4 and 5) as a
//! library: persistent, warp-specialized (one memory warpgroup, two compute
//! warpgroups), `BM x BN` tiles in planar-snake order, an epilogue through
//! double-buffered SMEM sub-tiles whose TMA stores overlap the next tile,
//! and optionally clusters of 2 multicasting B. The host entry point is
//! `kernel_ops::matmul`; the instances listed here are what it autotunes
//! over.
//!
//! Any `M`, `N`, `K` with `K % 8 == 0` and `N % 8 == 0` (rows of 16-byte
//! multiples, a TMA rule): loads past the edges are zero-filled, stores
//! clipped.
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_device::{f16, Barriers};

/// The swizzle of every ladder tile: 128 bytes (64 f16), tiling (8, 64).
pub type Sw = Swizzled<128>;
/// K step of every ladder kernel: one 128-byte swizzle span of f16.
pub const TK: usize = 64;
/// A's tile: `BM x 64` of `A (M x K)`.
pub type ATileOf<const BM: usize> = Tile<f16, BM, TK, Sw>;
/// B's tile: `BN x 64` of `B (N x K)` (K-major).
pub type BTileOf<const BN: usize> = Tile<f16, BN, TK, Sw>;
/// A whole output tile `BM x BN`.
pub type OTileOf<const BM: usize, const BN: usize> = Tile<f16, BM, BN, Sw>;
/// Epilogue sub-tile width : one 64-column swizzle block.
pub const EPI_N: usize = 64;
/// An epilogue sub-tile `BM x 64` .
pub type EpiTileOf<const BM: usize> = Tile<f16, BM, EPI_N, Sw>;

/// The compute warpgroups of both matmul kernels (the memory
/// warpgroup is number 2).
pub const COMPUTE_WGS: u32 = 2;
/// The named barrier of the two compute warpgroups (256 threads). Ids 8..=15
/// are the emulator's.
pub const COMPUTE_BARRIER: NamedBarrier = NamedBarrier::new(1, 256);
/// Register budgets per role (`setmaxnreg`): 40 for the memory warpgroup,
/// 232 for the compute ones (40 + 2 x 232 = 504 <= 512 per thread slot).
pub const MEMORY_REGS: u32 = 40;
pub const COMPUTE_REGS: u32 = 232;

/// The checks every ladder tile shape passes: one compute warpgroup holds
/// `BM / 2` rows x `BN` columns in f32 (at most 128 registers per thread).
pub const fn check_tile(bm: usize, bn: usize) {
    assert!(bm == 128 || bm == 256, "matmul kernels: BM must be 128 or 256 (each compute warpgroup owns BM / 2 rows, one or two 64-row wgmma blocks)");
    assert!(bn == 64 || bn == 128 || bn == 256, "matmul kernels: BN must be 64, 128 or 256 (wgmma N)");
    assert!(bm * bn <= 128 * 256, "matmul kernels: BM x BN at most 128 x 256: a compute warpgroup holds BM / 2 x BN f32 accumulators in at most 128 registers per thread");
}

/// One compute warpgroup's accumulators: rows `row0 .. row0 + BM / 2` of the
/// CTA tile, as one (`BM = 128`) or two (`BM = 256`) `64 x BN` blocks. The
/// second block is never touched when `BM = 128` (it costs no registers).
pub struct WgAcc<const BM: usize, const BN: usize>
where
    Cols<BN>: WgmmaShape,
{
    pub blocks: [Acc<BN>; 2],
}

impl<const BM: usize, const BN: usize> WgAcc<BM, BN>
where
    Cols<BN>: WgmmaShape,
{
    #[inline(always)]
    pub fn undefined() -> Self {
        WgAcc { blocks: [Acc::undefined(), Acc::undefined()] }
    }

    /// Issues one K step (`K = 64`: 4 wgmmas per 64-row block) of this
    /// warpgroup's rows from `row0`; no commit. Warpgroup-collective.
    #[inline(always)]
    #[track_caller]
    pub fn mma(&mut self, a: Smem<ATileOf<BM>>, row0: usize, b: Smem<BTileOf<BN>>, accumulate: bool) {
        self.blocks[0].mma(a, row0, b, 0, accumulate);
        if BM == 256 {
            self.blocks[1].mma(a, row0 + 64, b, 0, accumulate);
        }
    }

    /// Writes the whole `BM / 2 x BN` block as f16 into `dst` at row `row0`
    /// (after `wgmma_wait::<0>()`).
    #[inline(always)]
    pub fn store_f16(&mut self, dst: Smem<OTileOf<BM, BN>>, row0: usize) {
        self.blocks[0].store_f16(dst, row0, 0);
        if BM == 256 {
            self.blocks[1].store_f16(dst, row0 + 64, 0);
        }
    }

    /// Writes columns `64 j .. 64 j + 64` of the block as f16 into the
    /// epilogue sub-tile `dst` at row `row0` (after `wgmma_wait::<0>()`).
    /// `j` must be a constant after unrolling (a loop over `0..BN / 64`).
    #[inline(always)]
    pub fn store_cols_f16(&mut self, dst: Smem<EpiTileOf<BM>>, row0: usize, j: usize) {
        store_block_cols(&mut self.blocks[0], dst, row0, j);
        if BM == 256 {
            store_block_cols(&mut self.blocks[1], dst, row0 + 64, j);
        }
    }
}

/// Columns `64 j .. 64 j + 64` of one `64 x N` accumulator block into `dst`
/// at row `row0`: the fragment layout of [`Acc::for_each_pair`], keeping the
/// register pairs `p` with `8 (p / 2) / 64 == j` (a constant per unrolled
/// pair, so no register is indexed at run time).
#[inline(always)]
fn store_block_cols<const N: usize, const R: usize>(acc: &mut Acc<N>, dst: Smem<EpiTileOf<R>>, row0: usize, j: usize)
where
    Cols<N>: WgmmaShape,
{
    acc.fence_operands();
    let t = thread_in_warpgroup() as usize;
    let (w, l) = (t / 32, t % 32);
    let (row, col) = (row0 + 16 * w + l / 4, 2 * (l % 4));
    let base = dst.as_ptr() as *mut u8;
    <Cols<N>>::for_each_pair(&acc.regs, |p, v0, v1| {
        let c = 8 * (p / 2);
        if c / EPI_N == j {
            let off = EpiTileOf::<R>::offset_of(row + 8 * (p % 2), c % EPI_N + col);
            // SAFETY: row < R (row0 + 64 <= R), column < 64; 4-byte aligned.
            unsafe { (base.add(off) as *mut u32).write(kernel_device::wgmma::pack_f16x2(v0, v1)) };
        }
    });
}

/// `C = A · Bᵀ`, persistent, with an overlapped, sub-tiled epilogue.
///
/// This kernel works as follows:
/// 1. CTA `p` of `P` (at most one per SM) runs output tiles `p, p + P, ..`
///    ([`nd_loop`]) in [`planar_snake`] order (`GRID_W` M tiles per band);
///    one thread of warpgroup 2 loads A and B into `STAGES` slots, counting
///    K steps over all tiles, waiting on `consumed` once a slot was used;
/// 2. compute warpgroup `w` runs each tile's K steps on its `BM / 2 x BN`
///    block (one wgmma group in flight; each slot released one step later);
/// 3. epilogue, for each of the `BN / 64` column sub-tiles `j`: thread 0
///    waits until at most one of its TMA stores is still reading SMEM (so
///    the buffer of sub-tile `j` is free), the compute warpgroups meet,
///    write columns `64 j ..` of their rows as f16 into buffer
///    `e % 2` (`e` counts sub-tiles over all tiles), fence and meet again,
///    and thread 0 issues the sub-tile's TMA store without waiting;
/// 4. at the end thread 0 waits for all its stores.
///
/// Constraints: `BM` 128 or 256, `BN` 64/128/256, `BM x BN <= 128 x 256`;
/// grid `min(SMs, m_tiles * n_tiles)`; `m_tiles = ceil(M / BM)`, `n_tiles =
/// ceil(N / BN)`, `k_steps = ceil(K / 64) >= 1`; SMEM `STAGES x (BM + BN) x 128 B + 2 x BM x 128 B`
/// <= 227 KB (`STAGES = 4` at `128 x 256`, 3 at `256 x 128`).
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 256, 4, 8), (128, 256, 4, 16), (256, 128, 3, 8), (128, 128, 4, 8), (128, 128, 4, 16)))]
pub fn matmul_persistent_ws<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATileOf<BM>>,
    b: Tma<BTileOf<BN>>,
    c: Tma<EpiTileOf<BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATileOf<BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileOf<BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const { check_tile(BM, BN) };
    let tiles = [m_tiles * n_tiles];
    let tile = |i: u32| planar_snake(i, (m_tiles, n_tiles), 0, GRID_W);
    let slot = |step: u32| (step % STAGES as u32) as usize;
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        if thread_in_warpgroup() == 0 {
            let mut step = 0u32;
            nd_loop(tiles, Collective::Blocks, |info| {
                let (pm, pn) = tile(info.index[0]);
                for k in 0..k_steps {
                    let s = slot(step);
                    if step >= STAGES as u32 {
                        consumed.at(s).wait();
                    }
                    let bar = loaded.at(s);
                    bar.arrive_expect_tx(Tma::<ATileOf<BM>>::BYTES + Tma::<BTileOf<BN>>::BYTES);
                    a.load(a_bufs.at(s), pm * BM as u32, k * TK as u32, bar);
                    b.load(b_bufs.at(s), pn * BN as u32, k * TK as u32, bar);
                    step += 1;
                }
            });
        }
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx() as usize * BM / 2;
        let leader = thread_linear() == 0;
        let mut step = 0u32;
        let mut sub_tiles = 0u32;
        nd_loop(tiles, Collective::Blocks, |info| {
            let (pm, pn) = tile(info.index[0]);
            let mut acc = WgAcc::<BM, BN>::undefined();
            for k in 0..k_steps {
                let s = slot(step);
                loaded.at(s).wait();
                acc.mma(a_bufs.at(s), row0, b_bufs.at(s), k > 0);
                wgmma_commit_group();
                wgmma_wait::<1>();
                if k > 0 {
                    consumed.at(slot(step - 1)).arrive();
                }
                step += 1;
            }
            wgmma_wait::<0>();
            consumed.at(slot(step - 1)).arrive();
            for j in 0..BN / EPI_N {
                let buf = epi.at((sub_tiles % 2) as usize);
                if leader {
                    // The store two sub-tiles ago (same buffer) has read it.
                    wait_group_read::<1>();
                }
                COMPUTE_BARRIER.sync();
                acc.store_cols_f16(buf, row0, j);
                commit_smem();
                COMPUTE_BARRIER.sync();
                if leader {
                    c.store(buf, pm * BM as u32, pn * BN as u32 + (j * EPI_N) as u32);
                    commit_group();
                }
                sub_tiles += 1;
            }
        });
        if leader {
            wait_group::<0>();
        }
    }
}

/// CTAs per cluster of [`matmul_cluster_multicast`].
pub const CLUSTER_M: u32 = 2;

/// `C = A · Bᵀ`, persistent, clusters of 2 along M with B multicast.
///
/// This kernel works as follows:
/// 1. cluster `q` of `Q` (grid `2 Q`, at most one CTA per SM) runs the
///    cluster tiles `q, q + Q, ..` of `ceil(m_tiles / 2) * n_tiles`, in
///    [`planar_snake`] order; CTA rank `r` computes output tile
///    `(2 i + r, j)` of cluster tile `(i, j)`;
/// 2. one thread of warpgroup 2 per CTA, for every tile and K step, waits
///    until slot `step % STAGES` is consumed in both CTAs, announces A's and
///    the whole B tile's bytes on its `loaded` barrier, loads its A tile,
///    and multicasts rows `r BH .. (r + 1) BH` of the B tile to both CTAs
///    (mask `0b11`: the same SMEM offset and barrier in each);
/// 3. compute warpgroups as in [`matmul_persistent_ws`], releasing each slot on both CTAs'
///    `consumed` barriers;
/// 4. epilogue as in [`matmul_persistent_ws`] (each CTA stores its own tile).
///
/// Constraints: as [`matmul_persistent_ws`], and `BH * 2 == BN`; grid a multiple of 2, at
/// most the SM count; the kernel's end is a cluster barrier (no CTA exits
/// while its peer may still write into its SMEM or barriers).
#[kernel(block = warpgroups(3), cluster = 2, arch = sm_90a, instances((128, 256, 128, 4, 8), (128, 256, 128, 4, 16), (256, 128, 64, 3, 8)))]
pub fn matmul_persistent_ws_cluster<const BM: usize, const BN: usize, const BH: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATileOf<BM>>,
    b: Tma<BTileOf<BH>>,
    c: Tma<EpiTileOf<BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATileOf<BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileOf<BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 512)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        check_tile(BM, BN);
        assert!(BH * 2 == BN, "matmul_persistent_ws_cluster: BH (the B rows each CTA multicasts) must be BN / 2");
    };
    let rank = cluster_ctarank();
    let m_pairs = m_tiles.div_ceil(CLUSTER_M);
    let tiles = [m_pairs * n_tiles];
    let tile = |i: u32| {
        let (pi, pn) = planar_snake(i, (m_pairs, n_tiles), 0, GRID_W);
        (CLUSTER_M * pi + rank, pn)
    };
    let slot = |step: u32| (step % STAGES as u32) as usize;
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        if thread_in_warpgroup() == 0 {
            let mut step = 0u32;
            nd_loop(tiles, Collective::Clusters, |info| {
                let (pm, pn) = tile(info.index[0]);
                for k in 0..k_steps {
                    let s = slot(step);
                    if step >= STAGES as u32 {
                        consumed.at(s).wait();
                    }
                    let bar = loaded.at(s);
                    bar.arrive_expect_tx(Tma::<ATileOf<BM>>::BYTES + Tma::<BTileOf<BN>>::BYTES);
                    a.load(a_bufs.at(s), pm * BM as u32, k * TK as u32, bar);
                    // SAFETY: rows r BH .. (r + 1) BH of a BN-row, one-column-block
                    // tile start r BH x 128 bytes in (1024-byte aligned: BH % 8 == 0).
                    let half: Smem<BTileOf<BH>> = unsafe { b_bufs.at(s).cast_at(rank as usize * <BTileOf<BH> as TileLayout>::BYTES) };
                    b.load_multicast(half, pn * BN as u32 + rank * BH as u32, k * TK as u32, bar, 0b11);
                    step += 1;
                }
            });
        }
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx() as usize * BM / 2;
        let leader = thread_linear() == 0;
        let peer = rank ^ 1;
        let release = |s: usize| {
            let bar = consumed.at(s);
            bar.arrive();
            bar.arrive_cluster(peer);
        };
        let mut step = 0u32;
        let mut sub_tiles = 0u32;
        nd_loop(tiles, Collective::Clusters, |info| {
            let (pm, pn) = tile(info.index[0]);
            let mut acc = WgAcc::<BM, BN>::undefined();
            for k in 0..k_steps {
                let s = slot(step);
                loaded.at(s).wait();
                acc.mma(a_bufs.at(s), row0, b_bufs.at(s), k > 0);
                wgmma_commit_group();
                wgmma_wait::<1>();
                if k > 0 {
                    release(slot(step - 1));
                }
                step += 1;
            }
            wgmma_wait::<0>();
            release(slot(step - 1));
            for j in 0..BN / EPI_N {
                let buf = epi.at((sub_tiles % 2) as usize);
                if leader {
                    wait_group_read::<1>();
                }
                COMPUTE_BARRIER.sync();
                acc.store_cols_f16(buf, row0, j);
                commit_smem();
                COMPUTE_BARRIER.sync();
                if leader {
                    c.store(buf, pm * BM as u32, pn * BN as u32 + (j * EPI_N) as u32);
                    commit_group();
                }
                sub_tiles += 1;
            }
        });
        if leader {
            wait_group::<0>();
        }
    }
}
