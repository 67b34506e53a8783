//! The split-K matmul for shapes with few output tiles (the decode rows
//! of a model, `M` = 64-256 tokens, against a weight of thousands of rows
//! and columns): [`matmul_splitk`]. With `M = 64` and `N = 4096` there are
//! 32 tiles of `128 x 128`, so a kernel with one CTA per tile leaves
//! three quarters of an H200's 132 SMs idle and reads the weight at a
//! quarter of the memory's rate; splitting each tile's K steps over
//! `splits` CTAs fills the GPU.
//!
//! The partial tiles are summed without a second kernel and without
//! atomics on the data: every CTA writes its `f32` partial tile to the
//! workspace and counts itself in on its tile's counter (a
//! [`Semaphore`](kernel_device::Semaphore), acquire-release at GPU scope);
//! the CTA that completes the count reads all `splits` partials of the
//! tile back in split order (its own included), so the sum's order, and
//! the result, never depend on which CTA came last, converts it and stores
//! the tile with the plain kernels' epilogue, and resets the counter for
//! the next launch. This is the decode attention's "last CTA combines"
//! step (`crate::decode`) applied to a GEMM.
use crate::gemm::{store_block_cols, ATile, BTile, EpiTile, GemmElem, Stores, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};
use kernel_device::array::{Array, ArrayLayout, Wgmma};
use kernel_device::fence::fence_acq_rel_gpu;
use kernel_device::pipeline::Ring;
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{pin_entry_registers, setmaxnreg_dec, setmaxnreg_inc, Acc, Cols, WgmmaShape};
use kernel_device::array::regs::unroll;
use kernel_device::Barriers;
use kernel_device::{bf16, f16};

/// The compute threads of a split-K CTA (two warpgroups): the partial
/// tile's layout in the workspace is by thread.
pub const SPLITK_THREADS: usize = 256;

/// The K steps of split `split` of `splits`: `(first, count)`, the
/// `k_steps` dealt as evenly as possible (the first `k_steps % splits`
/// splits take one more). Every split has at least one step when
/// `splits <= k_steps`.
#[inline(always)]
pub fn split_steps(k_steps: u32, splits: u32, split: u32) -> (u32, u32) {
    let (q, r) = (k_steps / splits, k_steps % splits);
    (split * q + split.min(r), q + (split < r) as u32)
}

