//! `kernel_ops._native`: the Python extension behind the `kernel_ops`
//! package. Arrays come in through DLPack (`__dlpack__`): CUDA arrays
//! (torch, JAX, CuPy) are used in place on the GPU, in stream order with
//! the caller's stream; CPU arrays (NumPy) are used in place by the CPU
//! emulator, whose race and protocol reports become `EmulatorReport`
//! exceptions. Every input is checked (device, dtype, shape, contiguity,
//! alignment) and a violation raises `ValueError`/`TypeError` naming the
//! rule and the values before anything is launched. The Python wrappers in
//! `kernel_ops/__init__.py` allocate outputs and register the torch ops.
//! The array import, the devices and the error mapping are `kernel_py`'s,
//! which users' own kernels crates use too.
use kernel_device::{bf16, f16};
use kernel_py::{borrow, device, host_err, import, run, runtime_err, same_dtype, same_place, stream_for, want_shape, Arr, Dtype, Place, Programs};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// kernel-ops's kernels, loaded on each device at first use.
static OPS: Programs = Programs::new(&kernel_ops_kernels::DEVICE_CODE);

thread_local! {
    /// `kernel_ops::Matmul` (its tuning cache) per device kind, per
    /// thread: it is not `Send`.
    static MATMUL: std::cell::RefCell<[Option<kernel_ops::Matmul<'static>>; 2]> = const { std::cell::RefCell::new([None, None]) };
    /// `kernel_ops::grouped::GroupedMatmul` (its status word) per device kind.
    static GROUPED: std::cell::RefCell<[Option<kernel_ops::grouped::GroupedMatmul<'static>>; 2]> = const { std::cell::RefCell::new([None, None]) };
}

/// The Python exception of a kernel-ops error: `ValueError` for inputs
/// that do not fit the kernel, the rest as [`host_err`] maps it.
fn ops_err(e: kernel_ops::Error) -> PyErr {
    match e {
        kernel_ops::Error::Shape { .. } => PyValueError::new_err(e.to_string()),
        kernel_ops::Error::Runtime(e) => host_err(e),
    }
}

/// Runs `f` with [`kernel_py::run`] in stream order with `stream`, or by
/// default `first`'s framework's ([`stream_for`]: torch's current stream
/// for torch tensors), its kernel-ops error raised as [`ops_err`] maps it.
/// The GIL is held (the tuning cache of `Matmul` is per thread).
fn run_op(dev: &kernel_host::Device, first: &Arr, stream: Option<u64>, f: impl FnOnce() -> Result<(), kernel_ops::Error>) -> PyResult<()> {
    run(dev, stream_for(first, stream)?, || f().map_err(ops_err))
}

// ------------------------------------------------------------------ ops

/// Runs `$body` with `$T` the element type of dtype `$dt` (f16 or bf16).
macro_rules! with_norm_type {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            Dtype::F16 => {
                type $T = f16;
                $body
            }
            _ => {
                type $T = bf16;
                $body
            }
        }
    };
}

/// The dtypes of the norms (softmax, layer norm, RMS norm): every array of
/// one call in the same one.
const NORM_DTYPES: [Dtype; 3] = [Dtype::F16, Dtype::Bf16, Dtype::F32];

/// Runs `$body` with `$T` the element type of dtype `$dt` (f16, bf16 or
/// f32: [`NORM_DTYPES`]).
macro_rules! with_norm_elem {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            Dtype::F16 => {
                type $T = f16;
                $body
            }
            Dtype::Bf16 => {
                type $T = bf16;
                $body
            }
            _ => {
                type $T = f32;
                $body
            }
        }
    };
}

/// A matmul error as kernel-ops reports it: CUDA failures as runtime
/// errors, the rest (shape, stride, alignment) as the op's input rule.
fn matmul_err(e: kernel_ops::MatmulError) -> kernel_ops::Error {
    match e {
        kernel_ops::MatmulError::Cuda(e) => kernel_ops::Error::Runtime(e),
        other => kernel_ops::Error::Shape { op: "matmul", problem: other.to_string() },
    }
}

