//! The XLA FFI targets of `kernel_ops.jax`: each op as a handler XLA calls
//! from inside a jitted computation ([`crate::xla_ffi`] reads the call
//! frame), one per platform:
//!
//! * `cpu`: the op runs on the CPU emulator, in place on the host buffers
//!   XLA hands over (as the NumPy path runs on NumPy's memory), and has
//!   finished when the handler returns;
//! * `CUDA`: the op's kernels are queued on the GPU, on XLA's device
//!   buffers, in stream order with XLA's stream (`XLA_FFI_Stream_Get`)
//!   through `Gpu::in_order_with` (two events, no host synchronization),
//!   as the torch path orders them with torch's current stream.
//!
//! The checks are the native entry points' (`lib.rs`): dtypes, ranks,
//! shapes; the kernels' own checks (widths, head dims, alignment) run in
//! `kernel_ops` as they do there. `kernel_ops.jax` checks the same rules at
//! trace time, so these errors only show when a target is called by hand.
//! Every failure becomes an `XLA_FFI_Error` naming the op (`Failure`).
//!
//! Scratch: only `attention_backward` needs any (`delta` and dQ's f32
//! accumulator); it is allocated as the existing path allocates it,
//! `kernel_ops::attention::attention_backward` on the device's stream, in
//! order with XLA's stream, and freed in stream order.
use crate::xla_ffi::{self, dtype, Array, CallFrame, FfiError, Failure, Frame};
use kernel_device::{bf16, f16};
use kernel_host::{Buffer, Device, Program};
use kernel_py::{Place, Programs};

/// Where a target runs.
#[derive(Clone, Copy, PartialEq)]
enum Platform {
    Cpu,
    Cuda,
}

/// kernel-ops's kernels, loaded on each device at first use (the native
/// entry points' `OPS`: one load per device per process).
fn programs() -> &'static Programs {
    &crate::OPS
}

/// The message of a Python exception from `kernel_py` (device or program
/// set-up, which only fails when the device cannot be opened). Reading it
/// takes the GIL: jaxlib releases it while a computation runs, so this
/// waits at most for the interpreter's switch interval.
fn py_message(e: pyo3::PyErr) -> String {
    pyo3::Python::attach(|_| e.to_string())
}

/// The device and loaded kernels of the call: the emulator on the CPU
/// platform; on CUDA the GPU of XLA's device ordinal, which must be the
/// one this process's `kernel_ops` uses (one GPU per process, as for the
/// other frameworks).
fn device_and_ops(f: &Frame, p: Platform) -> Result<(&'static Device, Place), Failure> {
    let place = match p {
        Platform::Cpu => Place::Cpu,
        Platform::Cuda => Place::Cuda(f.device_ordinal().unwrap_or(0)),
    };
    let dev = kernel_py::device(place).map_err(|e| Failure::internal(py_message(e)))?;
    if let (Place::Cuda(want), Some(gpu)) = (place, dev.as_gpu()) {
        if gpu.ordinal() != want as usize {
            return Err(Failure::invalid(format!(
                "the call runs on cuda:{want}, but this process's kernel_ops uses cuda:{} (one GPU per process): run the op on that GPU",
                gpu.ordinal()
            )));
        }
    }
    Ok((dev, place))
}

fn program(place: Place) -> Result<&'static Program, Failure> {
    programs().get(place).map_err(|e| Failure::internal(py_message(e)))
}

/// A buffer over array `a`'s memory on `dev` (no copy), `a.len()`
/// elements of `T`.
///
/// # Safety
/// `T` has the array's element size (its dtype was checked), and the array
/// is one XLA passed to this call: valid for the call (and, on a GPU,
/// until the work queued in stream order with XLA's stream completes);
/// the kernels only read the arguments.
unsafe fn borrow<T>(dev: &Device, a: &Array) -> Result<Buffer<T>, Failure> {
    // SAFETY: the caller's contract.
    let r = unsafe {
        if dev.is_gpu() {
            Buffer::borrow_gpu(dev, a.data as u64, a.len())
        } else {
            Buffer::borrow_host(dev, a.data as *mut T, a.len())
        }
    };
    r.map_err(|e| Failure::internal(e.to_string()))
}

