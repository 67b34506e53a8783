//! Row softmax, layer norm (forward) and RMS norm over f16 / bf16 rows of
//! 1024, 2048, 4096 or 8192 columns: host entry points and CPU references.
//! Kernels: `kernel_ops_kernels::norms`. The entry points take the kernels
//! loaded on a [`Device`](kernel_host::Device) and run on a GPU or on the
//! CPU emulator alike.
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::f16;
//! use kernel_host::Device;
//! let dev = Device::emulator();                     // or Device::gpu_or_emulator()?
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! let (rows, cols) = (2, 1024);
//! let x = dev.upload(&vec![f16::from_f32(0.5); rows * cols])?;
//! let mut y = dev.zeros::<f16>(rows * cols)?;
//! kernel_ops::norms::softmax(&ops, &x, &mut y, rows, cols)?;
//! assert!(dev.download(&y)?.iter().all(|v| (v.to_f32() - 1.0 / 1024.0).abs() < 1e-5));
//! # Ok(()) }
//! ```
use crate::Error;
use kernel_device::gmem::GmemRef;
use kernel_device::launch::HostEntry;
use kernel_device::{bf16, f16, Gmem};
use kernel_host::{Buffer, Program};
use kernel_ops_kernels::norms as k;

/// The row lengths the kernels are built for (`1024 * VECS`).
pub const COLS: [usize; 4] = [1024, 2048, 4096, 8192];

/// Checks `cols` and the buffer lengths; returns `VECS = cols / 1024`.
fn check(op: &'static str, rows: usize, cols: usize, lens: &[(&str, usize, usize)]) -> Result<usize, Error> {
    if !COLS.contains(&cols) {
        return Err(Error::Shape { op, problem: format!("cols = {cols}: the kernels are built for rows of {COLS:?} columns (1024 x VECS, VECS in 1, 2, 4, 8)") });
    }
    if rows == 0 || rows > u32::MAX as usize {
        return Err(Error::Shape { op, problem: format!("rows = {rows}: must be in 1..=2^32-1 (one CTA per row)") });
    }
    for &(name, len, want) in lens {
        if len < want {
            return Err(Error::Shape { op, problem: format!("`{name}` holds {len} elements; {want} needed for {rows} x {cols}") });
        }
    }
    Ok(cols / 1024)
}

/// The launches of the three norms' kernels at one `VECS`, on element type `T`.
#[doc(hidden)]
pub struct Launches<T: 'static> {
    softmax: fn(&Program, u32, &Buffer<T>, &mut Buffer<T>) -> kernel_host::Result<()>,
    #[allow(clippy::type_complexity)]
    layer_norm: fn(&Program, u32, &Buffer<T>, &Buffer<T>, &Buffer<T>, &mut Buffer<T>, f32) -> kernel_host::Result<()>,
    rms_norm: fn(&Program, u32, &Buffer<T>, &Buffer<T>, &mut Buffer<T>, f32) -> kernel_host::Result<()>,
}

/// The launches of `k::softmax<T, V>`, `k::layer_norm<T, V>` and
/// `k::rms_norm<T, V>` (compiled for f16 and bf16, `V` in 1, 2, 4, 8).
const fn launches<T: Copy, const V: usize>() -> Launches<T>
where
    k::softmax<T, V>: HostEntry<Params = (GmemRef<T>, Gmem<T>)>,
    k::layer_norm<T, V>: HostEntry<Params = (GmemRef<T>, GmemRef<T>, GmemRef<T>, Gmem<T>, f32)>,
    k::rms_norm<T, V>: HostEntry<Params = (GmemRef<T>, GmemRef<T>, Gmem<T>, f32)>,
{
    Launches {
        softmax: |p, rows, x, y| p.kernel::<k::softmax<T, V>>()?.launch(rows, (x, y)).map(drop),
        layer_norm: |p, rows, x, g, b, y, eps| p.kernel::<k::layer_norm<T, V>>()?.launch(rows, (x, g, b, y, eps)).map(drop),
        rms_norm: |p, rows, x, g, y, eps| p.kernel::<k::rms_norm<T, V>>()?.launch(rows, (x, g, y, eps)).map(drop),
    }
}

