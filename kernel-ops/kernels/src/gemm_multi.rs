//! A GEMM over several B operands at once, with a register-array epilogue:
//! `C = epilogue(A · B0ᵀ, A · B1ᵀ, ..)` (A `M x K`, each `Bi` `N x K`, C
//! `M x N`, row-major f16, f32 accumulation). A SwiGLU is
//! `|_, [g, u]| g.silu() * u` over `B0 = W1`, `B1 = W3` (see
//! [`crate::swiglu`]); a gated MLP with another gate is another closure.
//!
//! It is the library's plain GEMM ([`crate::matmul::matmul_persistent_ws`],
//! the Hopper ladder's step 4: persistent, warp-specialized, planar-snake
//! tile order, an epilogue through double-buffered SMEM sub-tiles whose TMA
//! stores overlap the next tile) with the B side made of `OPS` operands:
//! the A tile is loaded once per K step for all of them, and the `OPS`
//! B tiles (`BN x 64` each, at the same N offset) land next to each other
//! in SMEM, where they form one `OPS BN x 64` tile. Each compute warpgroup
//! multiplies its A rows by that whole tile with ONE wgmma of
//! `N = NW = OPS x BN` per k16 step, so its accumulator holds the operands'
//! blocks side by side (columns `o BN .. (o + 1) BN` are operand `o`);
//! the epilogue gets them split into one register array per operand (no
//! instruction: the WGMMA layout of `N = NW` restricted to a column range
//! is the layout of `N = BN`).
//!
//! Tile shape and budget: with two operands the instance is `BM = 128`,
//! `BN = 128` per operand, `NW = 256`: per K step and compute warpgroup the
//! same 4 `m64n256k16` wgmmas over the same SMEM (`A 128 x 64 + 2 x B
//! 128 x 64` = the plain kernel's `A 128 x 64 + B 256 x 64`), the same 128
//! accumulator registers per thread, the same FLOPs per byte loaded as the
//! plain `128 x 256` kernel: the mainloop is the plain kernel's
//! instruction for instruction, and only the epilogue differs (it reads
//! two accumulators per output element and stores half as many bytes).
//!
//! Inputs: f16 or bf16 (K steps of 64, `m64nNk16`), or FP8 e4m3/e5m2 (K
//! steps of 128, `m64nNk32`: [`crate::matmul_fp8`]) through [`gemm_multi_of`];
//! one 128-byte swizzle span of K per step either way (`E`, `TKE`).
//! [`gemm_multi`] is the f16 form, and the sizes below are f16's.
//!
//! Shapes: `m_tiles = ceil(M / BM)`, `n_tiles = ceil(N / BN)`,
//! `k_steps = ceil(K / TKE)`; TMA zero-fills loads past the matrices' edges
//! and clips stores, so any `M`, `N`, `K` with `K % 8 == 0` and
//! `N % 8 == 0` (rows of 16-byte multiples) works (the zero-filled rows
//! and columns reach the epilogue, whose outputs there are clipped).
/// The plain GEMM's building blocks, which this one shares (its users
/// import the tile types from here).
pub use crate::gemm::{ATileOf, BTileOf, EpiTileOf, COMPUTE_BARRIER, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};

/// An operand tile of [`gemm_multi`] with elements `E`: `R` rows of one
/// 128-byte swizzle span of K (`TKE = 128 / size_of::<E>()` elements: 64
/// for f16/bf16, 128 for FP8). `InTile<f16, BM, 64>` is [`ATileOf`]`<BM>`.
pub type InTile<E, const R: usize, const TKE: usize> = Tile<E, R, TKE, crate::gemm::Sw>;

use kernel_device::array::regs::unroll;
use kernel_device::array::{Array, ArrayLayout, TileAt, Wgmma};
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::pipeline::Ring;
use kernel_device::wgmma::{setmaxnreg_inc, Acc, Cols, WgmmaInput, WgmmaShape, WgmmaWith};
use kernel_device::layout::Tile;
use kernel_device::Barriers;

