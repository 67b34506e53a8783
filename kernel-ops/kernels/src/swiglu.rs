//! SwiGLU: `out = silu(X · W1ᵀ) * (X · W3ᵀ)` (X `M x K`, W1 and W3 `N x K`,
//! out `M x N`, row-major f16, f32 accumulation and epilogue) in one
//! kernel: [`gemm_multi`] with two B operands and a one-line epilogue.
//! The CPU reference is `kernel_ops::swiglu::swiglu_reference`.
use crate::gemm_multi::{gemm_multi, AccBlock, ATileOf, BTileOf, EpiTileOf};
use kernel_device::array::{ArrayLayout, TileAt, Wgmma};
use kernel_device::prelude::*;
use kernel_device::wgmma::{Cols, WgmmaShape};
use kernel_device::Barriers;

/// SwiGLU's epilogue on one output block: `silu(gate) * up`.
#[inline(always)]
pub fn swiglu_epilogue<const BN: usize>(_: TileAt, [gate, up]: [AccBlock<BN>; 2]) -> AccBlock<BN>
where
    Wgmma<BN>: ArrayLayout,
{
    gate.silu() * up
}

/// `out = silu(X · W1ᵀ) * (X · W3ᵀ)`.
///
/// This kernel works as follows: it is [`gemm_multi`] with `OPS = 2`
/// (`B0 = W1`, the gate; `B1 = W3`, the up projection), whose header
/// describes the schedule, and [`swiglu_epilogue`] on each output block in
/// registers (`silu` is `ex2.approx` + `rcp.approx` per element, see
/// `kernel_device::array::silu`).
///
/// Launch: grid of at most `min(SMs, m_tiles x n_tiles)` CTAs (any count:
/// CTA `i` takes tiles `i, i + grid, ..`; `kernel_ops::Ctas` sizes it) of 3 warpgroups,
/// `m_tiles = ceil(M / BM)`, `n_tiles = ceil(N / BN)`, `k_steps =
/// ceil(K / 64)`; tensor maps `x: ATileOf<BM>` over `M x K`, `w1`, `w3:
/// BTileOf<BN>` over `N x K`, `out: EpiTileOf<BM>` over `M x N`.
///
/// Constraints: those of [`gemm_multi`]: `K % 8 == 0`, `N % 8 == 0`;
/// `BM x BN = 128 x 128` per operand and `NW = 2 BN = 256` (the one
/// `m64n256` wgmma over W1's and W3's tiles: the plain GEMM's 128 x 256
/// mainloop and its 128 accumulator registers per thread).
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 128, 256, 4, 8), (128, 128, 256, 4, 16)))]
pub fn swiglu<const BM: usize, const BN: usize, const NW: usize, const STAGES: usize, const GRID_W: u32>(
    x: Tma<ATileOf<BM>>,
    w1: Tma<BTileOf<BN>>,
    w3: Tma<BTileOf<BN>>,
    out: Tma<EpiTileOf<BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] x_bufs: Smem<[ATileOf<BM>; STAGES]>,
    #[scratch] w_bufs: Smem<[[BTileOf<BN>; 2]; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<NW>: WgmmaShape,
    Wgmma<BN>: ArrayLayout,
{
    gemm_multi::<2, BM, BN, NW, STAGES, GRID_W>(
        x, [w1, w3], out, m_tiles, n_tiles, k_steps, x_bufs, w_bufs, epi, loaded, consumed, swiglu_epilogue::<BN>,
    );
}
