//! Step 3 of the tutorial: collective (2-CTA) MMA.
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::collective::{pair_role, PairTma, PartitionedTma, TmemPair};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, tcgen05_mma_kn, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};

/// Step 3 of the tutorial: a cluster of 2 CTAs computes one `256 x PN`
/// output tile with collective MMAs.
///
/// This kernel works as follows (a diff from [`super::matmul2`]):
/// 1. the grid is `(2 M / 256, N / PN)` CTAs in clusters of `(2, 1, 1)`:
///    the pair `(x / 2, y)` owns the `256 x PN` output tile; CTA rank 0 of
///    the pair is the **leader**;
/// 2. the TMA warp of **both** CTAs loads its half of each operand
///    (`load_partitioned`: A split along rows, 128 each; B split along
///    columns, `TN = PN / 2` each) into its own SMEM; both halves complete
///    on the **leader's** `loaded[slot]`, which expects both halves' bytes
///    (the peer never waits on its own `loaded`);
/// 3. only the leader's MMA warp runs: it waits on `loaded[slot]` and issues
///    `tcgen05.mma.cta_group::2` (M = 256, N = PN) reading both CTAs' SMEM;
///    its commits are **multicast** to `consumed[slot]` (and at the end to
///    `mma_done`) of both CTAs, so each CTA's TMA warp knows when its slot
///    is free and each epilogue when its accumulator rows are final;
/// 4. the accumulator is collective TMEM (`TmemPair`, `128 x PN` per CTA:
///    rows 0..128 of the pair's tile in the leader, 128..256 in the peer);
///    each CTA stores its 128 rows with `matmul2`'s tiled epilogue.
///
/// Constraints: `M % 256 == 0`, `N % PN == 0`, `K % 64 == 0`, `K >= 64`;
/// `PN = 2 TN`, `PN % EPI_N == 0`, `STAGES >= 2`.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a, instances((128, 256, 4)))]
pub fn matmul3<const TN: usize, const PN: usize, const STAGES: usize>(
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
) {
    const { assert!(PN == 2 * TN && PN % EPI_N == 0, "matmul3: PN (the pair's tile N) must be 2 TN and a multiple of EPI_N") };
    let (pm, pn) = (block_idx().x / 2, block_idx().y);
    let pair_leader = pair_role().leader();
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    if ki >= STAGES as u32 {
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
                    tcgen05_mma_kn(&pl, &acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                    tcgen05_commit_arrive(&pl, consumed.at(slot));
                }
                tcgen05_commit_arrive(&pl, mma_done.as_ref());
            }
        }
        _ => {}
    }
    mma_done.wait();
    let leader = thread_linear() == 0;
    let out_row = block_idx().x * TILE_M as u32;
    for ni in 0..PN / EPI_N {
        let buf = acc_smem.at(ni % 2);
        if leader {
            wait_group_read::<1>();
        }
        sync_threads();
        acc_to_smem::<PN, EPI_N, TILE_M, EPI_N, _>(&acc, ni * EPI_N, buf, 0);
        commit_smem();
        sync_threads();
        if leader {
            c.store(buf, out_row, pn * PN as u32 + (ni * EPI_N) as u32);
            commit_group();
        }
    }
    if leader {
        wait_group_read::<0>();
    }
}
