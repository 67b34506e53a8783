//! Step 3: a persistent grid with a tile scheduler.
//!
//! Diff from step 2 ([`super::step2_big_tiles::matmul_big_tiles`]): the grid
//! is one CTA per SM (the host reads the SM count from the device), and each
//! CTA walks its share of the output tiles with [`nd_loop`], in
//! [`planar_snake`] order (`GRID_W` M tiles per band: Pallas's
//! `grid_tile_width`). The pipeline runs on across tiles: the memory thread
//! and the compute warpgroups count K steps globally, so the loads of the
//! next tile start while the compute warpgroups finish the current one, and
//! no CTA launch or barrier initialization happens per tile. The output tile
//! gets its own SMEM (the stage buffers are busy with the next tile), so
//! `STAGES` is 3 at `128 x 256`.
use kernel_ops_kernels::gemm::{check_tile, ATileOf, BTileOf, OTileOf, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, MEMORY_REGS, TK};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Cols, WgmmaShape};
use kernel_device::Barriers;

/// `C = A · Bᵀ`, persistent, `BM x BN` tiles in planar-snake order.
///
/// This kernel works as follows:
/// 1. CTA `p` of `P` (the grid, at most one per SM) runs the tiles
///    `p, p + P, ..` of the `m_tiles * n_tiles` output tiles ([`nd_loop`]);
///    tile `i` is `planar_snake(i, (m_tiles, n_tiles), 0, GRID_W)`;
/// 2. one thread of warpgroup 2 (memory, 40 registers) issues, for every
///    tile and K step, the TMA loads of A (`BM x 64`) and B (`BN x 64`)
///    into slot `step % STAGES` (`step` counts over all tiles), waiting on
///    `consumed` once the slot has been used;
/// 3. compute warpgroup `w` (232 registers) runs each tile's K steps on its
///    `BM / 2 x BN` block, keeps one wgmma group in flight, releases each
///    slot one step later, and the tile's last slot after `wgmma_wait::<0>`;
/// 4. epilogue: the compute warpgroups meet (the previous tile's store has
///    read `c_smem`), write their rows as f16, meet again, and one thread
///    TMA-stores the tile and waits until the store has read SMEM.
///
/// Constraints: as step 2 for `BM`, `BN`; SMEM `STAGES x (BM + BN) x 128 B
/// + BM x BN x 2 B` <= 227 KB; grid `min(SMs, m_tiles * n_tiles)`;
/// `m_tiles = ceil(M / BM)`, `n_tiles = ceil(N / BN)`, `k_steps = ceil(K /
/// 64) >= 1`; `GRID_W >= 1`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 256, 3, 8), (256, 128, 3, 8), (128, 256, 3, 16)))]
pub fn matmul_persistent<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATileOf<BM>>,
    b: Tma<BTileOf<BN>>,
    c: Tma<OTileOf<BM, BN>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATileOf<BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileOf<BN>; STAGES]>,
    #[scratch] c_smem: Smem<OTileOf<BM, BN>>,
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
        let mut step = 0u32;
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
            // The previous tile's TMA store has read `c_smem` (its issuer
            // waited before arriving here).
            COMPUTE_BARRIER.sync();
            acc.store_f16(c_smem, row0);
            commit_smem();
            COMPUTE_BARRIER.sync();
            if thread_linear() == 0 {
                c.store(c_smem, pm * BM as u32, pn * BN as u32);
                commit_group();
                wait_group_read::<0>();
            }
        });
        if thread_linear() == 0 {
            wait_group::<0>();
        }
    }
}
