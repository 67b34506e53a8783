//! Step 4 of the tutorial: a persistent kernel.
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::collective::{pair_rank, pair_role, PairTma, PartitionedTma, TmemPair};
use kernel_device::grid::{nd_loop, Collective};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{raw::fence_after_thread_sync, raw::fence_before_thread_sync, tcgen05_commit_arrive, tcgen05_mma_kn, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};

/// Step 4 of the tutorial: [`super::matmul3`] made persistent.
///
/// This kernel works as follows (a diff from `matmul3`):
/// 1. the grid is `SMs / 2` clusters of 2 (the host reads the SM count),
///    not one cluster per output tile; `nd_loop((m_iters, n_iters),
///    Collective::Clusters)` hands each cluster the tiles `c, c + C, ..`
///    (both CTAs of a cluster get the same tiles);
/// 2. per tile the warps run `matmul3`'s roles; the TMA warp skips its wait
///    on `consumed[slot]` only for the first `STAGES` steps of its **first**
///    tile (`local_index == 0`): later tiles reuse slots the previous tile's
///    MMAs read;
/// 3. every thread's TMEM loads complete (`acc_to_smem` gets their
///    registers from `tcgen05.wait::ld`) and are fenced
///    (`tcgen05.fence::before_thread_sync` before the epilogue's barrier,
///    `fence::after_thread_sync` in the MMA thread before the next tile's
///    first MMA) before the next tile's MMAs overwrite the accumulator;
///    `mma_done` completes once
///    per tile. The next MMAs wait for the next operands, which the TMA warp
///    of each CTA loads as soon as it passes the epilogue's last
///    `sync_threads`: so the wait comes *before* that barrier (the
///    tutorial's step 4 waits after the epilogue loop; with a TMA warp that
///    may run ahead of the other warps, the emulator reports that placement
///    as "TMEM overwritten while an in-flight tcgen05.ld reads it", in the
///    peer CTA as in the leader).
///
/// Constraints: as `matmul3`; `m_iters = M / 256`, `n_iters = N / PN`.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a, instances((128, 256, 4)))]
pub fn matmul4<const TN: usize, const PN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    m_iters: u32,
    n_iters: u32,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc: TmemPair<f32, TILE_M, PN>,
    #[scratch] loaded: Barriers<STAGES, PairTma>,
    #[scratch] consumed: Barriers<STAGES, TensorCore>,
    #[scratch] mma_done: Barrier<TensorCore>,
) {
    const { assert!(PN == 2 * TN && PN % EPI_N == 0, "matmul4: PN (the pair's tile N) must be 2 TN and a multiple of EPI_N") };
    let pair_leader = pair_role().leader();
    let leader = thread_linear() == 0;
    nd_loop([m_iters, n_iters], Collective::Clusters, |info| {
        let [pm, pn] = info.index;
        #[warp_specialize(warps)]
        match warp_in_warpgroup() {
            0 => {
                if elect_one() {
                    for ki in 0..k_steps {
                        let slot = (ki % STAGES as u32) as usize;
                        if ki >= STAGES as u32 || info.local_index > 0 {
                            consumed.at(slot).wait();
                        }
                        let bar = loaded.at(slot);
                        if let Some(pl) = &pair_leader {
                            bar.arrive_expect_tx(pl, <Tma<ATile> as PartitionedTma<ATile>>::PAIR_BYTES + <Tma<BTile<TN>> as PartitionedTma<BTile<TN>>>::PAIR_BYTES);
                        }
                        a.load_partitioned::<0>(a_smem.at(slot), pm * 2 * TILE_M as u32, ki * TILE_K as u32, bar);
                        b.load_partitioned::<1>(b_smem.at(slot), ki * TILE_K as u32, pn * PN as u32, bar);
                    }
                }
            }
            1 => {
                if let (Some(pl), true) = (pair_leader, elect_one()) {
                    for ki in 0..k_steps {
                        let slot = (ki % STAGES as u32) as usize;
                        loaded.at(slot).wait(&pl);
                        if ki == 0 {
                            // The previous tile's TMEM loads (fenced before
                            // the epilogue's barrier) come before this MMA.
                            fence_after_thread_sync();
                        }
                        tcgen05_mma_kn(&pl, &acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                        tcgen05_commit_arrive(&pl, consumed.at(slot));
                    }
                    tcgen05_commit_arrive(&pl, mma_done.as_ref());
                }
            }
            _ => {}
        }
        mma_done.wait();
        let out_row = (2 * pm + pair_rank()) * TILE_M as u32;
        for ni in 0..PN / EPI_N {
            let buf = acc_smem.at(ni % 2);
            if leader {
                wait_group_read::<1>();
            }
            sync_threads();
            acc_to_smem::<PN, EPI_N, TILE_M, EPI_N, _>(&acc, ni * EPI_N, buf, 0);
            // acc_to_smem's loads are complete (their registers came out
            // of tcgen05.wait::ld), and fenced, so ordered before this
            // barrier and the next tile's MMAs (see step 3 above).
            commit_smem();
            fence_before_thread_sync();
            sync_threads();
            if leader {
                c.store(buf, out_row, pn * PN as u32 + (ni * EPI_N) as u32);
                commit_group();
            }
        }
    });
    if leader {
        wait_group_read::<0>();
    }
}