/// `c = a · bᵀ` (a `M x K`, b `N x K`, c `M x N`, float16 or bfloat16,
/// f32 accumulation). The instance is the cached tuning winner for this
/// GPU, dtype and shape, else the library's built-in choice for the shape
/// class (`kernel_ops::Matmul::instance_for_elem`). With `tune` on a GPU,
/// `Matmul::tune_elem` first sweeps the instances for this shape and dtype
/// (3 warm-up and 10 timed runs each, on scratch buffers on the library's
/// stream, a progress bar on stderr when it is a terminal; nothing when a
/// winner is cached) and caches the winner; on the emulator `tune` is
/// ignored.
#[pyfunction]
#[pyo3(signature = (a, b, c, stream = None, tune = false))]
fn matmul(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>, stream: Option<u64>, tune: bool) -> PyResult<()> {
    let (a, b, c) = (import("a", a)?, import("b", b)?, import("c", c)?);
    let place = same_place(&[&a, &b, &c])?;
    let dt = same_dtype(&[&a, &b, &c], &[Dtype::F16, Dtype::Bf16])?;
    for x in [&a, &b] {
        if x.shape.len() != 2 {
            return Err(PyValueError::new_err(format!("{}: a matrix (2 dimensions) expected", x.describe())));
        }
    }
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[0]);
    if b.shape[1] != k {
        return Err(PyValueError::new_err(format!("{} and {}: K differs ({k} vs {}); c = a · bᵀ takes a M x K and b N x K", a.describe(), b.describe(), b.shape[1])));
    }
    want_shape(&c, &[m, n])?;
    let dev = device(place)?;
    let slot = usize::from(place != Place::Cpu);
    MATMUL.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache[slot].is_none() {
            cache[slot] = Some(kernel_ops::Matmul::new(dev).map_err(runtime_err)?);
        }
        let mm = cache[slot].as_ref().expect("set above");
        with_norm_type!(dt, T => {
            // Tuning times the instances on its own scratch buffers, so it
            // needs nothing of the caller's stream; the emulator cannot time.
            if tune && dev.as_gpu().is_some() {
                mm.tune_elem::<T>(m, n, k, false, 3, 10).map_err(|e| ops_err(matmul_err(e)))?;
            }
            // SAFETY: the arrays live for this call (their capsules are held) and
            // the caller hands them over until the launch is ordered on `stream`.
            let (ba, bb, mut bc) = unsafe { (borrow::<T>(dev, &a)?, borrow::<T>(dev, &b)?, borrow::<T>(dev, &c)?) };
            run_op(dev, &a, stream, move || mm.matmul(&ba, (m, k), &bb, (n, k), &mut bc).map_err(matmul_err))
        })
    })
}

/// Grouped GEMM for mixture of experts (float16 or bfloat16): `c[rows of
/// g] = a[rows of g] · b[g]ᵀ`, the rows of `a` and `c` grouped by expert in order, `sizes[g]`
/// rows each (int32 or uint32, on the same device: read by the kernel).
/// With `check`, waits for the kernel and raises ValueError when the sizes
/// do not add up to the rows of `a`.
#[pyfunction]
#[pyo3(signature = (a, b, sizes, c, check = true, stream = None))]
fn grouped_matmul(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, sizes: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>, check: bool, stream: Option<u64>) -> PyResult<()> {
    let (a, b, s, c) = (import("a", a)?, import("b", b)?, import("sizes", sizes)?, import("c", c)?);
    let place = same_place(&[&a, &b, &s, &c])?;
    let dt = same_dtype(&[&a, &b, &c], &[Dtype::F16, Dtype::Bf16])?;
    let (m, k, g, n) = grouped_problem(&a, &b, &s)?;
    want_shape(&c, &[m, n])?;
    let dev = device(place)?;
    with_grouped(dev, place, |gm| {
        with_norm_type!(dt, T => {
            // SAFETY: as in `matmul`; int32 sizes are read as u32 (a
            // negative size is a huge one, which the kernel refuses).
            let (ba, bb, bs, mut bc) = unsafe { (borrow::<T>(dev, &a)?, borrow::<T>(dev, &b)?, borrow::<u32>(dev, &s)?, borrow::<T>(dev, &c)?) };
            run_op(dev, &a, stream, || gm.run(&ba, &bb, &bs, &mut bc, (m, n, k), g))?;
        });
        if check {
            run_op(dev, &a, stream, || gm.status())?;
        }
        Ok(())
    })
}

/// The grouped GEMMs' operands: `a` `M x K`, `b` `G x N x K` (one weight
/// per expert), `sizes` int32 or uint32 with `G` entries; returns `(M, K,
/// G, N)`.
fn grouped_problem(a: &Arr, b: &Arr, s: &Arr) -> PyResult<(usize, usize, usize, usize)> {
    same_dtype(&[s], &[Dtype::I32, Dtype::U32])?;
    if a.shape.len() != 2 || b.shape.len() != 3 || s.shape.len() != 1 {
        return Err(PyValueError::new_err(format!(
            "{}, {}, {}: a is M x K, b is G x N x K (one weight per expert), sizes has G entries",
            a.describe(),
            b.describe(),
            s.describe()
        )));
    }
    let (m, k, g, n) = (a.shape[0], a.shape[1], b.shape[0], b.shape[1]);
    if b.shape[2] != k {
        return Err(PyValueError::new_err(format!("{} and {}: K differs ({k} vs {})", a.describe(), b.describe(), b.shape[2])));
    }
    want_shape(s, &[g])?;
    Ok((m, k, g, n))
}

