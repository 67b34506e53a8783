//! The FP8 GEMMs (`kernel_ops::fp8`, `GroupedMatmul::run_fp8_blockscaled`):
//! `c = scales · a · bᵀ`, a `M x K` and b `N x K` FP8 (e4m3, or e5m2 with
//! e4m3 for the per-tensor GEMM), c `M x N` float16, f32 accumulation.
//!
//! FP8 operands come in as uint8 arrays holding the bytes (DLPack exports
//! of torch's `float8_*` and ml_dtypes' arrays are not read: the Python
//! wrappers view them as uint8 and pass their format, `a_e5m2` and
//! `b_e5m2`; plain uint8 arrays are e4m3). Scales are float32 arrays on
//! the operands' device: the kernels read them, so scales computed on the
//! GPU need no round trip.
use crate::{grouped_problem, run_op, with_grouped, OPS};
use kernel_device::{f16, E4M3, E5M2};
use kernel_py::{borrow, device, import, same_dtype, same_place, want_shape, Arr, Dtype};
use pyo3::exceptions::{PyNotImplementedError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// K (and N for weights) of one scale block of the block-scaled GEMMs
/// (`kernel_ops_kernels::matmul_fp8::SCALE_BLOCK`).
const BLOCK: usize = kernel_ops_kernels::matmul_fp8::SCALE_BLOCK;

/// The layout of the block-scaled GEMMs' `a_scales`.
const A_GRID: &str = "ceil(K / 128) x M: one per row of a and 128 of K, K-block-major";

/// A `TypeError` unless `x` holds FP8 bytes (uint8).
fn want_fp8(x: &Arr) -> PyResult<()> {
    if x.dtype != Dtype::U8 {
        return Err(PyTypeError::new_err(format!(
            "{}: an FP8 operand is float8_e4m3fn or float8_e5m2 (torch, ml_dtypes) or uint8 holding e4m3 bytes",
            x.describe()
        )));
    }
    Ok(())
}

/// The problem `(m, n, k)` of `a` (`M x K`) and `b` (`N x K`), both FP8
/// matrices, and `c` (`M x N` float16).
fn fp8_problem(a: &Arr, b: &Arr, c: &Arr) -> PyResult<(usize, usize, usize)> {
    for x in [a, b] {
        want_fp8(x)?;
        if x.shape.len() != 2 {
            return Err(PyValueError::new_err(format!("{}: a matrix (2 dimensions) expected", x.describe())));
        }
    }
    let (m, k, n) = (a.shape[0], a.shape[1], b.shape[0]);
    if b.shape[1] != k {
        return Err(PyValueError::new_err(format!(
            "{} and {}: K differs ({k} vs {}); c = a · bᵀ takes a M x K and b N x K",
            a.describe(),
            b.describe(),
            b.shape[1]
        )));
    }
    same_dtype(&[c], &[Dtype::F16])?;
    want_shape(c, &[m, n])?;
    Ok((m, n, k))
}

/// A `ValueError` unless the scales `s` (float32) hold `len` values as a
/// vector: shape `[len]`, or `[len, 1]` / `[1, len]` (torch's row-wise
/// `_scaled_mm` shapes), `what` saying what one scale covers.
fn want_scale_vector(s: &Arr, len: usize, what: &str) -> PyResult<()> {
    same_dtype(&[s], &[Dtype::F32])?;
    let ok = s.shape == [len] || s.shape == [len, 1] || s.shape == [1, len];
    if !ok {
        return Err(PyValueError::new_err(format!("{}: {len} scales expected ({what}), shape [{len}] or [{len}, 1] or [1, {len}]", s.describe())));
    }
    Ok(())
}

/// A `ValueError` unless the block scales `s` have `shape`, `what` saying
/// the layout.
fn want_scale_grid(s: &Arr, shape: &[usize], what: &str) -> PyResult<()> {
    if s.shape != shape {
        return Err(PyValueError::new_err(format!("{}: shape {shape:?} expected ({what})", s.describe())));
    }
    Ok(())
}

/// A `NotImplementedError` for e5m2 operands of the GEMMs built for e4m3
/// only (`op`).
fn e4m3_only(op: &str, a_e5m2: bool, b_e5m2: bool) -> PyResult<()> {
    if a_e5m2 || b_e5m2 {
        return Err(PyNotImplementedError::new_err(format!(
            "{op}: built for e4m3 operands only (an e5m2 {} was given); the per-tensor matmul_fp8 takes e5m2 with e4m3",
            if a_e5m2 { "a" } else { "b" }
        )));
    }
    Ok(())
}

/// `c = (scales[0] · scales[1]) · a · bᵀ` (`kernel_ops::fp8::matmul_fp8`):
/// a `M x K`, b `N x K` FP8 bytes (uint8: e4m3, or e5m2 where `a_e5m2` /
/// `b_e5m2`; not both), `scales` float32 `[2]` (scale_a, scale_b) on the
/// same device, c `M x N` float16. K a multiple of 16, N of 8.
#[pyfunction]
#[pyo3(signature = (a, b, scales, c, a_e5m2 = false, b_e5m2 = false, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, scales: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>, a_e5m2: bool, b_e5m2: bool, stream: Option<u64>) -> PyResult<()> {
    let (a, b, s, c) = (import("a", a)?, import("b", b)?, import("scales", scales)?, import("c", c)?);
    let place = same_place(&[&a, &b, &s, &c])?;
    let (m, n, k) = fp8_problem(&a, &b, &c)?;
    same_dtype(&[&s], &[Dtype::F32])?;
    want_shape(&s, &[2])?;
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    macro_rules! go {
        ($A:ty, $B:ty) => {{
            // SAFETY: as in `matmul` (lib.rs): the dtypes were checked
            // above (uint8 for the FP8 bytes, of the format the caller
            // named), the arrays live for this call.
            let (ba, bb, bs, mut bc) = unsafe { (borrow::<$A>(dev, &a)?, borrow::<$B>(dev, &b)?, borrow::<f32>(dev, &s)?, borrow::<f16>(dev, &c)?) };
            run_op(dev, &a, stream, move || kernel_ops::fp8::matmul_fp8(dev, ops, &ba, &bb, &bs, &mut bc, (m, n, k)))
        }};
    }
    match (a_e5m2, b_e5m2) {
        (false, false) => go!(E4M3, E4M3),
        (true, false) => go!(E5M2, E4M3),
        (false, true) => go!(E4M3, E5M2),
        (true, true) => Err(PyNotImplementedError::new_err(
            "matmul_fp8: two e5m2 operands are not built (no FP8 recipe multiplies two gradients); built: e4m3 x e4m3, e5m2 x e4m3, e4m3 x e5m2",
        )),
    }
}

