//! Arrays in through DLPack: any object with `__dlpack__` and
//! `__dlpack_device__` (NumPy, JAX, CuPy; torch tensors are read through
//! their attributes, which is cheaper), used in place: no copy.
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::intern;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use std::ffi::c_void;

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

/// The element types an array may have (one lane each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F16,
    Bf16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

/// Every [`Dtype`], in declaration order, with its NumPy/torch name and
/// DLPack `(code, bits)` (code 0 int, 1 uint, 2 float, 4 bfloat).
const DTYPES: [(Dtype, &str, u8, u8); 12] = [
    (Dtype::F16, "float16", 2, 16),
    (Dtype::Bf16, "bfloat16", 4, 16),
    (Dtype::F32, "float32", 2, 32),
    (Dtype::F64, "float64", 2, 64),
    (Dtype::I8, "int8", 0, 8),
    (Dtype::I16, "int16", 0, 16),
    (Dtype::I32, "int32", 0, 32),
    (Dtype::I64, "int64", 0, 64),
    (Dtype::U8, "uint8", 1, 8),
    (Dtype::U16, "uint16", 1, 16),
    (Dtype::U32, "uint32", 1, 32),
    (Dtype::U64, "uint64", 1, 64),
];

impl Dtype {
    /// Its NumPy/torch name (`float16`, `int32`, ...).
    pub fn name(self) -> &'static str {
        DTYPES[self as usize].1
    }

    /// Bits per element.
    pub fn bits(self) -> u8 {
        DTYPES[self as usize].3
    }

    /// The type of a DLPack `(code, bits, lanes)`.
    fn from_dlpack(code: u8, bits: u8, lanes: u16) -> Option<Dtype> {
        DTYPES.iter().find(|e| lanes == 1 && (e.2, e.3) == (code, bits)).map(|e| e.0)
    }

    /// The type of a torch dtype's `str()` (`torch.float16`).
    fn from_torch(name: &str) -> Option<Dtype> {
        let name = name.strip_prefix("torch.")?;
        DTYPES.iter().find(|e| e.1 == name).map(|e| e.0)
    }
}

/// Where an array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Host memory: the CPU emulator runs on it.
    Cpu,
    /// CUDA device memory of this GPU ordinal.
    Cuda(i32),
}

/// One array borrowed through DLPack: its data pointer, shape and type.
/// The capsule (or the torch tensor) it holds keeps the producer's array
/// alive (a capsule's destructor calls the DLPack deleter when Python frees
/// it, after this call).
pub struct Arr<'py> {
    _keep: Bound<'py, PyAny>,
    /// The argument's name, for messages.
    pub name: &'static str,
    /// The first element (the DLPack byte offset applied).
    pub ptr: *mut u8,
    pub place: Place,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// Whether it is a torch tensor (read through its attributes), whose
    /// framework has a current stream ([`crate::stream_for`]).
    pub torch: bool,
}

impl<'py> Arr<'py> {
    /// The interpreter the array was passed in.
    pub fn py(&self) -> Python<'py> {
        self._keep.py()
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `` `name` (float16 [4, 8] on the CPU) ``, for messages.
    pub fn describe(&self) -> String {
        format!("`{}` ({} {:?} on {})", self.name, self.dtype.name(), self.shape, match self.place {
            Place::Cpu => "the CPU".to_string(),
            Place::Cuda(d) => format!("cuda:{d}"),
        })
    }
}

/// Imports `obj` (anything with `__dlpack__`/`__dlpack_device__`) as
/// argument `name`, checking what every kernel needs: one lane, a known
/// dtype, C-contiguous (row-major) strides, a 16-byte-aligned data pointer
/// (TMA and the vector loads need it), a CPU or CUDA device.
pub fn import<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Arr<'py>> {
    let py = obj.py();
    // A torch tensor first (it has `__dlpack__` too, which costs more).
    if is_torch_tensor(obj)? {
        return import_torch(name, obj);
    }
    // NumPy has no DLPack code for the `ml_dtypes.bfloat16` arrays JAX
    // and friends make on the CPU (a dtype of kind 'V'): read their
    // `__array_interface__` instead.
    if let Some(arr) = import_numpy_bfloat16(name, obj)? {
        return Ok(arr);
    }
    if !obj.hasattr("__dlpack__")? {
        let ty = obj.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "`{name}`: a {ty} is not an array with `__dlpack__` (pass a numpy.ndarray, torch.Tensor, jax.Array or cupy.ndarray)"
        )));
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
    let Some(dtype) = Dtype::from_dlpack(dt.code, dt.bits, dt.lanes) else {
        return Err(PyTypeError::new_err(format!(
            "`{name}`: DLPack dtype (code {}, {} bits, {} lanes) is not supported: a float, bfloat16, int or uint type of one lane",
            dt.code, dt.bits, dt.lanes
        )));
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
    checked(capsule, name, ptr, place, dtype, shape, strides, false)
}

