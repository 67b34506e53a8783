//! Step 6 of the tutorial: grid tiling.
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::collective::{pair_rank, pair_role, PairTma, PartitionedTma, TmemPair};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{raw::fence_after_thread_sync, raw::fence_before_thread_sync, tcgen05_commit_arrive, tcgen05_mma_kn, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::Barriers;

/// The epilogue warpgroup's named barrier (128 threads).
const EPILOGUE: NamedBarrier = NamedBarrier::new(1, 128);

/// Step 6 of the tutorial: [`super::matmul5`] with its output
/// tiles visited in `planar_snake` order (grid tiling).
///
/// This kernel works as follows (a diff from `matmul5`): every role's
/// `nd_loop` runs over the 1-D space of `m_iters * n_iters` tiles (still
/// split over the clusters), and maps each linear index to its tile with
/// `planar_snake(lin, (m_iters, n_iters), grid_minor_dim, grid_tile_width)`
/// (Pallas's helper): `grid_tile_width` indices along the minor dimension
/// are visited together, and every other band of tiles is walked backwards,
/// so tiles computed at the same time share operand tiles in L2. The
/// barriers, TMEM double-buffering and `store_done` protocol are
/// `matmul5`'s.
///
/// Constraints: as `matmul5`; `grid_minor_dim` 0 (M) or 1 (N),
/// `grid_tile_width >= 1`.
#[kernel(block = warpgroups(2), cluster = (2, 1, 1), arch = sm_100a, instances((128, 256, 512, 4)))]
pub fn matmul6<const TN: usize, const PN: usize, const AN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    m_iters: u32,
    n_iters: u32,
    k_steps: u32,
    grid_minor_dim: u32,
    grid_tile_width: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc_slots: TmemPair<f32, TILE_M, AN>,
    #[scratch] loaded: Barriers<STAGES, PairTma>,
    #[scratch] consumed: Barriers<STAGES, TensorCore>,
    #[scratch] mma_done: Barriers<2, TensorCore>,
    #[scratch(arrivals = 2)] store_done: Barriers<2>,
) {
    const { assert!(PN == 2 * TN && AN == 2 * PN && PN % EPI_N == 0, "matmul6: PN must be 2 TN and a multiple of EPI_N, AN (the double-buffered accumulator) 2 PN") };
    let pair_leader = pair_role().leader();
    let pair0 = cluster_ctarank() & !1;
    let mut step = 0u32;
    let tiles = [m_iters * n_iters];
    let tile = |lin: u32| planar_snake(lin, (m_iters, n_iters), grid_minor_dim, grid_tile_width);
    if warpgroup_idx() == 0 {
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                nd_loop(tiles, Collective::Clusters, |info| {
                    let (pm, pn) = tile(info.index[0]);
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
                nd_loop(tiles, Collective::Clusters, |info| {
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
            nd_loop(tiles, Collective::Clusters, |info| {
                let (pm, pn) = tile(info.index[0]);
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
