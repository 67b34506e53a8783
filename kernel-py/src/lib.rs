//! Kernels from Python: arrays of any framework that speaks DLPack (torch,
//! JAX, CuPy, NumPy) passed to `#[kernel]` launchers, with no copy. CUDA
//! arrays run on their GPU, in stream order with the caller's stream; CPU
//! arrays (NumPy) run on the CPU emulator, whose race and protocol reports
//! become [`EmulatorReport`] exceptions. Every input is checked before
//! anything is launched: a wrong dtype raises `TypeError`, a wrong shape,
//! a device mix, a non-contiguous layout or a misaligned data pointer
//! raises `ValueError`, each naming the argument, the rule and the values.
//!
//! * [`kernels!`]: a user's kernels crate's launchers as Python functions,
//!   in a few lines per kernel (the book's "From Python" chapter, and
//!   `docs/template/my-python`);
//! * the pieces it is made of, for hand-written bindings (`kernel_ops`
//!   uses them): [`import`] (DLPack), [`device`] and [`Programs`] (a device
//!   per place, made once per process, and the code loaded on it),
//!   [`same_place`], [`same_dtype`], [`want_shape`], [`borrow`], [`run`]
//!   (stream order, errors to exceptions), [`host_err`].
//!
//! The crate uses pyo3 with `abi3-py39` (one wheel for CPython 3.9 and
//! later) and no `extension-module` feature: maturin (1.9.4 or later) sets
//! `PYO3_BUILD_EXTENSION_MODULE` when it builds a wheel, and test binaries
//! link libpython as they must.
//!
//! # `kernels!`
//!
//! ```
//! use kernel_device::prelude::*;
//! use pyo3::prelude::*;
//! # mod my_kernels {
//! #     use kernel_device::prelude::*;
//! #     pub static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "my_kernels", images: &[] };
//! #     pub const BLOCK: u32 = 128;
//! #     #[kernel(block = threads(128))]
//! #     pub fn axpy(x: GmemRef<f32>, y: Gmem<f32>, a: f32, n: u32) {
//! #         let i = block_idx().x * 128 + thread_idx().x;
//! #         if i < n { y.write(i as usize, a * x.read(i as usize) + y.read(i as usize)); }
//! #     }
//! # }
//!
//! kernel_py::kernels! {
//!     code: my_kernels::DEVICE_CODE;
//!
//!     /// `y = a * x + y`, elementwise, on float32 vectors of one length.
//!     fn axpy(x: f32[n], y: mut f32[n], a: f32) {
//!         kernel: my_kernels::axpy,
//!         grid: (n as u32).div_ceil(my_kernels::BLOCK),
//!         args: (&x, &mut y, a, n as u32),
//!     }
//! }
//!
//! #[pymodule]
//! fn my_python(m: &Bound<'_, PyModule>) -> PyResult<()> {
//!     kernel_py::add_exceptions(m)?; // my_python.EmulatorReport
//!     m.add_function(wrap_pyfunction!(axpy, m)?)
//! }
//! # fn main() {}
//! ```
//!
//! `axpy` is then a Python function `axpy(x, y, a, stream=None)`. Each
//! parameter is
//!
//! * an array, `name: T[d0, d1, ..]`, or `name: mut T[..]` when the kernel
//!   writes it: `T` its element type (`f16`, `bf16`, `f32`, `f64`, `i8` ..
//!   `u64`, checked against the array's dtype), one entry per dimension, a
//!   name (`n`: the first array sets it, the others must agree; `grid` and
//!   `args` read it as a `usize`) or a number (`64`: that extent exactly).
//!   In `args` the array is a [`kernel_host::Buffer<T>`] over its memory:
//!   `&x` for a `GmemRef<T>`/`*const T` parameter, `&mut y` for a
//!   `Gmem<T>`/`*mut T` one, as a host program passes buffers;
//! * a scalar, `name: u32` (any type pyo3 extracts), passed as itself.
//!
//! `stream` (a raw `CUstream` of the device's primary context, such as
//! a JAX or CuPy stream's handle; by default torch's current stream for
//! torch tensors, else 0, the legacy default stream: [`stream_for`])
//! orders the launch on a GPU; a `stream` parameter of
//! your own would clash with it. `kernel` is the kernel's type, `grid` its
//! grid (anything `Into<Dim3>`), `args` one argument per kernel parameter
//! in order: the launch is the typed call of [`kernel_host::Launcher::launch`],
//! so an argument that does not fit its parameter (a buffer of another
//! element type, an `f64` for an `f32`, a missing argument) does not
//! compile:
//!
//! ```compile_fail
//! # use kernel_device::prelude::*;
//! # mod my_kernels {
//! #     use kernel_device::prelude::*;
//! #     pub static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "my_kernels", images: &[] };
//! #     #[kernel(block = threads(128))]
//! #     pub fn axpy(x: GmemRef<f32>, y: Gmem<f32>, a: f32, n: u32) {}
//! # }
//! kernel_py::kernels! {
//!     code: my_kernels::DEVICE_CODE;
//!     // error[E0277]: `&Buffer<f64>` cannot be passed for a kernel parameter of type `GmemRef<f32>`
//!     fn axpy(x: f64[n], y: mut f32[n], a: f32) {
//!         kernel: my_kernels::axpy,
//!         grid: (n as u32).div_ceil(128),
//!         args: (&x, &mut y, a, n as u32),
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! The crate that uses `kernels!` depends on `pyo3` itself (the
//! `#[pyfunction]` it expands to names `::pyo3`), with the same version.
mod call;
mod device;
mod dlpack;

pub use call::{ArrayArg, Call, Dim, Element};
pub use device::{borrow, device, host_err, run, runtime_err, same_dtype, same_place, stream_for, want_shape, Programs};
pub use dlpack::{import, Arr, Dtype, Place};
pub use pyo3;

use pyo3::prelude::*;

pyo3::create_exception!(
    kernel_py,
    EmulatorReport,
    pyo3::exceptions::PyRuntimeError,
    "A race or protocol report of the CPU emulator: the kernel broke a synchronization rule. The message is the report."
);

/// Adds [`EmulatorReport`] to the module `m` (as `m.EmulatorReport`), so
/// that Python code can catch it by name.
pub fn add_exceptions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("EmulatorReport", m.py().get_type::<EmulatorReport>())
}