/// The f32 accumulator block an epilogue receives per operand: `64 x BN`
/// in the WGMMA layout (`kernel_device::array::layout`).
pub type AccBlock<const BN: usize> = Array<f32, Wgmma<BN>>;

/// The rules every instance of [`gemm_multi`] passes (checked at compile
/// time): `OPS >= 1` operands; `BM` 128 or 256 (each compute warpgroup owns
/// `BM / 2` rows: one or two 64-row wgmma blocks); `BN` (columns per
/// operand) 64, 128 or 256 (whole 64-column epilogue sub-tiles);
/// `NW = OPS x BN`, the N of the one wgmma over all operands, is 64, 128
/// or 256 (wgmma N implemented here); and the register rule: a compute
/// warpgroup holds `BM / 2 x NW` f32 accumulators in at most 128 registers
/// per thread (`BM x NW <= 128 x 256`, the plain GEMM's `128 x 256` tile),
/// so the 232 registers of `setmaxnreg` leave room for addresses and the
/// epilogue. So: two operands at `128 x 128` (or `256 x 64`), four at
/// `128 x 64`; three do not fit a wgmma N (192 is not implemented).
pub const fn check_multi_tile(ops: usize, bm: usize, bn: usize, nw: usize) {
    assert!(ops >= 1, "gemm_multi: OPS (the number of B operands) must be at least 1");
    assert!(bm == 128 || bm == 256, "gemm_multi: BM must be 128 or 256 (each compute warpgroup owns BM / 2 rows, one or two 64-row wgmma blocks)");
    assert!(bn == 64 || bn == 128 || bn == 256, "gemm_multi: BN (columns per operand) must be 64, 128 or 256 (whole 64-column epilogue sub-tiles)");
    assert!(nw == ops * bn, "gemm_multi: NW (the N of the one wgmma over all operands) must be OPS x BN");
    assert!(nw == 64 || nw == 128 || nw == 256, "gemm_multi: NW = OPS x BN must be 64, 128 or 256 (the wgmma N implemented here): two operands at BN = 128 or 64, four at BN = 64");
    assert!(
        bm * nw <= 128 * 256,
        "gemm_multi: BM x OPS x BN must be at most 128 x 256: a compute warpgroup holds BM / 2 x OPS x BN f32 accumulators in at most 128 registers per thread (two operands: BM = 128 with BN = 128, or BM = 256 with BN = 64)"
    );
}

/// The `OPS` operand blocks of a `64 x NW` accumulator (`NW = OPS x BN`,
/// operand `o` in columns `o BN .. (o + 1) BN`) as one register array per
/// operand in the WGMMA layout of `N = BN` (after `wgmma_wait::<0>()`).
/// Register pair `p` of the accumulator is at column `8 (p / 2) + ..`
/// (PTX ISA §9.7.15.5.1), so it is pair `p mod BN / 4` of operand
/// `p / (BN / 4)`, same row; every index is a constant after unrolling,
/// so this compiles to no instruction.
#[inline(always)]
pub fn split_acc<const NW: usize, const BN: usize, const OPS: usize>(acc: &mut Acc<NW>) -> [Array<f32, Wgmma<BN>>; OPS]
where
    Cols<NW>: WgmmaShape,
    Wgmma<BN>: ArrayLayout,
{
    const { assert!(NW == OPS * BN && BN % 8 == 0, "split_acc: the accumulator's N must be OPS x BN, BN a multiple of 8") };
    acc.fence_operands();
    let mut out = [Array::<f32, Wgmma<BN>>::splat(0.0); OPS];
    let pairs = BN / 4;
    <Cols<NW>>::for_each_pair(&acc.regs, |p, v0, v1| {
        let (o, q) = (p / pairs, p % pairs);
        out[o].set(2 * q, v0);
        out[o].set(2 * q + 1, v1);
    });
    out
}

