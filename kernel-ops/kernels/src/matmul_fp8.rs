//! FP8 GEMMs: [`matmul_fp8`] with per-tensor scales, `C = (scale_a ·
//! scale_b) · A · Bᵀ`, and [`matmul_fp8_blockscaled`] with 1 x 128 (A) and
//! 128 x 128 (B) block scales promoted every 128 of K. Per-tensor:
//! (A `M x K`, B `N x K`, both e4m3 and row-major, i.e. K-major as FP8
//! wgmma requires; C `M x N` row-major f16; f32 accumulation): the
//! multi-operand GEMM [`gemm_multi_of`] with one operand, FP8 tiles (K steps
//! of 128, `m64n256k32`) and a scaling epilogue. The host entry point is
//! `kernel_ops::fp8::matmul_fp8`; its CPU reference `kernel_ops::fp8::reference`.
use crate::gemm::EPI_N;
use crate::gemm_multi::{gemm_multi_of, produce, store_out, AccBlock, EpiTileOf, InTile, MultiEpilogue};
use kernel_device::array::{Array, ArrayLayout, TileAt, Wgmma};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::wait_group;
use kernel_device::wgmma::{pin_entry_registers, setmaxnreg_inc, Cols, WgmmaInput, WgmmaShape, WgmmaWith};
use kernel_device::pipeline::Ring;
use kernel_device::{Barriers, E4M3, E5M2};

/// K elements per step: one 128-byte swizzle span of e4m3.
pub const TK8: usize = 128;
/// A's tile: `BM x 128` e4m3 of `A (M x K)`.
pub type A8TileOf<const BM: usize> = InTile<E4M3, BM, TK8>;
/// B's tile: `BN x 128` e4m3 of `B (N x K)`.
pub type B8TileOf<const BN: usize> = InTile<E4M3, BN, TK8>;
/// An FP8 operand tile of element `E` (e4m3 or e5m2): `R x 128`.
pub type Fp8TileOf<E, const R: usize> = InTile<E, R, TK8>;

