//! Step 2: larger CTA tiles and the widest wgmma.
//!
//! Diff from step 1 ([`crate::hopper::matmul_warp_specialized`]): step 1's
//! compute warpgroups each covered `128 x 128` of a `128 x 256` tile with
//! two `m64n128` wgmmas per k16 that read the same B columns twice. Here the
//! tile is `BM x BN` (instance parameters: `128 x 256` or `256 x 128`) and
//! compute warpgroup `w` owns rows `w BM / 2 ..` across all `BN` columns: at
//! `128 x 256` that is ONE `m64n256k16` wgmma per k16 (A `64 x 16` and B
//! `256 x 16` read once: 5 KB of SMEM per 262144 MACs instead of 6 KB), at
//! `256 x 128` two `m64n128` wgmmas on different A rows. Same 128
//! accumulator registers per thread; `STAGES` up to 4 (48 KB per stage).
use kernel_ops_kernels::gemm::{check_tile, ATileOf, BTileOf, OTileOf, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, COMPUTE_WGS, MEMORY_REGS};
use crate::hopper::tile_of;
use kernel_device::pipeline::{emit_pipeline_warp_specialized, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Cols, WgmmaShape};
use kernel_device::Barriers;

/// `C = A · Bᵀ` with `BM x BN` tiles, one CTA per tile.
///
/// This kernel works as follows:
/// 1. CTA `pid` (a 1-D grid of `m_tiles * n_tiles`) owns output tile
///    [`tile_of`]`(pid, m_tiles, n_tiles, GROUP_M)` (grouped rasterization,
///    as step 1);
/// 2. warpgroup 2 (memory, 40 registers) issues the TMA loads of A
///    (`BM x 64`) and B (`BN x 64`) for each K step into `STAGES` slots
///    (`emit_pipeline_warp_specialized`), waiting on `consumed` before
///    reusing a slot;
/// 3. compute warpgroup `w` (232 registers) waits on `loaded`, issues its
///    `BM / 2 x BN` block's wgmmas (4 per 64-row block and K step), keeps one
///    group in flight and releases the previous step's slot;
/// 4. both compute warpgroups meet (named barrier 1), write their rows as
///    f16 into SMEM aliasing the stage buffers, meet again, and one thread
///    TMA-stores the tile.
///
/// Constraints: `BM` 128 or 256, `BN` 64/128/256, `BM x BN <= 128 x 256`;
/// `STAGES x (BM + BN) x 128 B >= BM x BN x 2 B` (the output tile fits in
/// the stage buffers); grid `m_tiles * n_tiles`; `m_tiles = ceil(M / BM)`,
/// `n_tiles = ceil(N / BN)`, `k_steps = ceil(K / 64) >= 1` (edges: TMA
/// zero-fills loads and clips stores).
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 256, 4, 8), (256, 128, 4, 8), (128, 256, 3, 8)))]
pub fn matmul_big_tiles<const BM: usize, const BN: usize, const STAGES: usize, const GROUP_M: u32>(
    a: Tma<ATileOf<BM>>,
    b: Tma<BTileOf<BN>>,
    c: Tma<OTileOf<BM, BN>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATileOf<BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileOf<BN>; STAGES]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        check_tile(BM, BN);
        assert!(STAGES * (BM + BN) * 128 >= BM * BN * 2, "matmul_big_tiles: the output tile must fit in the stage buffers it aliases");
    };
    let (pm, pn) = tile_of(block_idx().x, m_tiles, n_tiles, GROUP_M);
    let row0 = warpgroup_idx() as usize * BM / 2;
    emit_pipeline_warp_specialized::<STAGES, MEMORY_REGS, COMPUTE_REGS, _>(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (pm, k)), BlockSpec::new(b, b_bufs, |k| (pn, k))),
        &loaded,
        &consumed,
        COMPUTE_WGS,
        1,
        |pipeline| {
            let mut acc = pipeline.run(WgAcc::<BM, BN>::undefined(), |step, (a_tile, b_tile), mut acc| {
                acc.mma(a_tile, row0, b_tile, step > 0);
                wgmma_commit_group();
                wgmma_wait::<1>();
                acc
            });
            wgmma_wait::<0>();
            // Both warpgroups' MMAs are done before the stage SMEM is reused.
            COMPUTE_BARRIER.sync();
            // SAFETY: the A and B stage buffers are consecutive in the scratch
            // layout (checked), hold the output tile (const-asserted), are
            // 1024-byte aligned, and no longer read or written.
            assert!(b_bufs.smem_addr() as usize == a_bufs.smem_addr() as usize + STAGES * <ATileOf<BM> as TileLayout>::BYTES);
            let c_smem: Smem<OTileOf<BM, BN>> = unsafe { a_bufs.cast_at(0) };
            acc.store_f16(c_smem, row0);
            commit_smem();
            COMPUTE_BARRIER.sync();
            if thread_linear() == 0 {
                c.store(c_smem, pm * BM as u32, pn * BN as u32);
                commit_group();
                wait_group::<0>();
            }
        },
    );
}
