//! Step 5 of the tutorial: a dedicated epilogue warpgroup.
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::collective::{pair_rank, pair_role, PairTma, PartitionedTma, TmemPair};
use kernel_device::grid::{nd_loop, Collective};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{raw::fence_after_thread_sync, raw::fence_before_thread_sync, tcgen05_commit_arrive, tcgen05_mma_kn, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::Barriers;

/// The epilogue warpgroup's named barrier (128 threads).
const EPILOGUE: NamedBarrier = NamedBarrier::new(1, 128);

/// Step 5 of the tutorial: [`super::matmul4`] with a dedicated
/// epilogue warpgroup and double-buffered TMEM accumulators.
///
/// This kernel works as follows (a diff from `matmul4`):
/// 1. two warpgroups: warpgroup 0 runs the TMA warp (0) and the MMA warp
///    (1) over all of the cluster's tiles, warpgroup 1 runs the epilogue of
///    each tile, so the tensor core computes tile `t + 1` while tile `t` is
///    stored;
/// 2. the collective accumulator has **twice** the columns (`AN = 2 PN`,
///    512 TMEM columns): tile `t` accumulates into half `t % 2`, completing
///    on `mma_done[t % 2]` (multicast to both CTAs);
/// 3. `store_done[2]` is a cluster barrier (2 arrivals: the epilogue
///    warpgroup of each CTA of the pair arrives on the barrier of **both**
///    CTAs once its TMEM loads of half `t % 2` completed); before the MMAs
///    of tile `t >= 2` the MMA warp of both CTAs waits on
///    `store_done[t % 2]` (only the leader issues; the peer waits so no
///    barrier gets two arrivals without a wait between), so the tensor core
///    never overwrites an accumulator half an epilogue still reads.
///
/// Constraints: as `matmul4`; `AN = 2 PN <= 512`.
#[kernel(block = warpgroups(2), cluster = (2, 1, 1), arch = sm_100a, instances((128, 256, 512, 4)))]
pub fn matmul5<const TN: usize, const PN: usize, const AN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    m_iters: u32,
    n_iters: u32,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc_slots: TmemPair<f32, TILE_M, AN>,
    #[scratch] loaded: Barriers<STAGES, PairTma>,
    #[scratch] consumed: Barriers<STAGES, TensorCore>,
    #[scratch] mma_done: Barriers<2, TensorCore>,
    #[scratch(arrivals = 2)] store_done: Barriers<2>,
) {
    const { assert!(PN == 2 * TN && AN == 2 * PN && PN % EPI_N == 0, "matmul5: PN must be 2 TN and a multiple of EPI_N, AN (the double-buffered accumulator) 2 PN") };
    let pair_leader = pair_role().leader();
    let pair0 = cluster_ctarank() & !1;
    let mut step = 0u32;
    if warpgroup_idx() == 0 {
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                nd_loop([m_iters, n_iters], Collective::Clusters, |info| {
                    let [pm, pn] = info.index;
                    for ki in 0..k_steps {
                        let slot = (step % STAGES as u32) as usize;
                        if step >= STAGES as u32 {
                            consumed.at(slot).wait();
                        }
                        let bar = loaded.at(slot);
                        if let Some(pl) = &pair_leader {
                            bar.arrive_expect_tx(pl, <Tma<ATile> as PartitionedTma<ATile>>::PAIR_BYTES + <Tma<BTile<TN>> as PartitionedTma<BTile<TN>>>::PAIR_BYTES);
                        }
                        a.load_partitioned::<0>(a_smem.at(slot), pm * 2 * TILE_M as u32, ki * TILE_K as u32, bar);
                        b.load_partitioned::<1>(b_smem.at(slot), ki * TILE_K as u32, pn * PN as u32, bar);
                        step += 1;
                    }
                });
            }
        }
        1 => {
            if elect_one() {
                nd_loop([m_iters, n_iters], Collective::Clusters, |info| {
                    let acc_slot = (info.local_index % 2) as usize;
                    let acc = acc_slots.cols_at::<PN>(acc_slot * PN);
                    if info.local_index >= 2 {
                        // Both epilogues finished reading this accumulator half.
                        store_done.at(acc_slot).wait_cluster();
                        fence_after_thread_sync();
                    }
                    if let Some(pl) = pair_leader {
                        for ki in 0..k_steps {
                            let slot = (step % STAGES as u32) as usize;
                            loaded.at(slot).wait(&pl);
                            tcgen05_mma_kn(&pl, &acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                            tcgen05_commit_arrive(&pl, consumed.at(slot));
                            step += 1;
                        }
                        tcgen05_commit_arrive(&pl, mma_done.at(acc_slot));
                    }
                });
            }
        }
        _ => {}
    }
    } else {
        {
            let leader = thread_in_warpgroup() == 0;
            let mut chunks = 0usize;
            nd_loop([m_iters, n_iters], Collective::Clusters, |info| {
                let [pm, pn] = info.index;
                let acc_slot = (info.local_index % 2) as usize;
                let acc = acc_slots.cols_at::<PN>(acc_slot * PN);
                mma_done.at(acc_slot).wait();
                let out_row = (2 * pm + pair_rank()) * TILE_M as u32;
                for ni in 0..PN / EPI_N {
                    let buf = acc_smem.at(chunks % 2);
                    if leader {
                        wait_group_read::<1>();
                    }
                    EPILOGUE.sync();
                    acc_to_smem::<PN, EPI_N, TILE_M, EPI_N, _>(&acc, ni * EPI_N, buf, 0);
                    commit_smem();
                    EPILOGUE.sync();
                    if leader {
                        c.store(buf, out_row, pn * PN as u32 + (ni * EPI_N) as u32);
                        commit_group();
                    }
                    chunks += 1;
                }
                // acc_to_smem's loads completed (their wait yielded the
                // registers) before we signal.
                fence_before_thread_sync();
                EPILOGUE.sync();
                if leader {
                    store_done.at(acc_slot).arrive_cluster(pair0);
                    store_done.at(acc_slot).arrive_cluster(pair0 + 1);
                }
            });
            if leader {
                wait_group_read::<0>();
            }
        }
    }
}
