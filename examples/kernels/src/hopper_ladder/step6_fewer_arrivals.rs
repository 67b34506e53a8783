//! Step 6: fewer barrier instructions.
//!
//! Diff from step 5 ([`super::step5_cluster_multicast::matmul_cluster_multicast`]):
//! step 5 released every stage slot with 512 arrivals: each of the 256
//! compute threads of both CTAs arrived on its own CTA's `consumed` barrier
//! and, through `mapa`, on its peer's — 2 mbarrier operations per thread
//! per K step, one of them remote. The wgmma wait
//! that precedes a release is warp-synchronous, so one elected lane per
//! warp can speak for its warp: `consumed` now counts 16 arrivals (8
//! compute warps x 2 CTAs) and each warp issues one local and one remote
//! arrive per K step, 32x fewer barrier operations on the compute side.
use kernel_ops_kernels::gemm::{check_tile, ATileOf, BTileOf, EpiTileOf, WgAcc, COMPUTE_REGS, MEMORY_REGS, TK};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::wait_group;
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Cols, WgmmaShape};
use kernel_device::Barriers;
use super::step5_cluster_multicast::CLUSTER_M;

/// `C = A · Bᵀ`, persistent, clusters of 2 along M with B multicast, one
/// slot release per warp.
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
/// 3. compute warpgroups as step 4; after the wgmma wait that retires a
///    slot's reads, one elected lane per compute warp releases the slot on
///    both CTAs' `consumed` barriers (16 arrivals per phase);
/// 4. epilogue as step 4 (each CTA stores its own tile).
///
/// Constraints: as step 4, and `BH * 2 == BN`; grid a multiple of 2, at
/// most the SM count; the kernel's end is a cluster barrier (no CTA exits
/// while its peer may still write into its SMEM or barriers).
#[kernel(block = warpgroups(3), cluster = 2, arch = sm_90a, instances((128, 256, 128, 4, 8), (128, 256, 128, 4, 16), (256, 128, 64, 3, 8)))]
pub fn matmul_fewer_arrivals<const BM: usize, const BN: usize, const BH: usize, const STAGES: usize, const GRID_W: u32>(
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
    #[scratch(arrivals = 16)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        check_tile(BM, BN);
        assert!(BH * 2 == BN, "matmul_fewer_arrivals: BH (the B rows each CTA multicasts) must be BN / 2");
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
        // After `wgmma_wait` (warp-synchronous: every lane's reads of the
        // slot are retired), one lane per warp speaks for the warp.
        let release = |s: usize| {
            if elect_one() {
                let bar = consumed.at(s);
                bar.arrive();
                bar.arrive_cluster_cta(peer);
            }
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
            sub_tiles = acc.store_tile(&c, epi, (pm, pn), row0, sub_tiles);
        });
        if leader {
            wait_group::<0>();
        }
    }
}
