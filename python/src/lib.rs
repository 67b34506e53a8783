//! `kernel_ops._native`: the Python extension behind the `kernel_ops`
//! package. Arrays come in through DLPack (`__dlpack__`): CUDA arrays
//! (torch, JAX, CuPy) are used in place on the GPU, in stream order with
//! the caller's stream; CPU arrays (NumPy) are used in place by the CPU
//! emulator, whose race and protocol reports become `EmulatorReport`
//! exceptions. Every input is checked (device, dtype, shape, contiguity,
//! alignment) and a violation raises `ValueError`/`TypeError` naming the
//! rule and the values before anything is launched. The Python wrappers in
//! `kernel_ops/__init__.py` allocate outputs and register the torch ops.
use kernel_device::{bf16, f16};
use kernel_host::{Buffer, Device, Gpu, Program};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ffi::c_void;
use std::sync::OnceLock;

create_exception!(_native, EmulatorReport, PyRuntimeError, "A race or protocol report of the CPU emulator: the kernel broke a synchronization rule. The message is the report.");

// ---------------------------------------------------------------- DLPack

/// `DLDevice` (dlpack.h v0.8+, the legacy unversioned capsule).
#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const KDL_CPU: i32 = 1;
const KDL_CUDA: i32 = 2;

/// The element types the ops take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    F16,
    Bf16,
    F32,
    /// Group sizes: int32 (torch's index type) or uint32.
    I32,
    U32,
}

impl Dtype {
    fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "float16",
            Dtype::Bf16 => "bfloat16",
            Dtype::F32 => "float32",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
        }
    }
}

/// Where an array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Cpu,
    Cuda(i32),
}

/// One array borrowed through DLPack: its data pointer, shape and type.
/// The capsule keeps the producer's tensor alive (its destructor calls the
/// DLPack deleter when Python frees it, after this call).
struct Arr<'py> {
    _capsule: Bound<'py, PyAny>,
    name: &'static str,
    ptr: *mut u8,
    place: Place,
    dtype: Dtype,
    shape: Vec<usize>,
}

impl Arr<'_> {
    fn len(&self) -> usize {
        self.shape.iter().product()
    }
    fn describe(&self) -> String {
        format!("`{}` ({} {:?} on {})", self.name, self.dtype.name(), self.shape, match self.place {
            Place::Cpu => "the CPU".to_string(),
            Place::Cuda(d) => format!("cuda:{d}"),
        })
    }
}

/// Imports `obj` (anything with `__dlpack__`/`__dlpack_device__`) as
/// argument `name`, checking what every op needs: one lane, a supported
/// dtype, C-contiguous (row-major) strides, a 16-byte-aligned data pointer
/// (TMA and the vector loads need it), a CPU or CUDA device.
fn import<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Arr<'py>> {
    let py = obj.py();
    if !obj.hasattr("__dlpack__")? {
        let ty = obj.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "`{name}`: a {ty} is not an array with `__dlpack__` (pass a numpy.ndarray, torch.Tensor, jax.Array or cupy.ndarray)"
        )));
    }
    if obj.get_type().module()?.to_cow()?.starts_with("torch") && obj.hasattr("data_ptr")? {
        return import_torch(name, obj);
    }
    let (dev_type, dev_id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    let capsule = if dev_type == KDL_CUDA {
        // stream = -1: the producer synchronizes nothing; the launch is
        // ordered with the caller's stream by `Gpu::in_order_with`.
        let kw = PyDict::new(py);
        kw.set_item("stream", -1)?;
        obj.call_method("__dlpack__", (), Some(&kw))?
    } else {
        obj.call_method0("__dlpack__")?
    };
    // SAFETY: a DLPack capsule named "dltensor" holds a DLManagedTensor*
    // that stays valid while the capsule lives (we hold it in `Arr`).
    let managed = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), c"dltensor".as_ptr()) } as *const DLManagedTensor;
    if managed.is_null() {
        return Err(PyTypeError::new_err(format!("`{name}`: `__dlpack__` did not return a \"dltensor\" capsule")));
    }
    // SAFETY: non-null DLManagedTensor from a live capsule.
    let t = unsafe { &(*managed).dl_tensor };
    let place = match t.device.device_type {
        KDL_CPU => Place::Cpu,
        KDL_CUDA => Place::Cuda(t.device.device_id),
        other => {
            return Err(PyValueError::new_err(format!(
                "`{name}`: DLPack device type {other} (device {dev_id}) is not supported: arrays must be on the CPU (the emulator) or on a CUDA GPU"
            )))
        }
    };
    let dt = t.dtype;
    let dtype = match (dt.code, dt.bits, dt.lanes) {
        (2, 16, 1) => Dtype::F16,
        (4, 16, 1) => Dtype::Bf16,
        (2, 32, 1) => Dtype::F32,
        (0, 32, 1) => Dtype::I32,
        (1, 32, 1) => Dtype::U32,
        (c, b, l) => {
            return Err(PyTypeError::new_err(format!(
                "`{name}`: DLPack dtype (code {c}, {b} bits, {l} lanes) is not supported: float16, bfloat16, float32 or (group sizes) int32/uint32, as the op requires"
            )))
        }
    };
    let ndim = usize::try_from(t.ndim).unwrap_or(0);
    // SAFETY: `shape` has `ndim` entries (DLPack).
    let shape: Vec<usize> = (0..ndim).map(|i| unsafe { *t.shape.add(i) } as usize).collect();
    let strides: Option<Vec<i64>> = if t.strides.is_null() {
        None
    } else {
        // SAFETY: `strides` has `ndim` entries when non-null.
        Some((0..ndim).map(|i| unsafe { *t.strides.add(i) }).collect())
    };
    let ptr = (t.data as *mut u8).wrapping_add(t.byte_offset as usize);
    checked(capsule, name, ptr, place, dtype, shape, strides)
}

