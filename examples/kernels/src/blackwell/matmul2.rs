//! Step 2 of the Blackwell matmul tutorial: the tiled epilogue.
use super::{acc_to_smem, ATile, BTile, ETile, EPI_N, TILE_K, TILE_M};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, tcgen05_mma_kn, Cta1, TensorCore};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::tmem::Tmem;
use kernel_device::Barriers;

/// Step 2 of the tutorial: the tiled epilogue.
///
/// This kernel works as follows: the TMA and MMA warps run as in
/// [`matmul1`]; the epilogue walks the output tile in `128 x EPI_N`
/// column chunks through two SMEM buffers: for chunk `ni`, thread 0 waits
/// until at most one TMA store still reads SMEM (so buffer `ni % 2` is
/// free), the warpgroup syncs, copies the chunk's accumulator columns from
/// TMEM into buffer `ni % 2` as f16, fences it (`commit_smem`) and syncs,
/// and thread 0 TMA-stores it, overlapping the next chunk's TMEM load with
/// this chunk's store.
///
/// Constraints: as [`matmul0`], and `TN % EPI_N == 0`.
#[kernel(block = warpgroups(1), arch = sm_100a, instances((128, 4), (256, 4)))]
pub fn matmul2<const TN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc: Tmem<f32, TILE_M, TN>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch] consumed: Barriers<STAGES, TensorCore>,
    #[scratch] mma_done: Barrier<TensorCore>,
) {
    const { assert!(TN % EPI_N == 0, "matmul2: TN must be a multiple of the epilogue tile EPI_N") };
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
    let leader = thread_linear() == 0;
    for ni in 0..TN / EPI_N {
        let buf = acc_smem.at(ni % 2);
        if leader {
            // The store that read this buffer two chunks ago is done reading.
            wait_group_read::<1>();
        }
        sync_threads();
        acc_to_smem::<TN, EPI_N, TILE_M, EPI_N, _>(&acc, ni * EPI_N, buf, 0);
        commit_smem();
        sync_threads();
        if leader {
            c.store(buf, pm * TILE_M as u32, pn * TN as u32 + (ni * EPI_N) as u32);
            commit_group();
        }
    }
    if leader {
        wait_group_read::<0>();
    }
}
