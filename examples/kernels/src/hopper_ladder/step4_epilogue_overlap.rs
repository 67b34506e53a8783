//! Step 4: the epilogue's stores overlap the next tile's mainloop.
//!
//! Diff from step 3 (`step3_persistent::matmul_persistent`): the
//! output tile leaves through two `BM x 64` SMEM sub-tiles (`EPI_N = 64`
//! columns, double-buffered) instead of one `BM x BN` tile: the compute
//! warpgroups write sub-tile `j` while the TMA store of sub-tile `j - 1`
//! reads the other buffer, and nobody waits for the last stores: they run
//! while the next tile's wgmmas do (the issuing thread only waits, before
//! reusing a buffer, for the store that read it two sub-tiles ago). The
//! SMEM saved (32 KB instead of 64 KB at `BM = 128`) buys a 4th stage.
//! This is the "cooperative kernel with a dedicated store path" of the
//! issue; the ping-pong variant is step 7.
use super::{check_tile, ATileOf, BTileOf, EpiTileOf, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Cols, WgmmaShape};
use kernel_device::Barriers;

/// `C = A · Bᵀ`, persistent, with an overlapped, sub-tiled epilogue.
///
/// This kernel works as follows:
/// 1. tiles, order and the memory warpgroup as step 3 ([`nd_loop`],
///    [`planar_snake`] with `GRID_W`, one thread loading A and B into
///    `STAGES` slots with a global step count);
/// 2. compute warpgroup `w` runs each tile's K steps on its `BM / 2 x BN`
///    block as step 3;
/// 3. epilogue, for each of the `BN / 64` column sub-tiles `j`: thread 0
///    waits until at most one of its TMA stores is still reading SMEM (so
///    the buffer of sub-tile `j` is free), the compute warpgroups meet,
///    write columns `64 j ..` of their rows as f16 into buffer
///    `e % 2` (`e` counts sub-tiles over all tiles), fence and meet again,
///    and thread 0 issues the sub-tile's TMA store without waiting;
/// 4. at the end thread 0 waits for all its stores.
///
/// Constraints: as step 3; SMEM `STAGES x (BM + BN) x 128 B + 2 x BM x 128 B`
/// <= 227 KB (`STAGES = 4` at `128 x 256`, 3 at `256 x 128`).
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 256, 4, 8), (256, 128, 3, 8), (128, 256, 4, 16), (128, 128, 4, 8), (128, 128, 4, 16)))]
pub fn matmul_epilogue_overlap<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
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
