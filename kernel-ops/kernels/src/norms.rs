//! Row softmax, layer norm, RMS norm and the fused residual norms
//! (`add_rms_norm`, `add_layer_norm`, optionally quantizing to FP8 e4m3)
//! over f16 / bf16 rows of any width that is a multiple of 8 elements, up
//! to 16384, on register arrays in the `Strided` layout.
//!
//! These kernels work as follows:
//! 1. a group of `G` threads owns one row and loads it as an
//!    `Array<T, Strided<G, V, 8>>`: thread `g` of the group holds the
//!    8-element pieces `g, g + G, ..` (`V` of them), each one 16-byte load,
//!    so each load instruction of the group reads `16 G` consecutive bytes;
//!    pieces at or beyond the row's end are not read (masked: filled with 0,
//!    or `-inf` for the softmax's maximum). The row stays in registers, as
//!    f32 (`InF32`) or, for the wide rows, as loaded (`AsLoaded`: 16-bit,
//!    half the registers, converted again at each use);
//! 2. the row statistics are group reductions (`Array::reduce`: registers,
//!    a warp butterfly, then for groups of several warps the warps through
//!    SMEM and a named barrier): softmax takes the max and the sum of
//!    `exp(x - max)`, layer norm the mean and the variance of `x - mean`
//!    (two passes over the registers, no cancellation), RMS norm the mean
//!    of `x²`;
//! 3. the result is computed in f32, converted (`cvt.rn`), and stored with
//!    16-byte stores (masked as the loads): each element is read once and
//!    written once.
//!
//! Three row shapes cover the widths, picked by the host
//! (`kernel_ops::norms`) from `cols`:
//!
//! | kernels | group | rows per CTA | `V` | columns |
//! |---|---|---|---|---|
//! | `{op}_warp<T, V>` | a warp (32 threads) | 4 | 1..=4 | `cols <= 256 V`, used below 1024 |
//! | `{op}<T, V>` | a warpgroup (128) | 1 | 1..=8 | `cols <= 1024 V`, 1024..=8192 |
//! | `{op}_wide<T, V>` | 4 warpgroups (512) | 1 | 3, 4 | `cols <= 4096 V`, 8200..=16384 |
//!
//! Narrow rows go one per warp so that a CTA moves 4 rows and each thread
//! has up to 4 loads in flight (a warpgroup per 768-column row would leave
//! a quarter of its threads idle and an SM 24 KB in flight); wide rows keep
//! their 16-bit elements in registers as words (half the registers of
//! f32). Wider rows (`V` 6 to 16, up to 65536 columns) spilled (ptxas
//! loads gamma and beta for the whole row at once beside the row itself):
//! they need a two-pass over L2 or a cluster per row, not built yet.
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
//! Constraints: `cols % 8 == 0`, `8 <= cols <= the shape's maximum`; `x`,
//! `y` (and `residual`, `new_residual`, `q`) hold `rows * cols` elements
//! (row-major, 16-byte aligned rows), `gamma` / `beta` `cols`. The host
//! entry points in `kernel-ops` check these.
use kernel_device::array::regs::{opaque_u32, unroll};
use kernel_device::array::{Array, Scalar, Strided};
use kernel_device::gmem::GmemRef;
use kernel_device::math::{ex2_approx, lg2_approx, rcp_approx_ftz, rsqrt_approx, LOG2_E};
use kernel_device::prelude::*;
use kernel_device::{bf16, f16, E4M3};

/// Elements per thread per access: 8 x 16 bits = 16 bytes.
pub const VEC: usize = 8;
/// Columns per `V` of the warpgroup kernels: 128 threads x 8 elements.
pub const COLS_PER_VEC: usize = 128 * VEC;
/// Rows per CTA of the `_warp` kernels (one per warp of the warpgroup).
pub const WARP_ROWS: usize = 4;
/// Threads per row of the `_wide` kernels.
pub const WIDE_THREADS: usize = 512;

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

