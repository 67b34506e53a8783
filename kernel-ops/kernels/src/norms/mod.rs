//! Row softmax, layer norm and RMS norm over f16 / bf16 / f32 rows of any
//! width up to 65536 ([`MAX_COLS`]), and the fused residual norms
//! (`add_rms_norm`, `add_layer_norm`, optionally quantizing to FP8 e4m3)
//! over f16 / bf16 rows of a multiple of 8 up to 16384, on register arrays
//! in the `Strided` layout.
//!
//! These kernels work as follows:
//! 1. a group of `G` threads owns one row (or one slice of a row split
//!    over a cluster) and loads it as [`RowF32<G, V>`]: `8 V` elements per
//!    thread, with 16-byte accesses ([`Vec16`]: rows whose starts are
//!    16-byte aligned, i.e. widths of a multiple of 8 elements, 4 for f32;
//!    [`Peel`]: the other widths, each row's body in 16-byte accesses, the
//!    partial 16-byte chunks at its ends by element, gamma and beta
//!    shifted to the row's alignment) or one element per access
//!    ([`Single`]: any width, any alignment; the peel's fallback), so
//!    that each load instruction of the group reads consecutive addresses
//!    (the map of each access: [`access`], [`peel`]). Accesses at or beyond
//!    the slice's ends are not made (masked: filled with 0, or `-inf` for
//!    the softmax's maximum). The row stays in registers, as f32 ([`InF32`])
//!    or, for the wide 16-bit rows, as loaded ([`AsLoaded`]: 16-bit words,
//!    half the registers, converted again at each use);
//! 2. the row statistics are reductions ([`RowAt::sum`], [`RowAt::max`]:
//!    registers, a warp butterfly, then for groups of several warps the
//!    warps through SMEM and a named barrier, then for a row split over a
//!    cluster the CTAs' partials through distributed shared memory and a
//!    cluster barrier, [`Cluster`]): softmax takes the max and the sum of
//!    `exp(x - max)`, layer norm the mean and the variance of `x - mean`
//!    (two passes over the registers, no cancellation; over a cluster,
//!    each CTA's slice's, combined in one exchange: [`Reach::moments`]),
//!    RMS norm the mean of `x²`;
//! 3. the result is computed in f32, rounded to `T` (`cvt.rn`), and stored
//!    with the loads' accesses: each element is read once and written once.
//!
//! Four row shapes cover the widths, picked by the host
//! (`kernel_ops::norms`) from `cols` (capacities in elements, for every
//! element type: `V` counts 8-element pieces per thread; a [`Peel`] row
//! needs room for `cols` plus up to 7 elements, 3 for f32: its first
//! 16-byte chunk starts before it):
//!
//! | kernels | group | rows per CTA | `V` ([`Vec16`]) | `V` ([`Peel`]) | columns |
//! |---|---|---|---|---|---|
//! | `{op}_warp<T, A, V>` | a warp (32 threads) | 4 | 1..=4 | 1..=4 | `cols <= 256 V`, used below 1024 |
//! | `{op}<T, A, V>` | a warpgroup (128) | 1 | 1..=8 | 1..=6 ([`Single`]: 8) | `cols <= 1024 V`, 1024..=8192 |
//! | `{op}_wide<T, A, V>` | 4 warpgroups (512) | 1 | 3, 4 | 3, 4 ([`Single`]: 4) | `cols <= 4096 V`, 8193..=16384 (and 16-bit [`Peel`] rows that need `V` 7, 8 per warpgroup) |
//! | `{op}_cluster<T, A, V>` | a cluster of 4 CTAs of 4 warpgroups | 1 per cluster | 2, 4 | 2, 4 ([`Single`]: 4) | `cols <= 16384 V`, 16385..=65536 |
//!
//! (The [`Peel`] warpgroup instances stop at `V` = 6: the f32 layer norm's
//! shifted gamma and beta spilled at 7 and 8; for the same reason the f32
//! layer norm has no [`Peel`] instance at `V` = 4 for 512 threads, and the
//! host gives f32 [`Peel`] rows at most `V` = 3 per 4 warpgroups and 2 per
//! cluster CTA. The [`Single`] cluster instance serves the widths whose
//! slices leave no room for the peel: the last few below 65536, and f32
//! beyond 2 pieces per cluster thread. The [`Single`] warpgroup and
//! 4-warpgroup instances serve where the peel was measured slower, H200:
//! f32 rows of `V` 7, 8 per warpgroup and of 4 per 4 warpgroups, and the
//! last few widths below 16384, whose peel would need a cluster.)
//!
//! Narrow rows go one per warp so that a CTA moves 4 rows and each thread
//! has up to 4 loads in flight (a warpgroup per 768-column row would leave
//! a quarter of its threads idle and an SM 24 KB in flight); wide 16-bit
//! rows keep their elements in registers as words (half the registers of
//! f32). Rows wider than 16384 columns do not fit one CTA's registers
//! (`V` 6 to 16 per 512 threads spilled: ptxas loads gamma and beta for
//! the whole row at once beside the row itself), nor, in f32, its shared
//! memory (65536 f32 are 256 KB; an SM has 227 KB): the cluster kernels
//! split the row into 4 slices of at most 16384 columns (each starting at
//! a multiple of 8), one per CTA, each a `_wide` row in registers, and
//! combine the statistics across the cluster ([`Cluster`]). Each element
//! is still read once and written once; a reduction costs one cluster
//! barrier more than in a `_wide` CTA.
//!
//! Element types: `x`, `y`, `gamma` and `beta` are all of one type `T`
//! (f16, bf16 or f32); the statistics and the arithmetic are f32, and `y`
//! is rounded to `T` once.
//!
//! The fused residual norms compute `s = x + residual` in f32, round it to
//! `T` (the new residual, stored), and normalize that rounded `s`, so `y`
//! is exactly the norm of the returned residual (the unfused composition).
//! Their FP8 output (`fp8` = one of the `FP8_*` modes) replaces `y` by
//! `q = e4m3(y / scale)` (`cvt.rn.satfinite`), with `scale = amax / 448`
//! (1 for an all-zero row or tensor), as `kernel_ops::fp8::quantize`:
//! per row (`scales[row]` written), per tensor from a given scale
//! (`scales[0]` read), or per tensor in two launches (the first only takes
//! the tensor's amax with an atomic max into `scales[0]`, the second
//! quantizes with it; the host turns it into the scale).
//!
//! Constraints: `1 <= cols <= the shape's maximum` (`cols % 8 == 0` for
//! 16-bit [`Vec16`] and the fused kernels, `cols % 4 == 0` for f32
//! [`Vec16`]; `cols` plus the peel's 7 (f32: 3) elements for [`Peel`]);
//! `x`, `y` (and `residual`, `new_residual`, `q`) hold
//! `rows * cols` elements (row-major, starting 16-byte aligned), `gamma` /
//! `beta` `cols`. The host entry points in `kernel-ops` check these.
pub mod access;
pub mod backward;
mod fused;
pub mod peel;
mod row;

