//! Step 0 of the Blackwell matmul tutorial: the basic kernel.
use super::{acc_to_smem, ATile, BTile, OTile, TILE_M};
use kernel_device::pipeline::{emit_pipeline, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, tcgen05_mma_kn, Cta1, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::tmem::Tmem;
use kernel_device::Barriers;

/// Step 0 of the tutorial: a basic kernel, `emit_pipeline` + tcgen05.
///
/// This kernel works as follows:
/// 1. CTA `(i, j)` owns output tile `(i, j)` (`128 x TN`), accumulated in
///    `acc`, a `128 x TN` f32 TMEM tile (`#[kernel]` allocates it);
/// 2. `emit_pipeline` walks K in steps of 64 with `STAGES` SMEM slots
///    (thread 0 issues the TMA loads); at step `ki` thread 0 issues the
///    step's MMAs (4 x `tcgen05.mma` K = 16, B MN-major) and commits them to
///    `consumed[ki % 2]`; then every thread waits on `consumed[1 - ki % 2]`,
///    i.e. for the *previous* step's MMAs, which is why the pipeline runs
///    with `delay_release = 1` (a slot is refilled only once the MMAs that
///    read it completed); `consumed[1]` is primed with one arrival so the
///    first wait succeeds;
/// 3. after the last step every thread waits for the final MMAs, loads its
///    row of the accumulator from TMEM (`tcgen05.ld` 32x32b, its warp's lane
///    quarter), converts it to f16 into the swizzled SMEM tile, and thread 0
///    TMA-stores the tile.
///
/// Constraints: `M % 128 == 0`, `N % TN == 0`, `K % 64 == 0`, `K >= 64`;
/// grid `(M / 128, N / TN)`; `k_steps = K / 64`; `STAGES >= 2`.
#[kernel(block = warpgroups(1), arch = sm_100a, instances((128, 4), (256, 2)))]
pub fn matmul0<const TN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<OTile<TN>>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<TN>; STAGES]>,
    #[scratch] c_smem: Smem<OTile<TN>>,
    #[scratch] acc: Tmem<f32, TILE_M, TN>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch] consumed: Barriers<2, TensorCore>,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
    let leader = thread_linear() == 0;
    // Make sure the wait of step 0 succeeds.
    if leader {
        consumed.at(1).arrive();
    }
    emit_pipeline(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (pm, k)), BlockSpec::new(b, b_bufs, |k| (k, pn))),
        &loaded,
        1,
        |ki, (a_tile, b_tile)| {
            let arrive_slot = (ki % 2) as usize;
            if leader {
                tcgen05_mma_kn(&Cta1, &acc, a_tile, b_tile, ki > 0);
                tcgen05_commit_arrive(&Cta1, consumed.at(arrive_slot));
            }
            consumed.at(1 - arrive_slot).wait();
        },
    );
    consumed.at(((k_steps - 1) % 2) as usize).wait();
    acc_to_smem::<TN, TN, TILE_M, TN, _>(&acc, 0, c_smem, 0);
    commit_smem();
    sync_threads();
    if leader {
        c.store(c_smem, pm * TILE_M as u32, pn * TN as u32);
        commit_group();
        wait_group_read::<0>();
    }
}