/// The element types of the norms: f16 and bf16, whose pairs are 32-bit words.
pub trait Elem: Scalar {
    /// The two elements of a word (`lo` in bits 0..16) as f32.
    fn unpack(w: u32) -> [f32; 2];
    /// Two f32 rounded to a word (`cvt.rn.{f16x2,bf16x2}.f32`).
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        Self::pair_word(lo, hi).unwrap_or(0)
    }
}
impl Elem for f16 {
    #[inline(always)]
    fn unpack(w: u32) -> [f32; 2] {
        [Scalar::to_f32(f16::from_bits(w as u16)), Scalar::to_f32(f16::from_bits((w >> 16) as u16))]
    }
}
impl Elem for bf16 {
    #[inline(always)]
    fn unpack(w: u32) -> [f32; 2] {
        // A bf16 is the top half of an f32.
        [f32::from_bits(w << 16), f32::from_bits(w & 0xffff_0000)]
    }
}

/// A row's 8-element pieces as words: `Strided<G, V, 4>` of `u32`.
pub type Words<const G: usize, const V: usize> = Array<u32, Strided<G, V, 4>>;

/// The words of `src[off .. off + cols]` (pieces beyond `cols`: `fill`, twice per word).
#[inline(always)]
#[track_caller]
fn load_words<T: Elem, const G: usize, const V: usize>(src: GmemRef<T>, off: usize, cols: usize, fill: f32) -> Words<G, V> {
    // SAFETY: the same memory as 16-bit pairs; `off` and `cols` are even.
    let w = unsafe { GmemRef::<u32>::from_ptr(src.ptr().cast(), src.len() / 2) };
    let f = T::pack(fill, fill);
    Words::<G, V>::load_gmem_masked(w, off / 2, cols / 2, f)
}

/// `src[off .. off + cols]` in f32, through words (pieces beyond `cols`: `fill`).
#[inline(always)]
#[track_caller]
fn load_f32<T: Elem, const G: usize, const V: usize>(src: GmemRef<T>, off: usize, cols: usize, fill: f32) -> Array<f32, Strided<G, V, VEC>> {
    AsLoaded::f32_of::<T, G, V>(load_words::<T, G, V>(src, off, cols, fill).regs.0)
}

/// Rounds `a` to `T` by pairs (`cvt.rn.{f16x2,bf16x2}.f32`) and stores
/// its pieces below `cols` to `dst[off ..]` as words.
#[inline(always)]
#[track_caller]
fn store_f32<T: Elem, const G: usize, const V: usize>(a: Array<f32, Strided<G, V, VEC>>, dst: Gmem<T>, off: usize, cols: usize) {
    let mut w = Words::<G, V>::splat(0);
    unroll(V, |j| unroll(4, |k| w.regs.0[j][k] = T::pack(a.regs.0[j][2 * k], a.regs.0[j][2 * k + 1])));
    // SAFETY: the same memory as 16-bit pairs; `off` and `cols` are even.
    let d = unsafe { Gmem::<u32>::from_ptr(dst.ptr().cast(), dst.len() / 2) };
    w.store_gmem_masked(d, off / 2, cols / 2);
}

