//! Building blocks of the warp-specialized Hopper GEMMs: this crate's
//! [`matmul`](crate::matmul) kernels and the Hopper ladder
//! (`examples/kernels/src/hopper_ladder`, steps 2 on) share them. `C = A ·
//! Bᵀ` (A `M x K`, B `N x K`, row-major f16, f32 accumulation), `BM x BN`
//! CTA tiles, K steps of 64, one memory warpgroup (number 2) and two compute
//! warpgroups, each owning `BM / 2` rows of the tile.
use kernel_device::layout::{Swizzled, Tile};
use kernel_device::smem::Smem;
use kernel_device::sync::NamedBarrier;
use kernel_device::array::regs::unroll;
use kernel_device::array::{Array, Scalar, Wgmma};
use kernel_device::index::thread_linear;
use kernel_device::thread_in_warpgroup;
use kernel_device::tma::{commit_group, Tma};
use kernel_device::wgmma::{Acc, Cols, WgmmaInput, WgmmaShape};
use kernel_device::cvt::{Bf16x2, F16x2};
use kernel_device::{bf16, f16};

/// A 16-bit wgmma input type the GEMMs (and attention) run on, with the
/// conversion of their f32 accumulators back to it: f16 or bf16.
pub trait GemmElem: WgmmaInput + Scalar + kernel_device::pack::Pack16 {
    /// Two f32 to a packed pair of `Self` (`lo` in bits 0..16):
    /// [`Scalar::pair_word`], which both 16-bit types have.
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        Self::pair_word(lo, hi).unwrap_or(0)
    }
    /// The inverse of [`GemmElem::pack`]: a packed pair as two f32 (exact).
    fn unpack(w: u32) -> (f32, f32);
}
impl GemmElem for f16 {
    #[inline(always)]
    fn unpack(w: u32) -> (f32, f32) {
        F16x2(w).to_f32()
    }
}
impl GemmElem for bf16 {
    #[inline(always)]
    fn unpack(w: u32) -> (f32, f32) {
        Bf16x2(w).to_f32()
    }
}

/// The swizzle of every tile: 128 bytes (64 f16), tiling (8, 64).
pub type Sw = Swizzled<128>;
/// K step of every kernel: one 128-byte swizzle span of f16.
pub const TK: usize = 64;
/// A's tile of element type `E`: `BM x 64` of `A (M x K)`.
pub type ATile<E, const BM: usize> = Tile<E, BM, TK, Sw>;
/// B's tile of element type `E`: `BN x 64` of `B (N x K)` (K-major).
pub type BTile<E, const BN: usize> = Tile<E, BN, TK, Sw>;
/// A's f16 tile.
pub type ATileOf<const BM: usize> = ATile<f16, BM>;
/// B's f16 tile.
pub type BTileOf<const BN: usize> = BTile<f16, BN>;
/// A whole output tile `BM x BN`.
pub type OTileOf<const BM: usize, const BN: usize> = Tile<f16, BM, BN, Sw>;
/// Epilogue sub-tile width: one 64-column swizzle block.
pub const EPI_N: usize = 64;
/// An epilogue sub-tile `BM x 64` of element type `E`.
pub type EpiTile<E, const BM: usize> = Tile<E, BM, EPI_N, Sw>;
/// An f16 epilogue sub-tile.
pub type EpiTileOf<const BM: usize> = EpiTile<f16, BM>;

/// The compute warpgroups (the memory warpgroup is number 2).
pub const COMPUTE_WGS: u32 = 2;
/// The named barrier of the two compute warpgroups (256 threads). Ids 8..=15
/// are the emulator's.
pub const COMPUTE_BARRIER: NamedBarrier = NamedBarrier::new(1, 256);
/// Register budgets per role (`setmaxnreg`): 40 for the memory warpgroup,
/// 232 for the compute ones. 40 + 2 x 232 = 504 is the register pool of a
/// 384-thread CTA (3 x 168; `kernel_device::wgmma::counts_fit` checks it), which
/// the roles may not exceed: a `setmaxnreg.inc` would wait forever.
pub const MEMORY_REGS: u32 = 40;
pub const COMPUTE_REGS: u32 = 232;
const _: () = assert!(
    COMPUTE_WGS == 2 && kernel_device::wgmma::counts_fit(&[COMPUTE_REGS, COMPUTE_REGS, MEMORY_REGS]),
    "setmaxnreg: the roles' counts must sum to at most the CTA's register pool (3 x 168 at 384 threads)"
);

/// The checks every tile shape passes: one compute warpgroup holds
/// `BM / 2` rows x `BN` columns in f32 (at most 128 registers per thread).
pub const fn check_tile(bm: usize, bn: usize) {
    assert!(bm == 128 || bm == 256, "warp-specialized GEMM: BM must be 128 or 256 (each compute warpgroup owns BM / 2 rows, one or two 64-row wgmma blocks)");
    assert!(bn == 64 || bn == 128 || bn == 256, "warp-specialized GEMM: BN must be 64, 128 or 256 (wgmma N)");
    assert!(bm * bn <= 128 * 256, "warp-specialized GEMM: BM x BN at most 128 x 256: a compute warpgroup holds BM / 2 x BN f32 accumulators in at most 128 registers per thread");
}

