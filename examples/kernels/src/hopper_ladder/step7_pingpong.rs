//! Step 7: ping-pong consumers (the other epilogue overlap).
//!
//! Diff from step 4 ([`super::step4_epilogue_overlap::matmul_epilogue_overlap`],
//! the cooperative kernel): there both compute warpgroups share each tile and
//! do its epilogue together, so the tensor cores idle while the accumulators
//! go to SMEM. Here (CUTLASS's ping-pong kernel) each compute warpgroup owns
//! whole `128 x BN` tiles (two `64 x BN` accumulators): warpgroup `w` takes
//! this CTA's tiles `w, w + 2, ..`, with its own stage slots, barriers and
//! producer thread, and an order barrier makes the two warpgroups' mainloops
//! alternate, so one runs its MMAs while the other runs its epilogue.
use kernel_ops_kernels::gemm::{store_block_cols, ATileOf, BTileOf, EpiTileOf, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_device::Barriers;

/// Rows of a ping-pong tile (one compute warpgroup's, as two 64-row blocks).
pub const PP_BM: usize = 128;

/// `C = A · Bᵀ`, persistent, ping-pong compute warpgroups.
///
/// This kernel works as follows:
/// 1. CTA `p` of `P` runs output tiles `p, p + P, ..` ([`nd_loop`],
///    [`planar_snake`] with `GRID_W`); its `t`-th tile goes to compute
///    warpgroup `t % 2`;
/// 2. warpgroup 2 (memory, 40 registers): thread `32 w` loads A (`128 x 64`)
///    and B (`BN x 64`) of warpgroup `w`'s tiles into its `STAGES` slots
///    (slots `w STAGES ..`), waiting on the slot's `consumed` barrier once
///    used;
/// 3. compute warpgroup `w` (232 registers), for its tile `t`: waits on
///    order barrier `w` (named barrier `2 + w`) until warpgroup `1 - w` has
///    issued tile `t - 1`'s MMAs; runs the K steps (one wgmma group in
///    flight, each slot released one step later, 128 arrivals); arrives on
///    order barrier `1 - w` if the CTA has a tile `t + 1`; then its
///    epilogue, alone (named barrier `4 + w`): for each 64-column sub-tile,
///    its leader waits until its previous TMA store has read its SMEM
///    sub-tile, the warpgroup writes the f16 sub-tile, fences, meets, and the
///    leader issues the store;
/// 4. every issuing thread waits for its stores at the end.
///
/// Constraints: `BN` 64/128 (two `64 x BN` f32 accumulators <= 128
/// registers); SMEM `2 x STAGES x (128 + BN) x 128 B + 2 x 16 KB` <= 227 KB;
/// grid `min(SMs, m_tiles * n_tiles)`; `m_tiles = ceil(M / 128)`, `n_tiles =
/// ceil(N / BN)`, `k_steps = ceil(K / 64) >= 1`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 3, 8), (128, 3, 16)))]
pub fn matmul_pingpong<const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATileOf<PP_BM>>,
    b: Tma<BTileOf<BN>>,
    c: Tma<EpiTileOf<PP_BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[[ATileOf<PP_BM>; STAGES]; 2]>,
    #[scratch] b_bufs: Smem<[[BTileOf<BN>; STAGES]; 2]>,
    #[scratch] epi: Smem<[EpiTileOf<PP_BM>; 2]>,
    #[scratch] loaded: Barriers<6>,
    #[scratch(arrivals = 128)] consumed: Barriers<6>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        assert!(BN == 64 || BN == 128, "matmul_pingpong: BN must be 64 or 128 (a warpgroup holds 128 x BN f32 accumulators)");
        assert!(STAGES >= 1 && STAGES <= 3, "matmul_pingpong: 1..=3 stages per warpgroup (6 barriers)");
    };
    let tiles = [m_tiles * n_tiles];
    let tile = |i: u32| planar_snake(i, (m_tiles, n_tiles), 0, GRID_W);
    // Slot `step % STAGES` of warpgroup `w`'s ring: barrier index and buffers.
    let slot = |w: u32, step: u32| (w as usize, (step % STAGES as u32) as usize);
    let bar_idx = |(w, s): (usize, usize)| w * STAGES + s;
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        let t = thread_in_warpgroup();
        if t == 0 || t == 32 {
            let w = t / 32;
            let mut step = 0u32;
            nd_loop(tiles, Collective::Blocks, |info| {
                if info.local_index % 2 != w {
                    return;
                }
                let (pm, pn) = tile(info.index[0]);
                for k in 0..k_steps {
                    let s = slot(w, step);
                    if step >= STAGES as u32 {
                        consumed.at(bar_idx(s)).wait();
                    }
                    let bar = loaded.at(bar_idx(s));
                    bar.arrive_expect_tx(Tma::<ATileOf<PP_BM>>::BYTES + Tma::<BTileOf<BN>>::BYTES);
                    // SAFETY: in bounds (w < 2, s < STAGES); the arrays of tiles keep their alignment.
                    let (a_s, b_s): (Smem<ATileOf<PP_BM>>, Smem<BTileOf<BN>>) = unsafe {
                        (a_bufs.cast_at((s.0 * STAGES + s.1) * <ATileOf<PP_BM> as TileLayout>::BYTES),
                         b_bufs.cast_at((s.0 * STAGES + s.1) * <BTileOf<BN> as TileLayout>::BYTES))
                    };
                    a.load(a_s, pm * PP_BM as u32, k * TK as u32, bar);
                    b.load(b_s, pn * BN as u32, k * TK as u32, bar);
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
        let mut step = 0u32;
        nd_loop(tiles, Collective::Blocks, |info| {
            if info.local_index % 2 != w {
                return;
            }
            let (pm, pn) = tile(info.index[0]);
            if info.local_index > 0 {
                // The other warpgroup has issued the previous tile's MMAs.
                my_order.sync();
            }
            let mut acc = [Acc::<BN>::undefined(), Acc::<BN>::undefined()];
            for k in 0..k_steps {
                let s = slot(w, step);
                loaded.at(bar_idx(s)).wait();
                // SAFETY: as the producer's.
                let (a_s, b_s): (Smem<ATileOf<PP_BM>>, Smem<BTileOf<BN>>) = unsafe {
                    (a_bufs.cast_at((s.0 * STAGES + s.1) * <ATileOf<PP_BM> as TileLayout>::BYTES),
                     b_bufs.cast_at((s.0 * STAGES + s.1) * <BTileOf<BN> as TileLayout>::BYTES))
                };
                acc[0].mma(a_s, 0, b_s, 0, k > 0);
                acc[1].mma(a_s, 64, b_s, 0, k > 0);
                wgmma_commit_group();
                wgmma_wait::<1>();
                if k > 0 {
                    consumed.at(bar_idx(slot(w, step - 1))).arrive();
                }
                step += 1;
            }
            if info.local_index + 1 < info.num_local_steps {
                // Let the other warpgroup issue the next tile's MMAs.
                other_order.arrive();
            }
            wgmma_wait::<0>();
            consumed.at(bar_idx(slot(w, step - 1))).arrive();
            for j in 0..BN / EPI_N {
                if leader {
                    wait_group_read::<0>();
                }
                epilogue.sync();
                store_block_cols(&mut acc[0], buf, 0, j);
                store_block_cols(&mut acc[1], buf, 64, j);
                commit_smem();
                epilogue.sync();
                if leader {
                    c.store(buf, pm * PP_BM as u32, pn * BN as u32 + (j * EPI_N) as u32);
                    commit_group();
                }
            }
        });
        if leader {
            wait_group::<0>();
        }
    }
}