pub use access::{Access, AsLoaded, Elem, FromWords, InF32, Keep, Pairs, RowF32, Single, Vec16, Words, VEC};
pub use backward::{layer_norm_bwd_rows, norm_bwd_reduce, rms_norm_bwd_rows, BwdIo, GroupRows, PartSmem, REDUCE_THREADS};
pub use fused::{add_layer_norm_row, add_rms_norm_row, FusedOut};
pub use peel::Peel;
pub use row::{cluster_slice, layer_norm_row, rms_norm_row, softmax_row, Cluster, Cta, LayerNormOut, Reach, RmsOut, RowAt, RowOut};

use kernel_device::gmem::GmemRef;
use kernel_device::prelude::*;
use kernel_device::{bf16, f16, E4M3};

/// Columns per `V` of the warpgroup kernels: 128 threads x 8 elements.
pub const COLS_PER_VEC: usize = 128 * VEC;
/// Rows per CTA of the `_warp` kernels (one per warp of the warpgroup).
pub const WARP_ROWS: usize = 4;
/// Threads per row of the `_wide` kernels (and per CTA of the `_cluster` ones).
pub const WIDE_THREADS: usize = 512;
/// CTAs per row (one cluster) of the `_cluster` kernels.
pub const CLUSTER: usize = 4;
/// The widest row: a cluster's 4 slices of 16384 columns.
pub const MAX_COLS: usize = CLUSTER * WIDE_THREADS * VEC * 4;

