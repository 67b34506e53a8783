//! What a function made by [`kernels!`](crate::kernels) does at run time:
//! import its arrays, check each one's dtype, rank and named dimensions,
//! check that they share a device and that no array the kernel writes
//! overlaps another, then launch on that device. The macro expands to
//! calls of these functions, so the generated code stays small.
use crate::device::{borrow, device, host_err, run, same_place, Programs};
use crate::dlpack::{import, Arr, Dtype, Place};
use kernel_device::launch::HostEntry;
use kernel_device::{bf16, f16, Dim3};
use kernel_host::{Args, Buffer, ParamList};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::marker::PhantomData;

/// An element type an array argument may declare (`x: f32[n]`): its
/// dtype, checked against the array's at run time.
pub trait Element: Copy + 'static {
    /// The dtype of arrays of this element type.
    const DTYPE: Dtype;
}

macro_rules! elements {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$d;
        }
    )*};
}
elements!(f16 => F16, bf16 => Bf16, f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

/// One dimension of an array argument's declared shape.
#[derive(Clone, Copy, Debug)]
pub enum Dim {
    /// A name (`n`): the first array that has it sets its value, every
    /// other must agree; the function's `grid` and `args` read it as a
    /// `usize`.
    Named(&'static str),
    /// A fixed extent (`64`).
    Fixed(usize),
}

/// An array argument of a [`Call`], imported and checked: its element type
/// is `T`.
pub struct ArrayArg<T> {
    index: usize,
    _t: PhantomData<fn() -> T>,
}

/// A named dimension's value and where it was set.
struct NamedDim {
    name: &'static str,
    value: usize,
    array: &'static str,
    axis: usize,
}

/// One call of a function made by [`kernels!`](crate::kernels).
pub struct Call<'py> {
    function: &'static str,
    arrays: Vec<(Arr<'py>, bool)>,
    dims: Vec<NamedDim>,
    place: Place,
    /// The first array argument as the caller passed it: scratch arrays
    /// are made by its framework ([`Call::scratch`]).
    like: Option<Bound<'py, PyAny>>,
    /// Whether [`Call::check`] passed.
    checked: bool,
}

fn shape_str(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Named(n) => n.to_string(),
            Dim::Fixed(v) => v.to_string(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

impl<'py> Call<'py> {
    /// A call of the Python function `function`.
    pub fn new(function: &'static str) -> Call<'py> {
        Call { function, arrays: Vec::new(), dims: Vec::new(), place: Place::Cpu, like: None, checked: false }
    }

    /// Imports `obj` as array argument `name` of element type `T` and
    /// shape `dims` (`written`: the kernel writes it). A dtype other than
    /// `T`'s is a `TypeError`; another rank, a fixed extent that differs
    /// or a named one that disagrees with its first value is a
    /// `ValueError`; each names the function, the argument, what was
    /// expected and what came.
    pub fn array<T: Element>(&mut self, name: &'static str, obj: &Bound<'py, PyAny>, dims: &[Dim], written: bool) -> PyResult<ArrayArg<T>> {
        let f = self.function;
        let a = import(name, obj)?;
        if a.dtype != T::DTYPE {
            return Err(PyTypeError::new_err(format!(
                "{f}(): `{name}` has dtype {}, {} expected (the kernel's element type); pass an array of dtype {}",
                a.dtype.name(),
                T::DTYPE.name(),
                T::DTYPE.name()
            )));
        }
        let want = shape_str(dims);
        if a.shape.len() != dims.len() {
            return Err(PyValueError::new_err(format!(
                "{f}(): `{name}` has shape {:?}, {} dimension(s) {want} expected",
                a.shape,
                dims.len()
            )));
        }
        for (axis, (&got, dim)) in a.shape.iter().zip(dims).enumerate() {
            match *dim {
                Dim::Fixed(v) if v != got => {
                    return Err(PyValueError::new_err(format!("{f}(): `{name}` has shape {:?}, {want} expected: dimension {axis} must be {v}", a.shape)));
                }
                Dim::Fixed(_) => {}
                Dim::Named(d) => match self.dims.iter().find(|b| b.name == d) {
                    Some(b) if b.value != got => {
                        return Err(PyValueError::new_err(format!(
                            "{f}(): `{name}` has shape {:?}, {want} expected, with {d} = {} (dimension {} of `{}`): dimension {axis} is {got}",
                            a.shape, b.value, b.axis, b.array
                        )));
                    }
                    Some(_) => {}
                    None => self.dims.push(NamedDim { name: d, value: got, array: name, axis }),
                },
            }
        }
        if self.like.is_none() {
            self.like = Some(obj.clone());
        }
        self.arrays.push((a, written));
        Ok(ArrayArg { index: self.arrays.len() - 1, _t: PhantomData })
    }

    /// After [`Call::check`]: a new scratch array `name` of element type
    /// `T` and `shape`, made by the framework of the first array argument
    /// on its device ([`crate::empty_like`]: `new_empty` for torch,
    /// `numpy.empty` for NumPy), uninitialized, for the kernels of this
    /// call to pass data through. The call holds it, and it goes back to
    /// the framework's allocator when the Python function returns.
    ///
    /// On a GPU the framework's allocator orders its memory by the
    /// framework's current stream (torch's caching allocator, CuPy's
    /// pool): it hands the memory out, and takes it back, assuming the
    /// work on it is queued on that stream. So launch on that stream: the
    /// default for torch tensors ([`crate::stream_for`]), and what a CuPy
    /// or JAX caller passes as `stream=`.
    pub fn scratch<T: Element>(&mut self, name: &'static str, shape: &[usize]) -> PyResult<ArrayArg<T>> {
        let f = self.function;
        let (Some(like), true) = (&self.like, self.checked) else {
            return Err(PyValueError::new_err(format!(
                "{f}(): scratch `{name}` needs the array arguments imported and checked first (`Call::array`, then `Call::check`)"
            )));
        };
        let obj = crate::empty_like(like, shape, T::DTYPE)?;
        let a = import(name, &obj)?;
        if a.place != self.place || a.dtype != T::DTYPE || a.shape != shape {
            return Err(PyValueError::new_err(format!("{f}(): scratch {} is not the {} {shape:?} array asked for on the arguments' device", a.describe(), T::DTYPE.name())));
        }
        self.arrays.push((a, true));
        Ok(ArrayArg { index: self.arrays.len() - 1, _t: PhantomData })
    }

    /// The value of named dimension `name` (set by [`Call::array`]).
    pub fn dim(&self, name: &str) -> usize {
        self.dims.iter().find(|b| b.name == name).map(|b| b.value).expect("every named dimension belongs to a declared array")
    }

    /// After the last [`Call::array`]: every array is on one device (the
    /// CPU: the emulator; one CUDA GPU), and no array the kernel writes
    /// overlaps another in memory (the kernel would race with itself, and
    /// the emulator's slices would alias); a `ValueError` otherwise.
    pub fn check(&mut self) -> PyResult<()> {
        let all: Vec<&Arr> = self.arrays.iter().map(|(a, _)| a).collect();
        if all.is_empty() {
            self.checked = true;
            return Ok(());
        }
        self.place = same_place(&all)?;
        for (i, (w, written)) in self.arrays.iter().enumerate() {
            if !written {
                continue;
            }
            for (j, (o, _)) in self.arrays.iter().enumerate() {
                if i != j && overlap(w, o) {
                    return Err(PyValueError::new_err(format!(
                        "{}(): {} overlaps {} in memory, and the kernel writes it: pass arrays that do not share memory",
                        self.function,
                        w.describe(),
                        o.describe()
                    )));
                }
            }
        }
        self.checked = true;
        Ok(())
    }

    /// The buffer over array `a` (no copy) on the call's device.
    ///
    /// # Safety
    /// [`Call::check`] passed, and the buffer is dropped before this call
    /// (which holds the arrays alive) is: declared after it, as the
    /// functions of `kernels!` do.
    pub unsafe fn buffer<T: Element>(&self, a: ArrayArg<T>) -> PyResult<Buffer<T>> {
        let arr = &self.arrays[a.index].0;
        // SAFETY: `T` is the array's dtype (checked by `array`), the
        // caller keeps the array alive, and `check` proved that no buffer
        // the kernel writes aliases another.
        unsafe { borrow::<T>(device(self.place)?, arr) }
    }

    /// Launches kernel `K` of `programs` over `grid` with `args` on the
    /// call's device, in stream order on a GPU with `stream`, or by default
    /// the first array's framework's ([`crate::stream_for`]); `args` must
    /// fit `K`'s parameters (a compile error otherwise: see
    /// [`kernel_host::Args`]).
    pub fn launch<K, A>(&self, programs: &Programs, stream: Option<u64>, grid: impl Into<Dim3>, args: A) -> PyResult<()>
    where
        K: HostEntry,
        K::Params: ParamList,
        A: Args<K::Params>,
    {
        let dev = device(self.place)?;
        let prog = programs.get(self.place)?;
        let grid = grid.into();
        let stream = match self.arrays.first() {
            Some((first, ..)) => crate::stream_for(first, stream)?,
            None => stream.unwrap_or(0),
        };
        run(dev, stream, || prog.kernel::<K>().and_then(|k| k.launch(grid, args)).map(drop).map_err(host_err))
    }
}

/// Whether the bytes of `a` and `b` intersect (neither empty).
fn overlap(a: &Arr, b: &Arr) -> bool {
    fn span(x: &Arr) -> (usize, usize) {
        let bytes = x.len() * usize::from(x.dtype.bits() / 8);
        (x.ptr as usize, x.ptr as usize + bytes)
    }
    let ((a0, a1), (b0, b1)) = (span(a), span(b));
    a.place == b.place && a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1
}

#[cfg(test)]
mod tests {
    use super::{Call, Dim};
    use pyo3::exceptions::{PyRuntimeError, PyTypeError};
    use pyo3::prelude::*;
    use pyo3::types::{PyList, PyModule};

    #[test]
    fn a_non_array_is_a_type_error_naming_the_argument() {
        Python::initialize();
        Python::attach(|py| {
            let mut call = Call::new("axpy");
            let err = call.array::<f32>("x", PyList::empty(py).as_any(), &[Dim::Named("n")], false).err().expect("a list is refused");
            assert!(err.is_instance_of::<PyTypeError>(py), "{err}");
            assert!(err.to_string().contains("`x`: a list is not an array with `__dlpack__`"), "{err}");
        });
    }

    #[test]
    fn the_emulator_report_is_a_runtime_error_added_to_a_module() {
        Python::initialize();
        Python::attach(|py| {
            let m = PyModule::new(py, "m").expect("a module");
            crate::add_exceptions(&m).expect("added");
            let ty = m.getattr("EmulatorReport").expect("m.EmulatorReport");
            assert!(ty.is(py.get_type::<crate::EmulatorReport>()));
            let report = kernel_emu::EmuError::Panic { kernel: "k".into(), cta: [0; 3], thread: [0; 3], message: "boom".into(), location: None };
            let err = crate::host_err(report.into());
            assert!(err.is_instance_of::<PyRuntimeError>(py) && err.is_instance_of::<crate::EmulatorReport>(py), "{err}");
        });
    }
}
