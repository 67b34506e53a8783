//! Planted bugs of the collective (2-CTA) protocol, each with its race-free
//! twin: instance `BUG = false` is the correct kernel, `BUG = true` the
//! kernel with the bug. The emulator must report every bug (under every
//! schedule tested) and run every twin cleanly.
//!
//! * [`collective_copy`] with `MODE = 1`: the peer CTA does not issue its
//!   half of a partitioned copy (the leader's barrier never gets the bytes:
//!   a deadlock naming the wait);
//! * `MODE = 2`: the peer CTA refills an SMEM slot without waiting on
//!   `consumed` (SMEM reused before the collective MMA that reads the
//!   peer's half finished: a race / "TMA overwrites SMEM still read by an
//!   in-flight tcgen05.mma");
//! * `MODE = 3`: the MMA's commits are not multicast (plain `cta_group::2`
//!   commit to the leader only... here: arrive on the leader's barriers
//!   only): the peer's epilogue waits forever on `mma_done`;
//! * [`store_done_skipped`] with `BUG = true`: matmul5's MMA warp does not
//!   wait on `store_done` before reusing an accumulator half: TMEM written
//!   by the MMA while the epilogue may still read it (a race on tensor
//!   memory).
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::collective::{pair_rank, pair_role, PairBarriers, tcgen05_commit_arrive_pair, tcgen05_mma_kn_pair, PartitionedTma, TmemPair};
use kernel_device::grid::{nd_loop, Collective};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{raw::fence_after_thread_sync, raw::fence_before_thread_sync, tcgen05_commit_arrive, TcBarrier, TcBarriers};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::tmem::wait_load_tmem;
use kernel_device::Barriers;

/// The pair tile's B half.
const TN: usize = 64;
/// The pair tile's N.
const PN: usize = 128;
/// Two stages, so a 4-step K loop reuses every slot.
const STAGES: usize = 2;

/// matmul3 at `256 x 128` pair tiles with 2 stages; `MODE` 0 is the
/// correct kernel, 1-3 plant the bugs listed in the module docs.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a, instances((0), (1), (2), (3)))]
pub fn collective_copy<const MODE: u32>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc: TmemPair<f32, TILE_M, PN>,
    #[scratch] loaded: PairBarriers<STAGES>,
    #[scratch] consumed: TcBarriers<STAGES>,
    #[scratch] mma_done: TcBarrier,
) {
    let (pm, pn) = (block_idx().x / 2, block_idx().y);
    let pair_leader = pair_role().leader();
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    // BUG 2: the peer refills a slot without waiting for the MMA.
                    if ki >= STAGES as u32 && !(MODE == 2 && pair_leader.is_none()) {
                        consumed.at(slot).wait();
                    }
                    let bar = loaded.at(slot);
                    if let Some(pl) = &pair_leader {
                        bar.arrive_expect_tx(pl, <Tma<ATile> as PartitionedTma<ATile>>::PAIR_BYTES + <Tma<BTile<TN>> as PartitionedTma<BTile<TN>>>::PAIR_BYTES);
                    }
                    a.load_partitioned::<0>(a_smem.at(slot), pm * 2 * TILE_M as u32, ki * TILE_K as u32, bar);
                    // BUG 1: the peer does not issue its half of B.
                    if !(MODE == 1 && pair_leader.is_none()) {
                        b.load_partitioned::<1>(b_smem.at(slot), ki * TILE_K as u32, pn * PN as u32, bar);
                    }
                }
            }
        }
        1 => {
            if let (Some(pl), true) = (pair_leader, elect_one()) {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    loaded.at(slot).wait(&pl);
                    tcgen05_mma_kn_pair(&pl, &acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                    // BUG 3: commits reach the leader's barriers only.
                    if MODE == 3 {
                        tcgen05_commit_arrive_leader_only(consumed.at(slot));
                    } else {
                        tcgen05_commit_arrive_pair(&pl, consumed.at(slot));
                    }
                }
                if MODE == 3 {
                    tcgen05_commit_arrive_leader_only(mma_done.as_ref());
                } else {
                    tcgen05_commit_arrive_pair(&pl, mma_done.as_ref());
                }
            }
        }
        _ => {}
    }
    mma_done.wait();
    let leader = thread_linear() == 0;
    for ni in 0..PN / EPI_N {
        let buf = acc_smem.at(ni % 2);
        if leader {
            wait_group_read::<1>();
        }
        sync_threads();
        acc_to_smem::<PN, EPI_N, TILE_M, EPI_N>(&acc.local(), ni * EPI_N, buf, 0);
        commit_smem();
        sync_threads();
        if leader {
            c.store(buf, block_idx().x * TILE_M as u32, pn * PN as u32 + (ni * EPI_N) as u32);
            commit_group();
        }
    }
    wait_load_tmem();
    if leader {
        wait_group_read::<0>();
    }
}

