//! The tutorial's kernel scheduled with cluster launch control.
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::collective::{pair_rank, pair_role, PairTma, PartitionedTma, TmemPair};
use kernel_device::clc::{dynamic_scheduling_loop, ClcResponse};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{raw::fence_after_thread_sync, raw::fence_before_thread_sync, tcgen05_commit_arrive, tcgen05_mma_kn, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};

/// [`super::matmul4`] scheduled dynamically with cluster launch
/// control (Pallas's `dynamic_scheduling_loop`, as in its
/// `blackwell_matmul_mgpu.py`).
///
/// This kernel works as follows (a diff from `matmul4`):
/// 1. the grid is one cluster of 2 per `256 x PN` output tile, as in
///    `matmul3` (not `SMs / 2` clusters): the hardware starts as many as fit;
/// 2. the tile loop is `dynamic_scheduling_loop` instead of `nd_loop`: a
///    cluster first computes its own tile; while it does, thread 0 of its
///    rank-0 CTA issues `clusterlaunchcontrol.try_cancel` (multicast: the
///    16-byte response lands in `clc` of both CTAs and completes on each
///    CTA's `clc_bar`); if a not-yet-started cluster was canceled, this
///    cluster computes the canceled cluster's tile next, else it exits. So
///    a cluster that finishes early steals work, and the tail of the grid
///    balances itself;
/// 3. everything inside an iteration is `matmul4`'s (`local_index > 0`
///    makes the TMA warp wait for the previous tile's MMAs before reusing
///    a slot; the epilogue's TMEM loads complete inside `acc_to_smem`, before
///    its last barrier, so before the next tile's MMAs).
///
/// Constraints: as `matmul3`; grid `(2 M / 256, N / PN)`.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a, instances((128, 256, 4)))]
pub fn matmul_dynamic<const TN: usize, const PN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc: TmemPair<f32, TILE_M, PN>,
    #[scratch] loaded: Barriers<STAGES, PairTma>,
    #[scratch] consumed: Barriers<STAGES, TensorCore>,
    #[scratch] mma_done: Barrier<TensorCore>,
    #[scratch] clc: ClcResponse,
    #[scratch] clc_bar: Barrier,
) {
    const { assert!(PN == 2 * TN && PN % EPI_N == 0, "matmul_dynamic: PN (the pair's tile N) must be 2 TN and a multiple of EPI_N") };
    let pair_leader = pair_role().leader();
    let leader = thread_linear() == 0;
    dynamic_scheduling_loop(&clc, clc_bar.as_ref(), |info| {
        let (pm, pn) = (info.index.x, info.index.y);
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