/// `C = A · Bᵀ` with each output tile's K steps split over `splits` CTAs;
/// `A`, `B` and `C` of element type `E` (f16 or bf16, f32 accumulation).
///
/// This kernel works as follows:
/// 1. CTA `i` of the grid (`m_tiles * n_tiles * splits` CTAs) takes tile
///    `t = i % tiles` (row-major over `(m_tiles, n_tiles)`) and split
///    `s = i / tiles`, the K steps [`split_steps`]`(k_steps, splits, s)`;
/// 2. one thread of warpgroup 2 (memory) issues the TMA loads of A
///    (`BM x 64`) and B (`BN x 64`) of those steps into a ring of
///    `STAGES` slots; compute warpgroup `w` accumulates its block of the
///    tile, one wgmma group in flight: with `BM = 128` rows `64 w ..` and
///    every column (`WN = BN`), with `BM = 64` (an `M` of at most 64, the
///    decode rows: no MMA on rows past `M`) every row and columns
///    `WN w ..` (`WN = BN / 2`: 64, or 32 for the `64 x 64` tile, whose
///    two `64 x 32` blocks share one epilogue sub-tile and one TMA store);
/// 3. with `splits = 1` the tile goes out through SMEM and TMA stores as
///    in the plain kernels; else every compute thread writes its `WN / 2`
///    accumulators to the tile's partial `s` in `partials` (element `r` of
///    thread `t` at `(r / 4) * 1024 + 4 t + r % 4`: 16-byte stores, 512
///    contiguous bytes per warp), the CTA fences (GPU scope) and meets,
///    and thread 0 counts it in on `counters[t]`;
/// 4. the CTA that completes the count sums the `splits` partials in
///    split order into its accumulators (a split per iteration, its loads
///    in flight together), stores the tile, and sets the counter back to
///    0; the others are done.
///
/// Constraints: `(BM, BN, WN)` = `(128, 64 | 128 | 256, BN)`,
/// `(64, 128, 64)` or `(64, 64, 32)`; `STAGES >= 2`; `1 <= splits <= k_steps`; `partials`
/// holds at least `grid x BM x BN` f32 when `splits > 1` (checked per
/// access), `counters` `m_tiles x n_tiles` zeros (left zero); any grid of
/// exactly `m_tiles * n_tiles * splits` CTAs (no CTA waits for another,
/// so the CTAs need not be resident together).
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 128, 128, 6), (128, 64, 64, 8), (64, 128, 64, 8), (64, 64, 32, 13)))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_splitk<E: GemmElem, const BM: usize, const BN: usize, const WN: usize, const STAGES: usize>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    partials: Gmem<f32>,
    counters: Gmem<u32>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    splits: u32,
    #[scratch] a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<E, BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
    #[scratch] last: Smem<[u32; 1]>,
) where
    Cols<BN>: WgmmaShape,
    Cols<WN>: WgmmaShape,
    Wgmma<WN>: ArrayLayout,
{
    const {
        assert!(
            (BM == 128 && WN == BN && (BN == 64 || BN == 128 || BN == 256)) || (BM == 64 && BN == 2 * WN && (WN == 64 || WN == 32)),
            "matmul_splitk: (BM, BN, WN) must be (128, 64 | 128 | 256, BN) (a compute warpgroup per 64 rows), (64, 128, 64) or (64, 64, 32) (a compute warpgroup per WN columns)"
        );
        assert!(STAGES >= 2, "matmul_splitk: at least 2 stages (a slot is released one step after its MMAs)");
    };
    // One CTA per SM (its SMEM says so anyway), the register count at the
    // entry pinned so ptxas keeps the roles' `setmaxnreg`.
    pin_entry_registers();
    let tiles = m_tiles * n_tiles;
    let cta = block_idx().x;
    let (tile, split) = (cta % tiles, cta / tiles);
    let (pm, pn) = (tile / n_tiles, tile % n_tiles);
    let (k0, steps) = split_steps(k_steps, splits, split);
    let ring = Ring::new(&loaded, &consumed, 256);
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        if thread_in_warpgroup() == 0 {
            let mut producer = ring.producer();
            for k in k0..k0 + steps {
                let slot = producer.acquire_tx(Tma::<ATile<E, BM>>::BYTES + Tma::<BTile<E, BN>>::BYTES);
                a.load(a_bufs.at(slot.index()), pm * BM as u32, k * TK as u32, slot.barrier());
                b.load(b_bufs.at(slot.index()), pn * BN as u32, k * TK as u32, slot.barrier());
            }
        }
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let w = warpgroup_idx_sync() as usize;
        let t = thread_linear() as usize;
        let leader = t == 0;
        let mut consumer = ring.consumer();
        if BM == 128 {
            let row0 = w * 64;
            let mut acc = WgAcc::<BM, BN>::undefined();
            consumer.mma_steps::<1>(steps, |k, slot| {
                acc.mma(a_bufs.at(slot.index()), row0, b_bufs.at(slot.index()), k > 0);
            });
            consumer.release_after_wgmma::<0>();
            acc.blocks[0].fence_operands();
            if splits > 1 && !sum_splits(acc.blocks[0].regs.as_mut(), partials, counters, last, (cta, tile, tiles, splits), BM * BN) {
                return;
            }
            acc.store_tile(&c, epi, (pm, pn), row0, 0);
        } else {
            let col0 = w * WN;
            let mut acc = Acc::<WN>::undefined();
            consumer.mma_steps::<1>(steps, |k, slot| {
                acc.mma(a_bufs.at(slot.index()), 0, b_bufs.at(slot.index()), col0, k > 0);
            });
            consumer.release_after_wgmma::<0>();
            acc.fence_operands();
            if splits > 1 && !sum_splits(acc.regs.as_mut(), partials, counters, last, (cta, tile, tiles, splits), BM * BN) {
                return;
            }
            if WN < EPI_N {
                // The two warpgroups' 64 x WN blocks side by side in one
                // 64 x 64 sub-tile: one TMA store, after both wrote.
                let buf = epi.at(0);
                let mut block = Array::<f32, Wgmma<WN>>::splat(0.0);
                <Cols<WN>>::for_each_pair(&acc.regs, |p, v0, v1| {
                    block.set(2 * p, v0);
                    block.set(2 * p + 1, v1);
                });
                block.store_tile(buf, 0, col0);
                commit_smem();
                COMPUTE_BARRIER.sync();
                if leader {
                    c.store(buf, pm * BM as u32, pn * BN as u32);
                    commit_group();
                    wait_group::<0>();
                }
                return;
            }
            // Warpgroup `w`'s 64 x 64 block: its own SMEM buffer, its own
            // barrier, one TMA store.
            let buf = epi.at(w);
            store_block_cols(&mut acc, buf, 0, 0, Stores::Matrix);
            commit_smem();
            // Constant barrier ids (a run-time id makes ptxas reserve all 16).
            if w == 0 {
                NamedBarrier::new(2, 128).sync();
            } else {
                NamedBarrier::new(3, 128).sync();
            }
            if thread_in_warpgroup() == 0 {
                c.store(buf, pm * BM as u32, pn * BN as u32 + col0 as u32);
                commit_group();
                wait_group::<0>();
            }
            return;
        }
        if leader {
            wait_group::<0>();
        }
    }
}

