//! Matmuls with fused epilogues: [`hopper::matmul_warp_specialized`]'s
//! mainloop, unchanged, with a few lines of epilogue on the f32 output
//! tile in registers.
use crate::hopper::{self, ATile, BTileWs, OTileWs, WsTile};
use kernel_device::array::{Prefetch, TileAt};
use kernel_device::prelude::*;
use kernel_device::gmem::GmemRef;
use kernel_device::{f16, Barriers};

/// `C = relu(A · Bᵀ + bias)` (f16 in, f32 accumulate and epilogue, f16
/// out; `bias` has one f16 per column of C).
///
/// This kernel works as follows: it is [`hopper::matmul_warp_specialized`]
/// (same parameters, same scratch) plus `bias`; before its mainloop, each
/// compute warpgroup loads the 128 bias values of its columns once, in the
/// WGMMA_COL layout (16 pair loads per thread, shared by both row blocks:
/// their latency hides under the MMAs); after it, it applies
/// `relu(x + bias[col])` to its 128 x 128 tile in registers before the
/// f16 conversion and the TMA store.
///
/// Constraints: those of `matmul_warp_specialized`; `bias.len() >= N`
/// (checked: a trap on the GPU, a reported misuse on the emulator).
#[kernel(block = warpgroups(3), arch = sm_90a, instances((4, 8)))]
pub fn matmul_bias_relu<const STAGES: usize, const GROUP_M: u32>(
    a: Tma<ATile>,
    b: Tma<BTileWs>,
    c: Tma<OTileWs>,
    bias: GmemRef<f16>,
    m_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileWs; STAGES]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) {
    let epilogue = Prefetch(|at: TileAt| {
        let bias = at.load_cols(bias); // before the mainloop: WGMMA_COL, 16 pair loads per thread
        move |tile: &mut WsTile| tile.map_cols(&bias, |x, b| (x + b).max(0.0)) // after it, in registers
    });
    hopper::matmul_warp_specialized_with::<STAGES, GROUP_M>(a, b, c, m_tiles, k_steps, a_bufs, b_bufs, loaded, consumed, epilogue);
}