/// Columns `64 j .. 64 j + 64` of a `64 x N` block as a `64 x 64` block
/// (`j` a constant: an index of [`unroll`]). The WGMMA layout's registers
/// `32 j .. 32 j + 32` are exactly those columns, laid out as a
/// `Wgmma<64>` block: no instruction.
#[inline(always)]
pub fn cols_of<const N: usize>(out: &Array<f32, Wgmma<N>>, j: usize) -> Array<f32, Wgmma<EPI_N>>
where
    Wgmma<N>: ArrayLayout,
{
    Array::from_fn(|i| out.get(Wgmma::<EPI_N>::REGS * j + i))
}

/// The epilogue of [`gemm_multi_of`]: a closure `|at, [acc_0, ..]| out`
/// over each 64-row block (nothing else to do), or a type that also loads
/// something per tile before the mainloop, where the loads' latency hides
/// under the MMAs ([`MultiEpilogue::prefetch`]), and hands it over to the
/// blocks once the mainloop is done ([`MultiEpilogue::begin`]).
pub trait MultiEpilogue<const BN: usize, const OPS: usize>
where
    Wgmma<BN>: ArrayLayout,
{
    /// What [`MultiEpilogue::prefetch`] loaded (per thread).
    type Prefetched: Copy;
    /// Run by every compute thread before the tile's mainloop, with the
    /// tile's global coordinates (its first row and column).
    fn prefetch(&self, tile: TileAt) -> Self::Prefetched;
    /// Run by every compute thread after the tile's mainloop, before the
    /// first [`MultiEpilogue::apply`].
    fn begin(&self, prefetched: Self::Prefetched);
    /// The output of one 64-row block at `at` from the operands' blocks.
    fn apply(&self, at: TileAt, acc: [AccBlock<BN>; OPS]) -> AccBlock<BN>;
    /// The last change to one `64 x 64` sub-tile of the output at `at`,
    /// run as [`store_out`] writes it to SMEM (between the output's
    /// barriers, so what it loads stays in registers for one sub-tile
    /// only). The identity by default.
    #[inline(always)]
    fn sub_tile(&self, _at: TileAt, cols: Array<f32, Wgmma<EPI_N>>) -> Array<f32, Wgmma<EPI_N>> {
        cols
    }
}

impl<const BN: usize, const OPS: usize, F: Fn(TileAt, [AccBlock<BN>; OPS]) -> AccBlock<BN>> MultiEpilogue<BN, OPS> for F
where
    Wgmma<BN>: ArrayLayout,
{
    type Prefetched = ();
    #[inline(always)]
    fn prefetch(&self, _: TileAt) {}
    #[inline(always)]
    fn begin(&self, _: ()) {}
    #[inline(always)]
    fn apply(&self, at: TileAt, acc: [AccBlock<BN>; OPS]) -> AccBlock<BN> {
        self(at, acc)
    }
}