/// Runs `f` with this thread's `GroupedMatmul` for `place` (made at the
/// first call: it holds the status word the size check reads).
fn with_grouped<R>(dev: &'static kernel_host::Device, place: Place, f: impl FnOnce(&kernel_ops::grouped::GroupedMatmul<'static>) -> PyResult<R>) -> PyResult<R> {
    let slot = usize::from(place != Place::Cpu);
    GROUPED.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache[slot].is_none() {
            cache[slot] = Some(kernel_ops::grouped::GroupedMatmul::new(dev).map_err(runtime_err)?);
        }
        f(cache[slot].as_ref().expect("set above"))
    })
}

/// The norms on `rows x cols` (the last dimension is `cols`).
fn rows_cols(x: &Arr) -> PyResult<(usize, usize)> {
    match x.shape.split_last() {
        Some((&cols, rest)) if !rest.is_empty() => Ok((rest.iter().product(), cols)),
        _ => Err(PyValueError::new_err(format!("{}: at least 2 dimensions (rows x columns) expected", x.describe()))),
    }
}


/// `y = softmax(x)` over the last dimension (float16, bfloat16 or float32,
/// any width up to 65536).
#[pyfunction]
#[pyo3(signature = (x, y, stream = None))]
fn softmax(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, stream: Option<u64>) -> PyResult<()> {
    let (x, y) = (import("x", x)?, import("y", y)?);
    let place = same_place(&[&x, &y])?;
    let dt = same_dtype(&[&x, &y], &NORM_DTYPES)?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&y, &x.shape)?;
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, mut by) = unsafe { (borrow::<T>(dev, &x)?, borrow::<T>(dev, &y)?) };
        run_op(dev, &x, stream, move || kernel_ops::norms::softmax(ops, &bx, &mut by, rows, cols))
    })
}

