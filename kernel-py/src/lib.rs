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
//!   (stream order, errors to exceptions), [`host_err`], [`empty_like`]
//!   (an array made by the caller's framework), [`Call`] (what `kernels!`
//!   expands to: one call's arrays, checks, scratch and launches).
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
//!   `u64`, checked against the array's dtype; the macro names it through
//!   [`elements`], so no import is needed), one entry per dimension, a
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
//! ## Several kernels, and scratch arrays
//!
//! A function may launch several kernels, in order, on the same device
//! and stream, passing data through scratch arrays: `scratch name:
//! T[extent, ..];` makes an uninitialized array by the framework of the
//! first array argument, on its device ([`empty_like`]: torch's
//! `new_empty`, `numpy.empty`), with extents that are expressions of the
//! named dimensions; in `args` it is a buffer like the arguments. It is
//! freed when the function returns, to the framework's allocator, which on
//! a GPU orders its memory by the framework's current stream: the default
//! `stream` for torch tensors; CuPy and JAX callers pass theirs
//! ([`Call::scratch`]).
//!
//! ```
//! # mod my_kernels {
//! #     use kernel_device::prelude::*;
//! #     pub static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "my_kernels", images: &[] };
//! #     #[kernel(block = threads(128))]
//! #     pub fn row_sums(x: GmemRef<f32>, sums: Gmem<f32>, rows: u32, cols: u32) {}
//! #     #[kernel(block = threads(128))]
//! #     pub fn divide_rows(x: GmemRef<f32>, sums: GmemRef<f32>, out: Gmem<kernel_device::bf16>, rows: u32, cols: u32) {}
//! # }
//! // No `use` of `bf16`: element types are the macro's to resolve.
//! kernel_py::kernels! {
//!     code: my_kernels::DEVICE_CODE;
//!
//!     /// `out[r, c] = x[r, c] / sum(x[r, :])`, rounded to bfloat16.
//!     fn normalize_rows(x: f32[rows, cols], out: mut bf16[rows, cols]) {
//!         scratch sums: f32[rows];
//!         launch {
//!             kernel: my_kernels::row_sums,
//!             grid: (rows as u32).div_ceil(4),
//!             args: (&x, &mut sums, rows as u32, cols as u32),
//!         }
//!         launch {
//!             kernel: my_kernels::divide_rows,
//!             grid: (rows as u32).div_ceil(4),
//!             args: (&x, &sums, &mut out, rows as u32, cols as u32),
//!         }
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! ## Tensor maps
//!
//! A kernel parameter `Tma<Tile>` takes a [`TileMap`] over an array's
//! buffer, made in `args` (this crate re-exports it: no `kernel-host`
//! dependency is needed); its error becomes a Python exception through
//! [`host_err`]:
//!
//! ```
//! # mod my_kernels {
//! #     use kernel_device::prelude::*;
//! #     pub static DEVICE_CODE: kernel_host::DeviceCode = kernel_host::DeviceCode { crate_name: "my_kernels", images: &[] };
//! #     pub type XTile = Tile<kernel_device::f16, 64, 64, Swizzled<128>>;
//! #     #[kernel(block = threads(128))]
//! #     pub fn tile_sums(x: Tma<XTile>, sums: Gmem<f32>) {}
//! # }
//! kernel_py::kernels! {
//!     code: my_kernels::DEVICE_CODE;
//!
//!     /// One sum per 64 x 64 tile of `x` (`rows` and `cols` multiples of 64).
//!     fn tile_sums(x: f16[rows, cols], sums: mut f32[tiles]) {
//!         kernel: my_kernels::tile_sums,
//!         grid: (tiles as u32),
//!         args: (&kernel_py::TileMap::<my_kernels::XTile>::new_2d(&x, rows, cols).map_err(kernel_py::host_err)?, &mut sums),
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! `TileMap::new_2d_mut(&mut y, ..)` makes the map of an array the kernel
//! stores to through TMA (`y: mut T[..]`).
//!
//! ## Arrays without DLPack: bfloat16 NumPy arrays
//!
//! NumPy has no bfloat16 of its own; `ml_dtypes.bfloat16` arrays (what JAX
//! hands NumPy) have a dtype of kind `'V'` that NumPy's `__dlpack__`
//! refuses. [`import`] reads such an array through its
//! `__array_interface__` instead, so a `bf16[..]` parameter takes them on
//! the emulator as a `float32[..]` one takes `numpy.float32` arrays.
//!
//! The crate that uses `kernels!` depends on `pyo3` itself (the
//! `#[pyfunction]` it expands to names `::pyo3`), with the same version.
mod alloc;
mod call;
mod device;
mod dlpack;