/// One compute warpgroup's accumulators: rows `row0 .. row0 + BM / 2` of the
/// CTA tile, as one (`BM = 128`) or two (`BM = 256`) `64 x BN` blocks. The
/// second block is never touched when `BM = 128` (it costs no registers).
pub struct WgAcc<const BM: usize, const BN: usize>
where
    Cols<BN>: WgmmaShape,
{
    pub blocks: [Acc<BN>; 2],
}

impl<const BM: usize, const BN: usize> WgAcc<BM, BN>
where
    Cols<BN>: WgmmaShape,
{
    #[inline(always)]
    pub fn undefined() -> Self {
        WgAcc { blocks: [Acc::undefined(), Acc::undefined()] }
    }

    /// Issues one K step (`K = 64`: 4 wgmmas per 64-row block) of this
    /// warpgroup's rows from `row0`; no commit. Warpgroup-collective.
    #[inline(always)]
    #[track_caller]
    pub fn mma<E: WgmmaInput>(&mut self, a: Smem<ATile<E, BM>>, row0: usize, b: Smem<BTile<E, BN>>, accumulate: bool) {
        self.blocks[0].mma(a, row0, b, 0, accumulate);
        if BM == 256 {
            self.blocks[1].mma(a, row0 + 64, b, 0, accumulate);
        }
    }

    /// Writes the whole `BM / 2 x BN` block as f16 into `dst` at row `row0`
    /// (after `wgmma_wait::<0>()`).
    #[inline(always)]
    pub fn store_f16(&mut self, dst: Smem<OTileOf<BM, BN>>, row0: usize) {
        self.blocks[0].store_f16(dst, row0, 0);
        if BM == 256 {
            self.blocks[1].store_f16(dst, row0 + 64, 0);
        }
    }

    /// Writes columns `64 j .. 64 j + 64` of the block as `E` (f16 or bf16)
    /// into the epilogue sub-tile `dst` at row `row0` (after
    /// `wgmma_wait::<0>()`), with `stores` ([`store_block_cols`]).
    #[inline(always)]
    pub fn store_cols<E: GemmElem>(&mut self, dst: Smem<EpiTile<E, BM>>, row0: usize, j: usize, stores: Stores) {
        store_block_cols(&mut self.blocks[0], dst, row0, j, stores);
        if BM == 256 {
            store_block_cols(&mut self.blocks[1], dst, row0 + 64, j, stores);
        }
    }

    /// The output of tile `(pm, pn)` as the matmuls of
    /// [`crate::matmul`] write it (after `wgmma_wait::<0>()`): for each of
    /// the `BN / 64` column sub-tiles, thread 0 waits until the TMA store of
    /// two sub-tiles ago has read the buffer it reuses, the compute
    /// warpgroups meet ([`COMPUTE_BARRIER`]), write their rows of the
    /// sub-tile into buffer `sub_tiles % 2`, fence (`commit_smem`) and meet
    /// again, and thread 0 issues the sub-tile's TMA store without waiting
    /// for it: it runs under the next tile's wgmmas. Both compute
    /// warpgroups call it; it returns the sub-tile count after the tile's.
    #[inline(always)]
    #[track_caller]
    pub fn store_tile<E: GemmElem>(&mut self, c: &Tma<EpiTile<E, BM>>, epi: Smem<[EpiTile<E, BM>; 2]>, (pm, pn): (u32, u32), row0: usize, sub_tiles: u32) -> u32 {
        let leader = thread_linear() == 0;
        // 256-row tiles (two accumulator blocks per warpgroup) keep pair
        // stores: with `stmatrix` two of their kernels spilled 4 bytes.
        let stores = if BM == 128 { Stores::Matrix } else { Stores::Pairs };
        self.store_tile_with(epi, row0, sub_tiles, stores, |buf, j| {
            if leader {
                c.store(buf, pm * BM as u32, pn * BN as u32 + (j * EPI_N) as u32);
                commit_group();
            }
        })
    }

    /// [`WgAcc::store_tile`] with the SMEM writes of `stores` and each
    /// complete sub-tile (`BM x 64` in `buf`, the tile's columns `64 j ..`)
    /// written by `emit(buf, j)` (`epilogue_sub_tile!`, whose contract
    /// `emit` keeps): a TMA store from thread 0 ([`WgAcc::store_tile`]) or
    /// the stores of a partial tile's rows (the grouped GEMM).
    #[inline(always)]
    #[track_caller]
    pub fn store_tile_with<E: GemmElem>(&mut self, epi: Smem<[EpiTile<E, BM>; 2]>, row0: usize, mut sub_tiles: u32, stores: Stores, emit: impl Fn(Smem<EpiTile<E, BM>>, usize)) -> u32 {
        let leader = thread_linear() == 0;
        for j in 0..BN / EPI_N {
            epilogue_sub_tile!(epi, sub_tiles, leader, |buf| self.store_cols(buf, row0, j, stores), |buf| emit(buf, j));
            sub_tiles += 1;
        }
        sub_tiles
    }
}

