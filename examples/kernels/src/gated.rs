//! A gated MLP written the way a user writes one on the library's
//! multi-operand GEMM (`kernel_ops_kernels::gemm_multi`): the kernel is its
//! parameters and one call, the gate is a one-line epilogue over the two
//! accumulators. The library's own SwiGLU (`kernel_ops::swiglu`) is the
//! same with `g.silu() * u`.
use kernel_device::array::TileAt;
use kernel_device::prelude::*;
use kernel_device::Barriers;
use kernel_ops_kernels::gemm_multi::{gemm_multi, AccBlock, ATileOf, BTileOf, EpiTileOf};

/// ReGLU: `out = relu(X · W1ᵀ) * (X · W3ᵀ)` (X `M x K`, W1 and W3 `N x K`,
/// out `M x N`, f16, f32 accumulation and epilogue).
///
/// This kernel works as follows: it is `gemm_multi` with two B operands
/// (the gate's and the up projection's weights, whose tiles it loads next
/// to each other and multiplies with one `m64n256` wgmma per k16 step),
/// 128 x 128 output tiles per operand, 4 stages, planar-snake width 8, and
/// the epilogue `relu(g) * u` on each 64-row block in registers. Launch and
/// constraints are `kernel_ops::swiglu`'s: grid `min(SMs, tiles)`,
/// `K % 8 == 0`, `N % 8 == 0`.
#[kernel(block = warpgroups(3), arch = sm_90a)]
pub fn reglu(
    x: Tma<ATileOf<128>>, w1: Tma<BTileOf<128>>, w3: Tma<BTileOf<128>>, out: Tma<EpiTileOf<128>>,
    m_tiles: u32, n_tiles: u32, k_steps: u32,
    #[scratch] x_bufs: Smem<[ATileOf<128>; 4]>,
    #[scratch] w_bufs: Smem<[[BTileOf<128>; 2]; 4]>,
    #[scratch] epi: Smem<[EpiTileOf<128>; 2]>,
    #[scratch] loaded: Barriers<4>,
    #[scratch(arrivals = 256)] consumed: Barriers<4>,
) {
    let gate = |_: TileAt, [g, u]: [AccBlock<128>; 2]| g.relu() * u;
    gemm_multi::<2, 128, 128, 256, 4, 8>(x, [w1, w3], out, m_tiles, n_tiles, k_steps, x_bufs, w_bufs, epi, loaded, consumed, gate);
}
