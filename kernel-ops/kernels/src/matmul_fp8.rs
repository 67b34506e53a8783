//! FP8 GEMMs: [`matmul_fp8`] with per-tensor scales, `C = (scale_a ·
//! scale_b) · A · Bᵀ`, and [`matmul_fp8_blockscaled`] with 1 x 128 (A) and
//! 128 x 128 (B) block scales promoted every 128 of K. Per-tensor:
//! (A `M x K`, B `N x K`, both e4m3 and row-major, i.e. K-major as FP8
//! wgmma requires; C `M x N` row-major f16; f32 accumulation): the
//! multi-operand GEMM [`gemm_multi_of`] with one operand, FP8 tiles (K steps
//! of 128, `m64n256k32`) and a scaling epilogue. The host entry point is
//! `kernel_ops::fp8::matmul_fp8`; its CPU reference `kernel_ops::fp8::reference`.
use crate::gemm::{COMPUTE_REGS, EPI_N};
use crate::gemm_multi::{gemm_multi_of, produce, store_out, AccBlock, EpiTileOf, InTile};
use kernel_device::array::regs::unroll;
use kernel_device::array::{ArrayLayout, TileAt, Wgmma};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::wait_group;
use kernel_device::wgmma::{setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
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

/// K (and, for B, N) of one scale block: A has one scale per row and 128
/// of K (1 x 128), B one per 128 x 128 block (DeepSeek-V3's recipe).
pub const SCALE_BLOCK: usize = 128;
/// [`matmul_fp8_blockscaled`]'s tile: `128 x 128` (one B scale block per
/// tile and K step).
pub const BS_BM: usize = 128;
/// See [`BS_BM`].
pub const BS_BN: usize = SCALE_BLOCK;

/// Block-scaled FP8 GEMM: `C[i, j] = Σ_kb sa[kb][i] sb[j / 128][kb] ·
/// Σ_{k in block kb} A[i, k] B[j, k]` (A `M x K`, B `N x K`, e4m3
/// K-major; `sa` `ceil(K / 128) x M` f32, one scale per row and 128 of K,
/// stored K-block-major so a warp's rows are adjacent; `sb` `ceil(N / 128)
/// x ceil(K / 128)` f32, one per 128 x 128 block of B; C `M x N` f16).
///
/// This kernel works as follows:
/// 1. tiles, order and the memory warpgroup as [`gemm_multi_of`]'s
///    (`gemm_multi::produce!`): `BM x BN = 128 x 128` tiles of K
///    steps of 128, so one K step is one scale block of A and, with
///    `BN = 128`, of B;
/// 2. compute warpgroup `w` owns rows `64 w ..` of the tile; per K step it
///    waits for the slot, issues the step's 4 `m64n128k32` wgmmas into a
///    step accumulator (overwritten: `accumulate = false`), commits, reads
///    the step's scales from device memory while the MMAs run (`sb` for
///    the tile's N block, `sa` for this thread's two rows), waits for the
///    MMAs (`wgmma_wait::<0>`: the step accumulator is read next), releases
///    the slot, and promotes: `acc += step · sa[row] sb` in f32 registers
///    (two-level accumulation: the tensor core's FP8 accumulator holds
///    only 128 of K, DeepGEMM's and CUTLASS's recipe for accuracy). The
///    other compute warpgroup's MMAs keep the tensor cores busy while one
///    promotes;
/// 3. the f32 accumulator leaves as f16 through
///    [`crate::gemm_multi::store_out`] (double-buffered sub-tiles, TMA
///    stores overlapping the next tile).
///
/// Launch: grid `min(SMs, m_tiles x n_tiles)`, `m_tiles = ceil(M / 128)`,
/// `n_tiles = ceil(N / 128)`, `k_steps = ceil(K / 128)`; maps as
/// [`matmul_fp8`]'s with `BN = 128`.
///
/// Constraints: tiles `BM x BN = 128 x 128` (one B scale per tile and step; a compute
/// warpgroup holds the 64 x 128 step and total accumulators, 128
/// registers); `K % 16 == 0`, `N % 8 == 0`; SMEM `6 x 32 KB + 32 KB`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((6, 8), (6, 16)))]
pub fn matmul_fp8_blockscaled<const STAGES: usize, const GRID_W: u32>(
    a: Tma<A8TileOf<BS_BM>>,
    b: Tma<B8TileOf<BS_BN>>,
    c: Tma<EpiTileOf<BS_BM>>,
    a_scales: GmemRef<f32>,
    b_scales: GmemRef<f32>,
    m: u32,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[A8TileOf<BS_BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[[B8TileOf<BS_BN>; 1]; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BS_BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) {
    const BM: usize = BS_BM;
    const BN: usize = BS_BN;
    if warpgroup_idx() == 2 {
        let b = [b];
        produce!(E4M3, TK8, 1, BM, BN, STAGES, GRID_W; a, b, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, loaded, consumed);
        return;
    }
    setmaxnreg_inc::<COMPUTE_REGS>();
    let row0 = warpgroup_idx() as usize * 64;
    let t = thread_in_warpgroup() as usize;
    // This thread's rows in the tile: `r` (register pairs with `p % 2 ==
    // 0`) and `r + 8` (the others), the WGMMA fragment layout.
    let r = (row0 + 16 * (t / 32) + (t % 32) / 4) as u32;
    let slot = |step: u32| (step % STAGES as u32) as usize;
    let mut step = 0u32;
    let mut sub_tiles = 0u32;
    nd_loop([m_tiles * n_tiles], Collective::Blocks, |info| {
        let (pm, pn) = planar_snake(info.index[0], (m_tiles, n_tiles), 0, GRID_W);
        // Rows past M (zero-filled A) read the last row's scale.
        let rows = [(pm * BM as u32 + r).min(m - 1) as usize, (pm * BM as u32 + r + 8).min(m - 1) as usize];
        let mut acc = Acc::<BN>::zeros();
        for k in 0..k_steps {
            let s = slot(step);
            loaded.at(s).wait();
            let mut part = Acc::<BN>::undefined();
            part.mma(a_bufs.at(s), row0, b_bufs.at(s).at(0), 0, false);
            wgmma_commit_group();
            let sb = b_scales.read((pn * k_steps + k) as usize);
            let scale = [a_scales.read(k as usize * m as usize + rows[0]) * sb, a_scales.read(k as usize * m as usize + rows[1]) * sb];
            wgmma_wait::<0>();
            consumed.at(s).arrive();
            part.fence_operands();
            unroll(BN / 2, |i| acc.regs[i] += part.regs[i] * scale[(i / 2) % 2]);
            step += 1;
        }
        let out = [acc.into_array(), AccBlock::<BN>::splat(0.0)];
        sub_tiles = store_out::<BM, BN>(&out, &c, epi, (pm, pn), row0, sub_tiles);
    });
    if thread_linear() == 0 {
        wait_group::<0>();
    }
}
