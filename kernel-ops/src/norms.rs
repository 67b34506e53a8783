//! Row softmax, layer norm (forward), RMS norm and the fused residual norms
//! ([`add_rms_norm`], [`add_layer_norm`], optionally with an FP8 e4m3
//! output and its scales) over f16 / bf16 rows of any length that is a
//! multiple of 8 up to [`MAX_COLS`] (16384), any row count: host entry
//! points and CPU references. Rows not a multiple of 8 are refused (no
//! scalar tail: a 16-byte piece per access keeps every row at the copy
//! rate; the error says to pad). f32 inputs are not built.
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
use crate::{at, Error};
use kernel_device::{bf16, f16, Gmem, E4M3};
use kernel_host::{Arg, Buffer, Program};
use kernel_ops_kernels::norms as k;

/// The widest row the kernels take. Wider rows are not implemented yet
/// (their registers spilled: see `kernel_ops_kernels::norms`).
pub const MAX_COLS: usize = 16384;
/// Row lengths are multiples of this (16-byte pieces of 16-bit elements).
pub const COLS_MULTIPLE: usize = 8;
/// The row lengths the benchmark and the tests cover: the hidden sizes of
/// common models, the former fixed set and odd multiples of 8.
pub const BENCH_COLS: [usize; 12] = [768, 1024, 2048, 2560, 4096, 5120, 7168, 8192, 12288, 16384, 1000, 24];

/// Which kernel family serves a row length, and its `V` (pieces per thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowShape {
    /// One row per warp, 4 per CTA: `cols <= 256 V`, `V` in 1..=4 (below 1024 columns).
    Warp(usize),
    /// One row per warpgroup CTA: `cols <= 1024 V`, `V` in 1..=8 (1024..=8192).
    Warpgroup(usize),
    /// One row per CTA of 4 warpgroups: `cols <= 4096 V`, `V` in 3..=4 (8200..=16384).
    Wide(usize),
}

impl RowShape {
    /// The shape for `cols` (a multiple of 8 in `8..=MAX_COLS`).
    pub fn of(cols: usize) -> RowShape {
        if cols < 1024 {
            RowShape::Warp(cols.div_ceil(256))
        } else if cols <= 8192 {
            RowShape::Warpgroup(cols.div_ceil(1024))
        } else {
            RowShape::Wide(cols.div_ceil(4096).max(3))
        }
    }
    /// The launch grid for `rows` rows.
    fn grid(self, rows: usize) -> u32 {
        match self {
            RowShape::Warp(_) => rows.div_ceil(k::WARP_ROWS) as u32,
            _ => rows as u32,
        }
    }
}

/// Checks `cols` and the buffer lengths; returns the row shape.
fn check(op: &'static str, rows: usize, cols: usize, lens: &[(&str, usize, usize)]) -> Result<RowShape, Error> {
    if cols % COLS_MULTIPLE != 0 || cols == 0 {
        return Err(Error::Shape {
            op,
            problem: format!(
                "cols = {cols}: the kernels take rows of a non-zero multiple of {COLS_MULTIPLE} elements (16-byte pieces; no scalar tail); \
                 pad the rows to {} columns (and the statistics change: mask or rescale), or use another implementation for this width",
                cols.next_multiple_of(COLS_MULTIPLE).max(COLS_MULTIPLE)
            ),
        });
    }
    if cols > MAX_COLS {
        return Err(Error::Shape { op, problem: format!("cols = {cols}: rows of more than {MAX_COLS} columns are not implemented yet (planned: a two-pass kernel over L2)") });
    }
    if rows == 0 || rows > i32::MAX as usize {
        return Err(Error::Shape { op, problem: format!("rows = {rows}: must be in 1..=2^31-1 (the grid's x extent)") });
    }
    for &(name, len, want) in lens {
        if len < want {
            return Err(Error::Shape { op, problem: format!("`{name}` holds {len} elements; {want} needed for {rows} x {cols}") });
        }
    }
    Ok(RowShape::of(cols))
}