/// A kernel-ops error as a [`Failure`]: inputs the kernel refuses are
/// `INVALID_ARGUMENT`, the rest (CUDA, an emulator report) `INTERNAL`.
fn ops_failure(e: kernel_ops::Error) -> Failure {
    match e {
        kernel_ops::Error::Shape { .. } => Failure::invalid(e.to_string()),
        kernel_ops::Error::Runtime(e) => Failure::internal(e.to_string()),
    }
}

/// Runs `launch` on `dev`: on a GPU in stream order with the call's
/// stream (queued, not waited for); on the emulator to the end.
fn run(f: &Frame, dev: &Device, launch: impl FnOnce() -> Result<(), Failure>) -> Result<(), Failure> {
    let Some(gpu) = dev.as_gpu() else {
        return launch();
    };
    let stream = f.stream()?;
    let mut failed = None;
    // SAFETY: `stream` is XLA's stream of this call, a live stream of the
    // device's primary context (XLA's CUDA client uses the primary
    // context, as torch and the CUDA runtime do).
    let r = unsafe {
        gpu.in_order_with(stream, || {
            launch().map_err(|e| {
                failed = Some(e);
                kernel_host::Error::InvalidArgument { function: "kernel_ops.jax", problem: "the launch failed".into() }
            })
        })
    };
    match failed {
        Some(e) => Err(e),
        None => r.map_err(|e| Failure::internal(e.to_string())),
    }
}

/// The one dtype of `arrays`, one of `allowed`, or the failure naming
/// them.
fn same_dtype(arrays: &[(&str, &Array)], allowed: &[i32]) -> Result<i32, Failure> {
    let (n0, a0) = arrays[0];
    if !allowed.contains(&a0.dtype) {
        let names: Vec<String> = allowed.iter().map(|&d| dtype::name(d)).collect();
        return Err(Failure::invalid(format!("`{n0}` is {}: the op takes {}", a0.describe(), names.join(" or "))));
    }
    if let Some((n, a)) = arrays.iter().find(|(_, a)| a.dtype != a0.dtype) {
        return Err(Failure::invalid(format!("`{n0}` is {} and `{n}` is {}: they must have the same dtype", a0.describe(), a.describe())));
    }
    Ok(a0.dtype)
}

fn want_dims(name: &str, a: &Array, dims: &[usize]) -> Result<(), Failure> {
    if a.dims != dims {
        return Err(Failure::invalid(format!("`{name}` is {}: shape {dims:?} expected", a.describe())));
    }
    Ok(())
}

/// Exactly `n` arguments and `m` results, named for messages.
fn arity(f: &Frame, args: &[&str], rets: &[&str]) -> Result<(Vec<Array>, Vec<Array>), Failure> {
    let (a, r) = (f.args()?, f.rets()?);
    if a.len() != args.len() || r.len() != rets.len() {
        return Err(Failure::invalid(format!(
            "{} arguments and {} results passed; the target takes ({}) -> ({})",
            a.len(),
            r.len(),
            args.join(", "),
            rets.join(", ")
        )));
    }
    Ok((a, r))
}