/// Python functions that launch kernels of a kernels crate: see the
/// [crate documentation](crate#kernels) for the syntax.
#[macro_export]
macro_rules! kernels {
    (code: $code:expr; $($rest:tt)*) => {
        $crate::kernels!(@fns [$code] $($rest)*);
    };

    // One function at a time.
    (@fns [$code:expr]) => {};
    (@fns [$code:expr]
        $(#[$attr:meta])*
        $vis:vis fn $name:ident ( $($params:tt)* ) {
            kernel: $K:ty,
            grid: $grid:expr,
            args: $args:expr $(,)?
        }
        $($rest:tt)*
    ) => {
        $crate::kernels!(@parse [[$code] [$(#[$attr])*] [$vis] $name [$K] [$grid] [$args]] [] [] $($params)* ,);
        $crate::kernels!(@fns [$code] $($rest)*);
    };

    // Parameters, one at a time: the Python signature `$p: type,` and the
    // work `{array ..}` / `{scalar ..}` of each.
    (@parse $f:tt [$($sig:tt)*] [$($item:tt)*] $p:ident : mut $t:ident [ $($d:tt),* $(,)? ] , $($rest:tt)*) => {
        $crate::kernels!(@parse $f [$($sig)* $p: $crate::pyo3::Bound<'_, $crate::pyo3::PyAny>,] [$($item)* {array $p true $t [$($d)*]}] $($rest)*);
    };
    (@parse $f:tt [$($sig:tt)*] [$($item:tt)*] $p:ident : $t:ident [ $($d:tt),* $(,)? ] , $($rest:tt)*) => {
        $crate::kernels!(@parse $f [$($sig)* $p: $crate::pyo3::Bound<'_, $crate::pyo3::PyAny>,] [$($item)* {array $p false $t [$($d)*]}] $($rest)*);
    };
    (@parse $f:tt [$($sig:tt)*] [$($item:tt)*] $p:ident : $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@parse $f [$($sig)* $p: $t,] [$($item)*] $($rest)*);
    };
    (@parse $f:tt $sig:tt $items:tt , $($rest:tt)*) => {
        $crate::kernels!(@parse $f $sig $items $($rest)*);
    };
    (@parse [[$code:expr] [$(#[$attr:meta])*] [$vis:vis] $name:ident [$K:ty] [$grid:expr] [$args:expr]] [$($p:ident : $t:ty,)*] [$($item:tt)*]) => {
        $(#[$attr])*
        #[$crate::pyo3::pyfunction]
        #[pyo3(signature = ($($p,)* stream = None))]
        #[allow(unused_mut, unused_variables, unsafe_code, clippy::too_many_arguments)]
        $vis fn $name($($p: $t,)* stream: Option<u64>) -> $crate::pyo3::PyResult<()> {
            static PROGRAMS: $crate::Programs = $crate::Programs::new(&$code);
            let mut call = $crate::Call::new(stringify!($name));
            $($crate::kernels!(@import call $item);)*
            call.check()?;
            $($crate::kernels!(@buffer call $item);)*
            call.launch::<$K, _>(&PROGRAMS, stream, $grid, $args)
        }
    };

    (@import $c:ident {array $p:ident $w:tt $t:ident [$($d:tt)*]}) => {
        let $p = $c.array::<$t>(stringify!($p), &$p, &[$($crate::kernels!(@dim $d)),*], $w)?;
    };
    (@dim $d:ident) => { $crate::Dim::Named(stringify!($d)) };
    (@dim $d:literal) => { $crate::Dim::Fixed($d) };

    (@buffer $c:ident {array $p:ident true $t:ident [$($d:tt)*]}) => {
        // SAFETY: `check` passed; the buffer is dropped before `call`.
        let mut $p = unsafe { $c.buffer($p)? };
        $($crate::kernels!(@let_dim $c $d);)*
    };
    (@buffer $c:ident {array $p:ident false $t:ident [$($d:tt)*]}) => {
        // SAFETY: as above.
        let $p = unsafe { $c.buffer($p)? };
        $($crate::kernels!(@let_dim $c $d);)*
    };
    (@let_dim $c:ident $d:ident) => { let $d: usize = $c.dim(stringify!($d)); };
    (@let_dim $c:ident $d:literal) => {};
}