/// The FP8 modes of the fused norms' `fp8` parameter.
/// `y` in `T`, no quantization.
pub const FP8_NONE: u32 = 0;
/// `q` with a scale per row, written to `scales[row]`.
pub const FP8_PER_ROW: u32 = 1;
/// `q` with the per-tensor scale `scales[0]` (given).
pub const FP8_TENSOR_SCALE: u32 = 2;
/// No output at all: the row's amax, atomically maxed (as f32 bits) into
/// `scales[0]` (zeroed before).
pub const FP8_TENSOR_AMAX: u32 = 3;
/// `q` with the per-tensor scale `amax / 448` of the amax in `scales[0]`.
pub const FP8_TENSOR_FROM_AMAX: u32 = 4;
/// The largest finite e4m3 value.
pub const E4M3_MAX: f32 = 448.0;

/// The warp's row of a `_warp` kernel (`None` past the last row): one per
/// warp, no SMEM and no barrier (a warp reduces by shuffles).
#[inline(always)]
fn warp_row(rows: u32, cols: u32, red: Smem<[f32; 1]>) -> Option<RowAt<1>> {
    let row = block_idx().x as usize * WARP_ROWS + warp_idx() as usize;
    let cols = cols as usize;
    (row < rows as usize).then_some(RowAt { row, cols, start: 0, len: cols, red, bar: NamedBarrier::new(1, 32), reach: Cta })
}
/// The CTA's row of a warpgroup kernel.
#[inline(always)]
fn wg_row(cols: u32, red: Smem<[f32; 4]>) -> RowAt<4> {
    let cols = cols as usize;
    RowAt { row: block_idx().x as usize, cols, start: 0, len: cols, red, bar: NamedBarrier::new(1, 128), reach: Cta }
}
/// The CTA's row of a `_wide` kernel.
#[inline(always)]
fn wide_row(cols: u32, red: Smem<[f32; 16]>) -> RowAt<16> {
    let cols = cols as usize;
    RowAt { row: block_idx().x as usize, cols, start: 0, len: cols, red, bar: NamedBarrier::new(1, WIDE_THREADS as u32), reach: Cta }
}
/// The CTA's slice of a `_cluster` kernel's row: CTA `rank` of cluster
/// `row` takes columns `rank * s ..` (`s = ceil(cols / 4)` rounded up to a
/// multiple of 8, so every slice of a [`Vec16`] row starts 16-byte aligned).
#[inline(always)]
fn cluster_row(cols: u32, red: Smem<[f32; 16]>, slots: Smem<[[f32; CLUSTER]; 2]>) -> RowAt<16, Cluster<CLUSTER>> {
    let cols = cols as usize;
    let slice = row::cluster_slice(cols, CLUSTER);
    let start = cluster_ctarank() as usize * slice;
    let len = cols.saturating_sub(start).min(slice);
    let bar = NamedBarrier::new(1, WIDE_THREADS as u32);
    RowAt { row: block_idx().x as usize / CLUSTER, cols, start, len, red, bar, reach: Cluster { slots, n: 0 } }
}

// The kernels: per op, the four row shapes of the module docs' table, each
// for every element type `T` and access `A`. Grid: `ceil(rows / 4)` for
// `_warp`, `rows` for the warpgroup and `_wide` kernels, `4 rows` for
// `_cluster`.