/// How a row stays in registers between its passes.
pub trait Keep<T: Elem>: 'static {
    /// The registers of a row of `Strided<G, V, 8>`.
    type Row<const G: usize, const V: usize>: Copy;
    /// The row, loaded (pieces beyond `cols`: `fill`).
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, cols: usize, fill: f32) -> Self::Row<G, V>;
    /// The row from its words.
    fn from_words<const G: usize, const V: usize>(w: Words<G, V>) -> Self::Row<G, V>;
    /// The row in f32.
    fn f32<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Array<f32, Strided<G, V, VEC>>;
    /// The row as a new value ([`opaque_u32`]) where later conversions must
    /// not be merged with earlier ones; the identity for f32 rows.
    fn refresh<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Self::Row<G, V>;
}
/// Converted to f32 at the load: no conversion at the later uses.
pub struct InF32;
/// As loaded, as 32-bit words of two elements: half the registers of f32,
/// converted at each use.
pub struct AsLoaded;
impl<T: Elem> Keep<T> for InF32 {
    type Row<const G: usize, const V: usize> = Array<f32, Strided<G, V, VEC>>;
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, cols: usize, fill: f32) -> Self::Row<G, V> {
        load_f32::<T, G, V>(src, off, cols, fill)
    }
    #[inline(always)]
    fn from_words<const G: usize, const V: usize>(w: Words<G, V>) -> Self::Row<G, V> {
        AsLoaded::f32_of::<T, G, V>(w.regs.0)
    }
    #[inline(always)]
    fn f32<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Array<f32, Strided<G, V, VEC>> {
        r
    }
    #[inline(always)]
    fn refresh<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Self::Row<G, V> {
        r
    }
}
impl AsLoaded {
    #[inline(always)]
    fn f32_of<T: Elem, const G: usize, const V: usize>(w: [[u32; 4]; V]) -> Array<f32, Strided<G, V, VEC>> {
        let mut out = Array::<f32, Strided<G, V, VEC>>::splat(0.0);
        unroll(V, |j| {
            unroll(4, |k| {
                let [a, b] = T::unpack(w[j][k]);
                out.regs.0[j][2 * k] = a;
                out.regs.0[j][2 * k + 1] = b;
            })
        });
        out
    }
}
impl<T: Elem> Keep<T> for AsLoaded {
    type Row<const G: usize, const V: usize> = [[u32; 4]; V];
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, cols: usize, fill: f32) -> Self::Row<G, V> {
        load_words::<T, G, V>(src, off, cols, fill).regs.0
    }
    #[inline(always)]
    fn from_words<const G: usize, const V: usize>(w: Words<G, V>) -> Self::Row<G, V> {
        w.regs.0
    }
    #[inline(always)]
    fn f32<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Array<f32, Strided<G, V, VEC>> {
        Self::f32_of::<T, G, V>(r)
    }
    #[inline(always)]
    fn refresh<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Self::Row<G, V> {
        let mut out = r;
        unroll(V, |j| unroll(4, |k| out[j][k] = opaque_u32(r[j][k])));
        out
    }
}

/// Where a group's row is: its index, its length, and the group's
/// reduction scratch and barrier (`W` warps; unused by a warp).
#[derive(Clone, Copy)]
pub struct RowAt<const W: usize> {
    pub row: usize,
    pub cols: usize,
    pub red: Smem<[f32; W]>,
    pub bar: NamedBarrier,
}

impl<const W: usize> RowAt<W> {
    #[inline(always)]
    fn off(&self) -> usize {
        self.row * self.cols
    }
    #[inline(always)]
    fn inv_cols(&self) -> f32 {
        // 1 ulp (`rcp.approx.ftz`): no division subroutine.
        rcp_approx_ftz(self.cols as f32)
    }
    /// The row of the group: `Array<f32, Strided<G, V, 8>>`'s reductions.
    #[inline(always)]
    #[track_caller]
    fn sum<const G: usize, const V: usize>(&self, a: Array<f32, Strided<G, V, VEC>>) -> f32 {
        a.sum(self.red, self.bar)
    }
    #[inline(always)]
    #[track_caller]
    fn max<const G: usize, const V: usize>(&self, a: Array<f32, Strided<G, V, VEC>>) -> f32 {
        a.max_all(self.red, self.bar)
    }
}

/// `y = exp(x - max x) / sum exp(x - max x)` of the group's row.
#[inline(always)]
#[track_caller]
pub fn softmax_row<T: Elem, K: Keep<T>, const G: usize, const V: usize, const W: usize>(x: GmemRef<T>, y: Gmem<T>, at: RowAt<W>) {
    let v = K::load::<G, V>(x, at.off(), at.cols, f32::NEG_INFINITY);
    let max = at.max(K::f32(v));
    if size_of::<K::Row<G, V>>() == size_of::<Array<f32, Strided<G, V, VEC>>>() {
        // f32 rows: the exponentials stay in the row's registers (masked
        // pieces: e^-inf = 0).
        let e = (K::f32(v) - max).exp();
        let inv = 1.0 / at.sum(e);
        store_f32(e * inv, y, at.off(), at.cols);
    } else {
        // 16-bit rows: the exponentials again at the store, with the sum
        // folded into the exponent (`2^(x log2 e - max log2 e - log2 sum)`),
        // so no f32 copy of the row stays live across the reduction.
        let c = -max * LOG2_E;
        let sum = at.sum(K::f32(v).map(|a| ex2_approx(a.fma(LOG2_E, c))));
        let c = c - lg2_approx(sum);
        store_f32(K::f32(K::refresh(v)).map(|a| ex2_approx(a.fma(LOG2_E, c))), y, at.off(), at.cols);
    }
}