/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` over the last dimension
/// (gamma and beta in x's dtype).
#[pyfunction]
#[pyo3(signature = (x, gamma, beta, y, eps = 1e-5, stream = None))]
fn layer_norm(x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, beta: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, eps: f32, stream: Option<u64>) -> PyResult<()> {
    let (x, g, b, y) = (import("x", x)?, import("gamma", gamma)?, import("beta", beta)?, import("y", y)?);
    let place = same_place(&[&x, &g, &b, &y])?;
    let dt = same_dtype(&[&x, &g, &b, &y], &NORM_DTYPES)?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&g, &[cols])?;
    want_shape(&b, &[cols])?;
    want_shape(&y, &x.shape)?;
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, bb, mut by) = unsafe { (borrow::<T>(dev, &x)?, borrow::<T>(dev, &g)?, borrow::<T>(dev, &b)?, borrow::<T>(dev, &y)?) };
        run_op(dev, &x, stream, move || kernel_ops::norms::layer_norm(ops, &bx, &bg, &bb, &mut by, eps, rows, cols))
    })
}

/// `y = x / sqrt(mean(x²) + eps) * gamma` over the last dimension (gamma
/// in x's dtype).
#[pyfunction]
#[pyo3(signature = (x, gamma, y, eps = 1e-6, stream = None))]
fn rms_norm(x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, eps: f32, stream: Option<u64>) -> PyResult<()> {
    rms_norm_up_to(x, gamma, y, eps, stream, Stage::Launch)
}

/// How far a call of [`rms_norm`] goes: all the way, or (the host-overhead
/// probes of the `testing` feature) up to the arrays' import, or up to the
/// launch (imported, checked, borrowed, stream found).
#[derive(Clone, Copy, PartialEq)]
enum Stage {
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    Import,
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    Prepare,
    Launch,
}

fn rms_norm_up_to(x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, eps: f32, stream: Option<u64>, stage: Stage) -> PyResult<()> {
    let (x, g, y) = (import("x", x)?, import("gamma", gamma)?, import("y", y)?);
    if stage == Stage::Import {
        return Ok(());
    }
    let place = same_place(&[&x, &g, &y])?;
    let dt = same_dtype(&[&x, &g, &y], &NORM_DTYPES)?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&g, &[cols])?;
    want_shape(&y, &x.shape)?;
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, mut by) = unsafe { (borrow::<T>(dev, &x)?, borrow::<T>(dev, &g)?, borrow::<T>(dev, &y)?) };
        if stage == Stage::Prepare {
            stream_for(&x, stream)?;
            return Ok(());
        }
        run_op(dev, &x, stream, move || kernel_ops::norms::rms_norm(ops, &bx, &bg, &mut by, eps, rows, cols))
    })
}

/// The RMS norm's backward over the last dimension: from x, gamma and dy
/// (x's dtype, float16, bfloat16 or float32), writes dx (x's dtype) and
/// dgamma (float32 `[cols]`, summed over the rows). Rows of a multiple of
/// 16 bytes up to 16384 columns (8192 for float32), other widths up to 4096.
#[pyfunction]
#[pyo3(signature = (x, gamma, dy, dx, dgamma, eps = 1e-6, stream = None))]
#[allow(clippy::too_many_arguments)]
fn rms_norm_backward(x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, dy: &Bound<'_, PyAny>, dx: &Bound<'_, PyAny>, dgamma: &Bound<'_, PyAny>, eps: f32, stream: Option<u64>) -> PyResult<()> {
    norm_backward(x, gamma, dy, dx, dgamma, None, eps, stream)
}

/// The layer norm's backward over the last dimension: as
/// [`rms_norm_backward`], with dbeta (float32 `[cols]`) too.
#[pyfunction]
#[pyo3(signature = (x, gamma, dy, dx, dgamma, dbeta, eps = 1e-5, stream = None))]
#[allow(clippy::too_many_arguments)]
fn layer_norm_backward(
    x: &Bound<'_, PyAny>,
    gamma: &Bound<'_, PyAny>,
    dy: &Bound<'_, PyAny>,
    dx: &Bound<'_, PyAny>,
    dgamma: &Bound<'_, PyAny>,
    dbeta: &Bound<'_, PyAny>,
    eps: f32,
    stream: Option<u64>,
) -> PyResult<()> {
    norm_backward(x, gamma, dy, dx, dgamma, Some(dbeta), eps, stream)
}

/// [`rms_norm_backward`] and [`layer_norm_backward`] (`dbeta` given: the layer norm).
#[allow(clippy::too_many_arguments)]
fn norm_backward(
    x: &Bound<'_, PyAny>,
    gamma: &Bound<'_, PyAny>,
    dy: &Bound<'_, PyAny>,
    dx: &Bound<'_, PyAny>,
    dgamma: &Bound<'_, PyAny>,
    dbeta: Option<&Bound<'_, PyAny>>,
    eps: f32,
    stream: Option<u64>,
) -> PyResult<()> {
    let (x, g, d, gx, gg) = (import("x", x)?, import("gamma", gamma)?, import("dy", dy)?, import("dx", dx)?, import("dgamma", dgamma)?);
    let gb = dbeta.map(|b| import("dbeta", b)).transpose()?;
    let mut all = vec![&x, &g, &d, &gx, &gg];
    let mut weights = vec![&gg];
    if let Some(b) = &gb {
        all.push(b);
        weights.push(b);
    }
    let place = same_place(&all)?;
    let dt = same_dtype(&[&x, &g, &d, &gx], &NORM_DTYPES)?;
    same_dtype(&weights, &[Dtype::F32])?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&g, &[cols])?;
    for a in [&d, &gx] {
        want_shape(a, &x.shape)?;
    }
    for a in &weights {
        want_shape(a, &[cols])?;
    }
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, bd, mut bdx, mut bdg) = unsafe { (borrow::<T>(dev, &x)?, borrow::<T>(dev, &g)?, borrow::<T>(dev, &d)?, borrow::<T>(dev, &gx)?, borrow::<f32>(dev, &gg)?) };
        // SAFETY: as in `matmul`.
        let bdb = match &gb {
            Some(b) => Some(unsafe { borrow::<f32>(dev, b)? }),
            None => None,
        };
        run_op(dev, &x, stream, move || match bdb {
            Some(mut bdb) => kernel_ops::norms::layer_norm_backward(dev, ops, &bx, &bg, &bd, &mut bdx, &mut bdg, &mut bdb, eps, rows, cols),
            None => kernel_ops::norms::rms_norm_backward(dev, ops, &bx, &bg, &bd, &mut bdx, &mut bdg, eps, rows, cols),
        })
    })
}

/// The fused residual norms: `new_residual = x + residual` (rounded to
/// x's dtype), `y = rms_norm(new_residual) * gamma` (or the layer norm
/// with `beta`), one pass; float16 or bfloat16, rows of a multiple of 8 up
/// to 16384 columns. With `q` and `scales` (instead of `y`): the FP8 e4m3
/// form `q = e4m3(y / scale)` (uint8 bytes), `scale_mode` 0 a scale per
/// row (`scales` float32 `[rows]`), 1 the given per-tensor `scale`, 2 the
/// tensor's `amax / 448` (`scales` float32 `[1]`, two passes).
#[pyfunction]
#[pyo3(signature = (x, residual, gamma, beta, y, new_residual, eps, q = None, scales = None, scale_mode = 0, scale = 1.0, stream = None))]
#[allow(clippy::too_many_arguments)]
fn add_norm(
    x: &Bound<'_, PyAny>,
    residual: &Bound<'_, PyAny>,
    gamma: &Bound<'_, PyAny>,
    beta: Option<&Bound<'_, PyAny>>,
    y: Option<&Bound<'_, PyAny>>,
    new_residual: &Bound<'_, PyAny>,
    eps: f32,
    q: Option<&Bound<'_, PyAny>>,
    scales: Option<&Bound<'_, PyAny>>,
    scale_mode: u32,
    scale: f32,
    stream: Option<u64>,
) -> PyResult<()> {
    use kernel_ops::norms::{Fp8Scale, NormOut};
    let (x, r, g, nr) = (import("x", x)?, import("residual", residual)?, import("gamma", gamma)?, import("new_residual", new_residual)?);
    let b = beta.map(|b| import("beta", b)).transpose()?;
    let y = y.map(|y| import("y", y)).transpose()?;
    let fp8 = match (q, scales) {
        (Some(q), Some(s)) => Some((import("q", q)?, import("scales", s)?)),
        (None, None) => None,
        _ => return Err(PyValueError::new_err("q and scales: pass both (the FP8 output) or neither")),
    };
    let mut typed = vec![&x, &r, &g, &nr];
    typed.extend(b.iter());
    typed.extend(y.iter());
    let mut all = typed.clone();
    if let Some((q, s)) = &fp8 {
        all.extend([q, s]);
    }
    let place = same_place(&all)?;
    let dt = same_dtype(&typed, &[Dtype::F16, Dtype::Bf16])?;
    let (rows, cols) = rows_cols(&x)?;
    for a in [&r, &nr] {
        want_shape(a, &x.shape)?;
    }
    want_shape(&g, &[cols])?;
    if let Some(b) = &b {
        want_shape(b, &[cols])?;
    }
    let fp8_scale = match (&y, &fp8) {
        (Some(y), None) => {
            want_shape(y, &x.shape)?;
            None
        }
        (None, Some((q, s))) => {
            same_dtype(&[q], &[Dtype::U8])?;
            same_dtype(&[s], &[Dtype::F32])?;
            want_shape(q, &x.shape)?;
            let (mode, n) = match scale_mode {
                0 => (Fp8Scale::PerRow, rows),
                1 => (Fp8Scale::PerTensor(scale), 1),
                2 => (Fp8Scale::PerTensorDynamic, 1),
                m => return Err(PyValueError::new_err(format!("scale_mode = {m}: 0 (per row), 1 (a given per-tensor scale) or 2 (per tensor, from its amax)"))),
            };
            want_shape(s, &[n])?;
            Some(mode)
        }
        _ => return Err(PyValueError::new_err("pass y (the output in x's dtype) or q and scales (FP8), not both")),
    };
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, br, bg, mut bnr) = unsafe { (borrow::<T>(dev, &x)?, borrow::<T>(dev, &r)?, borrow::<T>(dev, &g)?, borrow::<T>(dev, &nr)?) };
        // SAFETY: as in `matmul`.
        let bb = match &b {
            Some(b) => Some(unsafe { borrow::<T>(dev, b)? }),
            None => None,
        };
        // SAFETY: as in `matmul` (uint8 checked for the e4m3 bytes).
        let mut by = match &y {
            Some(y) => Some(unsafe { borrow::<T>(dev, y)? }),
            None => None,
        };
        // SAFETY: as above.
        let mut bq = match &fp8 {
            Some((q, s)) => Some(unsafe { (borrow::<kernel_device::E4M3>(dev, q)?, borrow::<f32>(dev, s)?) }),
            None => None,
        };
        run_op(dev, &x, stream, move || {
            let out = match (&mut by, &mut bq, fp8_scale) {
                (Some(y), _, _) => NormOut::Y(y),
                (None, Some((q, scales)), Some(scale)) => NormOut::Fp8 { q, scales, scale },
                _ => unreachable!("checked above: y or (q, scales)"),
            };
            match &bb {
                Some(bb) => kernel_ops::norms::add_layer_norm(ops, &bx, &br, &bg, bb, &mut bnr, out, eps, rows, cols),
                None => kernel_ops::norms::add_rms_norm(ops, &bx, &br, &bg, &mut bnr, out, eps, rows, cols),
            }
        })
    })
}

/// Host-overhead probes (the `testing` feature): [`rms_norm`]'s call with
/// its arguments, stopped at `stage` (0: nothing done, the interpreter's
/// call alone; 1: after the three arrays' import; 2: before the launch).
/// `python/bench/overhead_probe.py` times them.
#[cfg(feature = "testing")]
#[pyfunction]
#[pyo3(signature = (x, gamma, y, eps, stream, stage))]
fn _probe_rms_norm(x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, eps: f32, stream: Option<u64>, stage: u32) -> PyResult<()> {
    match stage {
        0 => Ok(()),
        1 => rms_norm_up_to(x, gamma, y, eps, stream, Stage::Import),
        2 => rms_norm_up_to(x, gamma, y, eps, stream, Stage::Prepare),
        _ => Err(PyValueError::new_err("stage: 0, 1 or 2")),
    }
}

/// The attention problem of q `[batch, seq, heads, head_dim]` and k
/// `[batch, seq, kv_heads, head_dim]` (both four-dimensional; the rest of
/// k's shape is checked by the caller against the result).
fn attention_shape(q: &Arr, k: &Arr) -> PyResult<kernel_ops::attention::Shape> {
    for x in [q, k] {
        if x.shape.len() != 4 {
            return Err(PyValueError::new_err(format!("{}: 4 dimensions [batch, seq, heads, head_dim] expected", x.describe())));
        }
    }
    Ok(kernel_ops::attention::Shape { batch: q.shape[0], seq: q.shape[1], heads: q.shape[2], kv_heads: k.shape[2], head_dim: q.shape[3] })
}

/// Attention forward: `o = softmax(scale q kᵀ) v`, `lse` its log-sum-exp;
/// q, o `[batch, seq, heads, head_dim]`, k, v `[batch, seq, kv_heads,
/// head_dim]`, lse `[batch, heads, seq]` float32.
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, causal = false, scale = None, stream = None))]
#[allow(clippy::too_many_arguments)]
fn attention(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    causal: bool,
    scale: Option<f32>,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v, o, l) = (import("q", q)?, import("k", k)?, import("v", v)?, import("o", o)?, import("lse", lse)?);
    let place = same_place(&[&q, &k, &v, &o, &l])?;
    let dt = same_dtype(&[&q, &k, &v, &o], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&l], &[Dtype::F32])?;
    let shape = attention_shape(&q, &k)?;
    want_shape(&k, &[shape.batch, shape.seq, shape.kv_heads, shape.head_dim])?;
    want_shape(&v, &k.shape)?;
    want_shape(&o, &q.shape)?;
    want_shape(&l, &[shape.batch, shape.heads, shape.seq])?;
    let opts = kernel_ops::attention::Options { causal, scale };
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bq, bk, bv, mut bo, mut bl) = unsafe { (borrow::<T>(dev, &q)?, borrow::<T>(dev, &k)?, borrow::<T>(dev, &v)?, borrow::<T>(dev, &o)?, borrow::<f32>(dev, &l)?) };
        run_op(dev, &q, stream, move || kernel_ops::attention::attention(dev, ops, &bq, &bk, &bv, &mut bo, &mut bl, shape, opts))
    })
}