/// A torch tensor read through its attributes (`data_ptr()`, `shape`,
/// `stride()`, `dtype`, `device`): the same facts as its DLPack capsule,
/// without making one (torch's `__dlpack__` costs microseconds per call).
fn import_torch<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Arr<'py>> {
    let place = if obj.getattr("is_cuda")?.extract::<bool>()? {
        Place::Cuda(obj.getattr("device")?.getattr("index")?.extract::<Option<i32>>()?.unwrap_or(0))
    } else {
        Place::Cpu
    };
    let dtype = match &*obj.getattr("dtype")?.str()?.to_cow()? {
        "torch.float16" => Dtype::F16,
        "torch.bfloat16" => Dtype::Bf16,
        "torch.float32" => Dtype::F32,
        "torch.int32" => Dtype::I32,
        "torch.uint32" => Dtype::U32,
        other => return Err(PyTypeError::new_err(format!("`{name}`: dtype {other} is not supported: float16, bfloat16 or float32 (as the op requires)"))),
    };
    let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
    let strides: Vec<i64> = obj.call_method0("stride")?.extract()?;
    let ptr = obj.call_method0("data_ptr")?.extract::<usize>()? as *mut u8;
    checked(obj.clone(), name, ptr, place, dtype, shape, Some(strides))
}

/// The checks of every array: row-major (C-contiguous) strides, a
/// 16-byte-aligned start.
fn checked<'py>(keep: Bound<'py, PyAny>, name: &'static str, ptr: *mut u8, place: Place, dtype: Dtype, shape: Vec<usize>, strides: Option<Vec<i64>>) -> PyResult<Arr<'py>> {
    if let Some(strides) = strides {
        let mut expect = 1i64;
        for i in (0..shape.len()).rev() {
            let st = strides[i];
            if shape[i] > 1 && st != expect {
                return Err(PyValueError::new_err(format!(
                    "`{name}`: strides (in elements) of shape {shape:?} are not row-major (C-contiguous): dimension {i} has stride {st}, {expect} expected; pass a contiguous array (`.contiguous()` in torch, `numpy.ascontiguousarray`)"
                )));
            }
            expect *= shape[i] as i64;
        }
    }
    if (ptr as usize) % 16 != 0 && shape.iter().product::<usize>() > 0 {
        return Err(PyValueError::new_err(format!(
            "`{name}`: its data starts at address {:#x}, not a multiple of 16 bytes (TMA and the 16-byte vector loads need it); pass an array that starts at an aligned address (a fresh allocation, or a copy)",
            ptr as usize
        )));
    }
    Ok(Arr { _capsule: keep, name, ptr, place, dtype, shape })
}

