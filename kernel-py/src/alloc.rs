//! New arrays made by the caller's framework, on the caller's device: the
//! scratch buffers of a function that launches several kernels
//! ([`Call::scratch`](crate::Call::scratch), `scratch` in
//! [`kernels!`](crate::kernels)). Made by the framework, they come from
//! its allocator (torch's caching allocator, CuPy's pool) and are freed to
//! it when the function returns, as its own temporaries are.
use crate::dlpack::{is_torch_tensor, Dtype};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice, PyTuple};

/// A new, uninitialized C-contiguous array of `shape` and `dtype` made by
/// the framework of `like`, on `like`'s device:
///
/// * a torch tensor: `like.new_empty(shape, dtype=torch.<dtype>)`;
/// * a NumPy array: `numpy.empty`, its start aligned to 16 bytes (the
///   import's rule), `ml_dtypes.bfloat16` for bfloat16;
/// * another array with `__array_namespace__` (the array API: CuPy, JAX):
///   `xp.empty(shape, dtype=xp.<dtype>, device=like.device)`;
///
/// and a `TypeError` naming the type for anything else.
pub fn empty_like<'py>(like: &Bound<'py, PyAny>, shape: &[usize], dtype: Dtype) -> PyResult<Bound<'py, PyAny>> {
    let py = like.py();
    let dims = PyTuple::new(py, shape)?;
    if is_torch_tensor(like)? {
        let kw = PyDict::new(py);
        kw.set_item("dtype", py.import("torch")?.getattr(dtype.name())?)?;
        return like.call_method("new_empty", (dims,), Some(&kw));
    }
    if like.get_type().module()?.to_cow()? == "numpy" {
        let np = py.import("numpy")?;
        let dt = match dtype {
            Dtype::Bf16 => py.import("ml_dtypes")?.getattr("bfloat16")?,
            other => np.getattr(other.name())?,
        };
        let bytes = shape.iter().product::<usize>() * usize::from(dtype.bits() / 8);
        let raw = np.call_method1("empty", (bytes + 16, "uint8"))?;
        let addr: usize = raw.getattr("ctypes")?.getattr("data")?.extract()?;
        let off = (16 - addr % 16) % 16;
        let aligned = raw.get_item(PySlice::new(py, off as isize, (off + bytes) as isize, 1))?;
        return aligned.call_method1("view", (dt,))?.call_method1("reshape", (dims,));
    }
    if like.hasattr("__array_namespace__")? {
        let xp = like.call_method0("__array_namespace__")?;
        let kw = PyDict::new(py);
        kw.set_item("dtype", xp.getattr(dtype.name())?)?;
        kw.set_item("device", like.getattr("device")?)?;
        return xp.call_method("empty", (dims,), Some(&kw));
    }
    let ty = like.get_type();
    Err(PyTypeError::new_err(format!(
        "cannot allocate a {} scratch array like a {}.{}: its framework is not torch or NumPy and has no `__array_namespace__`",
        dtype.name(),
        ty.module()?,
        ty.name()?
    )))
}