/// A NumPy array of `ml_dtypes.bfloat16` (dtype kind 'V', name
/// `bfloat16`, 2 bytes), which NumPy's `__dlpack__` refuses: its data
/// pointer, shape and strides from `__array_interface__`. `None` for
/// anything else (other NumPy dtypes go through DLPack, which names what
/// it refuses).
fn import_numpy_bfloat16<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Option<Arr<'py>>> {
    let py = obj.py();
    if obj.get_type().module()?.to_cow()? != "numpy" {
        return Ok(None);
    }
    let Ok(dtype) = obj.getattr(intern!(py, "dtype")) else { return Ok(None) };
    if dtype.getattr(intern!(py, "kind"))?.extract::<String>()? != "V" {
        return Ok(None);
    }
    let (dname, itemsize): (String, usize) = (dtype.getattr("name")?.extract()?, dtype.getattr("itemsize")?.extract()?);
    if dname != "bfloat16" || itemsize != 2 {
        return Err(PyTypeError::new_err(format!(
            "`{name}`: NumPy dtype {dname} ({itemsize} bytes) is not supported: a float, bfloat16 (ml_dtypes), int or uint type"
        )));
    }
    let iface = obj.getattr("__array_interface__")?;
    let (ptr, readonly): (usize, bool) = iface.get_item("data")?.extract()?;
    if readonly {
        return Err(PyValueError::new_err(format!("`{name}`: a read-only NumPy array; pass a writable one (`numpy.array(x)` copies)")));
    }
    let shape: Vec<usize> = iface.get_item("shape")?.extract()?;
    let byte_strides: Option<Vec<i64>> = iface.get_item("strides")?.extract()?;
    // In elements, as `checked` wants them (an odd byte stride is no
    // element stride: it fails the row-major check as -1).
    let strides = byte_strides.map(|s| s.iter().map(|&b| if b % 2 == 0 { b / 2 } else { -1 }).collect());
    checked(obj.clone(), name, ptr as *mut u8, Place::Cpu, Dtype::Bf16, shape, strides, false).map(Some)
}

/// `torch.Tensor`, once an argument showed that torch is in use.
static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Whether `obj` is a torch tensor (or of a subclass): an `isinstance`
/// check against `torch.Tensor` once one was seen. Until then, and for
/// any other object, its type's module name decides (`torch`, with a
/// `data_ptr`), so that importing `kernel_ops` never imports torch.
pub(crate) fn is_torch_tensor(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    if let Some(t) = TORCH_TENSOR.get(py) {
        if obj.is_instance(t.bind(py))? {
            return Ok(true);
        }
    }
    if !(obj.get_type().module()?.to_cow()?.starts_with("torch") && obj.hasattr(intern!(py, "data_ptr"))?) {
        return Ok(false);
    }
    let tensor = py.import("torch")?.getattr("Tensor")?.cast_into::<PyType>()?;
    let is = obj.is_instance(&tensor)?;
    let _ = TORCH_TENSOR.set(py, tensor.unbind());
    Ok(is)
}