/// Row softmax, one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 3), (Vec16, 4), (Peel, 1), (Peel, 2), (Peel, 3), (Peel, 4)))]
pub fn softmax_warp<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, y: Gmem<T>, rows: u32, cols: u32, #[scratch] red: Smem<[f32; 1]>) {
    if let Some(at) = warp_row(rows, cols, red) {
        softmax_row::<T, A, InF32, 32, V, 1, Cta>(x, y, at);
    }
}
/// Row softmax, one row of at most `1024 V` columns per CTA (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 3), (Vec16, 4), (Vec16, 5), (Vec16, 6), (Vec16, 7), (Vec16, 8), (Peel, 1), (Peel, 2), (Peel, 3), (Peel, 4), (Peel, 5), (Peel, 6), (Single, 8)))]
pub fn softmax<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, y: Gmem<T>, cols: u32, #[scratch] red: Smem<[f32; 4]>) {
    softmax_row::<T, A, InF32, 128, V, 4, Cta>(x, y, wg_row(cols, red));
}
/// Row softmax, one row of at most `4096 V` columns per CTA of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16, f32], (Vec16, 3), (Vec16, 4), (Peel, 3), (Peel, 4), (Single, 4)))]
pub fn softmax_wide<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, y: Gmem<T>, cols: u32, #[scratch] red: Smem<[f32; 16]>) {
    softmax_row::<T, A, AsLoaded, WIDE_THREADS, V, 16, Cta>(x, y, wide_row(cols, red));
}
/// Row softmax, one row of at most `16384 V` columns per cluster of 4 CTAs of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), cluster = 4, instances(T = [f16, bf16, f32], (Vec16, 2), (Vec16, 4), (Peel, 2), (Peel, 4), (Single, 4)))]
pub fn softmax_cluster<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, y: Gmem<T>, cols: u32, #[scratch] red: Smem<[f32; 16]>, #[scratch] slots: Smem<[[f32; CLUSTER]; 2]>) {
    softmax_row::<T, A, AsLoaded, WIDE_THREADS, V, 16, Cluster<CLUSTER>>(x, y, cluster_row(cols, red, slots));
}

/// Layer norm, one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 3), (Vec16, 4), (Peel, 1), (Peel, 2), (Peel, 3), (Peel, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_warp<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, rows: u32, cols: u32, #[scratch] red: Smem<[f32; 1]>) {
    if let Some(at) = warp_row(rows, cols, red) {
        layer_norm_row::<T, A, InF32, 32, V, 1, Cta>(x, gamma, beta, y, eps, at);
    }
}
/// Layer norm, one row of at most `1024 V` columns per CTA (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 3), (Vec16, 4), (Vec16, 5), (Vec16, 6), (Vec16, 7), (Vec16, 8), (Peel, 1), (Peel, 2), (Peel, 3), (Peel, 4), (Peel, 5), (Peel, 6), (Single, 8)))]
pub fn layer_norm<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 4]>) {
    layer_norm_row::<T, A, InF32, 128, V, 4, Cta>(x, gamma, beta, y, eps, wg_row(cols, red));
}
/// Layer norm, one row of at most `4096 V` columns per CTA of 4 warpgroups (see the [module docs](self)).
// (No f32 `Peel` at `V` = 4 for the layer norm: its shifted gamma and
// beta beside an f32 row of 512 threads spilled, 44 bytes, sm_90a.)
#[kernel(block = warpgroups(4), instances(
    (f16, Vec16, 3), (f16, Vec16, 4), (f16, Peel, 3), (f16, Peel, 4), (f16, Single, 4),
    (bf16, Vec16, 3), (bf16, Vec16, 4), (bf16, Peel, 3), (bf16, Peel, 4), (bf16, Single, 4),
    (f32, Vec16, 3), (f32, Vec16, 4), (f32, Peel, 3), (f32, Single, 4),
))]
pub fn layer_norm_wide<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 16]>) {
    layer_norm_row::<T, A, AsLoaded, WIDE_THREADS, V, 16, Cta>(x, gamma, beta, y, eps, wide_row(cols, red));
}
/// Layer norm, one row of at most `16384 V` columns per cluster of 4 CTAs of 4 warpgroups (see the [module docs](self)).
// (No f32 `Peel` at `V` = 4: see `layer_norm_wide`; 68 bytes.)
#[kernel(block = warpgroups(4), cluster = 4, instances(
    (f16, Vec16, 2), (f16, Vec16, 4), (f16, Peel, 2), (f16, Peel, 4), (f16, Single, 4),
    (bf16, Vec16, 2), (bf16, Vec16, 4), (bf16, Peel, 2), (bf16, Peel, 4), (bf16, Single, 4),
    (f32, Vec16, 2), (f32, Vec16, 4), (f32, Peel, 2), (f32, Single, 4),
))]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_cluster<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>, #[scratch] slots: Smem<[[f32; CLUSTER]; 2]>,
) {
    layer_norm_row::<T, A, AsLoaded, WIDE_THREADS, V, 16, Cluster<CLUSTER>>(x, gamma, beta, y, eps, cluster_row(cols, red, slots));
}

