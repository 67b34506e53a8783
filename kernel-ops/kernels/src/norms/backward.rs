//! The backward of the RMS norm and the layer norm: `dx` and per-group
//! partial sums of `dgamma` (and `dbeta`), then [`norm_bwd_reduce`] sums
//! the partials over the groups.
//!
//! These kernels work as follows:
//! 1. a group (a warp, a warpgroup or 4 warpgroups: the forward's row
//!    shapes, [`RowAt`]) takes rows `group, group + groups, ...` in turn;
//!    for each it loads `x` and `dy` with the forward's accesses (so every
//!    register pairs the same element of `x`, `dy`, `gamma`, `dx`) and
//!    recomputes the statistics from `x` in f32 as the forward does (no
//!    statistics are saved by the forward): the RMS norm's
//!    `r = 1 / sqrt(mean(x²) + eps)`, the layer norm's mean and
//!    `r = 1 / sqrt(var + eps)` (two passes, no cancellation);
//! 2. with `w = dy * gamma` (f32), two more row sums give the row's
//!    coefficients, and `dx` is stored in `T` (one rounding):
//!    RMS norm `dx = r w - x r³ mean(w x)`; layer norm, with
//!    `xhat = (x - mean) r`, `dx = r (w - mean(w) - xhat mean(w xhat))`;
//! 3. the row's contribution to the weights' gradients, `dy x r` (RMS
//!    norm) or `dy xhat` and `dy` (layer norm), is added to the group's
//!    partial row in f32 (`dgamma_part[group]`, `dbeta_part[group]`: one
//!    row of `cols` f32 per group, each element read and written by the one
//!    thread that owns its column, with the row's map: no atomics, no
//!    race, a fixed order); the group's first row stores it, the next ones
//!    read, add and store;
//! 4. [`norm_bwd_reduce`] sums the `groups` partial rows of each column in
//!    a fixed order (f32, deterministic): `dgamma` (and `dbeta`) in f32.
//!
//! Constraints: the forward's rows, [`Vec16`](super::Vec16) (16-byte
//! accesses: `cols % 8 == 0` for f16 / bf16, `cols % 4 == 0` for f32) or
//! [`Single`](super::Single) (any width, up to 4096 columns: the wider
//! `Single` rows spill), of at most 16384 columns for f16 / bf16 (one CTA per row: the warp,
//! warpgroup and `_wide` shapes), 8192 for f32 (no `_wide` f32 instances:
//! `x` and `dy` in f32 over 512 threads spill); `x`, `dy`, `dx` hold `rows * cols` elements, `gamma` `cols`,
//! the partials `groups * cols` f32 (groups: warps for the `_warp`
//! kernels, CTAs otherwise; at most `rows`, so each group has a row).
use super::access::{Access, Elem, Keep, RowF32};
use super::row::RowAt;
use kernel_device::gmem::GmemRef;
use kernel_device::array::regs::unroll;
use kernel_device::math::rsqrt_approx;
use kernel_device::prelude::*;

/// The backward's inputs and outputs (`beta`'s gradient only for the layer norm).
#[derive(Clone, Copy)]
pub struct BwdIo<T> {
    pub x: GmemRef<T>,
    pub dy: GmemRef<T>,
    pub gamma: GmemRef<T>,
    pub dx: Gmem<T>,
    /// `groups * cols` f32: the groups' partial sums of `dgamma`.
    pub dgamma_part: Gmem<f32>,
    /// `groups * cols` f32 (layer norm), or empty (RMS norm).
    pub dbeta_part: Gmem<f32>,
}

/// Which rows a group takes: `group, group + groups, ..` below `rows`.
#[derive(Clone, Copy)]
pub struct GroupRows {
    pub group: usize,
    pub groups: usize,
    pub rows: usize,
}

/// Adds the row's contribution `c` to the group's partial row `part[off
/// .. off + len]` (stores it for the group's first row).
#[inline(always)]
#[track_caller]
fn accumulate<T: Elem, A: Access<T>, const G: usize, const V: usize>(part: Gmem<f32>, off: usize, len: usize, c: RowF32<G, V>, first: bool) {
    let sum = if first { c } else { A::load_f32::<G, V>(part, off, len) + c };
    A::store_f32::<G, V>(sum, part, off, len);
}