/// Attention forward with variants (`kernel_ops::attention::attention_variant`):
/// `window` `(left, right)` (each `None` for no bound), `softcap`, `sinks`
/// (float32 `[heads]`, on the same device); the rest as [`attention`].
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, causal = false, scale = None, window = None, softcap = None, sinks = None, stream = None))]
#[allow(clippy::too_many_arguments)]
fn attention_variant(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    causal: bool,
    scale: Option<f32>,
    window: Option<(Option<usize>, Option<usize>)>,
    softcap: Option<f32>,
    sinks: Option<&Bound<'_, PyAny>>,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v, o, l) = (import("q", q)?, import("k", k)?, import("v", v)?, import("o", o)?, import("lse", lse)?);
    let sk = sinks.map(|s| import("sinks", s)).transpose()?;
    let mut all = vec![&q, &k, &v, &o, &l];
    if let Some(s) = &sk {
        all.push(s);
    }
    let place = same_place(&all)?;
    let dt = same_dtype(&[&q, &k, &v, &o], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&l], &[Dtype::F32])?;
    let shape = attention_shape(&q, &k)?;
    want_shape(&k, &[shape.batch, shape.seq, shape.kv_heads, shape.head_dim])?;
    want_shape(&v, &k.shape)?;
    want_shape(&o, &q.shape)?;
    want_shape(&l, &[shape.batch, shape.heads, shape.seq])?;
    check_sinks(&sk.iter().collect::<Vec<_>>(), shape.heads)?;
    let window = variant_window(window);
    let opts = kernel_ops::attention::Options { causal, scale };
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bq, bk, bv, mut bo, mut bl) = unsafe { (borrow::<T>(dev, &q)?, borrow::<T>(dev, &k)?, borrow::<T>(dev, &v)?, borrow::<T>(dev, &o)?, borrow::<f32>(dev, &l)?) };
        // SAFETY: as above; sinks are only read.
        let bs = match &sk {
            Some(s) => Some(unsafe { borrow::<f32>(dev, s)? }),
            None => None,
        };
        run_op(dev, &q, stream, move || {
            let variant = kernel_ops::attention::Variant { window, softcap, sinks: bs.as_ref() };
            kernel_ops::attention::attention_variant(dev, ops, &bq, &bk, &bv, &mut bo, &mut bl, shape, opts, variant)
        })
    })
}

