//! Step 7: ping-pong consumers (the other epilogue overlap).
//!
//! Diff from step 4 ([`super::step4_epilogue_overlap::matmul_epilogue_overlap`],
//! the cooperative kernel): there both compute warpgroups share each tile and
//! do its epilogue together, so the tensor cores idle while the accumulators
//! go to SMEM. Here (CUTLASS's ping-pong kernel) each compute warpgroup owns
//! whole `BM x BN` tiles (`128 x 128`: two `64 x 128` accumulators, or
//! `64 x 256`: one `m64n256` accumulator): warpgroup `w` takes
//! this CTA's tiles `w, w + 2, ..`, and an order barrier makes the two
//! warpgroups' mainloops alternate, so one runs its MMAs while the other
//! runs its epilogue. The producer fills ONE ring of stages in tile order,
//! as in step 4: the mainloops alternate, so the ring's steps are consumed
//! in order, one warpgroup's tile after the other's; each consumer passes
//! over the phases of the other's steps ([`kernel_device::BarrierRef::skip_phase`]).
//!
//! (The first version of this step gave each warpgroup its own 3-stage ring
//! and producer thread: a warpgroup then started each mainloop with only 3
//! steps of `128 x 128 x 64` loaded, about 1500 cycles of MMAs to hide the
//! next loads' latency, and the tensor pipe was 47 % busy at 0.62x cuBLAS.
//! The shared ring keeps all 6 stages ahead of whichever warpgroup runs.)
use kernel_ops_kernels::gemm::{store_block_cols, ATileOf, BTileOf, EpiTileOf, Stores, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};
use kernel_device::array::regs::unroll;
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_device::Barriers;


/// `C = A · Bᵀ`, persistent, ping-pong compute warpgroups.
///
/// This kernel works as follows:
/// 1. CTA `p` of `P` runs output tiles `p, p + P, ..` ([`nd_loop`],
///    [`planar_snake`] with `GRID_W`); its `t`-th tile goes to compute
///    warpgroup `t % 2`;
/// 2. warpgroup 2 (memory, 40 registers): one thread loads A (`128 x 64`)
///    and B (`BN x 64`) of every K step of every tile of the CTA, in order,
///    into slot `step % STAGES` of one ring, waiting on the slot's
///    `consumed` barrier once used (exactly step 4's producer);
/// 3. compute warpgroup `w` (232 registers), for its tile `t` (global steps
///    `t k_steps ..`): waits on order barrier `w` (named barrier `2 + w`)
///    until warpgroup `1 - w` has issued tile `t - 1`'s MMAs; runs the K
///    steps (one wgmma group in flight, each slot released one step later,
///    128 arrivals); arrives on order barrier `1 - w` if the CTA has a tile
///    `t + 1`; passes over the `loaded` phases of tile `t + 1`'s steps (the
///    other warpgroup's); then its epilogue, alone (named barrier `4 + w`):
///    for each 64-column sub-tile, its leader waits until its previous TMA
///    store has read its SMEM sub-tile, the warpgroup writes the f16
///    sub-tile, fences, meets, and the leader issues the store;
/// 4. every issuing thread waits for its stores at the end.
///
/// Constraints: `BM x BN` 128 x 64, 128 x 128, 64 x 128 or 64 x 256 (the
/// `BM x BN` f32 accumulators in <= 128 registers); SMEM `STAGES x (BM +
/// BN) x 128 B + 2 x BM x 128 B` <= 227 KB
/// (`STAGES = 6` at `128 x 128`, 5 at `64 x 256`); grid `min(SMs, m_tiles * n_tiles)`;
/// `m_tiles = ceil(M / BM)`, `n_tiles = ceil(N / BN)`, `k_steps =
/// ceil(K / 64) >= 1`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 128, 6, 8), (128, 128, 6, 16), (64, 256, 5, 8), (64, 256, 5, 16)))]
pub fn matmul_pingpong<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
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
    #[scratch(arrivals = 128)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        assert!(
            (BM == 128 && (BN == 64 || BN == 128)) || (BM == 64 && (BN == 128 || BN == 256)),
            "matmul_pingpong: BM x BN must be 128 x 64, 128 x 128, 64 x 128 or 64 x 256 (a warpgroup holds the BM x BN f32 accumulators, at most 128 registers, as BM / 64 blocks of 64 rows)"
        );
        assert!(STAGES >= 2, "matmul_pingpong: at least 2 stages (a slot is released one step after its MMAs)");
    };
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
        let w = warpgroup_idx();
        let leader = thread_in_warpgroup() == 0;
        let my_order = NamedBarrier::new(2 + w, 256);
        let other_order = NamedBarrier::new(2 + (1 - w), 256);
        let epilogue = NamedBarrier::new(4 + w, 128);
        let buf = epi.at(w as usize);
        // The ring's global step count: both warpgroups count every step,
        // their own and (passed over) the other's.
        let mut step = 0u32;
        let skip_tile = |step: &mut u32| {
            for _ in 0..k_steps {
                loaded.at(slot(*step)).skip_phase();
                *step += 1;
            }
        };
        nd_loop(tiles, Collective::Blocks, |info| {
            if info.local_index % 2 != w {
                // The other warpgroup's tile (counted only when it is not the
                // first: warpgroup 1 passes over tile 0 below, before its own).
                return;
            }
            if w == 1 && info.local_index == 1 {
                skip_tile(&mut step);
            }
            let (pm, pn) = tile(info.index[0]);
            if info.local_index > 0 {
                // The other warpgroup has issued the previous tile's MMAs.
                my_order.sync();
            }
            // One accumulator per 64-row block (the second is never touched
            // when BM = 64, and costs no registers).
            let mut acc = [Acc::<BN>::undefined(), Acc::<BN>::undefined()];
            for k in 0..k_steps {
                let s = slot(step);
                loaded.at(s).wait();
                unroll(BM / 64, |r| acc[r].mma(a_bufs.at(s), 64 * r, b_bufs.at(s), 0, k > 0));
                wgmma_commit_group();
                wgmma_wait::<1>();
                if k > 0 {
                    consumed.at(slot(step - 1)).arrive();
                }
                step += 1;
            }
            let last_slot = slot(step - 1);
            if info.local_index + 1 < info.num_local_steps {
                // Let the other warpgroup issue the next tile's MMAs; its
                // steps are passed over here.
                other_order.arrive();
                skip_tile(&mut step);
            }
            wgmma_wait::<0>();
            consumed.at(last_slot).arrive();
            for j in 0..BN / EPI_N {
                if leader {
                    wait_group_read::<0>();
                }
                epilogue.sync();
                unroll(BM / 64, |r| store_block_cols(&mut acc[r], buf, 64 * r, j, Stores::Matrix));
                commit_smem();
                epilogue.sync();
                if leader {
                    c.store(buf, pm * BM as u32, pn * BN as u32 + (j * EPI_N) as u32);
                    commit_group();
                }
            }
        });
        if leader {
            wait_group::<0>();
        }
    }
}