/// `c[i, j] = a_scales[i] · b_scales[j] · Σ_k a[i, k] b[j, k]`
/// (`kernel_ops::fp8::matmul_fp8_rowwise`): e4m3 bytes, `a_scales` float32
/// M values, `b_scales` N (each `[len]`, `[len, 1]` or `[1, len]`).
#[pyfunction]
#[pyo3(signature = (a, a_scales, b, b_scales, c, a_e5m2 = false, b_e5m2 = false, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8_rowwise(
    a: &Bound<'_, PyAny>,
    a_scales: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    b_scales: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    a_e5m2: bool,
    b_e5m2: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    scaled_of("matmul_fp8_rowwise", [a, a_scales, b, b_scales, c], (a_e5m2, b_e5m2), stream, kernel_ops::fp8::matmul_fp8_rowwise, |sa, sb, (m, n, _)| {
        want_scale_vector(sa, m, "one per row of a: M")?;
        want_scale_vector(sb, n, "one per row of b, i.e. per column of c: N")
    })
}

/// Block-scaled FP8 (`kernel_ops::fp8::matmul_fp8_blockscaled`,
/// DeepSeek-V3's scales): e4m3 bytes, `a_scales` float32 `[ceil(K / 128),
/// M]` (one per row and 128 of K, K-block-major), `b_scales` float32
/// `[ceil(N / 128), ceil(K / 128)]` (one per 128 x 128 block of b).
#[pyfunction]
#[pyo3(signature = (a, a_scales, b, b_scales, c, a_e5m2 = false, b_e5m2 = false, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8_blockscaled(
    a: &Bound<'_, PyAny>,
    a_scales: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    b_scales: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    a_e5m2: bool,
    b_e5m2: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    scaled_of("matmul_fp8_blockscaled", [a, a_scales, b, b_scales, c], (a_e5m2, b_e5m2), stream, kernel_ops::fp8::matmul_fp8_blockscaled, |sa, sb, (m, n, k)| {
        same_dtype(&[sa, sb], &[Dtype::F32])?;
        let (kb, nb) = (k.div_ceil(BLOCK), n.div_ceil(BLOCK));
        want_scale_grid(sa, &[kb, m], A_GRID)?;
        want_scale_grid(sb, &[nb, kb], "ceil(N / 128) x ceil(K / 128): one per 128 x 128 block of b")
    })
}

/// The row-wise and block-scaled GEMMs of `kernel_ops::fp8` (the same
/// arguments, their own scale layouts).
type ScaledRun = fn(&kernel_host::Device, &kernel_host::Program, &kernel_host::Buffer<E4M3>, &kernel_host::Buffer<f32>, &kernel_host::Buffer<E4M3>, &kernel_host::Buffer<f32>, &mut kernel_host::Buffer<f16>, (usize, usize, usize)) -> Result<(), kernel_ops::Error>;