/// Steps 3 and 4 of [`matmul_splitk`] for one compute thread whose
/// accumulators are `regs` (after `wgmma_wait::<0>()` and the operand
/// fence): writes them to this CTA's partial tile (`tile_len` f32, by
/// thread and register), counts the CTA in, and returns `false` unless it
/// completed its tile's count, in which case `regs` is replaced by the sum
/// of the tile's `splits` partials in split order and the counter is reset.
/// `(cta, tile, tiles, splits)`: this CTA, its tile, the tile count, the
/// split count. Both compute warpgroups call it (it meets them on
/// [`COMPUTE_BARRIER`]).
#[inline(always)]
fn sum_splits(regs: &mut [f32], partials: Gmem<f32>, counters: Gmem<u32>, last: Smem<[u32; 1]>, (cta, tile, tiles, splits): (u32, u32, u32, u32), tile_len: usize) -> bool {
    let t = thread_linear() as usize;
    let chunks = regs.len() / 4;
    let mine = cta as usize * tile_len;
    unroll(chunks, |q| partials.write_v4(mine + (q * SPLITK_THREADS + t) * 4, [regs[4 * q], regs[4 * q + 1], regs[4 * q + 2], regs[4 * q + 3]]));
    fence_acq_rel_gpu();
    COMPUTE_BARRIER.sync();
    if t == 0 {
        let seen = counters.semaphore(tile as usize).fetch_signal(1);
        last.write(0, (seen + 1 == splits) as u32);
    }
    COMPUTE_BARRIER.sync();
    if last.read(0) == 0 {
        return false;
    }
    fence_acq_rel_gpu();
    // The sum in split order, whichever CTA is last: each split's loads
    // all in flight together (a split per iteration).
    unroll(regs.len(), |i| regs[i] = 0.0);
    let mut s = 0;
    while s < splits {
        let base = (s * tiles + tile) as usize * tile_len;
        unroll(chunks, |q| {
            let v = partials.read_v4(base + (q * SPLITK_THREADS + t) * 4);
            unroll(4, |x| regs[4 * q + x] += v[x]);
        });
        s += 1;
    }
    if t == 0 {
        counters.atomic_exch(tile as usize, 0);
    }
    true
}
