//! Step 1 of the Blackwell matmul tutorial: warp specialization.
use super::{acc_to_smem, ATile, BTile, OTile, TILE_K, TILE_M};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, tcgen05_mma_kn, Cta1, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::tmem::Tmem;
use kernel_device::Barriers;

/// Step 1 of the tutorial: warp specialization inside one warpgroup.
///
/// This kernel works as follows:
/// 1. warp 0 (the TMA warp; one lane, `elect_one`) loads A's and B's tiles
///    of step `ki` into slot `ki % STAGES`, completing on `loaded[slot]`;
///    from step `STAGES` on it first waits on `consumed[slot]` (the MMAs
///    that read the slot completed);
/// 2. warp 1 (the MMA warp; one lane) waits on `loaded[slot]`, issues the
///    step's MMAs and commits them to `consumed[slot]`; after the last step
///    it commits to `mma_done`;
/// 3. warps 2 and 3 have no role; all four warps then wait on `mma_done`
///    and run the epilogue of [`matmul0`].
///
/// Constraints: as [`matmul0`].
#[kernel(block = warpgroups(1), arch = sm_100a, instances((128, 4), (256, 3)))]
pub fn matmul1<const TN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<OTile<TN>>,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] c_smem: Smem<OTile<TN>>,
    #[scratch] acc: Tmem<f32, TILE_M, TN>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch] consumed: Barriers<STAGES, TensorCore>,
    #[scratch] mma_done: Barrier<TensorCore>,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
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
                    bar.arrive_expect_tx(Tma::<ATile>::BYTES + Tma::<BTile<TN>>::BYTES);
                    a.load(a_smem.at(slot), pm * TILE_M as u32, ki * TILE_K as u32, bar);
                    b.load(b_smem.at(slot), ki * TILE_K as u32, pn * TN as u32, bar);
                }
            }
        }
        1 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    loaded.at(slot).wait();
                    tcgen05_mma_kn(&Cta1, &acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                    tcgen05_commit_arrive(&Cta1, consumed.at(slot));
                }
                tcgen05_commit_arrive(&Cta1, mma_done.as_ref());
            }
        }
        _ => {}
    }
    mma_done.wait();
    acc_to_smem::<TN, TN, TILE_M, TN, _>(&acc, 0, c_smem, 0);
    commit_smem();
    sync_threads();
    if thread_linear() == 0 {
        c.store(c_smem, pm * TILE_M as u32, pn * TN as u32);
        commit_group();
        wait_group_read::<0>();
    }
}