/// A variant's window as `kernel_ops` takes it: an unbounded side (None)
/// is 2^31 - 1 keys away (no key is farther).
fn variant_window(window: Option<(Option<usize>, Option<usize>)>) -> Option<(usize, usize)> {
    let unbounded = i32::MAX as usize;
    window.map(|(l, r)| (l.unwrap_or(unbounded), r.unwrap_or(unbounded)))
}

/// The sinks (and their gradient): float32 `[heads]` each.
fn check_sinks(sinks: &[&Arr], heads: usize) -> PyResult<()> {
    for s in sinks {
        same_dtype(&[s], &[Dtype::F32])?;
        want_shape(s, &[heads])?;
    }
    Ok(())
}

/// Attention backward: from q, k, v, the forward's o and lse and the
/// gradient d_o of the loss with respect to o, writes dq, dk, dv (the
/// layouts of q, k, v). `causal` and `scale` must be the forward's.
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, d_o, dq, dk, dv, causal = false, scale = None, stream = None))]
#[allow(clippy::too_many_arguments)]
fn attention_backward(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    d_o: &Bound<'_, PyAny>,
    dq: &Bound<'_, PyAny>,
    dk: &Bound<'_, PyAny>,
    dv: &Bound<'_, PyAny>,
    causal: bool,
    scale: Option<f32>,
    stream: Option<u64>,
) -> PyResult<()> {
    backward_of(q, k, v, o, lse, d_o, [dq, dk, dv], None, causal, scale, stream)
}

