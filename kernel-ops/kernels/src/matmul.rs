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
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Cols, WgmmaShape};
use kernel_device::Barriers;

pub use kernel_device::gemm::{
    check_tile, store_block_cols, ATileOf, BTileOf, EpiTileOf, OTileOf, Sw, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, COMPUTE_WGS, EPI_N, MEMORY_REGS, TK,
};

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

/// CTAs per cluster of `matmul_cluster_multicast` (the ladder's step 5, here [`matmul_persistent_ws_cluster`]).
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
            bar.arrive_cluster_cta(peer);
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