/// A torch tensor read through its attributes (`is_cuda` and
/// `get_device()`, or `is_cpu`; `dtype`, `shape`, `is_contiguous()`,
/// `data_ptr()`; `stride()` only for the error of a non-contiguous one): the same facts as its DLPack capsule, without
/// making one (torch's `__dlpack__` costs microseconds per call), in as few
/// Python calls as the checks allow (each costs 0.1-0.3 us on the H100
/// machine, RESULTS.md).
fn import_torch<'py>(name: &'static str, obj: &Bound<'py, PyAny>) -> PyResult<Arr<'py>> {
    let py = obj.py();
    // Interned names: no string made per call.
    let place = if obj.getattr(intern!(py, "is_cuda"))?.extract::<bool>()? {
        Place::Cuda(obj.call_method0(intern!(py, "get_device"))?.extract::<i32>()?)
    } else if obj.getattr(intern!(py, "is_cpu"))?.extract::<bool>()? {
        Place::Cpu
    } else {
        let device = obj.getattr("device")?.str()?;
        return Err(PyValueError::new_err(format!(
            "`{name}`: a torch tensor on {device} is not supported: arrays must be on the CPU (the emulator) or on a CUDA GPU"
        )));
    };
    let dtype = torch_dtype(name, &obj.getattr(intern!(py, "dtype"))?)?;
    // `torch.Size` is a tuple: read item by item.
    let shape_obj = obj.getattr(intern!(py, "shape"))?;
    let shape: Vec<usize> = match shape_obj.cast::<PyTuple>() {
        Ok(t) => t.iter().map(|d| d.extract::<usize>()).collect::<PyResult<_>>()?,
        Err(_) => shape_obj.extract()?,
    };
    // torch's contiguity is the rule `checked` applies (strides of
    // size-1 dimensions ignored): read the strides only to name them.
    let strides = if obj.call_method0(intern!(py, "is_contiguous"))?.extract::<bool>()? { None } else { Some(obj.call_method0("stride")?.extract()?) };
    let ptr = obj.call_method0(intern!(py, "data_ptr"))?.extract::<usize>()? as *mut u8;
    checked(obj.clone(), name, ptr, place, dtype, shape, strides, true)
}

/// The [`Dtype`] of a torch dtype object. torch's dtypes are process-long
/// singletons, so each is named (`str()`, `torch.float16`) once and then
/// found by identity.
fn torch_dtype(name: &'static str, dtype: &Bound<'_, PyAny>) -> PyResult<Dtype> {
    static SEEN: std::sync::Mutex<Vec<(usize, Dtype)>> = std::sync::Mutex::new(Vec::new());
    let id = dtype.as_ptr() as usize;
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, d)) = seen.iter().find(|e| e.0 == id) {
        return Ok(d);
    }
    let dtype_name = dtype.str()?;
    let dtype_name = dtype_name.to_cow()?;
    let Some(d) = Dtype::from_torch(&dtype_name) else {
        return Err(PyTypeError::new_err(format!("`{name}`: dtype {dtype_name} is not supported: a float, bfloat16, int or uint type")));
    };
    // Kept alive for the process: the identity stays valid.
    std::mem::forget(dtype.clone().unbind());
    seen.push((id, d));
    Ok(d)
}

/// The checks of every array: row-major (C-contiguous) strides, a
/// 16-byte-aligned start.
#[allow(clippy::too_many_arguments)]
fn checked<'py>(keep: Bound<'py, PyAny>, name: &'static str, ptr: *mut u8, place: Place, dtype: Dtype, shape: Vec<usize>, strides: Option<Vec<i64>>, torch: bool) -> PyResult<Arr<'py>> {
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
    if !(ptr as usize).is_multiple_of(16) && shape.iter().product::<usize>() > 0 {
        return Err(PyValueError::new_err(format!(
            "`{name}`: its data starts at address {:#x}, not a multiple of 16 bytes (TMA and the 16-byte vector loads need it); pass an array that starts at an aligned address (a fresh allocation, or a copy)",
            ptr as usize
        )));
    }
    Ok(Arr { _keep: keep, name, ptr, place, dtype, shape, torch })
}

#[cfg(test)]
mod tests {
    use super::Dtype;

    #[test]
    fn dtypes_round_trip_through_dlpack_and_torch_names() {
        for (i, &(d, name, code, bits)) in super::DTYPES.iter().enumerate() {
            assert_eq!(d as usize, i, "DTYPES is in declaration order");
            assert_eq!((d.name(), d.bits()), (name, bits));
            assert_eq!(Dtype::from_dlpack(code, bits, 1), Some(d));
            assert_eq!(Dtype::from_torch(&format!("torch.{name}")), Some(d));
        }
        assert_eq!(Dtype::from_dlpack(2, 32, 4), None, "vector lanes are refused");
        assert_eq!(Dtype::from_dlpack(5, 64, 1), None, "complex is refused");
    }
}
