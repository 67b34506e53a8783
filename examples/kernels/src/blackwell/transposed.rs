//! tcgen05 MMAs with transposed SMEM views (MN-major operands).
use super::{my_row, ATile, BTile, Sw, TILE_K, TILE_M};
use kernel_device::f16;
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, Cta1, TensorCore};
use kernel_device::tcgen05_view::tcgen05_mma_view;
use kernel_device::tmem::Tmem;

/// A stored `K x M` (`64 x 128` f16): the A operand of
/// [`tcgen05_transposed`] read through `.transposed()`.
pub type TrAKm = Tile<f16, TILE_K, TILE_M, Sw>;
/// B stored `N x K` (`128 x 64` f16, K-major).
pub type TrBNk = Tile<f16, 128, TILE_K, Sw>;
/// Outputs of [`tcgen05_transposed`], each `128 x 128` f32 row-major.
pub const TCGEN05_TRANSPOSED_VARIANTS: usize = 3;

/// One `128 x 128 x 64` product `A · Bᵀ` three ways on the tensor core,
/// with transposed SMEM views (Pallas's `plgpu.TransposeTransform`): the
/// tiles are loaded by TMA as stored, and `Smem::transposed()` makes
/// `tcgen05.mma` read them MN-major (the instruction descriptor's
/// transpose bit for that operand):
/// 0. A K-major (`M x K`), B from a `K x N` tile through `.transposed()`;
/// 1. A from a `K x M` tile through `.transposed()`, B K-major (`N x K`);
/// 2. both through `.transposed()`.
///
/// This kernel works as follows: thread 0 loads the four tiles on one
/// barrier, issues the three products into three TMEM accumulators
/// (`tcgen05_mma_view`, 4 MMAs of K = 16 each) and commits them to
/// `mma_done`; every thread waits, then copies its accumulator row of each
/// product (its warp's lane quarter, `tcgen05.ld` 32x32b) to `out[v]`.
///
/// Constraints: grid 1; `a_mk` is `128 x 64` (`M x K`), `a_km` its
/// transpose; `b_nk` is `128 x 64` (`N x K`), `b_kn` its transpose; `out`
/// holds `3 x 128 x 128` f32.
#[kernel(block = warpgroups(1), arch = sm_100a)]
pub fn tcgen05_transposed(
    a_mk: Tma<ATile>,
    a_km: Tma<TrAKm>,
    b_nk: Tma<TrBNk>,
    b_kn: Tma<BTile<128>>,
    out: Gmem<f32>,
    #[scratch] a_mk_s: Smem<ATile>,
    #[scratch] a_km_s: Smem<TrAKm>,
    #[scratch] b_nk_s: Smem<TrBNk>,
    #[scratch] b_kn_s: Smem<BTile<128>>,
    #[scratch] acc0: Tmem<f32, TILE_M, 128>,
    #[scratch] acc1: Tmem<f32, TILE_M, 128>,
    #[scratch] acc2: Tmem<f32, TILE_M, 128>,
    #[scratch] loaded: Barrier,
    #[scratch] mma_done: Barrier<TensorCore>,
) {
    // One bounds check for every store below (unchecked, so the compiler
    // unrolls them and the loaded registers stay registers).
    if out.len() < TCGEN05_TRANSPOSED_VARIANTS * TILE_M * 128 {
        kernel_device::gmem::out_of_range(TCGEN05_TRANSPOSED_VARIANTS * TILE_M * 128 - 1, out.len());
    }
    if thread_linear() == 0 {
        loaded.arrive_expect_tx(2 * Tma::<ATile>::BYTES + 2 * Tma::<TrBNk>::BYTES);
        a_mk.load(a_mk_s, 0, 0, loaded.as_ref());
        a_km.load(a_km_s, 0, 0, loaded.as_ref());
        b_nk.load(b_nk_s, 0, 0, loaded.as_ref());
        b_kn.load(b_kn_s, 0, 0, loaded.as_ref());
        loaded.wait();
        tcgen05_mma_view(&Cta1, &acc0, a_mk_s, b_kn_s.transposed(), false);
        tcgen05_mma_view(&Cta1, &acc1, a_km_s.transposed(), b_nk_s, false);
        tcgen05_mma_view(&Cta1, &acc2, a_km_s.transposed(), b_kn_s.transposed(), false);
        tcgen05_commit_arrive(&Cta1, mma_done.as_ref());
    }
    mma_done.wait();
    copy_row(&acc0, out, 0);
    copy_row(&acc1, out, 1);
    copy_row(&acc2, out, 2);
}

/// This thread's row of `acc` (32 columns per `tcgen05.ld`) to `out[v]`.
#[inline(always)]
#[track_caller]
fn copy_row(acc: &Tmem<f32, TILE_M, 128>, out: Gmem<f32>, v: usize) {
    let base = v * TILE_M * 128 + my_row() * 128;
    let mut c = 0;
    while c < 128 {
        let vals = acc.load_f32::<32>(c).wait();
        let mut i = 0;
        while i < 32 {
            // SAFETY: `base + 127 < 3 * 128 * 128 <= out.len()` (checked
            // on entry).
            unsafe { out.write_unchecked(base + c + i, vals[i]) };
            i += 1;
        }
        c += 32;
    }
}