/// Runs `$body` with `$T` the element type of XLA dtype `$dt` (f16, bf16
/// or f32; the caller checked it is one of those it allows).
macro_rules! with_elem {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            dtype::F16 => {
                type $T = f16;
                $body
            }
            dtype::BF16 => {
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

/// Runs `$body` with `$T` f16 or bf16 (the matmul's and attention's types).
macro_rules! with_half {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            dtype::F16 => {
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

const NORM_DTYPES: [i32; 3] = [dtype::F16, dtype::BF16, dtype::F32];
const HALF_DTYPES: [i32; 2] = [dtype::F16, dtype::BF16];

/// `(rows, cols)` of a norm's input: the last dimension is `cols`, the
/// rest are rows.
fn rows_cols(x: &Array) -> Result<(usize, usize), Failure> {
    match x.dims.split_last() {
        Some((&cols, rest)) if !rest.is_empty() => Ok((rest.iter().product(), cols)),
        _ => Err(Failure::invalid(format!("`x` is {}: at least 2 dimensions (rows x columns) expected", x.describe()))),
    }
}

// ------------------------------------------------------------------ ops

/// `c = a · bᵀ` (a `M x K`, b `N x K`; f16 or bf16).
fn matmul(f: &Frame, p: Platform) -> Result<(), Failure> {
    let (args, rets) = arity(f, &["a", "b"], &["c"])?;
    let (a, b, c) = (&args[0], &args[1], &rets[0]);
    let dt = same_dtype(&[("a", a), ("b", b), ("c", c)], &HALF_DTYPES)?;
    if a.dims.len() != 2 || b.dims.len() != 2 {
        return Err(Failure::invalid(format!("`a` is {} and `b` is {}: matrices (2 dimensions) expected", a.describe(), b.describe())));
    }
    let (m, k, n) = (a.dims[0], a.dims[1], b.dims[0]);
    if b.dims[1] != k {
        return Err(Failure::invalid(format!("`a` is {} and `b` is {}: K differs ({k} vs {}); c = a · bᵀ takes a M x K and b N x K", a.describe(), b.describe(), b.dims[1])));
    }
    want_dims("c", c, &[m, n])?;
    let (dev, place) = device_and_ops(f, p)?;
    let slot = usize::from(place != Place::Cpu);
    crate::MATMUL.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache[slot].is_none() {
            cache[slot] = Some(kernel_ops::Matmul::new(dev).map_err(|e| Failure::internal(e.to_string()))?);
        }
        let mm = cache[slot].as_ref().expect("set above");
        with_half!(dt, T => {
            // SAFETY: T is the checked dtype's element type; XLA's buffers.
            let (ba, bb, mut bc) = unsafe { (borrow::<T>(dev, a)?, borrow::<T>(dev, b)?, borrow::<T>(dev, c)?) };
            run(f, dev, move || {
                mm.matmul(&ba, (m, k), &bb, (n, k), &mut bc).map_err(|e| match e {
                    kernel_ops::MatmulError::Cuda(e) => Failure::internal(e.to_string()),
                    other => Failure::invalid(other.to_string()),
                })
            })
        })
    })
}

/// `y = softmax(x)` over the last dimension.
fn softmax(f: &Frame, p: Platform) -> Result<(), Failure> {
    let (args, rets) = arity(f, &["x"], &["y"])?;
    let (x, y) = (&args[0], &rets[0]);
    let dt = same_dtype(&[("x", x), ("y", y)], &NORM_DTYPES)?;
    let (rows, cols) = rows_cols(x)?;
    want_dims("y", y, &x.dims)?;
    let (dev, place) = device_and_ops(f, p)?;
    let ops = program(place)?;
    with_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, mut by) = unsafe { (borrow::<T>(dev, x)?, borrow::<T>(dev, y)?) };
        run(f, dev, move || kernel_ops::norms::softmax(ops, &bx, &mut by, rows, cols).map_err(ops_failure))
    })
}

/// `y = (x - mean) / sqrt(var + eps) * gamma + beta` over the last dimension.
fn layer_norm(f: &Frame, p: Platform) -> Result<(), Failure> {
    let (args, rets) = arity(f, &["x", "gamma", "beta"], &["y"])?;
    let (x, g, b, y) = (&args[0], &args[1], &args[2], &rets[0]);
    let dt = same_dtype(&[("x", x), ("gamma", g), ("beta", b), ("y", y)], &NORM_DTYPES)?;
    let (rows, cols) = rows_cols(x)?;
    want_dims("gamma", g, &[cols])?;
    want_dims("beta", b, &[cols])?;
    want_dims("y", y, &x.dims)?;
    let eps = f.attr_f32("eps")?;
    let (dev, place) = device_and_ops(f, p)?;
    let ops = program(place)?;
    with_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, bb, mut by) = unsafe { (borrow::<T>(dev, x)?, borrow::<T>(dev, g)?, borrow::<T>(dev, b)?, borrow::<T>(dev, y)?) };
        run(f, dev, move || kernel_ops::norms::layer_norm(ops, &bx, &bg, &bb, &mut by, eps, rows, cols).map_err(ops_failure))
    })
}

/// `y = x / sqrt(mean(x²) + eps) * gamma` over the last dimension.
fn rms_norm(f: &Frame, p: Platform) -> Result<(), Failure> {
    let (args, rets) = arity(f, &["x", "gamma"], &["y"])?;
    let (x, g, y) = (&args[0], &args[1], &rets[0]);
    let dt = same_dtype(&[("x", x), ("gamma", g), ("y", y)], &NORM_DTYPES)?;
    let (rows, cols) = rows_cols(x)?;
    want_dims("gamma", g, &[cols])?;
    want_dims("y", y, &x.dims)?;
    let eps = f.attr_f32("eps")?;
    let (dev, place) = device_and_ops(f, p)?;
    let ops = program(place)?;
    with_elem!(dt, T => {
        // SAFETY: as in `matmul`.
        let (bx, bg, mut by) = unsafe { (borrow::<T>(dev, x)?, borrow::<T>(dev, g)?, borrow::<T>(dev, y)?) };
        run(f, dev, move || kernel_ops::norms::rms_norm(ops, &bx, &bg, &mut by, eps, rows, cols).map_err(ops_failure))
    })
}