// ------------------------------------------------------------- devices

/// The devices and what is loaded on them, made once per process.
struct Ctx {
    dev: &'static Device,
    ops: Program,
}

thread_local! {
    /// `kernel_ops::Matmul` (its tuning cache) per device kind, per
    /// thread: it is not `Send`.
    static MATMUL: std::cell::RefCell<[Option<kernel_ops::Matmul<'static>>; 2]> = const { std::cell::RefCell::new([None, None]) };
    /// `kernel_ops::grouped::GroupedMatmul` (its status word) per device kind.
    static GROUPED: std::cell::RefCell<[Option<kernel_ops::grouped::GroupedMatmul<'static>>; 2]> = const { std::cell::RefCell::new([None, None]) };
}

static EMULATOR: OnceLock<Ctx> = OnceLock::new();
static GPU: OnceLock<Ctx> = OnceLock::new();

fn runtime_err(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

fn make_ctx(dev: Device) -> PyResult<Ctx> {
    let dev: &'static Device = Box::leak(Box::new(dev));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).map_err(runtime_err)?;
    Ok(Ctx { dev, ops })
}

fn ctx_for(place: Place) -> PyResult<&'static Ctx> {
    let cell = match place {
        Place::Cpu => &EMULATOR,
        Place::Cuda(_) => &GPU,
    };
    if let Some(c) = cell.get() {
        return Ok(c);
    }
    let c = match place {
        Place::Cpu => make_ctx(Device::emulator())?,
        Place::Cuda(d) => {
            let gpu = Gpu::new(d as usize).map_err(runtime_err)?;
            // SAFETY: all of this process's work goes to the one stream of
            // `Gpu` (the legacy default stream), ordered with the callers'
            // streams by `Gpu::in_order_with`: cudarc's per-buffer event
            // tracking (two events per borrowed buffer and per launch
            // argument) orders nothing more, and costs microseconds per call.
            unsafe { gpu.context().disable_event_tracking() };
            make_ctx(Device::gpu(gpu))?
        }
    };
    let _ = cell.set(c);
    Ok(cell.get().expect("set above"))
}

/// The place of all `arrs`, or a `ValueError` naming the two that differ.
fn same_place(arrs: &[&Arr]) -> PyResult<Place> {
    let p = arrs[0].place;
    if let Some(other) = arrs.iter().find(|a| a.place != p) {
        return Err(PyValueError::new_err(format!(
            "{} and {} are on different devices: every array of one call must be on the same device",
            arrs[0].describe(),
            other.describe()
        )));
    }
    if let Place::Cuda(d) = p {
        if let Some(g) = GPU.get() {
            let open = g.dev.as_gpu().map(|g| g.ordinal()).unwrap_or(0);
            if open != d as usize {
                return Err(PyValueError::new_err(format!(
                    "{} is on cuda:{d}, but this process uses cuda:{open} (one GPU per process)",
                    arrs[0].describe()
                )));
            }
        }
    }
    Ok(p)
}

fn same_dtype(arrs: &[&Arr], allowed: &[Dtype]) -> PyResult<Dtype> {
    let d = arrs[0].dtype;
    if !allowed.contains(&d) {
        let names: Vec<_> = allowed.iter().map(|d| d.name()).collect();
        return Err(PyTypeError::new_err(format!("{}: the op takes {}", arrs[0].describe(), names.join(" or "))));
    }
    if let Some(other) = arrs.iter().find(|a| a.dtype != d) {
        return Err(PyTypeError::new_err(format!("{} and {} differ in dtype: they must be the same", arrs[0].describe(), other.describe())));
    }
    Ok(d)
}

fn want_shape(a: &Arr, shape: &[usize]) -> PyResult<()> {
    if a.shape != shape {
        return Err(PyValueError::new_err(format!("{}: shape {:?} expected", a.describe(), shape)));
    }
    Ok(())
}

/// A buffer over the array's memory on the context's device (no copy).
///
/// # Safety
/// The array lives, and nothing else touches it, until the buffer drops.
unsafe fn borrow<T>(ctx: &Ctx, a: &Arr) -> PyResult<Buffer<T>> {
    let len = a.len();
    // SAFETY: the caller's contract; `import` checked the pointer's alignment and the type's size.
    let r = unsafe {
        match a.place {
            Place::Cpu => Buffer::borrow_host(ctx.dev, a.ptr as *mut T, len),
            Place::Cuda(_) => Buffer::borrow_gpu(ctx.dev, a.ptr as u64, len),
        }
    };
    r.map_err(runtime_err)
}

/// Runs `f` on the context's device: on a GPU in stream order with
/// `stream` (queued, not waited for); on the emulator to the end, an
/// emulator report raised as `EmulatorReport`. The GIL is held (the
/// tuning cache of `Matmul` is per thread).
fn run(_py: Python<'_>, ctx: &'static Ctx, stream: u64, f: impl FnOnce() -> Result<(), kernel_ops::Error>) -> PyResult<()> {
    let res: Result<(), kernel_ops::Error> = match ctx.dev.as_gpu() {
        // SAFETY: `stream` is the caller's stream of this device's primary
        // context (the wrappers pass torch's current stream), or 0.
        Some(gpu) => unsafe { gpu.in_order_with(stream, || f().map_err(|e| match e {
            kernel_ops::Error::Runtime(e) => e,
            other => kernel_host::Error::InvalidArgument { function: "kernel_ops", problem: other.to_string() },
        })) }
        .map_err(kernel_ops::Error::Runtime),
        None => f(),
    };
    res.map_err(|e| match e {
        kernel_ops::Error::Shape { .. } => PyValueError::new_err(e.to_string()),
        kernel_ops::Error::Runtime(kernel_host::Error::InvalidArgument { problem, .. }) => PyValueError::new_err(problem),
        kernel_ops::Error::Runtime(ref r) if is_emulator_report(r) => EmulatorReport::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    })
}

fn is_emulator_report(e: &kernel_host::Error) -> bool {
    matches!(e, kernel_host::Error::Emulator(_))
}

// ------------------------------------------------------------------ ops

/// `c = a · bᵀ` (a `M x K`, b `N x K`, c `M x N`, float16, f32
/// accumulation), autotuned per shape on a GPU.
#[pyfunction]
#[pyo3(signature = (a, b, c, stream = 0))]
fn matmul(py: Python<'_>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>, stream: u64) -> PyResult<()> {
    let (a, b, c) = (import("a", a)?, import("b", b)?, import("c", c)?);
    let place = same_place(&[&a, &b, &c])?;
    same_dtype(&[&a, &b, &c], &[Dtype::F16])?;
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
    let ctx = ctx_for(place)?;
    // SAFETY: the arrays live for this call (their capsules are held) and
    // the caller hands them over until the launch is ordered on `stream`.
    let (ba, bb, mut bc) = unsafe { (borrow::<f16>(ctx, &a)?, borrow::<f16>(ctx, &b)?, borrow::<f16>(ctx, &c)?) };
    let slot = usize::from(place != Place::Cpu);
    MATMUL.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache[slot].is_none() {
            cache[slot] = Some(kernel_ops::Matmul::new(ctx.dev).map_err(runtime_err)?);
        }
        let mm = cache[slot].as_ref().expect("set above");
        run(py, ctx, stream, move || {
            mm.matmul(&ba, (m, k), &bb, (n, k), &mut bc).map_err(|e| match e {
                kernel_ops::MatmulError::Cuda(e) => kernel_ops::Error::Runtime(e),
                other => kernel_ops::Error::Shape { op: "matmul", problem: other.to_string() },
            })
        })
    })
}

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

