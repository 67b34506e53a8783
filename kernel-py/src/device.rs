//! The devices behind the arrays (the CPU emulator for host arrays, the GPU
//! for CUDA arrays, one per process, made at first use), the programs
//! loaded on them, and running launches in the caller's stream order with
//! errors raised as Python exceptions.
use crate::dlpack::{Arr, Dtype, Place};
use crate::EmulatorReport;
use kernel_host::{Buffer, Device, DeviceCode, Gpu, Program};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::sync::OnceLock;

static EMULATOR: OnceLock<Device> = OnceLock::new();
static GPU: OnceLock<Device> = OnceLock::new();

/// A `RuntimeError` with `e`'s message.
pub fn runtime_err(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// The Python exception of a launch error: `ValueError` for an invalid
/// argument (the problem as the message), [`EmulatorReport`] for a race or
/// protocol report of the emulator, `RuntimeError` for the rest (CUDA).
pub fn host_err(e: kernel_host::Error) -> PyErr {
    match e {
        kernel_host::Error::InvalidArgument { problem, .. } => PyValueError::new_err(problem),
        e @ kernel_host::Error::Emulator(_) => EmulatorReport::new_err(e.to_string()),
        other => runtime_err(other),
    }
}

/// The device of `place`, made once per process: the CPU emulator for
/// host arrays; for CUDA arrays the GPU, in its primary context (the one
/// torch, JAX and CuPy use).
pub fn device(place: Place) -> PyResult<&'static Device> {
    let cell = match place {
        Place::Cpu => &EMULATOR,
        Place::Cuda(_) => &GPU,
    };
    if let Some(d) = cell.get() {
        return Ok(d);
    }
    let d = match place {
        Place::Cpu => Device::emulator(),
        Place::Cuda(d) => {
            let gpu = Gpu::new(d as usize).map_err(runtime_err)?;
            // SAFETY: all of this process's work goes to the one stream of
            // `Gpu` (the legacy default stream), ordered with the callers'
            // streams by `Gpu::in_order_with`: cudarc's per-buffer event
            // tracking (two events per borrowed buffer and per launch
            // argument) orders nothing more, and costs microseconds per call.
            unsafe { gpu.context().disable_event_tracking() };
            Device::gpu(gpu)
        }
    };
    let _ = cell.set(d);
    Ok(cell.get().expect("set above"))
}

/// A kernels crate's device code, loaded at first use on each device
/// (once per process): `static PROGRAM: Programs = Programs::new(&my_kernels::DEVICE_CODE);`.
pub struct Programs {
    code: &'static DeviceCode,
    loaded: [OnceLock<Program>; 2],
}

impl Programs {
    /// Loads `code` when first asked.
    pub const fn new(code: &'static DeviceCode) -> Programs {
        Programs { code, loaded: [OnceLock::new(), OnceLock::new()] }
    }

    /// The program on the device of `place` ([`device`]).
    pub fn get(&self, place: Place) -> PyResult<&Program> {
        let cell = &self.loaded[usize::from(place != Place::Cpu)];
        if let Some(p) = cell.get() {
            return Ok(p);
        }
        let p = device(place)?.load(self.code).map_err(runtime_err)?;
        let _ = cell.set(p);
        Ok(cell.get().expect("set above"))
    }
}

