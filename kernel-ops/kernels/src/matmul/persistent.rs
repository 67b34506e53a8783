//! The persistent, warp-specialized matmul with an overlapped, sub-tiled
//! epilogue: [`matmul_persistent_ws`] (the Hopper ladder's step 4,
//! `examples/kernels/src/hopper_ladder/step4_epilogue_overlap.rs`, which
//! re-exports it as `matmul_epilogue_overlap` and tells how it grew from
//! steps 0 to 3), generic over the element type (f16 and bf16 instances);
//! its body, [`matmul_persistent_ws_rows`], also serves the collective matmul.
use crate::gemm::{check_tile, ATile, BTile, EpiTile, GemmElem, WgAcc, COMPUTE_REGS, MEMORY_REGS, TK};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::wait_group;
use kernel_device::pipeline::{Producer, Ring, Step};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, Cols, WgmmaShape};
use kernel_device::Barriers;
use kernel_device::{bf16, f16};

/// `C = A · Bᵀ`, persistent, warp-specialized, with an overlapped,
/// sub-tiled epilogue; `A`, `B` and `C` of element type `E` (f16 or bf16,
/// f32 accumulation).
///
/// This kernel works as follows:
/// 1. CTA `p` of `P` (the grid, at most one per SM) runs the tiles
///    `p, p + P, ..` of the `m_tiles * n_tiles` output tiles ([`nd_loop`]);
///    tile `i` is `planar_snake(i, (m_tiles, n_tiles), 0, GRID_W)`;
/// 2. one thread of warpgroup 2 (memory, 40 registers) issues, for every
///    tile and K step, the TMA loads of A (`BM x 64`) and B (`BN x 64`)
///    into slot `step % STAGES` (`step` counts over all tiles, so the next
///    tile's loads start while the current one is computed), waiting on
///    `consumed` once the slot has been used;
/// 3. compute warpgroup `w` (232 registers) runs each tile's K steps on its
///    `BM / 2 x BN` block ([`WgAcc`](crate::gemm::WgAcc)), keeps one wgmma
///    group in flight, releases each slot one step later (256 arrivals),
///    and the tile's last slot after `wgmma_wait::<0>`;
/// 4. epilogue, for each of the `BN / 64` column sub-tiles `j`: thread 0
///    waits until at most one of its TMA stores is still reading SMEM (so
///    the buffer of sub-tile `j` is free), the compute warpgroups meet,
///    write columns `64 j ..` of their rows as `E` (f16 or bf16) into buffer
///    `e % 2` (`e` counts sub-tiles over all tiles), fence and meet again,
///    and thread 0 issues the sub-tile's TMA store without waiting: the
///    stores run under the next tile's wgmmas;
/// 5. at the end thread 0 waits for all its stores.
///
/// Constraints: `BM` 128 or 256, `BN` 64, 128 or 256, `BM x BN <= 128 x
/// 256` ([`check_tile`]); SMEM `STAGES x (BM + BN) x 128 B + 2 x BM x 128 B`
/// <= 227 KB (`STAGES = 4` at `128 x 256`, 3 at `256 x 128`); grid of
/// at most `min(SMs, m_tiles * n_tiles)` (any count: `kernel_ops::Ctas`
/// sizes it); `m_tiles = ceil(M / BM)`, `n_tiles =
/// ceil(N / BN)`, `k_steps = ceil(K / 64) >= 1`; `GRID_W >= 1`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 256, 4, 8), (256, 128, 3, 8), (128, 256, 4, 16), (128, 128, 4, 8), (128, 128, 4, 16)))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_persistent_ws<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<E, BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    matmul_persistent_ws_rows::<E, AllRows, BM, BN, STAGES, GRID_W>(AllRows, a, b, c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}