/// Grouped GEMM for mixture of experts (float16 or bfloat16): `c[rows of
/// g] = a[rows of g] · b[g]ᵀ`, the rows of `a` and `c` grouped by expert in order, `sizes[g]`
/// rows each (int32 or uint32, on the same device: read by the kernel).
/// With `check`, waits for the kernel and raises ValueError when the sizes
/// do not add up to the rows of `a`.
#[pyfunction]
#[pyo3(signature = (a, b, sizes, c, check = true, stream = 0))]
fn grouped_matmul(py: Python<'_>, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, sizes: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>, check: bool, stream: u64) -> PyResult<()> {
    let (a, b, s, c) = (import("a", a)?, import("b", b)?, import("sizes", sizes)?, import("c", c)?);
    let place = same_place(&[&a, &b, &s, &c])?;
    let dt = same_dtype(&[&a, &b, &c], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&s], &[Dtype::I32, Dtype::U32])?;
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
    want_shape(&s, &[g])?;
    want_shape(&c, &[m, n])?;
    let ctx = ctx_for(place)?;
    let slot = usize::from(place != Place::Cpu);
    GROUPED.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache[slot].is_none() {
            cache[slot] = Some(kernel_ops::grouped::GroupedMatmul::new(ctx.dev).map_err(runtime_err)?);
        }
        let gm = cache[slot].as_ref().expect("set above");
        with_norm_type!(dt, T => {
            // SAFETY: as in `matmul`; int32 sizes are read as u32 (a
            // negative size is a huge one, which the kernel refuses).
            let (ba, bb, bs, mut bc) = unsafe { (borrow::<T>(ctx, &a)?, borrow::<T>(ctx, &b)?, borrow::<u32>(ctx, &s)?, borrow::<T>(ctx, &c)?) };
            run(py, ctx, stream, || gm.run(&ba, &bb, &bs, &mut bc, (m, n, k), g))?;
        });
        if check {
            run(py, ctx, stream, || gm.status())?;
        }
        Ok(())
    })
}