/// An unused buffer parameter (the fused kernels' `y` when quantizing, or
/// `q` and `scales` when not): a null, empty `Gmem` the kernel never touches.
struct Unused;
impl<T: Copy> Arg<Gmem<T>> for Unused {
    fn gpu<'a>(self, _: &mut kernel_host::ArgSink<'a>) -> kernel_host::Result<Gmem<T>>
    where
        Self: 'a,
    {
        // SAFETY: an empty view; the kernel does not access it in this mode.
        Ok(unsafe { Gmem::from_raw_parts(core::ptr::null_mut(), 0) })
    }
    fn emulator(self) -> kernel_host::Result<Gmem<T>> {
        // SAFETY: as above.
        Ok(unsafe { Gmem::from_raw_parts(core::ptr::null_mut(), 0) })
    }
}

/// One launch of a norm kernel: the op and its buffers.
#[doc(hidden)]
pub enum Call<'a, T> {
    Softmax { x: &'a Buffer<T>, y: &'a mut Buffer<T> },
    LayerNorm { x: &'a Buffer<T>, g: &'a Buffer<T>, b: &'a Buffer<T>, y: &'a mut Buffer<T>, eps: f32 },
    RmsNorm { x: &'a Buffer<T>, g: &'a Buffer<T>, y: &'a mut Buffer<T>, eps: f32 },
    /// The fused norms (`b` given: layer norm); `y` or `(q, scales)` by `fp8` (a `k::FP8_*` mode).
    Add { x: &'a Buffer<T>, r: &'a Buffer<T>, g: &'a Buffer<T>, b: Option<&'a Buffer<T>>, new_r: &'a mut Buffer<T>, y: Option<&'a mut Buffer<T>>, q: Option<(&'a mut Buffer<E4M3>, &'a mut Buffer<f32>)>, fp8: u32, eps: f32 },
}

/// Launches `$call` on the instances `V = $v` of the kernels `$sm`, `$ln`,
/// `$rms`, `$arn`, `$aln` (`[rows]` for the `_warp` family, which takes the
/// row count). A macro: each `(T, V)` instance is its own concrete type.
macro_rules! launch_one {
    ($p:ident, $grid:ident, $rows:ident, $cols:ident, $call:ident, $t:ty, $v:literal, $sm:ident, $ln:ident, $rms:ident, $arn:ident, $aln:ident, [$($wr:ident)?]) => {{
        let c = $cols as u32;
        $(let $wr = $rows as u32;)?
        match $call {
            Call::Softmax { x, y } => $p.kernel::<k::$sm<$t, $v>>()?.launch($grid, (x, y, $($wr,)? c)).map(drop),
            Call::LayerNorm { x, g, b, y, eps } => $p.kernel::<k::$ln<$t, $v>>()?.launch($grid, (x, g, b, y, eps, $($wr,)? c)).map(drop),
            Call::RmsNorm { x, g, y, eps } => $p.kernel::<k::$rms<$t, $v>>()?.launch($grid, (x, g, y, eps, $($wr,)? c)).map(drop),
            Call::Add { x, r, g, b, new_r, y, q, fp8, eps } => match (b, y, q) {
                (None, Some(y), None) => $p.kernel::<k::$arn<$t, $v>>()?.launch($grid, (x, r, g, new_r, y, Unused, Unused, fp8, eps, $($wr,)? c)).map(drop),
                (None, None, Some((q, s))) => $p.kernel::<k::$arn<$t, $v>>()?.launch($grid, (x, r, g, new_r, Unused, q, s, fp8, eps, $($wr,)? c)).map(drop),
                (Some(b), Some(y), None) => $p.kernel::<k::$aln<$t, $v>>()?.launch($grid, (x, r, g, b, new_r, y, Unused, Unused, fp8, eps, $($wr,)? c)).map(drop),
                (Some(b), None, Some((q, s))) => $p.kernel::<k::$aln<$t, $v>>()?.launch($grid, (x, r, g, b, new_r, Unused, q, s, fp8, eps, $($wr,)? c)).map(drop),
                _ => unreachable!("the entry points pass y or (q, scales)"),
            },
        }
    }};
}