/// RMS norm, one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 3), (Vec16, 4), (Peel, 1), (Peel, 2), (Peel, 3), (Peel, 4)))]
pub fn rms_norm_warp<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, rows: u32, cols: u32, #[scratch] red: Smem<[f32; 1]>) {
    if let Some(at) = warp_row(rows, cols, red) {
        rms_norm_row::<T, A, InF32, 32, V, 1, Cta>(x, gamma, y, eps, at);
    }
}
/// RMS norm, one row of at most `1024 V` columns per CTA (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 3), (Vec16, 4), (Vec16, 5), (Vec16, 6), (Vec16, 7), (Vec16, 8), (Peel, 1), (Peel, 2), (Peel, 3), (Peel, 4), (Peel, 5), (Peel, 6), (Single, 8)))]
pub fn rms_norm<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 4]>) {
    rms_norm_row::<T, A, InF32, 128, V, 4, Cta>(x, gamma, y, eps, wg_row(cols, red));
}
/// RMS norm, one row of at most `4096 V` columns per CTA of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16, f32], (Vec16, 3), (Vec16, 4), (Peel, 3), (Peel, 4), (Single, 4)))]
pub fn rms_norm_wide<T: Elem, A: Access<T>, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 16]>) {
    rms_norm_row::<T, A, AsLoaded, WIDE_THREADS, V, 16, Cta>(x, gamma, y, eps, wide_row(cols, red));
}
/// RMS norm, one row of at most `16384 V` columns per cluster of 4 CTAs of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), cluster = 4, instances(T = [f16, bf16, f32], (Vec16, 2), (Vec16, 4), (Peel, 2), (Peel, 4), (Single, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_cluster<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>, #[scratch] slots: Smem<[[f32; CLUSTER]; 2]>,
) {
    rms_norm_row::<T, A, AsLoaded, WIDE_THREADS, V, 16, Cluster<CLUSTER>>(x, gamma, y, eps, cluster_row(cols, red, slots));
}

/// `new_residual = x + residual`, `y = rms_norm(new_residual) * gamma` (or
/// its FP8 form), one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm_warp<T: Pairs, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 1]>,
) {
    if let Some(at) = warp_row(rows, cols, red) {
        add_rms_norm_row::<T, InF32, 32, V, 1>(x, residual, gamma, FusedOut { new_residual, y, q, scales, fp8 }, eps, at);
    }
}
/// [`add_rms_norm_warp`]'s op, one row of at most `1024 V` columns per CTA.
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4), (5), (6), (7), (8)))]
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm<T: Pairs, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 4]>,
) {
    add_rms_norm_row::<T, InF32, 128, V, 4>(x, residual, gamma, FusedOut { new_residual, y, q, scales, fp8 }, eps, wg_row(cols, red));
}
/// [`add_rms_norm_warp`]'s op, one row of at most `4096 V` columns per CTA of 4 warpgroups.
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm_wide<T: Pairs, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>,
) {
    add_rms_norm_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, residual, gamma, FusedOut { new_residual, y, q, scales, fp8 }, eps, wide_row(cols, red));
}