pub use alloc::empty_like;
pub use call::{ArrayArg, Call, Dim, Element};
pub use device::{borrow, borrow_range, device, host_err, run, run_on, runtime_err, same_dtype, same_place, stream_for, want_shape, Programs};
pub use dlpack::{import, Arr, Dtype, Place};
pub use pyo3;
/// The host crate, for what a launch's `args` may need beyond buffers
/// ([`TileMap`], [`kernel_host::Buffer`]): a crate that uses `kernels!`
/// needs no `kernel-host` dependency of its own.
pub use kernel_host;
pub use kernel_host::{Buffer, TileMap};
/// The 16-bit float element types (`kernel_device`'s, which are `half`'s),
/// for a kernel's type arguments in a `kernels!` launch
/// (`kernel: my_kernels::scale<kernel_py::bf16>`).
pub use kernel_device::{bf16, f16};

/// Every element type an array parameter of [`kernels!`] may declare
/// (`x: bf16[n]`), by the name it declares: the macro names them through
/// this module, so the crate that uses it imports none of them.
pub mod elements {
    pub use core::primitive::{f32, f64, i16, i32, i64, i8, u16, u32, u64, u8};
    pub use kernel_device::{bf16, f16};
}

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
        $crate::kernels!(@parse [[$code] [$(#[$attr])*] [$vis] $name [] [([$K] [$grid] [$args])]] [] [] $($params)* ,);
        $crate::kernels!(@fns [$code] $($rest)*);
    };
    // Scratch arrays and several launches, in order.
    (@fns [$code:expr]
        $(#[$attr:meta])*
        $vis:vis fn $name:ident ( $($params:tt)* ) {
            $(scratch $s:ident : $st:ident [ $($sd:expr),* $(,)? ] ;)*
            $(launch {
                kernel: $K:ty,
                grid: $grid:expr,
                args: $args:expr $(,)?
            })+
        }
        $($rest:tt)*
    ) => {
        $crate::kernels!(@parse [[$code] [$(#[$attr])*] [$vis] $name [$(($s $st [$($sd),*]))*] [$(([$K] [$grid] [$args]))+]] [] [] $($params)* ,);
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
    (@parse [[$code:expr] [$(#[$attr:meta])*] [$vis:vis] $name:ident [$(($s:ident $st:ident [$($sd:expr),*]))*] [$(([$K:ty] [$grid:expr] [$args:expr]))+]] [$($p:ident : $t:ty,)*] [$($item:tt)*]) => {
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
            $(let $s = call.scratch::<$crate::elements::$st>(stringify!($s), &[$($sd),*])?;)*
            // SAFETY: `check` passed; scratch arrays are fresh; the buffers
            // are dropped before `call`.
            $(let mut $s = unsafe { call.buffer($s)? };)*
            $(call.launch::<$K, _>(&PROGRAMS, stream, $grid, $args)?;)+
            Ok(())
        }
    };

    (@import $c:ident {array $p:ident $w:tt $t:ident [$($d:tt)*]}) => {
        let $p = $c.array::<$crate::elements::$t>(stringify!($p), &$p, &[$($crate::kernels!(@dim $d)),*], $w)?;
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