/// A row's normalized result, recomputable from what stays in registers.
pub trait RowOut<const G: usize, const V: usize>: Copy {
    /// `y` in f32 (pieces beyond `cols`: 0).
    fn y(self) -> Array<f32, Strided<G, V, VEC>>;
    /// The same, its conversions not merged with an earlier `y()`.
    fn refresh(self) -> Self;
}

/// The layer norm's output: `(x - mean) * r * gamma + beta`.
pub struct LayerNormOut<T: Elem, K: Keep<T>, const G: usize, const V: usize> {
    v: K::Row<G, V>,
    mean: f32,
    r: f32,
    gamma: GmemRef<T>,
    beta: GmemRef<T>,
    cols: usize,
}
impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> Clone for LayerNormOut<T, K, G, V> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> Copy for LayerNormOut<T, K, G, V> {}

impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> LayerNormOut<T, K, G, V> {
    /// The statistics of the row `v` (pieces beyond `cols` are 0): two passes, no cancellation.
    #[inline(always)]
    #[track_caller]
    fn new<const W: usize>(v: K::Row<G, V>, gamma: GmemRef<T>, beta: GmemRef<T>, eps: f32, at: RowAt<W>) -> Self {
        let mean = at.sum(K::f32(v)) * at.inv_cols();
        let d = (K::f32(v) - mean).mask_beyond(at.cols, 0.0);
        let var = at.sum(d * d) * at.inv_cols();
        LayerNormOut { v, mean, r: rsqrt_approx(var + eps), gamma, beta, cols: at.cols }
    }
}
impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> RowOut<G, V> for LayerNormOut<T, K, G, V> {
    #[inline(always)]
    #[track_caller]
    fn y(self) -> Array<f32, Strided<G, V, VEC>> {
        let (g, b) = (load_f32::<T, G, V>(self.gamma, 0, self.cols, 0.0), load_f32::<T, G, V>(self.beta, 0, self.cols, 0.0));
        (K::f32(self.v) - self.mean) * self.r * g + b
    }
    #[inline(always)]
    fn refresh(self) -> Self {
        LayerNormOut { v: K::refresh(self.v), ..self }
    }
}

/// The RMS norm's output: `x * r * gamma`.
pub struct RmsOut<T: Elem, K: Keep<T>, const G: usize, const V: usize> {
    v: K::Row<G, V>,
    r: f32,
    gamma: GmemRef<T>,
    cols: usize,
}
impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> Clone for RmsOut<T, K, G, V> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> Copy for RmsOut<T, K, G, V> {}

impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> RmsOut<T, K, G, V> {
    /// `r = 1 / sqrt(mean(x²) + eps)` of the row `v`.
    #[inline(always)]
    #[track_caller]
    fn new<const W: usize>(v: K::Row<G, V>, gamma: GmemRef<T>, eps: f32, at: RowAt<W>) -> Self {
        let f = K::f32(v);
        RmsOut { v, r: rsqrt_approx(at.sum(f * f) * at.inv_cols() + eps), gamma, cols: at.cols }
    }
}
impl<T: Elem, K: Keep<T>, const G: usize, const V: usize> RowOut<G, V> for RmsOut<T, K, G, V> {
    #[inline(always)]
    #[track_caller]
    fn y(self) -> Array<f32, Strided<G, V, VEC>> {
        K::f32(self.v) * self.r * load_f32::<T, G, V>(self.gamma, 0, self.cols, 0.0)
    }
    #[inline(always)]
    fn refresh(self) -> Self {
        RmsOut { v: K::refresh(self.v), ..self }
    }
}

