//! Row softmax, layer norm and RMS norm over f16 / bf16 rows of 1024,
//! 2048, 4096 or 8192 columns, on register arrays in the WG_STRIDED layout.
//!
//! These kernels work as follows (one warpgroup per row, grid = rows):
//! 1. the warpgroup loads its row as an `Array<T, WgStrided<VECS, 8>>`:
//!    thread `t` holds the 8-element pieces `t, t + 128, ..` (`VECS` of
//!    them, `VECS = cols / 1024`), each one 16-byte load, so each load
//!    instruction of the warpgroup reads 2 KB of consecutive memory; the
//!    row is converted to f32 and stays in registers;
//! 2. the row statistics are warpgroup reductions (`Array::reduce`:
//!    registers, a warp butterfly, the 4 warps through 16 bytes of SMEM
//!    and a named barrier): softmax takes the max and the sum of
//!    `exp(x - max)`, layer norm the mean and the variance of `x - mean`
//!    (two passes over the registers, no cancellation), RMS norm the mean
//!    of `x²`;
//! 3. the result is computed in f32, converted (`cvt.rn`), and stored with
//!    16-byte stores: each element is read once and written once.
//!
//! Constraints: `cols = 1024 * VECS` with `VECS` in {1, 2, 4, 8}; `x` and
//! `y` hold `rows * cols` elements (row-major), `gamma` / `beta` `cols`;
//! 16-byte aligned rows. The host entry points in `kernel-ops` check these.
use kernel_device::array::{Array, Scalar, WgStrided};
use kernel_device::gmem::GmemRef;
use kernel_device::prelude::*;
use kernel_device::{bf16, f16};

/// Elements per thread per access: 8 x 16 bits = 16 bytes.
pub const VEC: usize = 8;
/// Columns per `VECS`: 128 threads x 8 elements.
pub const COLS_PER_VEC: usize = 128 * VEC;

/// The warpgroup's named barrier for its reductions (the block is one warpgroup).
const BAR: NamedBarrier = NamedBarrier::new(1, 128);

/// One row, in registers, as f32.
type Row<const VECS: usize> = Array<f32, WgStrided<VECS, VEC>>;

#[inline(always)]
#[track_caller]
fn load_row<T: Scalar, const VECS: usize>(x: GmemRef<T>, off: usize) -> Row<VECS> {
    Array::<T, WgStrided<VECS, VEC>>::load_gmem(x, off).cast::<f32>()
}

/// `y = exp(x - max x) / sum exp(x - max x)` of row `block_idx().x`.
#[inline(always)]
#[track_caller]
pub fn softmax_row<T: Scalar, const VECS: usize>(x: GmemRef<T>, y: Gmem<T>, red: Smem<[f32; 4]>) {
    let off = block_idx().x as usize * VECS * COLS_PER_VEC;
    let v = load_row::<T, VECS>(x, off);
    let max = v.max_all(red, BAR);
    let e = (v - max).exp();
    let inv = 1.0 / e.sum(red, BAR);
    (e * inv).cast::<T>().store_gmem(y, off);
}

/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` of row `block_idx().x`.
#[inline(always)]
#[track_caller]
pub fn layer_norm_row<T: Scalar, const VECS: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, red: Smem<[f32; 4]>) {
    let cols = VECS * COLS_PER_VEC;
    let off = block_idx().x as usize * cols;
    let v = load_row::<T, VECS>(x, off);
    let mean = v.sum(red, BAR) * (1.0 / cols as f32);
    let d = v - mean;
    let var = (d * d).sum(red, BAR) * (1.0 / cols as f32);
    let r = kernel_device::math::rsqrt_approx(var + eps);
    let (g, b) = (load_row::<T, VECS>(gamma, 0), load_row::<T, VECS>(beta, 0));
    (d * r * g + b).cast::<T>().store_gmem(y, off);
}

/// `y = x / sqrt(mean(x²) + eps) * gamma` of row `block_idx().x`.
#[inline(always)]
#[track_caller]
pub fn rms_norm_row<T: Scalar, const VECS: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, red: Smem<[f32; 4]>) {
    let cols = VECS * COLS_PER_VEC;
    let off = block_idx().x as usize * cols;
    let v = load_row::<T, VECS>(x, off);
    let ms = (v * v).sum(red, BAR) * (1.0 / cols as f32);
    let r = kernel_device::math::rsqrt_approx(ms + eps);
    (v * r * load_row::<T, VECS>(gamma, 0)).cast::<T>().store_gmem(y, off);
}

/// Row softmax of `T` rows (f16 or bf16) of `1024 * VECS` columns (see the [module docs](self)). Grid: rows.
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (4), (8)))]
pub fn softmax<T: Scalar, const VECS: usize>(x: GmemRef<T>, y: Gmem<T>, #[scratch] red: Smem<[f32; 4]>) {
    softmax_row::<T, VECS>(x, y, red);
}

/// Layer norm (forward) of `T` rows (f16 or bf16) of `1024 * VECS` columns (see the [module docs](self)). Grid: rows.
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (4), (8)))]
pub fn layer_norm<T: Scalar, const VECS: usize>(x: GmemRef<T>, gamma: GmemRef<T>, beta: GmemRef<T>, y: Gmem<T>, eps: f32, #[scratch] red: Smem<[f32; 4]>) {
    layer_norm_row::<T, VECS>(x, gamma, beta, y, eps, red);
}

/// RMS norm of `T` rows (f16 or bf16) of `1024 * VECS` columns (see the [module docs](self)). Grid: rows.
#[kernel(block = warpgroups(1), instances(T = [f16, bf16], (1), (2), (4), (8)))]
pub fn rms_norm<T: Scalar, const VECS: usize>(x: GmemRef<T>, gamma: GmemRef<T>, y: Gmem<T>, eps: f32, #[scratch] red: Smem<[f32; 4]>) {
    rms_norm_row::<T, VECS>(x, gamma, y, eps, red);
}