/// `new_residual = x + residual`, `y = layer_norm(new_residual)` (or its
/// FP8 form), one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm_warp<T: Pairs, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 1]>,
) {
    if let Some(at) = warp_row(rows, cols, red) {
        add_layer_norm_row::<T, InF32, 32, V, 1>(x, residual, gamma, beta, FusedOut { new_residual, y, q, scales, fp8 }, eps, at);
    }
}
/// [`add_layer_norm_warp`]'s op, one row of at most `1024 V` columns per CTA.
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4), (5), (6), (7), (8)))]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm<T: Pairs, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 4]>,
) {
    add_layer_norm_row::<T, InF32, 128, V, 4>(x, residual, gamma, beta, FusedOut { new_residual, y, q, scales, fp8 }, eps, wg_row(cols, red));
}
/// [`add_layer_norm_warp`]'s op, one row of at most `4096 V` columns per CTA of 4 warpgroups.
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm_wide<T: Pairs, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>,
) {
    add_layer_norm_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, residual, gamma, beta, FusedOut { new_residual, y, q, scales, fp8 }, eps, wide_row(cols, red));
}

// The backward kernels (`backward`'s module docs): the forward's row
// shapes up to 16384 columns, `V` rounded up to a power of two (1, 2, 4
// per warp; 1, 2, 4, 8 per warpgroup; 4 per 4 warpgroups); `Single` (one
// element per access) up to 4096 columns only (1, 2, 4 per warp; 2, 4 per
// warpgroup: `Single` at 8 per warpgroup or 4 per 4 warpgroups spills,
// sm_90a, 24 to 1712 bytes); no f32 `_wide` instances either: f32 rows of `x` and `dy` held by 512
// threads spill, sm_90a, 96 bytes for the layer norm). Grid: `ceil(groups / 4)` for `_warp` (a group per warp),
// `groups` otherwise (a group per CTA).

/// The `_warp` backward kernels' group: the warp's (`None` past the last).
#[inline(always)]
fn warp_group(groups: u32, rows: u32, cols: u32, red: Smem<[f32; 1]>) -> Option<(GroupRows, RowAt<1>)> {
    let group = block_idx().x as usize * WARP_ROWS + warp_idx() as usize;
    let cols = cols as usize;
    let at = RowAt { row: group, cols, start: 0, len: cols, red, bar: NamedBarrier::new(1, 32), reach: Cta };
    (group < groups as usize).then_some((GroupRows { group, groups: groups as usize, rows: rows as usize }, at))
}
/// A CTA's backward group (a warpgroup or 4).
#[inline(always)]
fn cta_group(groups: u32, rows: u32) -> GroupRows {
    GroupRows { group: block_idx().x as usize, groups: groups as usize, rows: rows as usize }
}

/// RMS norm backward, rows of at most `256 V` columns, a group per warp (see [`backward`]).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 4), (Single, 1), (Single, 2), (Single, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_bwd_warp<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, dy: GmemRef<T>, gamma: GmemRef<T>, dx: Gmem<T>, dgamma_part: Gmem<f32>, eps: f32, groups: u32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 1]>, #[scratch] acc: PartSmem<512, V>,
) {
    if let Some((gr, at)) = warp_group(groups, rows, cols, red) {
        let io = BwdIo { x, dy, gamma, dx, dgamma_part, dbeta_part: dgamma_part };
        rms_norm_bwd_rows::<T, A, InF32, 32, V, 1, 512>(io, eps, gr, at, acc);
    }
}
/// RMS norm backward, rows of at most `1024 V` columns, a group per CTA (see [`backward`]).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 4), (Vec16, 8), (Single, 2), (Single, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_bwd<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, dy: GmemRef<T>, gamma: GmemRef<T>, dx: Gmem<T>, dgamma_part: Gmem<f32>, eps: f32, groups: u32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 4]>, #[scratch] acc: PartSmem<512, V>,
) {
    let io = BwdIo { x, dy, gamma, dx, dgamma_part, dbeta_part: dgamma_part };
    rms_norm_bwd_rows::<T, A, InF32, 128, V, 4, 512>(io, eps, cta_group(groups, rows), wg_row(cols, red), acc);
}
/// RMS norm backward, rows of at most `4096 V` columns, a group per CTA of 4 warpgroups (see [`backward`]).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (Vec16, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_bwd_wide<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, dy: GmemRef<T>, gamma: GmemRef<T>, dx: Gmem<T>, dgamma_part: Gmem<f32>, eps: f32, groups: u32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>, #[scratch] acc: PartSmem<{ 4 * WIDE_THREADS }, V>,
) {
    let io = BwdIo { x, dy, gamma, dx, dgamma_part, dbeta_part: dgamma_part };
    rms_norm_bwd_rows::<T, A, AsLoaded, WIDE_THREADS, V, 16, { 4 * WIDE_THREADS }>(io, eps, cta_group(groups, rows), wide_row(cols, red), acc);
}