/// The backward of [`attention_variant`]
/// (`kernel_ops::attention::attention_variant_backward`): from the
/// forward's inputs, its o and lse (which include the sinks) and d_o,
/// writes dq, dk, dv and, with `sinks`, their gradient `d_sinks` (float32
/// `[heads]`; given exactly when `sinks` is). `causal`, `scale`, `window`,
/// `softcap` and `sinks` must be the forward's; the rest as
/// [`attention_backward`].
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, d_o, dq, dk, dv, d_sinks = None, causal = false, scale = None, window = None, softcap = None, sinks = None, stream = None))]
#[allow(clippy::too_many_arguments)]
fn attention_variant_backward(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    d_o: &Bound<'_, PyAny>,
    dq: &Bound<'_, PyAny>,
    dk: &Bound<'_, PyAny>,
    dv: &Bound<'_, PyAny>,
    d_sinks: Option<&Bound<'_, PyAny>>,
    causal: bool,
    scale: Option<f32>,
    window: Option<(Option<usize>, Option<usize>)>,
    softcap: Option<f32>,
    sinks: Option<&Bound<'_, PyAny>>,
    stream: Option<u64>,
) -> PyResult<()> {
    let variant = (variant_window(window), softcap, sinks, d_sinks);
    backward_of(q, k, v, o, lse, d_o, [dq, dk, dv], Some(variant), causal, scale, stream)
}

/// A variant's parameters in the bindings: the window (as
/// [`variant_window`] makes it), the soft-cap, the sinks and their gradient.
type VariantArgs<'a, 'py> = (Option<(usize, usize)>, Option<f32>, Option<&'a Bound<'py, PyAny>>, Option<&'a Bound<'py, PyAny>>);

/// [`attention_backward`] (`variant` None) and
/// [`attention_variant_backward`]: the checks once, then
/// `kernel_ops::attention::attention_backward` or
/// `attention_variant_backward`. d_sinks given without sinks, or missing
/// with them, is refused by the latter (a ValueError naming the rule).
#[allow(clippy::too_many_arguments)]
fn backward_of(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    d_o: &Bound<'_, PyAny>,
    [dq, dk, dv]: [&Bound<'_, PyAny>; 3],
    variant: Option<VariantArgs<'_, '_>>,
    causal: bool,
    scale: Option<f32>,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v, o, l) = (import("q", q)?, import("k", k)?, import("v", v)?, import("o", o)?, import("lse", lse)?);
    let (g, gq, gk, gv) = (import("d_o", d_o)?, import("dq", dq)?, import("dk", dk)?, import("dv", dv)?);
    let (window, softcap, sinks, d_sinks) = variant.unwrap_or((None, None, None, None));
    let sk = sinks.map(|s| import("sinks", s)).transpose()?;
    let gs = d_sinks.map(|s| import("d_sinks", s)).transpose()?;
    let mut all = vec![&q, &k, &v, &o, &l, &g, &gq, &gk, &gv];
    all.extend(sk.iter().chain(gs.iter()));
    let place = same_place(&all)?;
    let dt = same_dtype(&[&q, &k, &v, &o, &g, &gq, &gk, &gv], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&l], &[Dtype::F32])?;
    let shape = attention_shape(&q, &k)?;
    want_shape(&k, &[shape.batch, shape.seq, shape.kv_heads, shape.head_dim])?;
    for x in [&v, &gk, &gv] {
        want_shape(x, &k.shape)?;
    }
    for x in [&o, &g, &gq] {
        want_shape(x, &q.shape)?;
    }
    want_shape(&l, &[shape.batch, shape.heads, shape.seq])?;
    check_sinks(&sk.iter().chain(gs.iter()).collect::<Vec<_>>(), shape.heads)?;
    let opts = kernel_ops::attention::Options { causal, scale };
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    let is_variant = variant.is_some();
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bq, bk, bv, bo, bl, bg) = unsafe { (borrow::<T>(dev, &q)?, borrow::<T>(dev, &k)?, borrow::<T>(dev, &v)?, borrow::<T>(dev, &o)?, borrow::<f32>(dev, &l)?, borrow::<T>(dev, &g)?) };
        // SAFETY: as in `matmul`.
        let (mut bdq, mut bdk, mut bdv) = unsafe { (borrow::<T>(dev, &gq)?, borrow::<T>(dev, &gk)?, borrow::<T>(dev, &gv)?) };
        // SAFETY: as above; sinks are only read, d_sinks only written.
        let bs = match &sk {
            Some(s) => Some(unsafe { borrow::<f32>(dev, s)? }),
            None => None,
        };
        // SAFETY: as above.
        let mut bds = match &gs {
            Some(s) => Some(unsafe { borrow::<f32>(dev, s)? }),
            None => None,
        };
        run_op(dev, &q, stream, move || {
            if is_variant {
                let variant = kernel_ops::attention::Variant { window, softcap, sinks: bs.as_ref() };
                kernel_ops::attention::attention_variant_backward(dev, ops, &bq, &bk, &bv, &bo, &bl, &bg, &mut bdq, &mut bdk, &mut bdv, bds.as_mut(), shape, opts, variant)
            } else {
                kernel_ops::attention::attention_backward(dev, ops, &bq, &bk, &bv, &bo, &bl, &bg, &mut bdq, &mut bdk, &mut bdv, shape, opts)
            }
        })
    })
}

