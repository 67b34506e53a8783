//! A group's row slice ([`RowAt`]), its reductions over the CTA or the
//! cluster ([`Reach`]), and the row algorithms: [`softmax_row`],
//! [`layer_norm_row`], [`rms_norm_row`].
use super::access::{Access, Elem, Keep, RowF32, VEC};
use kernel_device::array::regs::{opaque_u32, unroll};
use kernel_device::gmem::GmemRef;
use kernel_device::math::{ex2_approx, lg2_approx, rcp_approx_ftz, rsqrt_approx, LOG2_E};
use kernel_device::prelude::*;
use kernel_device::reduce::{Max, ReduceOp, Sum};

/// How far a row's reduction reaches beyond the group's CTA.
pub trait Reach: Copy {
    /// The reduction of the CTA's partial `v` (the same value in every
    /// thread of the CTA) with the other CTAs' of the row.
    fn combine<Op: ReduceOp<f32>>(&mut self, v: f32) -> f32;
    /// The row's mean and sum of squared deviations (`m2`) from the CTA's
    /// slice's (`mean` and `m2` about it, the same in every thread of the
    /// CTA) and the other CTAs': all in one exchange, combined as Chan,
    /// Golub and LeVeque's pairwise update (`m2 = Σ m2ₖ + lenₖ (meanₖ -
    /// mean)²`, no cancellation). The row's last exchange.
    fn moments(&mut self, mean: f32, m2: f32, cols: usize) -> (f32, f32);
}

/// The columns of each CTA's slice of a `cols`-column row split over `c`
/// CTAs: a multiple of 8, so that every slice of a row of a multiple of 8
/// starts 16-byte aligned (the last slice is shorter).
#[inline(always)]
pub fn cluster_slice(cols: usize, c: usize) -> usize {
    cols.div_ceil(c * VEC) * VEC
}

/// The row lies in one CTA: nothing to combine.
#[derive(Clone, Copy)]
pub struct Cta;
impl Reach for Cta {
    #[inline(always)]
    fn combine<Op: ReduceOp<f32>>(&mut self, v: f32) -> f32 {
        v
    }
    #[inline(always)]
    fn moments(&mut self, mean: f32, m2: f32, _cols: usize) -> (f32, f32) {
        (mean, m2)
    }
}

/// The row is split over the `C` CTAs of a cluster (one slice each): each
/// CTA's partial goes to slot `rank` in every CTA of the cluster
/// (distributed shared memory: thread `t < C` stores to CTA `t`), a
/// cluster barrier (release / acquire) orders the stores before the
/// reads, and each CTA combines the `C` partials in rank order, so every
/// CTA gets the same value. Reductions alternate between two slots: the
/// barrier of reduction `n + 1` orders reduction `n`'s reads before
/// reduction `n + 2`'s stores into the same slot.
#[derive(Clone, Copy)]
pub struct Cluster<const C: usize> {
    pub slots: Smem<[[f32; C]; 2]>,
    /// Reductions so far (the slot is `n % 2`).
    pub n: usize,
}
impl<const C: usize> Reach for Cluster<C> {
    #[inline(always)]
    #[track_caller]
    fn combine<Op: ReduceOp<f32>>(&mut self, v: f32) -> f32 {
        let slot = self.slots.at(self.n % 2);
        self.n += 1;
        let t = thread_linear();
        if (t as usize) < C {
            // SAFETY: `t < C` is a rank of this cluster of `C` CTAs, all of
            // which run until the kernel's closing cluster barrier; the
            // store is ordered before the reads by the barrier below.
            unsafe { slot.map_rank(t) }.write(cluster_ctarank() as usize, v);
        }
        cluster_sync();
        let mut r = slot.read(0);
        unroll(C - 1, |k| r = Op::combine(r, slot.read(k + 1)));
        r
    }
    /// Both slots at once (the means in one, the `m2`s in the other), so
    /// no reduction may follow in the row: its stores would not be ordered
    /// after these reads.
    #[inline(always)]
    #[track_caller]
    fn moments(&mut self, mean: f32, m2: f32, cols: usize) -> (f32, f32) {
        let (means, m2s) = (self.slots.at(0), self.slots.at(1));
        self.n += 2;
        let t = thread_linear();
        if (t as usize) < C {
            let me = cluster_ctarank() as usize;
            // SAFETY: as in `combine`: `t < C` is a rank of this cluster,
            // whose CTAs all run until the kernel's closing cluster barrier;
            // the stores are ordered before the reads by the barrier below.
            unsafe { means.map_rank(t) }.write(me, mean);
            unsafe { m2s.map_rank(t) }.write(me, m2);
        }
        cluster_sync();
        let slice = cluster_slice(cols, C);
        let len = |k: usize| cols.saturating_sub(k * slice).min(slice) as f32;
        let mut sum = 0.0;
        unroll(C, |k| sum += len(k) * means.read(k));
        let mean = sum * rcp_approx_ftz(cols as f32);
        let mut q = 0.0;
        unroll(C, |k| {
            let d = means.read(k) - mean;
            q += m2s.read(k) + len(k) * d * d;
        });
        (mean, q)
    }
}