/// `C = epilogue(A · B0ᵀ, .., A · B(OPS-1)ᵀ)` with inputs of type `E` (f16,
/// bf16, or FP8 with `TKE = 128`; [`gemm_multi`] is the f16 form), persistent, warp-specialized,
/// with an overlapped, sub-tiled epilogue. A kernel is its parameters plus
/// a call of this (see [`crate::swiglu::swiglu`]); `epilogue` is called as
/// `epilogue(at, [acc_0, .., acc_(OPS-1)])` once per 64-row block of each
/// compute warpgroup, with the block's global coordinates `at` (row of its
/// first row, column of its first column) and each operand's f32
/// accumulator block ([`AccBlock`]); it returns the block's output, which
/// is rounded to f16 (`cvt.rn.f16x2.f32`) and stored. `NW` is `OPS x BN`
/// (a const generic of its own: Rust cannot compute it in a type).
///
/// This kernel works as follows:
/// 1. tiles, order and scheduling as the plain GEMM
///    ([`crate::matmul::matmul_persistent_ws`]): output tile
///    `i` of `m_tiles x n_tiles` ([`planar_snake`] with `GRID_W`) goes to
///    CTA `i mod grid` ([`nd_loop`]);
/// 2. one thread of the memory warpgroup (number 2), for every tile and K
///    step (a global step count over the CTA's tiles), waits until slot
///    `step % STAGES` is consumed, announces the bytes of A's tile and the
///    `OPS` B tiles on the slot's `loaded` barrier, and issues their TMA
///    loads: A's `BM x 64` tile, and each `Bi`'s `BN x 64` tile at the
///    same N offset into part `i` of the slot's B buffer (`OPS` adjacent
///    `BN x 64` tiles: together one `NW x 64` K-major tile, since a 128B-
///    swizzled tile is rows of 128 bytes in 1024-byte groups of 8);
/// 3. compute warpgroup `w` (0 or 1) owns rows `w BM / 2 ..` of the tile:
///    per K step it waits for the slot, issues the 4 wgmmas (k16 each) of
///    `N = NW` per 64-row block over the whole B buffer, commits, waits
///    until at most the group just issued is pending, and releases the
///    previous step's slot (all 256 compute threads arrive on `consumed`);
/// 4. after the last step (`wgmma_wait::<0>`, last slot released) it
///    splits each row block's accumulator into the operands' blocks
///    ([`split_acc`]) and runs `epilogue` on them: the output block, in
///    registers;
/// 5. the output leaves as the plain GEMM's does: for each of the `BN / 64` column
///    sub-tiles, thread 0 waits until the TMA store of two sub-tiles ago
///    has read the buffer it reuses, the compute warpgroups meet, write
///    their rows of the sub-tile as f16 into buffer `e % 2`, fence
///    (`commit_smem`) and meet again, and thread 0 issues the TMA store
///    without waiting for it (it overlaps the next tile's mainloop);
/// 6. at the end thread 0 waits for all its stores.
///
/// Constraints: [`check_multi_tile`]; block = 3 warpgroups; `consumed` has
/// 256 arrivals; SMEM `STAGES x (BM + NW) x 128 B + 2 x BM x 128 B`
/// <= 227 KB (`STAGES = 4` at `BM = 128`, `NW = 256`); every `Bi` has the
/// same N and K as the others, and A the same K.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn gemm_multi_of<E: WgmmaWith<EB>, EB: WgmmaInput, const TKE: usize, const OPS: usize, const BM: usize, const BN: usize, const NW: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<InTile<E, BM, TKE>>,
    b: [Tma<InTile<EB, BN, TKE>>; OPS],
    c: Tma<EpiTileOf<BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[InTile<E, BM, TKE>; STAGES]>,
    b_bufs: Smem<[[InTile<EB, BN, TKE>; OPS]; STAGES]>,
    epi: Smem<[EpiTileOf<BM>; 2]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
    epilogue: impl MultiEpilogue<BN, OPS>,
) where
    Cols<NW>: WgmmaShape,
    Wgmma<BN>: ArrayLayout,
{
    const {
        check_multi_tile(OPS, BM, BN, NW);
        assert!(TKE * core::mem::size_of::<E>() == 128, "gemm_multi: TKE (K per step) must be one 128-byte swizzle span of E: 64 for f16/bf16, 128 for FP8");
    };
    // Row blocks of 64 per compute warpgroup.
    const fn blocks(bm: usize) -> usize {
        bm / 128
    }
    let tiles = [m_tiles * n_tiles];
    let tile = |i: u32| planar_snake(i, (m_tiles, n_tiles), 0, GRID_W);
    let ring = Ring::new(&loaded, &consumed, 256);
    if warpgroup_idx() == 2 {
        produce::<E, EB, TKE, OPS, BM, BN, STAGES, GRID_W, MEMORY_REGS>(&a, &b, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, ring);
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx_sync() as usize * BM / 2;
        let leader = thread_linear() == 0;
        let mut consumer = ring.consumer();
        let mut sub_tiles = 0u32;
        nd_loop(tiles, Collective::Blocks, |info| {
            let (pm, pn) = tile(info.index[0]);
            let prefetched = epilogue.prefetch(TileAt { row: pm as usize * BM, col: pn as usize * BN });
            // One accumulator per 64-row block (the second is never touched
            // when BM = 128, and costs no registers).
            let mut acc = [Acc::<NW>::undefined(), Acc::<NW>::undefined()];
            consumer.mma_steps::<1>(k_steps, |k, slot| {
                // SAFETY: the slot's `OPS` B tiles are adjacent (an array),
                // `OPS x BN = NW` rows of 128 bytes from a 1024-aligned
                // address: byte for byte the `NW x 64` tile (checked above).
                let b_all: Smem<InTile<EB, NW, TKE>> = unsafe { b_bufs.at(slot.index()).cast_at(0) };
                unroll(blocks(BM), |r| acc[r].mma(a_bufs.at(slot.index()), row0 + 64 * r, b_all, 0, k > 0));
            });
            consumer.release_after_wgmma::<0>();
            // The epilogue, in registers: one output block per row block.
            epilogue.begin(prefetched);
            let mut out = [AccBlock::<BN>::splat(0.0); 2];
            unroll(blocks(BM), |r| {
                let at = TileAt { row: pm as usize * BM + row0 + 64 * r, col: pn as usize * BN };
                out[r] = epilogue.apply(at, split_acc::<NW, BN, OPS>(&mut acc[r]));
            });
            sub_tiles = store_out::<BM, BN>(&out, &c, epi, (pm, pn), row0, sub_tiles, |at, cols| epilogue.sub_tile(at, cols));
        });
        if leader {
            wait_group::<0>();
        }
    }
}