/// The RMS norm's backward over the group's rows (see the module docs).
#[inline(always)]
#[track_caller]
pub fn rms_norm_bwd_rows<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize>(io: BwdIo<T>, eps: f32, gr: GroupRows, at: RowAt<W>) {
    let mut row = gr.group;
    while row < gr.rows {
        let mut at = RowAt { row, ..at };
        let (v, d) = (K::load::<G, V>(io.x, at.off(), at.len, 0.0), K::load::<G, V>(io.dy, at.off(), at.len, 0.0));
        let x = K::f32(v);
        let r = rsqrt_approx(at.sum(x * x) * at.inv_cols() + eps);
        let g = A::f32::<G, V>(A::load_weights::<G, V>(io.gamma, at.start, at.len, at.off()));
        let w = K::f32(d) * g;
        let c = at.sum(w * K::f32(K::refresh(v))) * at.inv_cols();
        let (x, d) = (K::f32(K::refresh(v)), K::f32(K::refresh(d)));
        A::store(w * r - x * (r * r * r * c), io.dx, at.off(), at.len);
        accumulate::<T, A, G, V>(io.dgamma_part, gr.group * at.cols + at.start, at.len, d * x * r, row == gr.group);
        row += gr.groups;
    }
}

/// The layer norm's backward over the group's rows (see the module docs).
#[inline(always)]
#[track_caller]
pub fn layer_norm_bwd_rows<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize>(io: BwdIo<T>, eps: f32, gr: GroupRows, at: RowAt<W>) {
    let mut row = gr.group;
    while row < gr.rows {
        let mut at = RowAt { row, ..at };
        let (v, d) = (K::load::<G, V>(io.x, at.off(), at.len, 0.0), K::load::<G, V>(io.dy, at.off(), at.len, 0.0));
        let mean = at.sum(K::f32(v)) * at.inv_cols();
        // Elements beyond the slice are 0 in `x`, `dy` and `gamma`: masked
        // for the variance; `w` is 0 there, so the other sums need no mask.
        let dev = A::mask_beyond(K::f32(K::refresh(v)) - mean, at.off(), at.len, 0.0);
        let r = rsqrt_approx(at.sum(dev * dev) * at.inv_cols() + eps);
        // gamma is loaded again at each use (L1 hits after the first; each
        // reduction's barrier keeps them loads), so that neither `w` nor
        // `xhat` stays live across a reduction beside `x` and `dy` (the f32
        // 512-thread rows would spill).
        let (start, len, off) = (at.start, at.len, at.off());
        let gamma = || A::f32::<G, V>(A::load_weights::<G, V>(io.gamma, start, len, off));
        let mw = at.sum(K::f32(K::refresh(d)) * gamma()) * at.inv_cols();
        let mwx = at.sum(K::f32(K::refresh(d)) * gamma() * (K::f32(K::refresh(v)) - mean)) * at.inv_cols() * r;
        let (xhat, dr) = ((K::f32(K::refresh(v)) - mean) * r, K::f32(K::refresh(d)));
        A::store((dr * gamma() - mw - xhat * mwx) * r, io.dx, at.off(), at.len);
        let (first, off) = (row == gr.group, gr.group * at.cols + at.start);
        accumulate::<T, A, G, V>(io.dgamma_part, off, at.len, dr * xhat, first);
        accumulate::<T, A, G, V>(io.dbeta_part, off, at.len, dr, first);
        row += gr.groups;
    }
}

/// Threads per CTA of [`norm_bwd_reduce`]: one column each.
pub const REDUCE_THREADS: usize = 128;

/// Independent partial sums per thread of [`norm_bwd_reduce`] (loads in flight).
pub const REDUCE_LANES: usize = 8;

/// `out[c] = sum over p < groups of part[p * cols + c]` (f32): one thread
/// per column, `ctas` CTAs of 128 threads (the grid) taking columns
/// `128 ctas` apart in turn. The groups go [`REDUCE_LANES`] at a time into
/// as many running sums (so that 8 loads are in flight), combined in lane
/// order at the end: a fixed order, the same result on every run.
#[kernel(block = threads(128))]
pub fn norm_bwd_reduce(part: GmemRef<f32>, out: Gmem<f32>, groups: u32, cols: u32, ctas: u32) {
    let (cols, groups) = (cols as usize, groups as usize);
    let mut c = block_idx().x as usize * REDUCE_THREADS + thread_linear() as usize;
    while c < cols {
        let mut s = [0.0f32; REDUCE_LANES];
        let mut p = 0;
        while p + REDUCE_LANES <= groups {
            unroll(REDUCE_LANES, |l| s[l] += part.read((p + l) * cols + c));
            p += REDUCE_LANES;
        }
        unroll(REDUCE_LANES, |l| {
            if p + l < groups {
                s[l] += part.read((p + l) * cols + c);
            }
        });
        let mut total = 0.0f32;
        unroll(REDUCE_LANES, |l| total += s[l]);
        out.write(c, total);
        c += ctas as usize * REDUCE_THREADS;
    }
}