/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` of the group's row.
#[inline(always)]
#[track_caller]
pub fn layer_norm_row<T: Elem, K: Keep<T>, const G: usize, const V: usize, const W: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, at: RowAt<W>) {
    let v = K::load::<G, V>(x, at.off(), at.cols, 0.0);
    let out = LayerNormOut::<T, K, G, V>::new(v, gamma, beta, eps, at);
    store_f32(out.refresh().y(), y, at.off(), at.cols);
}

/// `y = x / sqrt(mean(x²) + eps) * gamma` of the group's row.
#[inline(always)]
#[track_caller]
pub fn rms_norm_row<T: Elem, K: Keep<T>, const G: usize, const V: usize, const W: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, at: RowAt<W>) {
    let v = K::load::<G, V>(x, at.off(), at.cols, 0.0);
    let out = RmsOut::<T, K, G, V>::new(v, gamma, eps, at);
    store_f32(out.refresh().y(), y, at.off(), at.cols);
}

/// The fused norms' outputs: `new_residual`, and `y` or its FP8 form.
#[derive(Clone, Copy)]
pub struct FusedOut<T> {
    pub new_residual: Gmem<T>,
    pub y: Gmem<T>,
    pub q: Gmem<E4M3>,
    pub scales: Gmem<f32>,
    pub fp8: u32,
}

/// `s = round_T(x + residual)` of the group's row as words, stored to
/// `new_residual` (except in the amax-only pass).
#[inline(always)]
#[track_caller]
fn add_residual<T: Elem, const G: usize, const V: usize>(x: GmemRef<T>, residual: GmemRef<T>, out: FusedOut<T>, off: usize, cols: usize) -> Words<G, V> {
    let (a, b) = (load_words::<T, G, V>(x, off, cols, 0.0), load_words::<T, G, V>(residual, off, cols, 0.0));
    let s = a.zip(b, |a, b| {
        let ([a0, a1], [b0, b1]) = (T::unpack(a), T::unpack(b));
        T::pack(a0 + b0, a1 + b1)
    });
    if out.fp8 != FP8_TENSOR_AMAX {
        // SAFETY: the same memory as 16-bit pairs; `off` and `cols` are even.
        let w = unsafe { Gmem::<u32>::from_ptr(out.new_residual.ptr().cast(), out.new_residual.len() / 2) };
        s.store_gmem_masked(w, off / 2, cols / 2);
    }
    s
}

/// Stores the row's result as `T`, or quantized to e4m3 as `out.fp8` says
/// (see the module docs).
#[inline(always)]
#[track_caller]
fn store_out<T: Elem, const G: usize, const V: usize, const W: usize>(res: impl RowOut<G, V>, out: FusedOut<T>, at: RowAt<W>) {
    if out.fp8 == FP8_NONE {
        store_f32(res.refresh().y(), out.y, at.off(), at.cols);
        return;
    }
    let first = thread_linear() as usize % G == 0;
    let scale_of = |amax: f32| if amax > 0.0 && amax.is_finite() { amax * (1.0 / E4M3_MAX) } else { 1.0 };
    let scale = if out.fp8 == FP8_TENSOR_SCALE {
        out.scales.read(0)
    } else if out.fp8 == FP8_TENSOR_FROM_AMAX {
        scale_of(out.scales.read(0))
    } else {
        // Pieces beyond `cols` are 0 (gamma and beta loaded as 0).
        let amax = at.max(res.y().map(|a| a.abs()));
        if out.fp8 == FP8_TENSOR_AMAX {
            if first {
                // SAFETY: f32 and u32 have one layout; amax >= 0 orders as its bits.
                let bits = unsafe { Gmem::<u32>::from_ptr(out.scales.ptr().cast(), out.scales.len()) };
                bits.atomic_max(0, amax.to_bits());
            }
            return;
        }
        let s = scale_of(amax);
        if first {
            out.scales.write(at.row, s);
        }
        s
    };
    let inv = 1.0 / scale;
    // Each 8-element piece as two words of 4 e4m3 (`cvt.rn.satfinite.e4m3x2.f32`).
    let f = res.refresh().y();
    let mut q = Array::<u32, Strided<G, V, 2>>::splat(0);
    unroll(V, |j| {
        let p = |k: usize| u32::from(kernel_device::cvt::pack_e4m3x2(f.regs.0[j][k] * inv, f.regs.0[j][k + 1] * inv));
        q.regs.0[j] = [p(0) | (p(2) << 16), p(4) | (p(6) << 16)];
    });
    // SAFETY: e4m3 bytes as words: `rows * cols` bytes, `cols % 8 == 0`, so each row's start is 8-byte aligned.
    let words = unsafe { Gmem::<u32>::from_ptr(out.q.ptr().cast(), out.q.len() / 4) };
    q.store_gmem_masked(words, at.off() / 4, at.cols / 4);
}

/// `new_residual = x + residual`, `y = rms_norm(new_residual) * gamma` (or its FP8 form) of the group's row.
#[inline(always)]
#[track_caller]
pub fn add_rms_norm_row<T: Elem, K: Keep<T>, const G: usize, const V: usize, const W: usize>(x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, out: FusedOut<T>, eps: f32, at: RowAt<W>) {
    let v = K::from_words(add_residual::<T, G, V>(x, residual, out, at.off(), at.cols));
    store_out(RmsOut::<T, K, G, V>::new(v, gamma, eps, at), out, at);
}

/// `new_residual = x + residual`, `y = layer_norm(new_residual)` (or its FP8 form) of the group's row.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm_row<T: Elem, K: Keep<T>, const G: usize, const V: usize, const W: usize>(
    x: GmemRef<T>,
    residual: GmemRef<T>,
    gamma: GmemRef<T>,
    beta: GmemRef<T>,
    out: FusedOut<T>,
    eps: f32,
    at: RowAt<W>,
) {
    let v = K::from_words(add_residual::<T, G, V>(x, residual, out, at.off(), at.cols));
    store_out(LayerNormOut::<T, K, G, V>::new(v, gamma, beta, eps, at), out, at);
}

/// The warp's row of a `_warp` kernel (`None` past the last row): one per
/// warp, no SMEM and no barrier (a warp reduces by shuffles).
#[inline(always)]
fn warp_row(rows: u32, cols: u32, red: Smem<[f32; 1]>) -> Option<RowAt<1>> {
    let row = block_idx().x as usize * WARP_ROWS + warp_idx() as usize;
    (row < rows as usize).then_some(RowAt { row, cols: cols as usize, red, bar: NamedBarrier::new(1, 32) })
}
/// The CTA's row of a warpgroup kernel.
#[inline(always)]
fn wg_row(cols: u32, red: Smem<[f32; 4]>) -> RowAt<4> {
    RowAt { row: block_idx().x as usize, cols: cols as usize, red, bar: NamedBarrier::new(1, 128) }
}
/// The CTA's row of a `_wide` kernel.
#[inline(always)]
fn wide_row(cols: u32, red: Smem<[f32; 16]>) -> RowAt<16> {
    RowAt { row: block_idx().x as usize, cols: cols as usize, red, bar: NamedBarrier::new(1, WIDE_THREADS as u32) }
}

// The kernels: per op, the three row shapes of the module docs' table.
// Grid: `ceil(rows / 4)` for `_warp`, `rows` for the others.

/// Row softmax, one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
pub fn softmax_warp<T: Elem, const V: usize>(x: GmemRef<T>, y: Gmem<T>, rows: u32, cols: u32, #[scratch] red: Smem<[f32; 1]>) {
    if let Some(at) = warp_row(rows, cols, red) {
        softmax_row::<T, InF32, 32, V, 1>(x, y, at);
    }
}
/// Row softmax, one row of at most `1024 V` columns per CTA (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4), (5), (6), (7), (8)))]
pub fn softmax<T: Elem, const V: usize>(x: GmemRef<T>, y: Gmem<T>, cols: u32, #[scratch] red: Smem<[f32; 4]>) {
    softmax_row::<T, InF32, 128, V, 4>(x, y, wg_row(cols, red));
}
/// Row softmax, one row of at most `4096 V` columns per CTA of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
pub fn softmax_wide<T: Elem, const V: usize>(x: GmemRef<T>, y: Gmem<T>, cols: u32, #[scratch] red: Smem<[f32; 16]>) {
    softmax_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, y, wide_row(cols, red));
}

/// Layer norm, one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
pub fn layer_norm_warp<T: Elem, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, rows: u32, cols: u32, #[scratch] red: Smem<[f32; 1]>) {
    if let Some(at) = warp_row(rows, cols, red) {
        layer_norm_row::<T, InF32, 32, V, 1>(x, gamma, beta, y, eps, at);
    }
}
/// Layer norm, one row of at most `1024 V` columns per CTA (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4), (5), (6), (7), (8)))]
pub fn layer_norm<T: Elem, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 4]>) {
    layer_norm_row::<T, InF32, 128, V, 4>(x, gamma, beta, y, eps, wg_row(cols, red));
}
/// Layer norm, one row of at most `4096 V` columns per CTA of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
pub fn layer_norm_wide<T: Elem, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 16]>) {
    layer_norm_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, gamma, beta, y, eps, wide_row(cols, red));
}

/// RMS norm, one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
pub fn rms_norm_warp<T: Elem, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, rows: u32, cols: u32, #[scratch] red: Smem<[f32; 1]>) {
    if let Some(at) = warp_row(rows, cols, red) {
        rms_norm_row::<T, InF32, 32, V, 1>(x, gamma, y, eps, at);
    }
}
/// RMS norm, one row of at most `1024 V` columns per CTA (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4), (5), (6), (7), (8)))]
pub fn rms_norm<T: Elem, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 4]>) {
    rms_norm_row::<T, InF32, 128, V, 4>(x, gamma, y, eps, wg_row(cols, red));
}
/// RMS norm, one row of at most `4096 V` columns per CTA of 4 warpgroups (see the [module docs](self)).
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
pub fn rms_norm_wide<T: Elem, const V: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, cols: u32, #[scratch] red: Smem<[f32; 16]>) {
    rms_norm_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, gamma, y, eps, wide_row(cols, red));
}

/// `new_residual = x + residual`, `y = rms_norm(new_residual) * gamma` (or
/// its FP8 form), one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm_warp<T: Elem, const V: usize>(
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
pub fn add_rms_norm<T: Elem, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 4]>,
) {
    add_rms_norm_row::<T, InF32, 128, V, 4>(x, residual, gamma, FusedOut { new_residual, y, q, scales, fp8 }, eps, wg_row(cols, red));
}
/// [`add_rms_norm_warp`]'s op, one row of at most `4096 V` columns per CTA of 4 warpgroups.
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm_wide<T: Elem, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>,
) {
    add_rms_norm_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, residual, gamma, FusedOut { new_residual, y, q, scales, fp8 }, eps, wide_row(cols, red));
}

/// `new_residual = x + residual`, `y = layer_norm(new_residual)` (or its
/// FP8 form), one row of at most `256 V` columns per warp (see the [module docs](self)).
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm_warp<T: Elem, const V: usize>(
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
pub fn add_layer_norm<T: Elem, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 4]>,
) {
    add_layer_norm_row::<T, InF32, 128, V, 4>(x, residual, gamma, beta, FusedOut { new_residual, y, q, scales, fp8 }, eps, wg_row(cols, red));
}
/// [`add_layer_norm_warp`]'s op, one row of at most `4096 V` columns per CTA of 4 warpgroups.
#[kernel(block = warpgroups(4), instances(T = [f16, bf16], (3), (4)))]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm_wide<T: Elem, const V: usize>(
    x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, new_residual: Gmem<T>, y: Gmem<T>, q: Gmem<E4M3>, scales: Gmem<f32>, fp8: u32, eps: f32, cols: u32,
    #[scratch] red: Smem<[f32; 16]>,
) {
    add_layer_norm_row::<T, AsLoaded, WIDE_THREADS, V, 16>(x, residual, gamma, beta, FusedOut { new_residual, y, q, scales, fp8 }, eps, wide_row(cols, red));
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