/// The norms on `rows x cols` (the last dimension is `cols`).
fn rows_cols(x: &Arr) -> PyResult<(usize, usize)> {
    match x.shape.split_last() {
        Some((&cols, rest)) if !rest.is_empty() => Ok((rest.iter().product(), cols)),
        _ => Err(PyValueError::new_err(format!("{}: at least 2 dimensions (rows x columns) expected", x.describe()))),
    }
}


/// `y = softmax(x)` over the last dimension.
#[pyfunction]
#[pyo3(signature = (x, y, stream = 0))]
fn softmax(py: Python<'_>, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, stream: u64) -> PyResult<()> {
    let (x, y) = (import("x", x)?, import("y", y)?);
    let place = same_place(&[&x, &y])?;
    let dt = same_dtype(&[&x, &y], &[Dtype::F16, Dtype::Bf16])?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&y, &x.shape)?;
    let ctx = ctx_for(place)?;
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, mut by) = unsafe { (borrow::<T>(ctx, &x)?, borrow::<T>(ctx, &y)?) };
        run(py, ctx, stream, move || kernel_ops::norms::softmax(&ctx.ops, &bx, &mut by, rows, cols))
    })
}

/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` over the last dimension.
#[pyfunction]
#[pyo3(signature = (x, gamma, beta, y, eps = 1e-5, stream = 0))]
fn layer_norm(py: Python<'_>, x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, beta: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, eps: f32, stream: u64) -> PyResult<()> {
    let (x, g, b, y) = (import("x", x)?, import("gamma", gamma)?, import("beta", beta)?, import("y", y)?);
    let place = same_place(&[&x, &g, &b, &y])?;
    let dt = same_dtype(&[&x, &g, &b, &y], &[Dtype::F16, Dtype::Bf16])?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&g, &[cols])?;
    want_shape(&b, &[cols])?;
    want_shape(&y, &x.shape)?;
    let ctx = ctx_for(place)?;
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, bb, mut by) = unsafe { (borrow::<T>(ctx, &x)?, borrow::<T>(ctx, &g)?, borrow::<T>(ctx, &b)?, borrow::<T>(ctx, &y)?) };
        run(py, ctx, stream, move || kernel_ops::norms::layer_norm(&ctx.ops, &bx, &bg, &bb, &mut by, eps, rows, cols))
    })
}

/// `y = x / sqrt(mean(x²) + eps) * gamma` over the last dimension.
#[pyfunction]
#[pyo3(signature = (x, gamma, y, eps = 1e-6, stream = 0))]
fn rms_norm(py: Python<'_>, x: &Bound<'_, PyAny>, gamma: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, eps: f32, stream: u64) -> PyResult<()> {
    let (x, g, y) = (import("x", x)?, import("gamma", gamma)?, import("y", y)?);
    let place = same_place(&[&x, &g, &y])?;
    let dt = same_dtype(&[&x, &g, &y], &[Dtype::F16, Dtype::Bf16])?;
    let (rows, cols) = rows_cols(&x)?;
    want_shape(&g, &[cols])?;
    want_shape(&y, &x.shape)?;
    let ctx = ctx_for(place)?;
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, mut by) = unsafe { (borrow::<T>(ctx, &x)?, borrow::<T>(ctx, &g)?, borrow::<T>(ctx, &y)?) };
        run(py, ctx, stream, move || kernel_ops::norms::rms_norm(&ctx.ops, &bx, &bg, &mut by, eps, rows, cols))
    })
}

/// Attention forward: `o = softmax(scale q kᵀ) v`, `lse` its log-sum-exp;
/// q, o `[batch, seq, heads, head_dim]`, k, v `[batch, seq, kv_heads,
/// head_dim]`, lse `[batch, heads, seq]` float32.
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, causal = false, scale = None, stream = 0))]
#[allow(clippy::too_many_arguments)]
fn attention(
    py: Python<'_>,
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    causal: bool,
    scale: Option<f32>,
    stream: u64,
) -> PyResult<()> {
    let (q, k, v, o, l) = (import("q", q)?, import("k", k)?, import("v", v)?, import("o", o)?, import("lse", lse)?);
    let place = same_place(&[&q, &k, &v, &o, &l])?;
    let dt = same_dtype(&[&q, &k, &v, &o], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&l], &[Dtype::F32])?;
    for x in [&q, &k, &v] {
        if x.shape.len() != 4 {
            return Err(PyValueError::new_err(format!("{}: 4 dimensions [batch, seq, heads, head_dim] expected", x.describe())));
        }
    }
    let shape = kernel_ops::attention::Shape { batch: q.shape[0], seq: q.shape[1], heads: q.shape[2], kv_heads: k.shape[2], head_dim: q.shape[3] };
    want_shape(&k, &[shape.batch, shape.seq, shape.kv_heads, shape.head_dim])?;
    want_shape(&v, &k.shape)?;
    want_shape(&o, &q.shape)?;
    want_shape(&l, &[shape.batch, shape.heads, shape.seq])?;
    let opts = kernel_ops::attention::Options { causal, scale };
    let ctx = ctx_for(place)?;
    with_norm_type!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bq, bk, bv, mut bo, mut bl) = unsafe { (borrow::<T>(ctx, &q)?, borrow::<T>(ctx, &k)?, borrow::<T>(ctx, &v)?, borrow::<T>(ctx, &o)?, borrow::<f32>(ctx, &l)?) };
        run(py, ctx, stream, move || kernel_ops::attention::attention(ctx.dev, &ctx.ops, &bq, &bk, &bv, &mut bo, &mut bl, shape, opts))
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
fn _testing_transpose(py: Python<'_>, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, racy: bool) -> PyResult<()> {
    use kernel_fixtures::races::smem_transpose_without_sync as k;
    let (x, y) = (import("x", x)?, import("y", y)?);
    same_dtype(&[&x, &y], &[Dtype::F32])?;
    if same_place(&[&x, &y])? != Place::Cpu {
        return Err(PyValueError::new_err("the planted race runs on the emulator only: pass NumPy arrays"));
    }
    want_shape(&x, &[64])?;
    want_shape(&y, &[64])?;
    let ctx = ctx_for(Place::Cpu)?;
    let prog = ctx.dev.load(&kernel_fixtures::DEVICE_CODE).map_err(runtime_err)?;
    // SAFETY: as in `matmul`.
    let (mut bx, mut by) = unsafe { (borrow::<f32>(ctx, &x)?, borrow::<f32>(ctx, &y)?) };
    run(py, ctx, 0, move || {
        let r = if racy { prog.kernel::<k<true>>()?.launch(1u32, (&mut bx, &mut by)) } else { prog.kernel::<k<false>>()?.launch(1u32, (&mut bx, &mut by)) };
        r.map(|_| ()).map_err(kernel_ops::Error::Runtime)
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("EmulatorReport", m.py().get_type::<EmulatorReport>())?;
    m.add_function(wrap_pyfunction!(matmul, m)?)?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(attention, m)?)?;
    m.add_function(wrap_pyfunction!(grouped_matmul, m)?)?;
    #[cfg(feature = "testing")]
    m.add_function(wrap_pyfunction!(_testing_transpose, m)?)?;
    Ok(())
}