/// The attention problem of q `[batch, seq, heads, head_dim]` and k, v
/// `[batch, seq, kv_heads, head_dim]`, with `lse` `[batch, heads, seq]`
/// float32.
fn attention_shape(q: &Array, k: &Array, v: &Array, lse: &Array) -> Result<kernel_ops::attention::Shape, Failure> {
    for (name, x) in [("q", q), ("k", k), ("v", v)] {
        if x.dims.len() != 4 {
            return Err(Failure::invalid(format!("`{name}` is {}: 4 dimensions [batch, seq, heads, head_dim] expected", x.describe())));
        }
    }
    let s = kernel_ops::attention::Shape { batch: q.dims[0], seq: q.dims[1], heads: q.dims[2], kv_heads: k.dims[2], head_dim: q.dims[3] };
    want_dims("k", k, &[s.batch, s.seq, s.kv_heads, s.head_dim])?;
    want_dims("v", v, &k.dims)?;
    if lse.dtype != dtype::F32 {
        return Err(Failure::invalid(format!("`lse` is {}: float32 expected", lse.describe())));
    }
    want_dims("lse", lse, &[s.batch, s.heads, s.seq])?;
    Ok(s)
}

/// The attention options of the call's attributes `causal` and `scale`
/// (the softmax scale, always passed: `kernel_ops.jax` computes the
/// default).
fn attention_options(f: &Frame) -> Result<kernel_ops::attention::Options, Failure> {
    Ok(kernel_ops::attention::Options { causal: f.attr_bool("causal")?, scale: Some(f.attr_f32("scale")?) })
}

/// Attention forward: `(o, lse)` of q, k, v.
fn attention(f: &Frame, p: Platform) -> Result<(), Failure> {
    let (args, rets) = arity(f, &["q", "k", "v"], &["o", "lse"])?;
    let (q, k, v, o, l) = (&args[0], &args[1], &args[2], &rets[0], &rets[1]);
    let dt = same_dtype(&[("q", q), ("k", k), ("v", v), ("o", o)], &HALF_DTYPES)?;
    let shape = attention_shape(q, k, v, l)?;
    want_dims("o", o, &q.dims)?;
    let opts = attention_options(f)?;
    let (dev, place) = device_and_ops(f, p)?;
    let ops = program(place)?;
    with_half!(dt, T => {
        // SAFETY: as in `matmul`; lse is checked float32.
        let (bq, bk, bv, mut bo, mut bl) = unsafe { (borrow::<T>(dev, q)?, borrow::<T>(dev, k)?, borrow::<T>(dev, v)?, borrow::<T>(dev, o)?, borrow::<f32>(dev, l)?) };
        run(f, dev, move || kernel_ops::attention::attention(dev, ops, &bq, &bk, &bv, &mut bo, &mut bl, shape, opts).map_err(ops_failure))
    })
}

