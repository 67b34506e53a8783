//! Blackwell (sm_100a) kernels: the Blackwell matmul tutorial's steps 0-2
//! with tensor memory and `tcgen05.mma` ([`matmul0`], [`matmul1`],
//! [`matmul2`]).
//!
//! All three compute `C = A · B` with `A` (`M x K`), `B` (`K x N`, row-major,
//! read MN-major by the tensor core as in the tutorial) and `C` (`M x N`), f16
//! in, f32 accumulated in TMEM, f16 out. Configuration is compile-time:
//! `TN` (tile N: 128 or 256) and `STAGES` (pipeline depth) are instance
//! parameters; tile M is [`TILE_M`] (128: one TMEM lane per row), tile K is
//! [`TILE_K`] (64: one 128-byte swizzled row of f16), the epilogue tile of
//! `matmul2` is [`EPI_N`] columns.
//!
//! None of these kernels has run on a Blackwell GPU (none is available to
//! this project): they are verified by ptxas 13.0 for sm_100a and by the CPU
//! emulator's TMEM and tensor-core model.
use kernel_device::prelude::*;
use kernel_device::tcgen05::CtaGroup;
use kernel_device::tmem::{store_row_f16, Tmem};
use kernel_device::f16;

// (The kernel types `matmul0..2` take the module names, so the modules are `step0..2`.)
#[path = "matmul0.rs"]
mod step0;
#[path = "matmul1.rs"]
mod step1;
#[path = "matmul2.rs"]
mod step2;
#[path = "matmul3.rs"]
mod step3;
#[path = "matmul4.rs"]
mod step4;
#[path = "matmul5.rs"]
mod step5;
#[path = "matmul6.rs"]
mod step6;
#[path = "matmul_dynamic.rs"]
mod dynamic;
mod gather;
mod transposed;

pub use step0::matmul0;
pub use step1::matmul1;
pub use step2::matmul2;
pub use step3::matmul3;
pub use step4::matmul4;
pub use step5::matmul5;
pub use step6::matmul6;
pub use dynamic::matmul_dynamic;
pub use gather::{embedding_gather, EmbedRow, EmbedTile, EMBED_DIM, GATHER_TOKENS};
pub use transposed::{tcgen05_transposed, TrAKm, TrBNk, TCGEN05_TRANSPOSED_VARIANTS};

/// 128-byte swizzle, tiling (8, 64) for f16: `plgpu.find_swizzle(64 * 16)`.
pub type Sw = Swizzled<128>;
/// Tile M: 128 (the accumulator spans all 128 TMEM lanes).
pub const TILE_M: usize = 128;
/// Tile K: 64 f16 = one 128-byte swizzled row.
pub const TILE_K: usize = 64;
/// Columns of `matmul2`'s epilogue tile (one 128-byte column block).
pub const EPI_N: usize = 64;
/// A tile: `TILE_M x TILE_K`, K-major.
pub type ATile = Tile<f16, TILE_M, TILE_K, Sw>;
/// B tile: `TILE_K x TN` of the row-major `K x N` B (MN-major for the MMA).
pub type BTile<const TN: usize> = Tile<f16, TILE_K, TN, Sw>;
/// Output tile of `matmul0`/`matmul1`: `TILE_M x TN`.
pub type OTile<const TN: usize> = Tile<f16, TILE_M, TN, Sw>;
/// Output tile of `matmul2`'s epilogue: `TILE_M x EPI_N`.
pub type ETile = Tile<f16, TILE_M, EPI_N, Sw>;

/// This thread's accumulator row in a 128-thread warpgroup: TMEM lane
/// quarter of its warp plus its lane.
#[inline(always)]
pub fn my_row() -> usize {
    (32 * (warp_idx() % 4) + lane_id()) as usize
}

/// Every thread of the warpgroup copies its accumulator row, columns
/// `col0 .. col0 + W`, from TMEM (its rows of a pair's `TmemPair` too) (32 columns per `tcgen05.ld`) into the
/// swizzled SMEM tile `dst` at column `dst_col0`, as f16. Each load's
/// registers come out of its `tcgen05.wait::ld`, so every load is complete
/// when this returns (the next MMAs may overwrite the accumulator after a
/// barrier).
#[inline(always)]
#[track_caller]
pub fn acc_to_smem<const TN: usize, const W: usize, const R: usize, const C: usize, G: CtaGroup>(
    acc: &Tmem<f32, TILE_M, TN, false, G>,
    col0: usize,
    dst: Smem<Tile<f16, R, C, Sw>>,
    dst_col0: usize,
) {
    let row = my_row();
    let mut c = 0;
    while c < W {
        let v = acc.load_f32::<32>(col0 + c).wait();
        store_row_f16(&v, dst, row, dst_col0 + c);
        c += 32;
    }
}