/// `C = (scale_a · scale_b) · A · Bᵀ` in FP8, f16 out: A of `EA` and B of
/// `EB`, each e4m3 or e5m2 (e5m2 is the FP8 training recipes' gradient
/// type: a backward GEMM multiplies e5m2 gradients by e4m3 weights or
/// activations, one `m64nNk32.f32.e5m2.e4m3` wgmma per K step of 32).
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
/// Launch: grid of at most `min(SMs, m_tiles x n_tiles)` CTAs (any count:
/// `kernel_ops::Ctas` sizes it) of 3 warpgroups,
/// `m_tiles = ceil(M / BM)`, `n_tiles = ceil(N / BN)`, `k_steps =
/// ceil(K / 128)`; maps `a: A8TileOf<BM>` over `M x K`, `b: B8TileOf<BN>`
/// over `N x K`, `c: EpiTileOf<BM>` over `M x N`; `scales` holds 2 f32.
///
/// Constraints: `K % 16 == 0` (TMA: rows of 16-byte multiples), `N % 8 ==
/// 0`; `BM x BN = 128 x 256`, 4 stages (SMEM `4 x 48 KB + 32 KB`); the
/// hardware's FP8 MMA accumulates with less precision than f32 (no
/// promotion here: per-tensor scaling).
#[kernel(
    block = warpgroups(3),
    arch = sm_90a,
    instances(
        (E4M3, E4M3, 128, 256, 4, 8),
        (E4M3, E4M3, 128, 256, 4, 16),
        (E5M2, E4M3, 128, 256, 4, 8),
        (E5M2, E4M3, 128, 256, 4, 16),
        (E4M3, E5M2, 128, 256, 4, 8),
        (E4M3, E5M2, 128, 256, 4, 16)
    )
)]
pub fn matmul_fp8<EA: WgmmaWith<EB>, EB: WgmmaInput, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<Fp8TileOf<EA, BM>>,
    b: Tma<Fp8TileOf<EB, BN>>,
    c: Tma<EpiTileOf<BM>>,
    scales: GmemRef<f32>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[Fp8TileOf<EA, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[[Fp8TileOf<EB, BN>; 1]; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
    Wgmma<BN>: ArrayLayout,
{
    const {
        assert!(BN % EPI_N == 0, "matmul_fp8: BN must be whole 64-column epilogue sub-tiles");
        assert!(EA::K == kernel_device::wgmma::WGMMA_K_FP8, "matmul_fp8: A and B must be FP8 (e4m3 or e5m2)");
    };
    let scale = scales.read(0) * scales.read(1);
    gemm_multi_of::<EA, EB, TK8, 1, BM, BN, BN, STAGES, GRID_W>(
        a, [b], c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed,
        |_: TileAt, [acc]: [AccBlock<BN>; 1]| acc * scale,
    );
}

/// [`matmul_fp8_rowwise`]'s tile: the per-tensor kernel's.
pub const RW_BM: usize = 128;
/// See [`RW_BM`].
pub const RW_BN: usize = 256;

/// [`matmul_fp8_rowwise`]'s epilogue: `acc · sa[row] · sb[col]`. Before a
/// tile's mainloop each of the 256 compute threads reads one scale of the
/// tile's `BN` columns and, the first `BM`, one of its rows (clamped to M
/// and N: the rows and columns TMA zero-filled read the last scale); after
/// it they write them to SMEM, and as each `64 x 64` sub-tile of the
/// output is stored each thread reads the scales of its own rows and
/// columns of it from there ([`MultiEpilogue::sub_tile`]). No barrier of
/// its own: [`store_out`]'s first barrier of the tile orders the writes
/// before every read, and its last one orders this tile's reads before the
/// next tile's writes.
#[derive(Clone, Copy)]
struct RowwiseScales {
    a_scales: GmemRef<f32>,
    b_scales: GmemRef<f32>,
    m: u32,
    n: u32,
    smem: Smem<[f32; RW_BM + RW_BN]>,
}

impl MultiEpilogue<RW_BN, 1> for RowwiseScales {
    type Prefetched = (f32, f32);
    #[inline(always)]
    fn prefetch(&self, tile: TileAt) -> (f32, f32) {
        let t = thread_linear() as usize;
        // SAFETY: the host checked `a_scales` holds M and `b_scales` N
        // scales; the indices are clamped below them.
        let col = unsafe { self.b_scales.read_nc_unchecked(((tile.col + t % RW_BN) as u32).min(self.n - 1) as usize) };
        // SAFETY: as above.
        let row = unsafe { self.a_scales.read_nc_unchecked(((tile.row + t % RW_BM) as u32).min(self.m - 1) as usize) };
        (row, col)
    }
    #[inline(always)]
    fn begin(&self, (row, col): (f32, f32)) {
        let t = thread_linear() as usize;
        if t < RW_BM {
            self.smem.write(t, row);
        }
        self.smem.write(RW_BM + t % RW_BN, col);
    }
    #[inline(always)]
    fn apply(&self, _at: TileAt, [acc]: [AccBlock<RW_BN>; 1]) -> AccBlock<RW_BN> {
        acc
    }
    /// The scales of one `64 x 64` sub-tile: 16 column scales and 2 row
    /// scales per thread, read from SMEM as the sub-tile is stored (all
    /// `BN / 4` column scales at once, beside the 128 accumulator
    /// registers, spilled 248 bytes).
    #[inline(always)]
    fn sub_tile(&self, at: TileAt, cols: Array<f32, Wgmma<EPI_N>>) -> Array<f32, Wgmma<EPI_N>> {
        let t = thread_in_warpgroup() as usize;
        let (row0, col0) = (at.row % RW_BM, at.col % RW_BN);
        Array::from_fn(|i| {
            let (r, c) = Wgmma::<EPI_N>::coords(t, i);
            cols.get(i) * (self.smem.read(row0 + r) * self.smem.read(RW_BM + col0 + c))
        })
    }
}

/// `C[i, j] = sa[i] · sb[j] · Σ_k A[i, k] B[j, k]` in FP8 (e4m3): row-wise
/// scales, one per row of A (`sa`, M f32) and one per row of B, that is
/// per column of C (`sb`, N f32), f16 out.
///
/// This kernel works as [`matmul_fp8`]: the same mainloop and constraints,
/// no promotion (the scales are per row and column, not per block of K, so
/// they factor out of the K sum). Its epilogue ([`RowwiseScales`]) reads
/// the tile's scales before the mainloop, one per thread, and multiplies
/// the f32 accumulators by both as each `64 x 64` sub-tile of the output
/// is stored, before rounding to f16. Measured on an H100 (RESULTS.md,
/// 2026-11-27 fourth session): 1-2.5 % behind [`matmul_fp8`].
///
/// Launch: as [`matmul_fp8`]'s, with `a_scales` (M f32), `b_scales` (N
/// f32), `m` and `n` in place of `scales`. SMEM: [`matmul_fp8`]'s plus
/// `(BM + BN) x 4` bytes.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((4, 8), (4, 16)))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8_rowwise<const STAGES: usize, const GRID_W: u32>(
    a: Tma<A8TileOf<RW_BM>>,
    b: Tma<B8TileOf<RW_BN>>,
    c: Tma<EpiTileOf<RW_BM>>,
    a_scales: GmemRef<f32>,
    b_scales: GmemRef<f32>,
    m: u32,
    n: u32,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[A8TileOf<RW_BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[[B8TileOf<RW_BN>; 1]; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<RW_BM>; 2]>,
    #[scratch] scales: Smem<[f32; RW_BM + RW_BN]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) {
    let epilogue = RowwiseScales { a_scales, b_scales, m, n, smem: scales };
    gemm_multi_of::<E4M3, E4M3, TK8, 1, RW_BM, RW_BN, RW_BN, STAGES, GRID_W>(a, [b], c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed, epilogue);
}

/// K (and, for B, N) of one scale block: A has one scale per row and 128
/// of K (1 x 128), B one per 128 x 128 block (DeepSeek-V3's recipe).
pub const SCALE_BLOCK: usize = 128;
/// [`matmul_fp8_blockscaled`]'s tile: `128 x 256` (two B scale blocks per
/// tile and K step; `128 x 128` tiles ran 7-10 % slower on the H100).
pub const BS_BM: usize = 128;
/// [`matmul_fp8_blockscaled`]'s registers per thread: each compute
/// warpgroup's and the memory warpgroup's (`setmaxnreg`). They may sum to
/// at most the pool the CTA is launched with, 3 x 168 = 504 per thread
/// slot at 384 threads: `setmaxnreg.inc` waits for registers the other
/// roles free, so 240 + 240 + 32 hangs on the GPU.
pub const BS_COMPUTE_REGS: u32 = 232;
/// See [`BS_COMPUTE_REGS`].
pub const BS_MEMORY_REGS: u32 = 40;
const _: () = assert!(
    kernel_device::wgmma::counts_fit(&[BS_COMPUTE_REGS, BS_COMPUTE_REGS, BS_MEMORY_REGS]),
    "setmaxnreg: the roles' counts must sum to at most the CTA's register pool (3 x 168 at 384 threads)"
);
/// See [`BS_BM`].
pub const BS_BN: usize = 2 * SCALE_BLOCK;

/// Step `k`'s four scales of the block-scaled GEMMs' K loop
/// ([`blockscaled_k_loop!`]) for this thread's two rows and the tile's two
/// B scale blocks: `[sa[rows[0]], sa[rows[1]], sb[nblk[0]], sb[nblk[1]]]`
/// of K block `k` (`sa` K-block-major, `m` per block; `sb` `k_steps` per
/// N block). Loaded a step ahead through the read-only path, and loaded
/// only: multiplied where used, so the loads stay in flight. Indices in 32
/// bits (fewer registers): the scales of an A that fits in device memory
/// number far fewer than 2^32 (one per 128 bytes).
///
/// # Safety
/// Every index is in bounds (`k < k_steps`, `rows < m`, `nblk` below the
/// N blocks); unchecked, because these loads are issued while the
/// warpgroup's MMAs run and a check's trap branch there would make ptxas
/// serialize the wgmmas.
#[inline(always)]
#[track_caller]
pub(crate) unsafe fn step_scales(a_scales: GmemRef<f32>, b_scales: GmemRef<f32>, m: u32, rows: [u32; 2], nblk: [u32; 2], k_steps: u32, k: u32) -> [f32; 4] {
    let at = k * m;
    // SAFETY: the caller's contract.
    unsafe {
        [
            a_scales.read_nc_unchecked((at + rows[0]) as usize),
            a_scales.read_nc_unchecked((at + rows[1]) as usize),
            b_scales.read_nc_unchecked((nblk[0] * k_steps + k) as usize),
            b_scales.read_nc_unchecked((nblk[1] * k_steps + k) as usize),
        ]
    }
}

/// The compute warpgroups' K loop of the block-scaled FP8 GEMMs
/// ([`matmul_fp8_blockscaled`], and the grouped one,
/// [`crate::grouped::grouped_matmul_fp8_blockscaled`]): one output tile's
/// `64 x 256` f32 total of this warpgroup (rows `row0 ..` of the tile),
/// promoted every K step (see [`matmul_fp8_blockscaled`], step 2).
///
/// `blockscaled_k_loop!(a_bufs, b_bufs, consumer, k_steps, row0,
/// scales)`: the ring's buffers, the compute warpgroup's ring
/// [`Consumer`](kernel_device::pipeline::Consumer) (it waits for and
/// releases every step of the tile; a caller that must read something the
/// producer wrote with the first step [`peek`](kernel_device::pipeline::Consumer::peek)s it), the tile's K steps,
/// `scales(k)`, step `k`'s four scales `[sa[row], sa[row + 8], sb[first
/// block], sb[second block]]` for this thread's rows `r`, `r + 8` (loaded a
/// step ahead, unchecked: see the callers). Evaluates to the total
/// (`Acc<BS_BN>`).
// A macro, so that both kernels compile as if it were written in place
// (register allocation around the wgmmas is what this loop's speed is made of).
macro_rules! blockscaled_k_loop {
    ($a_bufs:expr, $b_bufs:expr, $consumer:expr, $k_steps:expr, $row0:expr, $scales:expr) => {{
        const BN: usize = $crate::matmul_fp8::BS_BN;
        const H: usize = BN / 2;
        let (k_steps, row0): (u32, usize) = ($k_steps, $row0);
        let scales = $scales;
        // Zeroed register by register: `Acc::zeros()` of 128 registers is a
        // 512-byte array that LLVM lowers through local memory.
        let mut acc = kernel_device::wgmma::Acc::<BN>::undefined();
        kernel_device::array::regs::unroll(BN / 2, |i| acc.regs[i] = 0.0);
        // One step accumulator of one column half (one scale block of B):
        // each half's four m64n128k32 MMAs, waited for, then promoted
        // while the other warpgroup's MMAs run.
        let mut part = kernel_device::wgmma::Acc::<H>::undefined();
        // Every MMA is waited for before the loop's back edge (C7514).
        let mut scale: [f32; 4] = scales(0);
        for k in 0..k_steps {
            let next = scales((k + 1).min(k_steps - 1));
            let slot = $consumer.wait();
            let s = slot.index();
            // Each half: its MMAs into `part` (overwritten) as one group,
            // waited for, then `acc[.., half h] += part · sa[row] sb[block
            // h]`; `Acc<H>` register `i` is `Acc<BN>` register `h H / 2 +
            // i`.
            kernel_device::array::regs::unroll(2, |h| {
                part.mma($a_bufs.at(s), row0, $b_bufs.at(s).at(0), h * H, false);
                kernel_device::wgmma::wgmma_commit_group();
                kernel_device::wgmma::wgmma_wait::<0>();
                if h == 1 {
                    $consumer.release_slot(slot);
                }
                part.fence_operands();
                let sb = scale[2 + h];
                let row_scale = [scale[0] * sb, scale[1] * sb];
                kernel_device::array::regs::unroll(H / 2, |i| acc.regs[h * H / 2 + i] = part.regs[i].fma(row_scale[(i / 2) % 2], acc.regs[h * H / 2 + i]));
                // Keeps the first half's promotion before the second
                // half's MMAs into `part` are issued (else LLVM may sink it
                // past them through copies, and ptxas serializes every
                // wgmma: C7514). Not after the second half, which ends the
                // step: there the fence pinned the total's registers, and
                // ptxas copied 29 of them back and forth every step (280 ->
                // 249 instructions per warp and K step without it, 0.4-2.8 %
                // faster on an H100, RESULTS.md 2026-11-27).
                if h == 0 {
                    acc.fence_operands();
                }
            });
            scale = next;
        }
        acc
    }};
}
pub(crate) use blockscaled_k_loop;

/// Block-scaled FP8 GEMM: `C[i, j] = Σ_kb sa[kb][i] sb[j / 128][kb] ·
/// Σ_{k in block kb} A[i, k] B[j, k]` (A `M x K`, B `N x K`, e4m3
/// K-major; `sa` `ceil(K / 128) x M` f32, one scale per row and 128 of K,
/// stored K-block-major so a warp's rows are adjacent; `sb` `ceil(N / 128)
/// x ceil(K / 128)` f32, one per 128 x 128 block of B; C `M x N` f16).
///
/// This kernel works as follows:
/// 1. tiles, order and the memory warpgroup as [`gemm_multi_of`]'s
///    (`gemm_multi::produce`): `BM x BN = 128 x 256` tiles of K steps of
///    128, so one K step is one scale block of A and two of B (columns
///    `0 ..` and `128 ..` of the tile);
/// 2. compute warpgroup `w` owns rows `64 w ..` of the tile and its `64 x
///    256` f32 total. Per K step it computes the partial product in two
///    column halves, one scale block of B each: a group of 4 `m64n128k32`
///    wgmmas into one step accumulator (overwritten: `accumulate =
///    false`), waited for, then promoted, `acc += part · sa[row] sb[half]`,
///    while the other warpgroup's MMAs run. Every wgmma is waited for
///    before the loop's back edge (one left in flight across it makes
///    ptxas serialize them all, C7514). The scales (`sa` for this thread's
///    two rows, `sb` for the tile's two N blocks) are loaded a step ahead,
///    unchecked (a check's trap branch between a wgmma and its wait
///    serializes them too; the host checked the buffers' lengths). This is
///    two-level accumulation, the tensor core's FP8 accumulator holding
///    only 128 of K: DeepGEMM's and CUTLASS's recipe for accuracy. Measured
///    on an H100 (RESULTS.md): n128 halves were 1-4 % faster than four
///    `m64n64k32` quarters with two step accumulators taking turns (each
///    promoted under the next one's MMAs: an `n64` FP8 wgmma reads A and B
///    from shared memory at its full 128 bytes per cycle), and the two
///    warpgroups taking strict turns on the tensor pipe (`TurnOrder`) was
///    17 % slower than letting their MMAs interleave;
/// 3. the f32 accumulator leaves as f16 through
///    [`crate::gemm_multi::store_out`] (double-buffered sub-tiles, TMA
///    stores overlapping the next tile).
///
/// Launch: grid of at most `min(SMs, m_tiles x n_tiles)` (any count),
/// `m_tiles = ceil(M / 128)`,
/// `n_tiles = ceil(N / 256)`, `k_steps = ceil(K / 128)`; maps as
/// [`matmul_fp8`]'s with `BN = 256`.
///
/// Constraints: tiles `BM x BN = 128 x 256`; a compute warpgroup holds the
/// `64 x 256` total and one `64 x 128` step accumulator, 192 of its
/// [`BS_COMPUTE_REGS`] = 232 registers; the memory warpgroup runs on
/// [`BS_MEMORY_REGS`] = 40 (232 + 232 + 40 = 504, the launch pool). ptxas
/// spills 4 bytes: the thread index, computed before the role split and
/// reloaded after the last tile (once per kernel). Since the warpgroup
/// index became warp-uniform ([`kernel_device::warpgroup_idx_sync`]),
/// 232/40 runs 1-5 % faster than 240/24 on an H100 (which had been 2-6 %
/// faster before: 240/24 spilled the memory warpgroup's loop counters,
/// 232/40 a tile coordinate in the compute warpgroups; RESULTS.md).
/// `K % 16 == 0`, `N % 8 == 0`; SMEM `STAGES x 48 KB + 32 KB`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((4, 8), (4, 16)))]
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
    let ring = Ring::new(&loaded, &consumed, 256);
    if warpgroup_idx() == 2 {
        let b = [b];
        produce::<E4M3, E4M3, TK8, 1, BM, BN, STAGES, GRID_W, BS_MEMORY_REGS>(&a, &b, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, ring);
        return;
    }
    setmaxnreg_inc::<BS_COMPUTE_REGS>();
    // Without the pin ptxas dropped this kernel's `setmaxnreg` (C7508, see
    // `pin_entry_registers`) in the split-halves version.
    pin_entry_registers();
    let row0 = warpgroup_idx_sync() as usize * 64;
    let t = thread_in_warpgroup() as usize;
    // This thread's rows in the tile: `r` (register pairs with `p % 2 ==
    // 0`) and `r + 8` (the others), the WGMMA fragment layout.
    let r = (row0 + 16 * (t / 32) + (t % 32) / 4) as u32;
    let mut consumer = ring.consumer();
    let mut sub_tiles = 0u32;
    nd_loop([m_tiles * n_tiles], Collective::Blocks, |info| {
        let (pm, pn) = planar_snake(info.index[0], (m_tiles, n_tiles), 0, GRID_W);
        // Rows past M (zero-filled A) read the last row's scale.
        let rows = [(pm * BM as u32 + r).min(m - 1), (pm * BM as u32 + r + 8).min(m - 1)];
        // B's scale blocks along N (the host checked `b_scales` holds
        // `ceil(N / 128) x k_steps`); a tile's second block past N (its
        // columns are zero-filled) reads the last one.
        let n_blocks = (b_scales.len() / k_steps as usize) as u32;
        let nblk = [2 * pn, (2 * pn + 1).min(n_blocks - 1)];
        // SAFETY: the host checked `a_scales` holds `k_steps x m` and
        // `b_scales` `n_blocks x k_steps` (rows < m, `nblk < n_blocks`; the K
        // loop asks for `k < k_steps`).
        let scales = |k: u32| unsafe { step_scales(a_scales, b_scales, m, rows, nblk, k_steps, k) };
        let acc = blockscaled_k_loop!(a_bufs, b_bufs, consumer, k_steps, row0, scales);
        let out = [acc.into_array(), AccBlock::<BN>::splat(0.0)];
        sub_tiles = store_out::<BM, BN>(&out, &c, epi, (pm, pn), row0, sub_tiles, |_, cols| cols);
    });
    if thread_linear() == 0 {
        wait_group::<0>();
    }
}
