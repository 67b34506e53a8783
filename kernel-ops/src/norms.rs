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

/// Runs `$body` with `K` the instance of kernel `$kernel` for `$vecs`.
macro_rules! with_vecs {
    ($vecs:expr, $kernel:ident, |$K:ident| $body:expr) => {
        match $vecs {
            1 => {
                type $K = k::$kernel<1>;
                $body
            }
            2 => {
                type $K = k::$kernel<2>;
                $body
            }
            4 => {
                type $K = k::$kernel<4>;
                $body
            }
            _ => {
                type $K = k::$kernel<8>;
                $body
            }
        }
    };
}

/// f16 and bf16: the element types the norm kernels are built for.
pub trait NormElem: Copy + kernel_host::DeviceRepr + Default + 'static + sealed::Sealed {
    #[doc(hidden)]
    fn softmax(p: &Program, vecs: usize, rows: u32, x: &Buffer<Self>, y: &mut Buffer<Self>) -> kernel_host::Result<()>;
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn layer_norm(p: &Program, vecs: usize, rows: u32, x: &Buffer<Self>, g: &Buffer<Self>, b: &Buffer<Self>, y: &mut Buffer<Self>, eps: f32) -> kernel_host::Result<()>;
    #[doc(hidden)]
    fn rms_norm(p: &Program, vecs: usize, rows: u32, x: &Buffer<Self>, g: &Buffer<Self>, y: &mut Buffer<Self>, eps: f32) -> kernel_host::Result<()>;
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kernel_device::f16 {}
    impl Sealed for kernel_device::bf16 {}
}

macro_rules! norm_elem {
    ($t:ty, $softmax:ident, $layer_norm:ident, $rms_norm:ident) => {
        impl NormElem for $t {
            fn softmax(p: &Program, vecs: usize, rows: u32, x: &Buffer<Self>, y: &mut Buffer<Self>) -> kernel_host::Result<()> {
                with_vecs!(vecs, $softmax, |K| p.kernel::<K>()?.launch(rows, (x, y)).map(drop))
            }
            fn layer_norm(p: &Program, vecs: usize, rows: u32, x: &Buffer<Self>, g: &Buffer<Self>, b: &Buffer<Self>, y: &mut Buffer<Self>, eps: f32) -> kernel_host::Result<()> {
                with_vecs!(vecs, $layer_norm, |K| p.kernel::<K>()?.launch(rows, (x, g, b, y, eps)).map(drop))
            }
            fn rms_norm(p: &Program, vecs: usize, rows: u32, x: &Buffer<Self>, g: &Buffer<Self>, y: &mut Buffer<Self>, eps: f32) -> kernel_host::Result<()> {
                with_vecs!(vecs, $rms_norm, |K| p.kernel::<K>()?.launch(rows, (x, g, y, eps)).map(drop))
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
        }
    };
}
norm_elem!(kernel_device::f16, softmax_f16, layer_norm_f16, rms_norm_f16);
norm_elem!(kernel_device::bf16, softmax_bf16, layer_norm_bf16, rms_norm_bf16);

/// `y[r] = softmax(x[r])` for each of `rows` rows of `cols`, with `ops` the
/// kernels of `kernel_ops_kernels` loaded on the device that holds the
/// buffers (queued on a GPU's stream; run to completion on the emulator).
pub fn softmax<T: NormElem>(ops: &Program, x: &Buffer<T>, y: &mut Buffer<T>, rows: usize, cols: usize) -> Result<(), Error> {
    let vecs = check("softmax", rows, cols, &[("x", x.len(), rows * cols), ("y", y.len(), rows * cols)])?;
    Ok(T::softmax(ops, vecs, rows as u32, x, y)?)
}

/// `y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta` for each row.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, beta: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let vecs = check("layer_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("beta", beta.len(), cols), ("y", y.len(), rows * cols)])?;
    Ok(T::layer_norm(ops, vecs, rows as u32, x, gamma, beta, y, eps)?)
}

/// `y[r] = x[r] / sqrt(mean(x[r]²) + eps) * gamma` for each row.
pub fn rms_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let vecs = check("rms_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("y", y.len(), rows * cols)])?;
    Ok(T::rms_norm(ops, vecs, rows as u32, x, gamma, y, eps)?)
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
