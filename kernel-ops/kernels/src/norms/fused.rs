//! The fused residual norms: `new_residual = x + residual` (rounded to
//! `T`), then the RMS or layer norm of it, with `y` in `T` or quantized to
//! FP8 e4m3 (see the [module docs](super)). f16 / bf16 rows of a multiple
//! of 8 columns ([`Vec16`]), in one CTA.
use super::access::{load_words, Access, FromWords, Pairs, Vec16, Words};
use super::row::{LayerNormOut, RmsOut, RowAt, RowOut};
use super::{E4M3_MAX, FP8_NONE, FP8_TENSOR_AMAX, FP8_TENSOR_FROM_AMAX, FP8_TENSOR_SCALE};
use kernel_device::array::regs::unroll;
use kernel_device::array::{Array, Strided};
use kernel_device::gmem::GmemRef;
use kernel_device::prelude::*;
use kernel_device::E4M3;

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
fn add_residual<T: Pairs, const G: usize, const V: usize>(x: GmemRef<T>, residual: GmemRef<T>, out: FusedOut<T>, off: usize, cols: usize) -> Words<G, V> {
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
fn store_out<T: Pairs, const G: usize, const V: usize, const W: usize>(res: impl RowOut<G, V>, out: FusedOut<T>, mut at: RowAt<W>) {
    if out.fp8 == FP8_NONE {
        <Vec16 as Access<T>>::store(res.refresh().y(), out.y, at.off(), at.cols);
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
pub fn add_rms_norm_row<T: Pairs, K: FromWords<T>, const G: usize, const V: usize, const W: usize>(x: GmemRef<T>, residual: GmemRef<T>, gamma: GmemRef<T>, out: FusedOut<T>, eps: f32, at: RowAt<W>) {
    let v = K::from_words(add_residual::<T, G, V>(x, residual, out, at.off(), at.cols));
    store_out(RmsOut::<T, Vec16, K, G, V>::new(v, gamma, eps, at), out, at);
}

/// `new_residual = x + residual`, `y = layer_norm(new_residual)` (or its FP8 form) of the group's row.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm_row<T: Pairs, K: FromWords<T>, const G: usize, const V: usize, const W: usize>(
    x: GmemRef<T>,
    residual: GmemRef<T>,
    gamma: GmemRef<T>,
    beta: GmemRef<T>,
    out: FusedOut<T>,
    eps: f32,
    at: RowAt<W>,
) {
    let v = K::from_words(add_residual::<T, G, V>(x, residual, out, at.off(), at.cols));
    store_out(LayerNormOut::<T, Vec16, K, G, V>::new(v, gamma, beta, eps, at), out, at);
}