/// Launches the race detector's planted racy kernel (an `8 x 8` SMEM
/// transpose without its barrier, `races::smem_transpose_without_sync`)
/// on the emulator over `x` and `y` (64 float32 each, NumPy): with
/// `racy = False` its race-free twin. For the tests: a race report must
/// surface as `EmulatorReport`.
#[cfg(feature = "testing")]
#[pyfunction]
#[pyo3(signature = (x, y, racy = true))]
fn _testing_transpose(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, racy: bool) -> PyResult<()> {
    use kernel_fixtures::races::smem_transpose_without_sync as k;
    let (x, y) = (import("x", x)?, import("y", y)?);
    same_dtype(&[&x, &y], &[Dtype::F32])?;
    if same_place(&[&x, &y])? != Place::Cpu {
        return Err(PyValueError::new_err("the planted race runs on the emulator only: pass NumPy arrays"));
    }
    want_shape(&x, &[64])?;
    want_shape(&y, &[64])?;
    let dev = device(Place::Cpu)?;
    let prog = dev.load(&kernel_fixtures::DEVICE_CODE).map_err(runtime_err)?;
    // SAFETY: as in `matmul`.
    let (mut bx, mut by) = unsafe { (borrow::<f32>(dev, &x)?, borrow::<f32>(dev, &y)?) };
    run_op(dev, &x, Some(0), move || {
        let r = if racy { prog.kernel::<k<true>>()?.launch(1u32, (&mut bx, &mut by)) } else { prog.kernel::<k<false>>()?.launch(1u32, (&mut bx, &mut by)) };
        r.map(|_| ()).map_err(kernel_ops::Error::Runtime)
    })
}

mod collective;
mod fp8;
mod jax_ffi;
mod serving;
mod xla_ffi;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    kernel_py::add_exceptions(m)?;
    m.add_function(wrap_pyfunction!(matmul, m)?)?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(rms_norm_backward, m)?)?;
    m.add_function(wrap_pyfunction!(layer_norm_backward, m)?)?;
    m.add_function(wrap_pyfunction!(add_norm, m)?)?;
    m.add_function(wrap_pyfunction!(attention, m)?)?;
    m.add_function(wrap_pyfunction!(attention_variant, m)?)?;
    m.add_function(wrap_pyfunction!(attention_backward, m)?)?;
    m.add_function(wrap_pyfunction!(attention_variant_backward, m)?)?;
    m.add_function(wrap_pyfunction!(grouped_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(collective::all_gather_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(collective::reduce_scatter_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(collective::all_reduce_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(fp8::matmul_fp8, m)?)?;
    m.add_function(wrap_pyfunction!(fp8::matmul_fp8_rowwise, m)?)?;
    m.add_function(wrap_pyfunction!(fp8::matmul_fp8_blockscaled, m)?)?;
    m.add_function(wrap_pyfunction!(fp8::grouped_matmul_fp8_blockscaled, m)?)?;
    m.add_function(wrap_pyfunction!(serving::attention_decode, m)?)?;
    m.add_function(wrap_pyfunction!(serving::attention_varlen, m)?)?;
    m.add_function(wrap_pyfunction!(serving::attention_varlen_backward, m)?)?;
    m.add_function(wrap_pyfunction!(jax_ffi::_xla_ffi_targets, m)?)?;
    #[cfg(feature = "testing")]
    m.add_function(wrap_pyfunction!(_testing_transpose, m)?)?;
    #[cfg(feature = "testing")]
    m.add_function(wrap_pyfunction!(_probe_rms_norm, m)?)?;
    Ok(())
}