/// Attention backward: `(dq, dk, dv)` of q, k, v, the forward's o and
/// lse, and `d_o`.
fn attention_backward(f: &Frame, p: Platform) -> Result<(), Failure> {
    let (args, rets) = arity(f, &["q", "k", "v", "o", "lse", "d_o"], &["dq", "dk", "dv"])?;
    let (q, k, v, o, l, g) = (&args[0], &args[1], &args[2], &args[3], &args[4], &args[5]);
    let (dq, dk, dv) = (&rets[0], &rets[1], &rets[2]);
    let dt = same_dtype(&[("q", q), ("k", k), ("v", v), ("o", o), ("d_o", g), ("dq", dq), ("dk", dk), ("dv", dv)], &HALF_DTYPES)?;
    let shape = attention_shape(q, k, v, l)?;
    for (name, x) in [("o", o), ("d_o", g), ("dq", dq)] {
        want_dims(name, x, &q.dims)?;
    }
    for (name, x) in [("dk", dk), ("dv", dv)] {
        want_dims(name, x, &k.dims)?;
    }
    let opts = attention_options(f)?;
    let (dev, place) = device_and_ops(f, p)?;
    let ops = program(place)?;
    with_half!(dt, T => {
        // SAFETY: as in `matmul`; lse is checked float32.
        let (bq, bk, bv, bo, bl, bg) = unsafe { (borrow::<T>(dev, q)?, borrow::<T>(dev, k)?, borrow::<T>(dev, v)?, borrow::<T>(dev, o)?, borrow::<f32>(dev, l)?, borrow::<T>(dev, g)?) };
        // SAFETY: as above.
        let (mut bdq, mut bdk, mut bdv) = unsafe { (borrow::<T>(dev, dq)?, borrow::<T>(dev, dk)?, borrow::<T>(dev, dv)?) };
        run(f, dev, move || {
            kernel_ops::attention::attention_backward(dev, ops, &bq, &bk, &bv, &bo, &bl, &bg, &mut bdq, &mut bdk, &mut bdv, shape, opts).map_err(ops_failure)
        })
    })
}

// ------------------------------------------------------------- handlers

/// The C handler `$name` of op `$op` on platform `$p`.
macro_rules! handler {
    ($name:ident, $op:ident, $p:expr) => {
        unsafe extern "C" fn $name(frame: *mut CallFrame) -> *mut FfiError {
            // SAFETY: XLA calls a handler with its call frame.
            unsafe { xla_ffi::handle(frame, stringify!($op), |f| $op(f, $p)) }
        }
    };
}

handler!(cpu_matmul, matmul, Platform::Cpu);
handler!(cpu_softmax, softmax, Platform::Cpu);
handler!(cpu_layer_norm, layer_norm, Platform::Cpu);
handler!(cpu_rms_norm, rms_norm, Platform::Cpu);
handler!(cpu_attention, attention, Platform::Cpu);
handler!(cpu_attention_backward, attention_backward, Platform::Cpu);
handler!(cuda_matmul, matmul, Platform::Cuda);
handler!(cuda_softmax, softmax, Platform::Cuda);
handler!(cuda_layer_norm, layer_norm, Platform::Cuda);
handler!(cuda_rms_norm, rms_norm, Platform::Cuda);
handler!(cuda_attention, attention, Platform::Cuda);
handler!(cuda_attention_backward, attention_backward, Platform::Cuda);

type Handler = unsafe extern "C" fn(*mut CallFrame) -> *mut FfiError;

/// Every target: `(op, cpu handler, CUDA handler)`.
pub const TARGETS: [(&str, Handler, Handler); 6] = [
    ("matmul", cpu_matmul, cuda_matmul),
    ("softmax", cpu_softmax, cuda_softmax),
    ("layer_norm", cpu_layer_norm, cuda_layer_norm),
    ("rms_norm", cpu_rms_norm, cuda_rms_norm),
    ("attention", cpu_attention, cuda_attention),
    ("attention_backward", cpu_attention_backward, cuda_attention_backward),
];

/// `kernel_ops._native._xla_ffi_targets()`: `{op: (cpu capsule, CUDA
/// capsule)}`, each a `PyCapsule` with no name wrapping the handler's
/// function pointer, as `jax.ffi.pycapsule` makes them and
/// `jax.ffi.register_ffi_target` takes them.
#[pyo3::pyfunction]
pub fn _xla_ffi_targets(py: pyo3::Python<'_>) -> pyo3::PyResult<pyo3::Bound<'_, pyo3::types::PyDict>> {
    use pyo3::types::PyDictMethods;
    let out = pyo3::types::PyDict::new(py);
    for (op, cpu, cuda) in TARGETS {
        let cap = |h: Handler| -> pyo3::PyResult<pyo3::Bound<'_, pyo3::PyAny>> {
            // SAFETY: a capsule over a function pointer that lives for the
            // process (no destructor, no name: `jax.ffi.pycapsule`'s form).
            let raw = unsafe { pyo3::ffi::PyCapsule_New(h as *mut std::ffi::c_void, std::ptr::null(), None) };
            // SAFETY: a new reference, or null with the Python error set.
            unsafe { pyo3::Bound::from_owned_ptr_or_err(py, raw) }
        };
        out.set_item(op, (cap(cpu)?, cap(cuda)?))?;
    }
    Ok(out)
}