/// f16 and bf16: the element types the norm kernels are built for.
pub trait NormElem: Copy + kernel_host::DeviceRepr + Default + 'static + sealed::Sealed {
    /// The kernels' launches for `VECS` = 1, 2, 4, 8 (index `log2 VECS`).
    #[doc(hidden)]
    const LAUNCHES: [Launches<Self>; 4];
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kernel_device::f16 {}
    impl Sealed for kernel_device::bf16 {}
}

impl NormElem for f16 {
    const LAUNCHES: [Launches<Self>; 4] = [launches::<Self, 1>(), launches::<Self, 2>(), launches::<Self, 4>(), launches::<Self, 8>()];
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl NormElem for bf16 {
    const LAUNCHES: [Launches<Self>; 4] = [launches::<Self, 1>(), launches::<Self, 2>(), launches::<Self, 4>(), launches::<Self, 8>()];
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// The launches for `vecs` (1, 2, 4 or 8, checked).
fn at<T: NormElem>(vecs: usize) -> &'static Launches<T> {
    &T::LAUNCHES[vecs.trailing_zeros() as usize]
}

/// `y[r] = softmax(x[r])` for each of `rows` rows of `cols`, with `ops` the
/// kernels of `kernel_ops_kernels` loaded on the device that holds the
/// buffers (queued on a GPU's stream; run to completion on the emulator).
pub fn softmax<T: NormElem>(ops: &Program, x: &Buffer<T>, y: &mut Buffer<T>, rows: usize, cols: usize) -> Result<(), Error> {
    let vecs = check("softmax", rows, cols, &[("x", x.len(), rows * cols), ("y", y.len(), rows * cols)])?;
    Ok((at::<T>(vecs).softmax)(ops, rows as u32, x, y)?)
}

/// `y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta` for each row.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, beta: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let vecs = check("layer_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("beta", beta.len(), cols), ("y", y.len(), rows * cols)])?;
    Ok((at::<T>(vecs).layer_norm)(ops, rows as u32, x, gamma, beta, y, eps)?)
}

/// `y[r] = x[r] / sqrt(mean(x[r]²) + eps) * gamma` for each row.
pub fn rms_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let vecs = check("rms_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("y", y.len(), rows * cols)])?;
    Ok((at::<T>(vecs).rms_norm)(ops, rows as u32, x, gamma, y, eps)?)
}

/// CPU reference of [`softmax`] (f64 arithmetic on the f32 inputs).
pub fn softmax_reference(x: &[f32], cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| (v / s) as f32)
        })
        .collect()
}

/// CPU reference of [`layer_norm`] (f64 arithmetic).
pub fn layer_norm_reference(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let n = cols as f64;
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            let r = 1.0 / (var + eps as f64).sqrt();
            row.iter().enumerate().map(move |(c, &v)| ((v as f64 - mean) * r * gamma[c] as f64 + beta[c] as f64) as f32)
        })
        .collect()
}

/// CPU reference of [`rms_norm`] (f64 arithmetic).
pub fn rms_norm_reference(x: &[f32], gamma: &[f32], eps: f32, cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            let r = 1.0 / (ms + eps as f64).sqrt();
            row.iter().enumerate().map(move |(c, &v)| (v as f64 * r * gamma[c] as f64) as f32)
        })
        .collect()
}

/// `max |got - want| / max |want|` (a normwise relative error: f16 outputs
/// of a softmax over 8192 columns are mostly f16 subnormals, whose
/// elementwise relative error is large by construction). The tests and the
/// benchmark accept f16 below 4e-3, bf16 below 2e-2.
pub fn max_rel_error<T: NormElem>(got: &[T], want: &[f32]) -> f64 {
    let scale = want.iter().fold(0f64, |m, &w| m.max(w.abs() as f64));
    let err = got.iter().zip(want).map(|(&g, &w)| (g.to_f32() as f64 - w as f64).abs()).fold(0.0, |m: f64, e| if e.is_nan() { f64::INFINITY } else { m.max(e) });
    err / scale
}