/// Every instance of `T`, by shape and `V`.
macro_rules! launch_elem {
    ($t:ty, $p:ident, $shape:ident, $rows:ident, $cols:ident, $call:ident) => {{
        let grid = $shape.grid($rows);
        let r: kernel_host::Result<()> = match $shape {
            RowShape::Warp(1) => launch_one!($p, grid, $rows, $cols, $call, $t, 1, softmax_warp, layer_norm_warp, rms_norm_warp, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warp(2) => launch_one!($p, grid, $rows, $cols, $call, $t, 2, softmax_warp, layer_norm_warp, rms_norm_warp, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warp(3) => launch_one!($p, grid, $rows, $cols, $call, $t, 3, softmax_warp, layer_norm_warp, rms_norm_warp, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warp(4) => launch_one!($p, grid, $rows, $cols, $call, $t, 4, softmax_warp, layer_norm_warp, rms_norm_warp, add_rms_norm_warp, add_layer_norm_warp, [rows]),
            RowShape::Warpgroup(1) => launch_one!($p, grid, $rows, $cols, $call, $t, 1, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(2) => launch_one!($p, grid, $rows, $cols, $call, $t, 2, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(3) => launch_one!($p, grid, $rows, $cols, $call, $t, 3, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(4) => launch_one!($p, grid, $rows, $cols, $call, $t, 4, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(5) => launch_one!($p, grid, $rows, $cols, $call, $t, 5, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(6) => launch_one!($p, grid, $rows, $cols, $call, $t, 6, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(7) => launch_one!($p, grid, $rows, $cols, $call, $t, 7, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Warpgroup(8) => launch_one!($p, grid, $rows, $cols, $call, $t, 8, softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, []),
            RowShape::Wide(3) => launch_one!($p, grid, $rows, $cols, $call, $t, 3, softmax_wide, layer_norm_wide, rms_norm_wide, add_rms_norm_wide, add_layer_norm_wide, []),
            RowShape::Wide(4) => launch_one!($p, grid, $rows, $cols, $call, $t, 4, softmax_wide, layer_norm_wide, rms_norm_wide, add_rms_norm_wide, add_layer_norm_wide, []),
            other => unreachable!("no instance for {other:?} (checked)"),
        };
        Ok(r?)
    }};
}

/// f16 and bf16: the element types the norm kernels are built for.
pub trait NormElem: Copy + kernel_host::DeviceRepr + Default + 'static + sealed::Sealed {
    #[doc(hidden)]
    fn launch(p: &Program, shape: RowShape, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error>;
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kernel_device::f16 {}
    impl Sealed for kernel_device::bf16 {}
}

impl NormElem for f16 {
    fn launch(p: &Program, shape: RowShape, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error> {
        launch_elem!(f16, p, shape, rows, cols, call)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

impl NormElem for bf16 {
    fn launch(p: &Program, shape: RowShape, rows: usize, cols: usize, call: Call<'_, Self>) -> Result<(), Error> {
        launch_elem!(bf16, p, shape, rows, cols, call)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// `y[r] = softmax(x[r])` for each of `rows` rows of `cols` (a multiple of
/// 8 up to [`MAX_COLS`]), with `ops` the kernels of `kernel_ops_kernels`
/// loaded on the device that holds the buffers (queued on a GPU's stream;
/// run to completion on the emulator).
pub fn softmax<T: NormElem>(ops: &Program, x: &Buffer<T>, y: &mut Buffer<T>, rows: usize, cols: usize) -> Result<(), Error> {
    let shape = check("softmax", rows, cols, &[("x", x.len(), rows * cols), ("y", y.len(), rows * cols)])?;
    crate::check_aligned("softmax", &[at("x", x), at("y", y)])?;
    T::launch(ops, shape, rows, cols, Call::Softmax { x, y })
}

/// `y[r] = (x[r] - mean) / sqrt(var + eps) * gamma + beta` for each row.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, beta: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let shape = check("layer_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("beta", beta.len(), cols), ("y", y.len(), rows * cols)])?;
    crate::check_aligned("layer_norm", &[at("x", x), at("gamma", gamma), at("beta", beta), at("y", y)])?;
    T::launch(ops, shape, rows, cols, Call::LayerNorm { x, g: gamma, b: beta, y, eps })
}

/// `y[r] = x[r] / sqrt(mean(x[r]²) + eps) * gamma` for each row.
pub fn rms_norm<T: NormElem>(ops: &Program, x: &Buffer<T>, gamma: &Buffer<T>, y: &mut Buffer<T>, eps: f32, rows: usize, cols: usize) -> Result<(), Error> {
    let shape = check("rms_norm", rows, cols, &[("x", x.len(), rows * cols), ("gamma", gamma.len(), cols), ("y", y.len(), rows * cols)])?;
    crate::check_aligned("rms_norm", &[at("x", x), at("gamma", gamma), at("y", y)])?;
    T::launch(ops, shape, rows, cols, Call::RmsNorm { x, g: gamma, y, eps })
}

/// How the fused norms scale their FP8 output `q = e4m3(y / scale)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fp8Scale {
    /// `scale[r] = amax(|y[r]|) / 448` (1 for an all-zero row), one per
    /// row, written to `scales[r]` (`rows` of them): one pass.
    PerRow,
    /// One given scale for the tensor (calibrated; the caller's `scale`,
    /// written to `scales[0]`): one pass.
    PerTensor(f32),
    /// `scale = amax(|y|) / 448` over the tensor (1 if all zero), written
    /// to `scales[0]`: two passes over `x` and `residual` (the first finds
    /// the amax) and two one-thread launches.
    PerTensorDynamic,
}

/// The fused norms' output: `y` in `T`, or FP8 e4m3 with its scales.
pub enum NormOut<'a, T> {
    /// `y` in the input's type.
    Y(&'a mut Buffer<T>),
    /// `q = e4m3(y / scale)` (round to nearest even, saturating) and the
    /// scales (`rows` for [`Fp8Scale::PerRow`], else 1): what
    /// `kernel_ops::fp8::matmul_fp8_rowwise` / `matmul_fp8` multiply back.
    Fp8 { q: &'a mut Buffer<E4M3>, scales: &'a mut Buffer<f32>, scale: Fp8Scale },
}

/// The fused residual norms: `new_residual = x + residual` (rounded to
/// `T`), then `y = norm(new_residual)` (layer norm with `beta`, RMS norm
/// without), both in one pass over the rows: `x` and `residual` read once,
/// `new_residual` and `y` (or its FP8 form) written once.
#[allow(clippy::too_many_arguments)]
fn add_norm<T: NormElem>(
    op: &'static str,
    ops: &Program,
    (x, residual, gamma, beta): (&Buffer<T>, &Buffer<T>, &Buffer<T>, Option<&Buffer<T>>),
    new_residual: &mut Buffer<T>,
    out: NormOut<'_, T>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    let n = rows * cols;
    let mut lens = vec![("x", x.len(), n), ("residual", residual.len(), n), ("gamma", gamma.len(), cols), ("new_residual", new_residual.len(), n)];
    let mut starts = vec![at("x", x), at("residual", residual), at("gamma", gamma), at("new_residual", new_residual)];
    if let Some(b) = beta {
        lens.push(("beta", b.len(), cols));
        starts.push(at("beta", b));
    }
    match &out {
        NormOut::Y(y) => {
            lens.push(("y", y.len(), n));
            starts.push(at("y", y));
        }
        NormOut::Fp8 { q, scales, scale } => {
            lens.push(("q", q.len(), n));
            lens.push(("scales", scales.len(), if *scale == Fp8Scale::PerRow { rows } else { 1 }));
            starts.extend([at("q", q), at("scales", scales)]);
        }
    }
    let shape = check(op, rows, cols, &lens)?;
    crate::check_aligned(op, &starts)?;
    let call = |new_r: &mut Buffer<T>, y: Option<&mut Buffer<T>>, q: Option<(&mut Buffer<E4M3>, &mut Buffer<f32>)>, fp8: u32| {
        T::launch(ops, shape, rows, cols, Call::Add { x, r: residual, g: gamma, b: beta, new_r, y, q, fp8, eps })
    };
    match out {
        NormOut::Y(y) => call(new_residual, Some(y), None, k::FP8_NONE),
        NormOut::Fp8 { q, scales, scale: Fp8Scale::PerRow } => call(new_residual, None, Some((q, scales)), k::FP8_PER_ROW),
        NormOut::Fp8 { q, scales, scale: Fp8Scale::PerTensor(s) } => {
            scale_step(ops, scales, 0, s)?;
            call(new_residual, None, Some((q, scales)), k::FP8_TENSOR_SCALE)
        }
        NormOut::Fp8 { q, scales, scale: Fp8Scale::PerTensorDynamic } => {
            scale_step(ops, scales, 0, 0.0)?;
            call(new_residual, None, Some((q, scales)), k::FP8_TENSOR_AMAX)?;
            call(new_residual, None, Some((q, scales)), k::FP8_TENSOR_FROM_AMAX)?;
            scale_step(ops, scales, 1, 0.0)
        }
    }
}

/// One launch of `fp8_tensor_scale` (`op` 0: `scales[0] = value`; 1: amax to scale).
fn scale_step(ops: &Program, scales: &mut Buffer<f32>, op: u32, value: f32) -> Result<(), Error> {
    Ok(ops.kernel::<k::fp8_tensor_scale>()?.launch(1u32, (scales, op, value)).map(drop)?)
}

/// `new_residual = x + residual`, `y = rms_norm(new_residual) * gamma`
/// (see [`NormOut`] for the FP8 form), one pass (two for
/// [`Fp8Scale::PerTensorDynamic`]).
#[allow(clippy::too_many_arguments)]
pub fn add_rms_norm<T: NormElem>(
    ops: &Program,
    x: &Buffer<T>,
    residual: &Buffer<T>,
    gamma: &Buffer<T>,
    new_residual: &mut Buffer<T>,
    out: NormOut<'_, T>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    add_norm("add_rms_norm", ops, (x, residual, gamma, None), new_residual, out, eps, rows, cols)
}

/// `new_residual = x + residual`, `y = layer_norm(new_residual) * gamma +
/// beta` (see [`NormOut`] for the FP8 form), one pass.
#[allow(clippy::too_many_arguments)]
pub fn add_layer_norm<T: NormElem>(
    ops: &Program,
    x: &Buffer<T>,
    residual: &Buffer<T>,
    gamma: &Buffer<T>,
    beta: &Buffer<T>,
    new_residual: &mut Buffer<T>,
    out: NormOut<'_, T>,
    eps: f32,
    rows: usize,
    cols: usize,
) -> Result<(), Error> {
    add_norm("add_layer_norm", ops, (x, residual, gamma, Some(beta)), new_residual, out, eps, rows, cols)
}

/// CPU reference of the fused norms: `(new_residual, y)`, with
/// `new_residual = round_T(x + residual)` (`round` the element type's
/// rounding) and `y` the norm of it in f64 (layer norm with `beta`).
pub fn add_norm_reference(x: &[f32], residual: &[f32], gamma: &[f32], beta: Option<&[f32]>, eps: f32, cols: usize, round: impl Fn(f32) -> f32) -> (Vec<f32>, Vec<f32>) {
    let s: Vec<f32> = x.iter().zip(residual).map(|(a, b)| round(a + b)).collect();
    let y = match beta {
        Some(b) => layer_norm_reference(&s, gamma, b, eps, cols),
        None => rms_norm_reference(&s, gamma, eps, cols),
    };
    (s, y)
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
