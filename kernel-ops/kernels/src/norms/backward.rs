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
//!    norm) or `dy xhat` and `dy` (layer norm), is added to the thread's
//!    running sums in SMEM ([`PartSmem`]: f32, one cell per register, each
//!    read and written only by its thread: no barrier, no race, a fixed
//!    order); after the group's last row they are stored once, with the
//!    row's map, as the group's partial row (`dgamma_part[group]`,
//!    `dbeta_part[group]`: `cols` f32);
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

/// A group's running sums of a weight's gradient, in SMEM: registers `(j,
/// 4 h .. 4 h + 4)` of the CTA's thread `t` at `[j][h][4 t .. 4 t + 4]`
/// (`F = 4 x` the CTA's threads), one 16-byte access each (consecutive
/// threads, consecutive 16 bytes: no bank conflict); each thread reads and
/// writes only its own cells (no barrier, no race, a fixed order).
pub type PartSmem<const F: usize, const V: usize> = Smem<[[[f32; F]; 2]; V]>;

/// The thread's first cell in each `[f32; F]` of a [`PartSmem`] (bounded
/// by `F`, a multiple of 4, so the compiler sees the 16-byte accesses in
/// bounds and aligned: no check left per access).
#[inline(always)]
fn cell_of<const F: usize>() -> usize {
    4 * (thread_linear() as usize % (F / 4))
}

/// Zeroes the thread's running sums (before the group's first row).
#[inline(always)]
fn clear<const V: usize, const F: usize>(acc: PartSmem<F, V>) {
    let t = cell_of::<F>();
    unroll(V, |j| unroll(2, |h| acc.at(j).at(h).write_v4(t, [0.0; 4])));
}

/// Adds the row's contribution `c` to the thread's running sums.
#[inline(always)]
fn accumulate<const G: usize, const V: usize, const F: usize>(acc: PartSmem<F, V>, c: RowF32<G, V>) {
    let t = cell_of::<F>();
    unroll(V, |j| {
        unroll(2, |h| {
            let cell = acc.at(j).at(h);
            let old = cell.read_v4(t);
            cell.write_v4(t, core::array::from_fn(|k| old[k] + c.regs.0[j][4 * h + k]));
        })
    });
}

/// Stores the thread's running sums to the group's partial row `part[off ..
/// off + len]` (once, after the group's last row), with the row's map.
#[inline(always)]
#[track_caller]
fn store_partial<T: Elem, A: Access<T>, const G: usize, const V: usize, const F: usize>(acc: PartSmem<F, V>, part: Gmem<f32>, off: usize, len: usize) {
    let t = cell_of::<F>();
    let mut sum = RowF32::<G, V>::splat(0.0);
    unroll(V, |j| {
        unroll(2, |h| {
            let v = acc.at(j).at(h).read_v4(t);
            unroll(4, |k| sum.regs.0[j][4 * h + k] = v[k]);
        })
    });
    A::store_f32::<G, V>(sum, part, off, len);
}

/// The RMS norm's backward over the group's rows (see the module docs).
#[inline(always)]
#[track_caller]
pub fn rms_norm_bwd_rows<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize, const F: usize>(
    io: BwdIo<T>, eps: f32, gr: GroupRows, at: RowAt<W>, acc: PartSmem<F, V>,
) {
    clear(acc);
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
        accumulate::<G, V, F>(acc, d * x * r);
        row += gr.groups;
    }
    store_partial::<T, A, G, V, F>(acc, io.dgamma_part, gr.group * at.cols + at.start, at.len);
}

/// The layer norm's backward over the group's rows (see the module docs).
#[inline(always)]
#[track_caller]
pub fn layer_norm_bwd_rows<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize, const F: usize>(
    io: BwdIo<T>, eps: f32, gr: GroupRows, at: RowAt<W>, (acc_g, acc_b): (PartSmem<F, V>, PartSmem<F, V>),
) {
    clear(acc_g);
    clear(acc_b);
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
        accumulate::<G, V, F>(acc_g, dr * xhat);
        accumulate::<G, V, F>(acc_b, dr);
        row += gr.groups;
    }
    let off = gr.group * at.cols + at.start;
    store_partial::<T, A, G, V, F>(acc_g, io.dgamma_part, off, at.len);
    store_partial::<T, A, G, V, F>(acc_b, io.dbeta_part, off, at.len);
}

/// Threads per CTA of [`norm_bwd_reduce`]: one column each.
pub const REDUCE_THREADS: usize = 128;

/// Independent partial sums per thread of [`norm_bwd_reduce`] (loads in flight).
pub const REDUCE_LANES: usize = 8;

/// `out[y * cols + c] = sum over p in chunk y of part[p * cols + c]` (f32),
/// chunk `y` (the grid's `y`) being the groups `y chunk .. min(groups, (y +
/// 1) chunk)`: one thread per column, `ctas` CTAs of 128 threads (the
/// grid's `x`) taking columns `128 ctas` apart in turn. A chunk's groups go
/// [`REDUCE_LANES`] at a time into as many running sums (8 loads in
/// flight), combined in lane order at the end: a fixed order, the same
/// result on every run. The host sums many groups in two launches (chunks
/// of partial rows, then the chunks' rows: both in parallel over the
/// chunks), a few in one (`chunk = groups`, a grid `y` of 1); no barrier.
#[kernel(block = threads(128))]
pub fn norm_bwd_reduce(part: GmemRef<f32>, out: Gmem<f32>, groups: u32, cols: u32, ctas: u32, chunk: u32) {
    let (cols, chunk) = (cols as usize, chunk as usize);
    let y = block_idx().y as usize;
    let (p0, p1) = (y * chunk, (groups as usize).min((y + 1) * chunk));
    let mut c = block_idx().x as usize * REDUCE_THREADS + thread_linear() as usize;
    while c < cols {
        let mut s = [0.0f32; REDUCE_LANES];
        let mut p = p0;
        while p + REDUCE_LANES <= p1 {
            unroll(REDUCE_LANES, |l| s[l] += part.read((p + l) * cols + c));
            p += REDUCE_LANES;
        }
        unroll(REDUCE_LANES, |l| {
            if p + l < p1 {
                s[l] += part.read((p + l) * cols + c);
            }
        });
        let mut total = 0.0f32;
        unroll(REDUCE_LANES, |l| total += s[l]);
        out.write(y * cols + c, total);
        c += ctas as usize * REDUCE_THREADS;
    }
}