/// [`gemm_multi_of`] with f16 inputs (K steps of [`TK`] = 64): `C =
/// epilogue(A · B0ᵀ, ..)`, the form a SwiGLU or gated MLP calls (see
/// [`crate::swiglu::swiglu`]); the schedule is [`gemm_multi_of`]'s.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn gemm_multi<const OPS: usize, const BM: usize, const BN: usize, const NW: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATileOf<BM>>,
    b: [Tma<BTileOf<BN>>; OPS],
    c: Tma<EpiTileOf<BM>>,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[ATileOf<BM>; STAGES]>,
    b_bufs: Smem<[[BTileOf<BN>; OPS]; STAGES]>,
    epi: Smem<[EpiTileOf<BM>; 2]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
    epilogue: impl Fn(TileAt, [AccBlock<BN>; OPS]) -> AccBlock<BN>,
) where
    Cols<NW>: WgmmaShape,
    Wgmma<BN>: ArrayLayout,
{
    gemm_multi_of::<kernel_device::f16, kernel_device::f16, TK, OPS, BM, BN, NW, STAGES, GRID_W>(a, b, c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed, epilogue)
}

/// The memory warpgroup's part of [`gemm_multi_of`] (and of the kernels
/// that share its schedule with another mainloop,
/// [`crate::matmul_fp8::matmul_fp8_blockscaled`]): `setmaxnreg` down to
/// `REGS` (the kernel's memory-role count: its roles' counts must sum to at
/// most the launch pool, 3 x 168 per thread slot), then
/// one thread, for every tile of the CTA in [`planar_snake`] order and K
/// step, acquires the ring's next slot ([`Producer::acquire_tx`](kernel_device::pipeline::Producer::acquire_tx): waits
/// until it is empty, announces the bytes of A's tile and the `OPS` B
/// tiles), and issues their TMA loads into it.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub(crate) fn produce<E: WgmmaInput, EB: WgmmaInput, const TKE: usize, const OPS: usize, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32, const REGS: u32>(
    a: &Tma<InTile<E, BM, TKE>>,
    b: &[Tma<InTile<EB, BN, TKE>>; OPS],
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[InTile<E, BM, TKE>; STAGES]>,
    b_bufs: Smem<[[InTile<EB, BN, TKE>; OPS]; STAGES]>,
    ring: Ring<'_, STAGES>,
) {
    kernel_device::wgmma::setmaxnreg_dec::<REGS>();
    if thread_in_warpgroup() == 0 {
        let mut producer = ring.producer();
        nd_loop([m_tiles * n_tiles], Collective::Blocks, |info| {
            let (pm, pn) = planar_snake(info.index[0], (m_tiles, n_tiles), 0, GRID_W);
            for k in 0..k_steps {
                let slot = producer.acquire_tx(Tma::<InTile<E, BM, TKE>>::BYTES + OPS as u32 * Tma::<InTile<EB, BN, TKE>>::BYTES);
                a.load(a_bufs.at(slot.index()), pm * BM as u32, k * TKE as u32, slot.barrier());
                let bs = b_bufs.at(slot.index());
                unroll(OPS, |o| b[o].load(bs.at(o), pn * BN as u32, k * TKE as u32, slot.barrier()));
            }
        });
    }
}