/// Where the tile rows of [`matmul_persistent_ws_rows`] (elements `E`,
/// `BM`-row tiles) come from: the order in which its CTAs visit the `m`
/// tile rows, when the A rows of one may be read (the producing thread
/// calls [`RowSource::ready`] before its first TMA load of a tile), and
/// what else the producing thread does with the A tiles it loads
/// ([`RowSource::loaded`] and [`RowSource::refill`]: nothing by default;
/// the all-gather matmul's `ForwardRows` stores them to the next GPU).
pub trait RowSource<E: GemmElem, const BM: usize>: Copy {
    /// The A/C tile row visited as the `pm`-th (a permutation of
    /// `0..m_tiles`).
    fn m_tile(&self, pm: u32) -> u32;
    /// Returns once the A rows of tile row `m_tile` may be read by TMA
    /// (may spin; called by the one producing thread).
    fn ready(&mut self, m_tile: u32);
    /// The `(pm, pn)` of the `i`-th of the `m_tiles x n_tiles` tiles (`pm`
    /// goes through [`RowSource::m_tile`]): by default
    /// `planar_snake(i, (m_tiles, n_tiles), 0, grid_w)`.
    #[inline(always)]
    fn order(&self, i: u32, (m_tiles, n_tiles): (u32, u32), grid_w: u32) -> (u32, u32) {
        planar_snake(i, (m_tiles, n_tiles), 0, grid_w)
    }
    /// Run by the producing thread right after it issued the TMA loads of
    /// K step `k` of `k_steps` of tile `(m_tile, pn)` as ring step `step`:
    /// A's tile lands in `a_bufs.at(step.index())`
    /// ([`Producer::wait_full`] waits for it).
    #[inline(always)]
    fn loaded<const S: usize>(&mut self, _producer: &Producer<'_, S>, _step: Step<S>, _tile: (u32, u32), _k: (u32, u32), _a_bufs: Smem<[ATile<E, BM>; S]>) {}
    /// Run by the producing thread after it acquired ring slot `slot` and
    /// before its loads refill it: the place to wait for whatever still
    /// reads the slot's previous A tile.
    #[inline(always)]
    fn refill(&mut self, _slot: usize) {}
}

/// Every A row is there at launch; tile rows in order (the plain matmul).
#[derive(Clone, Copy)]
pub struct AllRows;

impl<E: GemmElem, const BM: usize> RowSource<E, BM> for AllRows {
    #[inline(always)]
    fn m_tile(&self, pm: u32) -> u32 {
        pm
    }
    #[inline(always)]
    fn ready(&mut self, _m_tile: u32) {}
}

/// The body of [`matmul_persistent_ws`] (elements `E`: f16 or bf16) over a [`RowSource`] (the collective
/// matmul's kernel, `crate::collective`, visits the shards of a gathered A
/// in arrival order and waits for each).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_persistent_ws_rows<E: GemmElem, R: RowSource<E, BM>, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    rows: R,
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    epi: Smem<[EpiTile<E, BM>; 2]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const { check_tile(BM, BN) };
    let tiles = [m_tiles * n_tiles];
    let tile = |i: u32| {
        let (pm, pn) = rows.order(i, (m_tiles, n_tiles), GRID_W);
        (rows.m_tile(pm), pn)
    };
    let ring = Ring::new(&loaded, &consumed, 256);
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        if thread_in_warpgroup() == 0 {
            let mut gate = rows;
            let mut producer = ring.producer();
            nd_loop(tiles, Collective::Blocks, |info| {
                let (pm, pn) = tile(info.index[0]);
                gate.ready(pm);
                for k in 0..k_steps {
                    let step = producer.step();
                    let slot = producer.acquire_tx(Tma::<ATile<E, BM>>::BYTES + Tma::<BTile<E, BN>>::BYTES);
                    gate.refill(slot.index());
                    a.load(a_bufs.at(slot.index()), pm * BM as u32, k * TK as u32, slot.barrier());
                    b.load(b_bufs.at(slot.index()), pn * BN as u32, k * TK as u32, slot.barrier());
                    gate.loaded(&producer, step, (pm, pn), (k, k_steps), a_bufs);
                }
            });
        }
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx_sync() as usize * BM / 2;
        let leader = thread_linear() == 0;
        let mut consumer = ring.consumer();
        let mut sub_tiles = 0u32;
        nd_loop(tiles, Collective::Blocks, |info| {
            let (pm, pn) = tile(info.index[0]);
            let mut acc = WgAcc::<BM, BN>::undefined();
            consumer.mma_steps::<1>(k_steps, |k, slot| {
                acc.mma(a_bufs.at(slot.index()), row0, b_bufs.at(slot.index()), k > 0);
            });
            consumer.release_after_wgmma::<0>();
            sub_tiles = acc.store_tile(&c, epi, (pm, pn), row0, sub_tiles);
        });
        if leader {
            wait_group::<0>();
        }
    }
}