/// Where a group's row slice is: the row, its width, the slice
/// (`start .. start + len` of its columns; the whole row unless the row is
/// split over a cluster), the group's reduction scratch and barrier (`W`
/// warps; unused by a warp), and the reach of the reductions.
#[derive(Clone, Copy)]
pub struct RowAt<const W: usize, R: Reach = Cta> {
    pub row: usize,
    pub cols: usize,
    pub start: usize,
    pub len: usize,
    pub red: Smem<[f32; W]>,
    pub bar: NamedBarrier,
    pub reach: R,
}

impl<const W: usize, R: Reach> RowAt<W, R> {
    /// The slice's first element in `x` and `y`.
    #[inline(always)]
    pub fn off(&self) -> usize {
        self.row * self.cols + self.start
    }
    #[inline(always)]
    pub fn inv_cols(&self) -> f32 {
        // 1 ulp (`rcp.approx.ftz`): no division subroutine.
        rcp_approx_ftz(self.cols as f32)
    }
    /// `1 / len` (the slice's columns; the row's in one CTA).
    #[inline(always)]
    pub fn inv_len(&self) -> f32 {
        rcp_approx_ftz(self.len as f32)
    }
    /// The sum over the group's slice (the group's reduction only).
    #[inline(always)]
    #[track_caller]
    pub fn sum_slice<const G: usize, const V: usize>(&mut self, a: RowF32<G, V>) -> f32 {
        a.sum(self.red, self.bar)
    }
    /// The sum over the row (group reduction, then the reach's).
    #[inline(always)]
    #[track_caller]
    pub fn sum<const G: usize, const V: usize>(&mut self, a: RowF32<G, V>) -> f32 {
        let v = a.sum(self.red, self.bar);
        self.reach.combine::<Sum>(v)
    }
    /// The maximum over the row.
    #[inline(always)]
    #[track_caller]
    pub fn max<const G: usize, const V: usize>(&mut self, a: RowF32<G, V>) -> f32 {
        let v = a.max_all(self.red, self.bar);
        self.reach.combine::<Max>(v)
    }
}

/// `y = exp(x - max x) / sum exp(x - max x)` of the group's row slice.
#[inline(always)]
#[track_caller]
pub fn softmax_row<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize, R: Reach>(x: GmemRef<T>, y: Gmem<T>, mut at: RowAt<W, R>) {
    let v = K::load::<G, V>(x, at.off(), at.len, f32::NEG_INFINITY);
    let max = at.max(K::f32(v));
    if size_of::<K::Row<G, V>>() == size_of::<RowF32<G, V>>() {
        // f32 rows: the exponentials stay in the row's registers (masked
        // pieces: e^-inf = 0).
        let e = (K::f32(v) - max).exp();
        let inv = 1.0 / at.sum(e);
        A::store(e * inv, y, at.off(), at.len);
    } else {
        // 16-bit rows: the exponentials again at the store, with the sum
        // folded into the exponent (`2^(x log2 e - max log2 e - log2 sum)`),
        // so no f32 copy of the row stays live across the reduction.
        let c = -max * LOG2_E;
        let sum = at.sum(K::f32(v).map(|a| ex2_approx(a.fma(LOG2_E, c))));
        let c = c - lg2_approx(sum);
        A::store(K::f32(K::refresh(v)).map(|a| ex2_approx(a.fma(LOG2_E, c))), y, at.off(), at.len);
    }
}

/// A row's normalized result, recomputable from what stays in registers.
pub trait RowOut<const G: usize, const V: usize>: Copy {
    /// `y` in f32 (elements beyond the slice: 0).
    fn y(self) -> RowF32<G, V>;
    /// The same, its conversions not merged with an earlier `y()`.
    fn refresh(self) -> Self;
}