/// Layer norm backward, rows of at most `256 V` columns, a group per warp (see [`backward`]).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 4), (Single, 1), (Single, 2), (Single, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd_warp<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, dy: GmemRef<T>, gamma: GmemRef<T>, dx: Gmem<T>, dgamma_part: Gmem<f32>, dbeta_part: Gmem<f32>, eps: f32, groups: u32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 1]>, #[scratch] acc_g: PartSmem<512, V>, #[scratch] acc_b: PartSmem<512, V>,
) {
    if let Some((gr, at)) = warp_group(groups, rows, cols, red) {
        let io = BwdIo { x, dy, gamma, dx, dgamma_part, dbeta_part };
        layer_norm_bwd_rows::<T, A, InF32, 32, V, 1, 512>(io, eps, gr, at, (acc_g, acc_b));
    }
}
/// Layer norm backward, rows of at most `1024 V` columns, a group per CTA (see [`backward`]).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16, f32], (Vec16, 1), (Vec16, 2), (Vec16, 4), (Vec16, 8), (Single, 2), (Single, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, dy: GmemRef<T>, gamma: GmemRef<T>, dx: Gmem<T>, dgamma_part: Gmem<f32>, dbeta_part: Gmem<f32>, eps: f32, groups: u32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 4]>, #[scratch] acc_g: PartSmem<512, V>, #[scratch] acc_b: PartSmem<512, V>,
) {
    let io = BwdIo { x, dy, gamma, dx, dgamma_part, dbeta_part };
    layer_norm_bwd_rows::<T, A, InF32, 128, V, 4, 512>(io, eps, cta_group(groups, rows), wg_row(cols, red), (acc_g, acc_b));
}
/// Layer norm backward, rows of at most `4096 V` columns, a group per CTA of 4 warpgroups (see [`backward`]).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (Vec16, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_bwd_wide<T: Elem, A: Access<T>, const V: usize>(
    x: GmemRef<T>, dy: GmemRef<T>, gamma: GmemRef<T>, dx: Gmem<T>, dgamma_part: Gmem<f32>, dbeta_part: Gmem<f32>, eps: f32, groups: u32, rows: u32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>, #[scratch] acc_g: PartSmem<{ 4 * WIDE_THREADS }, V>, #[scratch] acc_b: PartSmem<{ 4 * WIDE_THREADS }, V>,
) {
    let io = BwdIo { x, dy, gamma, dx, dgamma_part, dbeta_part };
    layer_norm_bwd_rows::<T, A, AsLoaded, WIDE_THREADS, V, 16, { 4 * WIDE_THREADS }>(io, eps, cta_group(groups, rows), wide_row(cols, red), (acc_g, acc_b));
}

/// The per-tensor FP8 scale's first and last step (one thread): `op` 0
/// sets `scales[0] = value` (0 before the amax pass, or a given scale),
/// `op` 1 turns the amax there into the scale `amax / 448` (1 for 0) after
/// the quantizing pass.
#[kernel(block = threads(32))]
pub fn fp8_tensor_scale(scales: Gmem<f32>, op: u32, value: f32) {
    if thread_linear() == 0 {
        let a = scales.read(0);
        scales.write(0, if op == 0 { value } else if a > 0.0 && a.is_finite() { a * (1.0 / E4M3_MAX) } else { 1.0 });
    }
}