/// The bug of MODE 3: a commit multicast to the leader only (mask of rank
/// 0 alone) instead of both CTAs of the pair.
#[inline(always)]
#[track_caller]
fn tcgen05_commit_arrive_leader_only(bar: kernel_device::tcgen05::TcBarrierRef<'_>) {
    // SAFETY: a scratch barrier; the mask names this cluster's rank 0.
    unsafe { kernel_device::collective::raw::commit_multicast(bar.smem_addr(), 0b01) }
    let _ = tcgen05_commit_arrive;
}

/// matmul5's protocol at `256 x 128` pair tiles; with `BUG` the MMA warp
/// skips its `store_done` wait before reusing an accumulator half.
#[kernel(block = warpgroups(2), cluster = (2, 1, 1), arch = sm_100a, instances((false), (true)))]
pub fn store_done_skipped<const BUG: bool>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    m_iters: u32,
    n_iters: u32,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc_slots: TmemPair<f32, TILE_M, 256>,
    #[scratch] loaded: PairBarriers<STAGES>,
    #[scratch] consumed: TcBarriers<STAGES>,
    #[scratch] mma_done: TcBarriers<2>,
    #[scratch(arrivals = 2)] store_done: Barriers<2>,
) {
    const EPI: NamedBarrier = NamedBarrier::new(1, 128);
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
                        // BUG: no wait for the epilogues before reusing the half.
                        if info.local_index >= 2 && !BUG {
                            store_done.at(acc_slot).wait_cluster();
                            fence_after_thread_sync();
                        }
                        if let Some(pl) = pair_leader {
                            for ki in 0..k_steps {
                                let slot = (step % STAGES as u32) as usize;
                                loaded.at(slot).wait(&pl);
                                tcgen05_mma_kn_pair(&pl, &acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                                tcgen05_commit_arrive_pair(&pl, consumed.at(slot));
                                step += 1;
                            }
                            tcgen05_commit_arrive_pair(&pl, mma_done.at(acc_slot));
                        }
                    });
                }
            }
            _ => {}
        }
    } else {
        let leader = thread_in_warpgroup() == 0;
        let mut chunks = 0usize;
        nd_loop([m_iters, n_iters], Collective::Clusters, |info| {
            let [pm, pn] = info.index;
            let acc_slot = (info.local_index % 2) as usize;
            let acc = acc_slots.cols_at::<PN>(acc_slot * PN);
            mma_done.at(acc_slot).wait();
            for ni in 0..PN / EPI_N {
                let buf = acc_smem.at(chunks % 2);
                if leader {
                    wait_group_read::<1>();
                }
                EPI.sync();
                acc_to_smem::<PN, EPI_N, TILE_M, EPI_N>(&acc.local(), ni * EPI_N, buf, 0);
                commit_smem();
                EPI.sync();
                if leader {
                    c.store(buf, (2 * pm + pair_rank()) * TILE_M as u32, pn * PN as u32 + (ni * EPI_N) as u32);
                    commit_group();
                }
                chunks += 1;
            }
            wait_load_tmem();
            fence_before_thread_sync();
            EPI.sync();
            // With the bug the barrier is never waited: do not arrive twice
            // without a wait in between.
            if leader && !BUG {
                store_done.at(acc_slot).arrive_cluster(pair0);
                store_done.at(acc_slot).arrive_cluster(pair0 + 1);
            }
        });
        if leader {
            wait_group_read::<0>();
        }
    }
}