/// The layer norm's output: `(x - mean) * r * gamma + beta`.
pub struct LayerNormOut<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> {
    v: K::Row<G, V>,
    mean: f32,
    r: f32,
    gamma: GmemRef<T>,
    beta: GmemRef<T>,
    start: usize,
    len: usize,
    /// The row slice's first element in `x` (the weights' map: [`Access::load_weights`]).
    off: usize,
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> Clone for LayerNormOut<T, A, K, G, V> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> Copy for LayerNormOut<T, A, K, G, V> {}

impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> LayerNormOut<T, A, K, G, V> {
    /// The statistics of the row `v` (elements beyond the slice are 0):
    /// two passes over the slice, no cancellation. A row kept as loaded is converted
    /// again for the second pass ([`Keep::refresh`]), so that no f32 copy
    /// of it stays live across the first reduction.
    #[inline(always)]
    #[track_caller]
    pub fn new<const W: usize, R: Reach>(v: K::Row<G, V>, gamma: GmemRef<T>, beta: GmemRef<T>, eps: f32, mut at: RowAt<W, R>) -> Self {
        // The slice's moments, then the row's ([`Reach::moments`]: for a
        // row split over a cluster, one exchange instead of one per pass).
        let mean = at.sum_slice(K::f32(v)) * at.inv_len();
        let d = A::mask_beyond(K::f32(K::refresh(v)) - mean, at.off(), at.len, 0.0);
        let m2 = at.sum_slice(d * d);
        let (mean, m2) = at.reach.moments(mean, m2, at.cols);
        LayerNormOut { v, mean, r: rsqrt_approx(m2 * at.inv_cols() + eps), gamma, beta, start: at.start, len: at.len, off: at.off() }
    }
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> LayerNormOut<T, A, K, G, V> {
    /// `y` with gamma and beta given (loaded earlier).
    #[inline(always)]
    fn y_with(self, g: RowF32<G, V>, b: RowF32<G, V>) -> RowF32<G, V> {
        (K::f32(self.v) - self.mean) * self.r * g + b
    }
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> RowOut<G, V> for LayerNormOut<T, A, K, G, V> {
    #[inline(always)]
    #[track_caller]
    fn y(self) -> RowF32<G, V> {
        let g = A::f32::<G, V>(A::load_weights::<G, V>(self.gamma, self.start, self.len, self.off));
        if G >= 512 && !A::STORE_BY_PIECES {
            // 512 threads, the whole row's weights at once ([`Peel`](super::Peel)):
            // gamma's product made opaque before beta is loaded, so that
            // gamma and beta (two chunks each, for the shift) are not live
            // together (f32 rows spilled).
            let t = ((K::f32(self.v) - self.mean) * self.r * g).map(|a| f32::from_bits(opaque_u32(a.to_bits())));
            return t + A::f32::<G, V>(A::load_weights::<G, V>(self.beta, self.start, self.len, self.off));
        }
        let b = A::f32::<G, V>(A::load_weights::<G, V>(self.beta, self.start, self.len, self.off));
        self.y_with(g, b)
    }
    #[inline(always)]
    fn refresh(self) -> Self {
        LayerNormOut { v: K::refresh(self.v), ..self }
    }
}

/// The RMS norm's output: `x * r * gamma`.
pub struct RmsOut<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> {
    v: K::Row<G, V>,
    r: f32,
    gamma: GmemRef<T>,
    start: usize,
    len: usize,
    off: usize,
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> Clone for RmsOut<T, A, K, G, V> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> Copy for RmsOut<T, A, K, G, V> {}

impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> RmsOut<T, A, K, G, V> {
    /// `r = 1 / sqrt(mean(x²) + eps)` of the row `v`.
    #[inline(always)]
    #[track_caller]
    pub fn new<const W: usize, R: Reach>(v: K::Row<G, V>, gamma: GmemRef<T>, eps: f32, mut at: RowAt<W, R>) -> Self {
        let f = K::f32(v);
        RmsOut { v, r: rsqrt_approx(at.sum(f * f) * at.inv_cols() + eps), gamma, start: at.start, len: at.len, off: at.off() }
    }
}
impl<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize> RowOut<G, V> for RmsOut<T, A, K, G, V> {
    #[inline(always)]
    #[track_caller]
    fn y(self) -> RowF32<G, V> {
        K::f32(self.v) * self.r * A::f32::<G, V>(A::load_weights::<G, V>(self.gamma, self.start, self.len, self.off))
    }
    #[inline(always)]
    fn refresh(self) -> Self {
        RmsOut { v: K::refresh(self.v), ..self }
    }
}

/// Pieces per chunk of [`store_chunked`] (ptxas, sm_90a, registers of
/// the 512-thread kernels with chunks of 1 / 2 / the whole row: f16 layer
/// norm at `V` = 3: 63 / 72 / 66, at `V` = 4: 83 / 106 / 100; f32 RMS norm
/// at `V` = 4: 56 / 76 / 74).
pub const CHUNK: usize = 1;

/// Computes and stores `out`'s `y` [`CHUNK`] pieces at a time: each
/// chunk's gamma (and beta) are loaded after the previous chunk's stores,
/// which they may alias, so neither LLVM nor ptxas moves them earlier, and
/// only a chunk of them is live at once: a 512-thread CTA needs at most 64
/// registers per thread for two CTAs per SM, and ptxas, given the whole
/// row's gamma and beta, loads and converts them all at once beside the
/// row. The price: an L2 round trip per chunk after the first, which the
/// other CTA of the SM can hide.
#[inline(always)]
#[track_caller]
fn store_chunked<T: Elem, A: Access<T>, const G: usize, const V: usize>(out: impl RowOut<G, V>, y: Gmem<T>, off: usize, len: usize) {
    unroll(V.div_ceil(CHUNK), |c| {
        let j1 = if CHUNK * c + CHUNK < V { CHUNK * c + CHUNK } else { V };
        A::store_pieces(out.refresh().y(), y, off, len, CHUNK * c, j1);
    });
}

/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` of the group's row slice.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_row<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize, R: Reach>(
    x: GmemRef<T>,
    gamma: GmemRef<T>,
    beta: GmemRef<T>,
    y: Gmem<T>,
    eps: f32,
    at: RowAt<W, R>,
) {
    let v = K::load::<G, V>(x, at.off(), at.len, 0.0);
    if V == 1 {
        // One piece per thread (1024 columns per warpgroup, 256 per warp):
        // gamma and beta loaded with the row (8 registers more, the same
        // occupancy for a warpgroup), their latency hidden behind the row's
        // and the two reductions instead of added after them.
        let (g, b) = (A::load_weights::<G, V>(gamma, at.start, at.len, at.off()), A::load_weights::<G, V>(beta, at.start, at.len, at.off()));
        let out = LayerNormOut::<T, A, K, G, V>::new(v, gamma, beta, eps, at);
        A::store(out.refresh().y_with(A::f32(g), A::f32(b)), y, at.off(), at.len);
    } else if G >= 512 && A::PER_ACCESS > 1 && A::STORE_BY_PIECES {
        // A CTA of 512 threads (`_wide`, `_cluster`): gamma and beta by
        // chunks. (Not for `Single`: there LLVM leaves the f32 row in local
        // memory across the chunks.)
        let out = LayerNormOut::<T, A, K, G, V>::new(v, gamma, beta, eps, at);
        store_chunked::<T, A, G, V>(out, y, at.off(), at.len);
    } else {
        let out = LayerNormOut::<T, A, K, G, V>::new(v, gamma, beta, eps, at);
        A::store(out.refresh().y(), y, at.off(), at.len);
    }
}

/// `y = x / sqrt(mean(x²) + eps) * gamma` of the group's row slice.
#[inline(always)]
#[track_caller]
pub fn rms_norm_row<T: Elem, A: Access<T>, K: Keep<T, A>, const G: usize, const V: usize, const W: usize, R: Reach>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, at: RowAt<W, R>) {
    let v = K::load::<G, V>(x, at.off(), at.len, 0.0);
    let out = RmsOut::<T, A, K, G, V>::new(v, gamma, eps, at);
    if G >= 512 && size_of::<K::Row<G, V>>() == size_of::<RowF32<G, V>>() && A::STORE_BY_PIECES {
        // A CTA of 512 threads holding its row in f32 (f32 or one element
        // per access): gamma by chunks. (The 16-bit rows, kept as words,
        // need no chunks for two CTAs per SM.)
        store_chunked::<T, A, G, V>(out, y, at.off(), at.len);
    } else {
        A::store(out.refresh().y(), y, at.off(), at.len);
    }
}