/// The output of one tile (`out[r]`: the 64-row blocks of this compute
/// warpgroup's rows from `row0`, `BM / 128` of them) leaves as
/// [`gemm_multi_of`]'s does: for each of the `BN / 64` column sub-tiles,
/// thread 0 waits until the TMA store of two sub-tiles ago has read the
/// buffer it reuses, the compute warpgroups meet, write their rows of the
/// sub-tile (after `sub_tile(at, cols)`, the identity for most kernels:
/// [`MultiEpilogue::sub_tile`]) as f16 into buffer `sub_tiles % 2`, fence
/// (`commit_smem`) and meet again, and thread 0 issues the TMA store
/// without waiting for it. Both compute warpgroups call it
/// (`COMPUTE_BARRIER`); it returns the sub-tile count after the tile's.
#[inline(always)]
#[track_caller]
pub fn store_out<const BM: usize, const BN: usize>(
    out: &[AccBlock<BN>; 2],
    c: &Tma<EpiTileOf<BM>>,
    epi: Smem<[EpiTileOf<BM>; 2]>,
    (pm, pn): (u32, u32),
    row0: usize,
    sub_tiles: u32,
    sub_tile: impl Fn(TileAt, Array<f32, Wgmma<EPI_N>>) -> Array<f32, Wgmma<EPI_N>>,
) -> u32
where
    Wgmma<BN>: ArrayLayout,
{
    let leader = thread_linear() == 0;
    store_out_with::<BM, BN>(out, epi, (pm as usize * BM, pn as usize * BN), row0, sub_tiles, sub_tile, |buf, j| {
        if leader {
            c.store(buf, pm * BM as u32, pn * BN as u32 + (j * EPI_N) as u32);
            commit_group();
        }
    })
}

/// [`store_out`] for a tile whose first element is at `(row, col)` of the
/// output, written by `emit(buf, j)` instead of a TMA store: every
/// compute thread runs it once per sub-tile after the sub-tile's second
/// barrier, with the buffer holding the sub-tile (`BM x 64`, complete) and
/// the sub-tile's index `j` in the tile (its first column is `col + 64 j`):
/// a TMA store from thread 0 (what [`store_out`] passes) or stores of a
/// partial tile's rows by all 256 threads (the grouped GEMMs' last tile of
/// a group), keeping the contract of the epilogue's sub-tile protocol (`gemm::epilogue_sub_tile!`).
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn store_out_with<const BM: usize, const BN: usize>(
    out: &[AccBlock<BN>; 2],
    epi: Smem<[EpiTileOf<BM>; 2]>,
    (row, col): (usize, usize),
    row0: usize,
    sub_tiles: u32,
    sub_tile: impl Fn(TileAt, Array<f32, Wgmma<EPI_N>>) -> Array<f32, Wgmma<EPI_N>>,
    emit: impl Fn(Smem<EpiTileOf<BM>>, usize),
) -> u32
where
    Wgmma<BN>: ArrayLayout,
{
    let leader = thread_linear() == 0;
    let mut sub_tiles = sub_tiles;
    // Unrolled: `j` picks registers (`cols_of`), so it must be a constant.
    unroll(BN / EPI_N, |j| {
        crate::gemm::epilogue_sub_tile!(
            epi,
            sub_tiles,
            leader,
            |buf| unroll(BM / 128, |r| {
                let at = TileAt { row: row + row0 + 64 * r, col: col + EPI_N * j };
                sub_tile(at, cols_of(&out[r], j)).store_tile(buf, row0 + 64 * r, 0);
            }),
            |buf| emit(buf, j)
        );
        sub_tiles += 1;
    });
    sub_tiles
}