/// The place of all `arrs`, or a `ValueError` naming the two that differ
/// (or the GPU this process does not use).
pub fn same_place(arrs: &[&Arr]) -> PyResult<Place> {
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
            let open = g.as_gpu().map(|g| g.ordinal()).unwrap_or(0);
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

/// The dtype of all `arrs`, one of `allowed`, or a `TypeError` naming the
/// array and the types the op takes, or the two that differ.
pub fn same_dtype(arrs: &[&Arr], allowed: &[Dtype]) -> PyResult<Dtype> {
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

/// A `ValueError` unless `a` has exactly `shape`.
pub fn want_shape(a: &Arr, shape: &[usize]) -> PyResult<()> {
    if a.shape != shape {
        return Err(PyValueError::new_err(format!("{}: shape {:?} expected", a.describe(), shape)));
    }
    Ok(())
}

/// A buffer over the array's memory on `dev` (no copy), `a.len()`
/// elements of `T`.
///
/// # Safety
/// `T` is the array's element type (or one of its size and alignment);
/// the array lives, and nothing else touches it, until the buffer drops
/// (and, on a GPU, until the work using it has completed in stream order).
pub unsafe fn borrow<T>(dev: &Device, a: &Arr) -> PyResult<Buffer<T>> {
    // SAFETY: the caller's contract, for the whole array.
    unsafe { borrow_range(dev, a, 0, a.len()) }
}

/// A buffer over elements `offset .. offset + len` of the array's memory
/// on `dev` (no copy): [`borrow`] of a part, such as a row block.
///
/// # Safety
/// As [`borrow`]'s; `offset + len` is within the array, and `offset`
/// elements of `T` keep the 16-byte alignment when the part is used for
/// 16-byte accesses or tensor maps.
pub unsafe fn borrow_range<T>(dev: &Device, a: &Arr, offset: usize, len: usize) -> PyResult<Buffer<T>> {
    // SAFETY: the caller's contract; `import` checked the pointer's alignment.
    let r = unsafe {
        let ptr = (a.ptr as *mut T).add(offset);
        match a.place {
            Place::Cpu => Buffer::borrow_host(dev, ptr, len),
            Place::Cuda(_) => Buffer::borrow_gpu(dev, ptr as u64, len),
        }
    };
    r.map_err(runtime_err)
}

/// The stream to order a launch on `arr`'s device with: `stream` when the
/// caller gave one; else, for a torch CUDA tensor, torch's current stream
/// on its device (`torch.cuda.current_stream(d).cuda_stream`, read through
/// `torch._C._cuda_getCurrentRawStream`, looked up once per process), so a
/// call inside `with torch.cuda.stream(s):` is ordered on `s`; else 0, the
/// legacy default stream (NumPy arrays run on the emulator, where streams
/// play no part; JAX and CuPy callers pass their stream).
pub fn stream_for(arr: &Arr, stream: Option<u64>) -> PyResult<u64> {
    if let Some(s) = stream {
        return Ok(s);
    }
    let Place::Cuda(d) = arr.place else { return Ok(0) };
    if !arr.torch {
        return Ok(0);
    }
    static CURRENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = arr.py();
    let current = CURRENT.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let c = py.import("torch")?.getattr("_C")?;
        match c.getattr("_cuda_getCurrentRawStream") {
            Ok(f) => Ok(f.unbind()),
            // A torch without the private fast path: the public call.
            Err(_) => Ok(py.eval(c"lambda d: __import__('torch').cuda.current_stream(d).cuda_stream", None, None)?.unbind()),
        }
    })?;
    current.bind(py).call1((d,))?.extract::<u64>()
}

/// Runs `f` (launches on `dev`) on that device: on a GPU in stream order
/// with `stream` (queued, not waited for; 0 is the legacy default stream);
/// on the emulator to the end. `f` maps its errors itself ([`host_err`]
/// for `kernel_host`'s, which makes an emulator report an
/// [`EmulatorReport`]).
///
/// `stream` is what the Python caller passed (torch's current stream's
/// `cuda_stream`, 0 by default): it must be 0 or a live stream of the
/// device's primary context, which the Python API documents and trusts.
pub fn run(dev: &Device, stream: u64, f: impl FnOnce() -> PyResult<()>) -> PyResult<()> {
    run_on(&[dev], &[stream], f)
}

/// [`run`] on several devices at once (a group's launches): on GPUs in
/// stream order with each device's stream of `streams` (entry `d` for
/// `devices[d]`), the launches of `f` after what each stream had queued and
/// before what it queues next; on the emulator to the end.
pub fn run_on(devices: &[&Device], streams: &[u64], f: impl FnOnce() -> PyResult<()>) -> PyResult<()> {
    if !devices.iter().any(|d| d.as_gpu().is_some()) {
        return f();
    }
    let mut failed = None;
    let mut body = Some(|| {
        f().map_err(|e| {
            failed = Some(e);
            kernel_host::Error::InvalidArgument { function: "kernel_py::run", problem: "the launch failed (the Python exception)".into() }
        })
    });
    let r = in_order(devices, streams, &mut body);
    match failed {
        Some(e) => Err(e),
        None => r.map_err(host_err),
    }
}

/// `body` inside [`Gpu::in_order_with`] of every GPU of `devices` with its
/// stream, one inside the other (no allocation: one instance per `F`).
fn in_order<F: FnOnce() -> kernel_host::Result<()>>(devices: &[&Device], streams: &[u64], body: &mut Option<F>) -> kernel_host::Result<()> {
    match devices.split_first() {
        None => (body.take().expect("run once"))(),
        Some((d, rest)) => match d.as_gpu() {
            // SAFETY: each stream is 0 or a live stream of its device's
            // primary context, as [`run`] documents and trusts.
            Some(g) => unsafe { g.in_order_with(streams[0], || in_order(rest, &streams[1..], body)) },
            None => in_order(rest, &streams[1..], body),
        },
    }
}
