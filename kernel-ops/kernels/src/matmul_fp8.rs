//! FP8 GEMM with per-tensor scales: `C = (scale_a · scale_b) · A · Bᵀ`
//! (A `M x K`, B `N x K`, both e4m3 and row-major, i.e. K-major as FP8
//! wgmma requires; C `M x N` row-major f16; f32 accumulation): the
//! multi-operand GEMM [`gemm_multi_of`] with one operand, FP8 tiles (K steps
//! of 128, `m64n256k32`) and a scaling epilogue. The host entry point is
//! `kernel_ops::matmul_fp8`; its CPU reference `kernel_ops::fp8::reference`.
use crate::gemm::EPI_N;
use crate::gemm_multi::{gemm_multi_of, AccBlock, EpiTileOf, InTile};
use kernel_device::array::{ArrayLayout, TileAt, Wgmma};
use kernel_device::prelude::*;
use kernel_device::wgmma::{Cols, WgmmaShape};
use kernel_device::{Barriers, E4M3};

/// K elements per step: one 128-byte swizzle span of e4m3.
pub const TK8: usize = 128;
/// A's tile: `BM x 128` e4m3 of `A (M x K)`.
pub type A8TileOf<const BM: usize> = InTile<E4M3, BM, TK8>;
/// B's tile: `BN x 128` e4m3 of `B (N x K)`.
pub type B8TileOf<const BN: usize> = InTile<E4M3, BN, TK8>;

/// `C = (scale_a · scale_b) · A · Bᵀ` in FP8 (e4m3), f16 out.
///
/// This kernel works as follows: it is [`gemm_multi_of`] with one B operand
/// (whose header describes the schedule: persistent, warp-specialized,
/// planar-snake tile order, an epilogue through double-buffered SMEM
/// sub-tiles whose TMA stores overlap the next tile) on e4m3 tiles of K
/// 128, so each compute warpgroup issues 4 `m64n256k32` wgmmas per K step
/// over the same SMEM bytes as the f16 kernel's 4 `m64n256k16`; the
/// epilogue reads the two scales once (`scales[0] · scales[1]`, f32, from
/// device memory, as cuBLASLt's scale pointers) and multiplies the f32
/// accumulators by their product before rounding to f16.
///
/// Launch: grid `min(SMs, m_tiles x n_tiles)` CTAs of 3 warpgroups,
/// `m_tiles = ceil(M / BM)`, `n_tiles = ceil(N / BN)`, `k_steps =
/// ceil(K / 128)`; maps `a: A8TileOf<BM>` over `M x K`, `b: B8TileOf<BN>`
/// over `N x K`, `c: EpiTileOf<BM>` over `M x N`; `scales` holds 2 f32.
///
/// Constraints: `K % 16 == 0` (TMA: rows of 16-byte multiples), `N % 8 ==
/// 0`; `BM x BN = 128 x 256`, 4 stages (SMEM `4 x 48 KB + 32 KB`); the
/// hardware's FP8 MMA accumulates with less precision than f32 (no
/// promotion here: per-tensor scaling).
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 256, 4, 8), (128, 256, 4, 16)))]
pub fn matmul_fp8<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<A8TileOf<BM>>,
    b: Tma<B8TileOf<BN>>,
    c: Tma<EpiTileOf<BM>>,
    scales: GmemRef<f32>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[A8TileOf<BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[[B8TileOf<BN>; 1]; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
    Wgmma<BN>: ArrayLayout,
{
    const { assert!(BN % EPI_N == 0, "matmul_fp8: BN must be whole 64-column epilogue sub-tiles") };
    let scale = scales.read(0) * scales.read(1);
    gemm_multi_of::<E4M3, TK8, 1, BM, BN, BN, STAGES, GRID_W>(
        a, [b], c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed,
        |_: TileAt, [acc]: [AccBlock<BN>; 1]| acc * scale,
    );
}