/// A GEMM of `kernel_ops::fp8` with scale arrays beside each e4m3 operand
/// (`run`: the row-wise or the block-scaled one), bound for `op`: the
/// operands `[a, a_scales, b, b_scales, c]` imported and checked
/// ([`fp8_problem`], e4m3 only, then the scales by `check_scales(a_scales,
/// b_scales, (M, N, K))`), then `run` ordered on `stream`.
fn scaled_of(
    op: &str,
    [a, a_scales, b, b_scales, c]: [&Bound<'_, PyAny>; 5],
    (a_e5m2, b_e5m2): (bool, bool),
    stream: Option<u64>,
    run: ScaledRun,
    check_scales: impl FnOnce(&Arr, &Arr, (usize, usize, usize)) -> PyResult<()>,
) -> PyResult<()> {
    let (a, sa, b, sb, c) = (import("a", a)?, import("a_scales", a_scales)?, import("b", b)?, import("b_scales", b_scales)?, import("c", c)?);
    let place = same_place(&[&a, &sa, &b, &sb, &c])?;
    let (m, n, k) = fp8_problem(&a, &b, &c)?;
    e4m3_only(op, a_e5m2, b_e5m2)?;
    check_scales(&sa, &sb, (m, n, k))?;
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    // SAFETY: as in `matmul_fp8`.
    let (ba, bsa, bb, bsb, mut bc) = unsafe { (borrow::<E4M3>(dev, &a)?, borrow::<f32>(dev, &sa)?, borrow::<E4M3>(dev, &b)?, borrow::<f32>(dev, &sb)?, borrow::<f16>(dev, &c)?) };
    run_op(dev, &a, stream, move || run(dev, ops, &ba, &bsa, &bb, &bsb, &mut bc, (m, n, k)))
}

/// Grouped block-scaled FP8 for mixture of experts
/// (`GroupedMatmul::run_fp8_blockscaled`): a `M x K` e4m3 rows grouped by
/// expert (`sizes`, int32 or uint32 `[G]` on the device), b `[G, N, K]`
/// e4m3, `a_scales` float32 `[ceil(K / 128), M]`, `b_scales` float32 `[G,
/// ceil(N / 128), ceil(K / 128)]`, c `M x N` float16. With `check`, waits
/// for the kernel and raises ValueError when the sizes do not add up to M.
#[pyfunction]
#[pyo3(signature = (a, a_scales, b, b_scales, sizes, c, a_e5m2 = false, b_e5m2 = false, check = true, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn grouped_matmul_fp8_blockscaled(
    a: &Bound<'_, PyAny>,
    a_scales: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    b_scales: &Bound<'_, PyAny>,
    sizes: &Bound<'_, PyAny>,
    c: &Bound<'_, PyAny>,
    a_e5m2: bool,
    b_e5m2: bool,
    check: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    let (a, sa, b, sb) = (import("a", a)?, import("a_scales", a_scales)?, import("b", b)?, import("b_scales", b_scales)?);
    let (s, c) = (import("sizes", sizes)?, import("c", c)?);
    let place = same_place(&[&a, &sa, &b, &sb, &s, &c])?;
    want_fp8(&a)?;
    want_fp8(&b)?;
    e4m3_only("grouped_matmul_fp8_blockscaled", a_e5m2, b_e5m2)?;
    same_dtype(&[&sa, &sb], &[Dtype::F32])?;
    same_dtype(&[&c], &[Dtype::F16])?;
    let (m, k, g, n) = grouped_problem(&a, &b, &s)?;
    let (kb, nb) = (k.div_ceil(BLOCK), n.div_ceil(BLOCK));
    want_scale_grid(&sa, &[kb, m], A_GRID)?;
    want_scale_grid(&sb, &[g, nb, kb], "G x ceil(N / 128) x ceil(K / 128): one per 128 x 128 block of each expert's b")?;
    want_shape(&c, &[m, n])?;
    let dev = device(place)?;
    with_grouped(dev, place, |gm| {
        // SAFETY: as in `matmul_fp8`; int32 sizes are read as u32 (a
        // negative size is a huge one, which the kernel refuses).
        let (ba, bsa, bb, bsb) = unsafe { (borrow::<E4M3>(dev, &a)?, borrow::<f32>(dev, &sa)?, borrow::<E4M3>(dev, &b)?, borrow::<f32>(dev, &sb)?) };
        // SAFETY: as above.
        let (bs, mut bc) = unsafe { (borrow::<u32>(dev, &s)?, borrow::<f16>(dev, &c)?) };
        run_op(dev, &a, stream, || gm.run_fp8_blockscaled(&ba, &bsa, &bb, &bsb, &bs, &mut bc, (m, n, k), g))?;
        if check {
            run_op(dev, &a, stream, || gm.status())?;
        }
        Ok(())
    })
}
