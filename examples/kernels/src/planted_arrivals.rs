//! A warp-specialized pipeline whose `consumed` barrier has the wrong
//! arrival count (issue 15's case: `#[scratch] consumed` without
//! `arrivals = 256`), and its correct twin, for the emulator's arrival-count
//! report (`tests/tests/arrivals.rs`).
//!
//! Each kernel computes `C = A · Bᵀ` for one `128 x 128` output tile
//! (f16 in, f32 accumulate, f16 out): warpgroup 2 is the memory warpgroup
//! of `emit_pipeline_warp_specialized`, warpgroups 0 and 1 each compute 64
//! rows with one wgmma per K step, keep one wgmma group in flight
//! (`wgmma_wait::<1>`) and release the previous step's slot
//! (`delay_release = 1`): every one of the 256 compute threads arrives on
//! `consumed` once per step, so its count must be 256.
//!
//! Constraints: grid 1; `A` is `128 x K`, `B` is `128 x K` (row-major,
//! K-major), `C` is `128 x 128`; `K = 64 k_steps`, `k_steps >= 1`.
use kernel_device::pipeline::{emit_pipeline_warp_specialized, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Acc};
use kernel_device::{f16, Barriers};

/// `128 x 64` f16 tile of A or B (128-byte swizzle).
pub type ArrTile = Tile<f16, 128, 64, Swizzled<128>>;
/// The `128 x 128` f16 output tile.
pub type ArrOut = Tile<f16, 128, 128, Swizzled<128>>;
/// Slots of the pipeline.
pub const ARR_STAGES: usize = 2;

/// The shared body: `consumed` is declared by each kernel.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn body(
    a: Tma<ArrTile>,
    b: Tma<ArrTile>,
    c: Tma<ArrOut>,
    k_steps: u32,
    a_bufs: Smem<[ArrTile; ARR_STAGES]>,
    b_bufs: Smem<[ArrTile; ARR_STAGES]>,
    c_smem: Smem<ArrOut>,
    loaded: Barriers<ARR_STAGES>,
    consumed: Barriers<ARR_STAGES>,
) {
    let wg = warpgroup_idx();
    emit_pipeline_warp_specialized::<ARR_STAGES, 40, 232, _>(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (0, k)), BlockSpec::new(b, b_bufs, |k| (0, k))),
        &loaded,
        &consumed,
        2,
        1,
        |pipeline| {
            let row = 64 * wg as usize;
            let mut acc = pipeline.run(Acc::<128>::undefined(), |step, (a_tile, b_tile), mut acc| {
                acc.mma(a_tile, row, b_tile, 0, step > 0);
                wgmma_commit_group();
                wgmma_wait::<1>();
                acc
            });
            wgmma_wait::<0>();
            acc.store_f16(c_smem, row, 0);
            commit_smem();
            // The two compute warpgroups (not the memory one).
            NamedBarrier::new(1, 256).sync();
            if thread_linear() == 0 {
                c.store(c_smem, 0, 0);
                commit_group();
                wait_group::<0>();
            }
        },
    );
}

/// The bug: `consumed` keeps the default count of 1, so its phase
/// completes at the first of the 256 arrivals and the memory warpgroup
/// refills a slot the other compute threads' wgmmas still read.
#[kernel(block = warpgroups(3), arch = sm_90a)]
pub fn consumed_count_missing(
    a: Tma<ArrTile>,
    b: Tma<ArrTile>,
    c: Tma<ArrOut>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ArrTile; ARR_STAGES]>,
    #[scratch] b_bufs: Smem<[ArrTile; ARR_STAGES]>,
    #[scratch] c_smem: Smem<ArrOut>,
    #[scratch] loaded: Barriers<ARR_STAGES>,
    #[scratch] consumed: Barriers<ARR_STAGES>,
) {
    body(a, b, c, k_steps, a_bufs, b_bufs, c_smem, loaded, consumed);
}

/// The twin: `consumed` counts the 256 compute threads.
#[kernel(block = warpgroups(3), arch = sm_90a)]
pub fn consumed_count_256(
    a: Tma<ArrTile>,
    b: Tma<ArrTile>,
    c: Tma<ArrOut>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ArrTile; ARR_STAGES]>,
    #[scratch] b_bufs: Smem<[ArrTile; ARR_STAGES]>,
    #[scratch] c_smem: Smem<ArrOut>,
    #[scratch] loaded: Barriers<ARR_STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<ARR_STAGES>,
) {
    body(a, b, c, k_steps, a_bufs, b_bufs, c_smem, loaded, consumed);
}

/// The other way round: `consumed` counts 384 arrivals (the whole block),
/// and only the 256 compute threads arrive: no phase could ever complete.
#[kernel(block = warpgroups(3), arch = sm_90a)]
pub fn consumed_count_too_large(
    a: Tma<ArrTile>,
    b: Tma<ArrTile>,
    c: Tma<ArrOut>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ArrTile; ARR_STAGES]>,
    #[scratch] b_bufs: Smem<[ArrTile; ARR_STAGES]>,
    #[scratch] c_smem: Smem<ArrOut>,
    #[scratch] loaded: Barriers<ARR_STAGES>,
    #[scratch(arrivals = 384)] consumed: Barriers<ARR_STAGES>,
) {
    body(a, b, c, k_steps, a_bufs, b_bufs, c_smem, loaded, consumed);
}