/// One sub-tile of the double-buffered epilogue every GEMM of this crate
/// ends its tiles with (the one definition of its protocol):
/// `epilogue_sub_tile!(epi, sub_tiles, leader, |buf| write, |buf| emit)`
/// takes buffer `sub_tiles % 2` of `epi`; thread 0 (`leader`) waits until
/// the TMA store of two sub-tiles ago, which read that buffer, has read it
/// (`wait_group_read::<1>`); the compute warpgroups meet
/// ([`COMPUTE_BARRIER`]), run `write` (their rows into `buf`), fence
/// (`commit_smem`) and meet again; then every compute thread runs `emit`.
///
/// The wait counts on each sub-tile's `emit` committing exactly one bulk
/// group from thread 0 (a TMA store of `buf`). An `emit` that writes
/// `buf` out otherwise (plain stores, the grouped GEMMs' partial tiles)
/// commits none, so it must have thread 0 wait for every earlier group's
/// reads (`wait_group_read::<0>`) and be done reading `buf` when it
/// returns.
///
/// A macro, not a function: as a function taking the two closures it made
/// ptxas serialize the wgmmas of every `WgAcc` kernel (C7520) and spill 4
/// bytes in the cluster ones.
macro_rules! epilogue_sub_tile {
    ($epi:expr, $sub_tiles:expr, $leader:expr, |$buf:ident| $write:expr, |$buf2:ident| $emit:expr) => {{
        let $buf = $epi.at(($sub_tiles % 2) as usize);
        if $leader {
            kernel_device::tma::wait_group_read::<1>();
        }
        $crate::gemm::COMPUTE_BARRIER.sync();
        $write;
        kernel_device::tma::commit_smem();
        $crate::gemm::COMPUTE_BARRIER.sync();
        let $buf2 = $buf;
        $emit;
    }};
}
pub(crate) use epilogue_sub_tile;

/// How an epilogue writes its sub-tiles to SMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    /// `stmatrix .x4`, 16 x 16 elements per warp and instruction
    /// ([`Array::store_tile`]): a quarter of the instructions of `Pairs`.
    Matrix,
    /// One 4-byte store per pair of columns: for kernels where `Matrix`
    /// costs spills (the grouped GEMM, whose sub-tile index is a run-time
    /// value; the 256-row tiles).
    Pairs,
}

/// Columns `64 j .. 64 j + 64` of one `64 x N` accumulator block into `dst`
/// at row `row0`, as `E`: for the sub-tile `jj == j` (of the `N / 64`,
/// unrolled, so a run-time `j` costs a uniform branch per sub-tile, not a
/// register indexed at run time) its columns as a `64 x 64` register
/// array (the accumulator's register pairs `p` with `8 (p / 2) / 64 ==
/// jj`; no instruction moves them) stored by [`Array::store_tile`]; with
/// [`Stores::Pairs`], each register pair of the sub-tile as one 4-byte
/// store (a run-time `j` predicates them).
#[inline(always)]
pub fn store_block_cols<E: GemmElem, const N: usize, const R: usize>(acc: &mut Acc<N>, dst: Smem<EpiTile<E, R>>, row0: usize, j: usize, stores: Stores)
where
    Cols<N>: WgmmaShape,
{
    acc.fence_operands();
    match stores {
        Stores::Matrix => unroll(N / EPI_N, |jj| {
            if jj == j {
                let mut cols = Array::<f32, Wgmma<EPI_N>>::splat(0.0);
                let pairs = EPI_N / 4;
                <Cols<N>>::for_each_pair(&acc.regs, |p, v0, v1| {
                    if 8 * (p / 2) / EPI_N == jj {
                        let q = p - pairs * jj;
                        cols.set(2 * q, v0);
                        cols.set(2 * q + 1, v1);
                    }
                });
                cols.store_tile(dst, row0, 0);
            }
        }),
        Stores::Pairs => {
            let t = thread_in_warpgroup() as usize;
            let (w, l) = (t / 32, t % 32);
            let (row, col) = (row0 + 16 * w + l / 4, 2 * (l % 4));
            let base = dst.ptr().cast::<u8>();
            <Cols<N>>::for_each_pair(&acc.regs, |p, v0, v1| {
                let c = 8 * (p / 2);
                if c / EPI_N == j {
                    let off = EpiTile::<E, R>::offset_of(row + 8 * (p % 2), c % EPI_N + col);
                    // SAFETY: row < R (row0 + 64 <= R), column < 64; 4-byte aligned.
                    unsafe { kernel_device::smem::write_word(base.add(off), E::pack(v0, v1)) };
                }
            });
        }
    }
}
