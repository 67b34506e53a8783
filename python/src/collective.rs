//! The collective matmuls over several devices of one host
//! (`kernel_ops::collective`, `kernel_ops::reduce_scatter`): each argument
//! is a list of arrays, entry `d` on device `d` (CUDA arrays on GPUs `0 ..
//! p`, or NumPy arrays, each an emulated device of one emulator run under
//! the race detector). The group of the first `p` GPUs (peer access
//! enabled between every pair, in the primary contexts the frameworks use)
//! or of `p` emulated devices is made at first use, once per process and
//! size. On GPUs each device's launch is ordered with that device's
//! current torch stream (or the legacy default stream), as the one-device
//! ops are.
use crate::{matmul_err, ops_err};
use kernel_device::{bf16, f16};
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_ops::collective::{AllGatherMatmul, CollectiveElem, FORWARDING_TILE_ROWS};
use kernel_ops::reduce_scatter::ReduceScatterMatmul;
use kernel_py::{borrow_range, host_err, import, run_on, runtime_err, same_dtype, stream_for, Arr, Dtype, Place};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Mutex;

/// The groups made so far: `(GPUs?, size, group)`, each leaked (it lives
/// for the process, as the one-device ops' devices do).
static GROUPS: Mutex<Vec<(bool, usize, &'static DeviceGroup)>> = Mutex::new(Vec::new());

thread_local! {
    /// The collectives per group (the group's address), per thread: they
    /// are not `Send`.
    static ALL_GATHER: Cache<AllGatherMatmul<'static>> = const { std::cell::RefCell::new(Vec::new()) };
    static REDUCE_SCATTER: Cache<ReduceScatterMatmul<'static>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The group of `p` devices of this kind: GPUs `0 .. p` or `p` emulated
/// devices.
fn group(gpus: bool, p: usize) -> PyResult<&'static DeviceGroup> {
    let mut groups = GROUPS.lock().map_err(runtime_err)?;
    if let Some(&(_, _, g)) = groups.iter().find(|(k, n, _)| *k == gpus && *n == p) {
        return Ok(g);
    }
    let g = if gpus { DeviceGroup::gpus(p) } else { DeviceGroup::emulator(p) }.map_err(host_err)?;
    for d in 0..p {
        if let Some(gpu) = g.device(d).as_gpu() {
            // SAFETY: as for the one-device ops (`kernel_py::device`): all
            // of this group's work goes to each device's one stream, ordered
            // with the callers' streams by `Gpu::in_order_with`.
            unsafe { gpu.context().disable_event_tracking() };
        }
    }
    let g: &'static DeviceGroup = Box::leak(Box::new(g));
    groups.push((gpus, p, g));
    Ok(g)
}

/// The arrays of one list argument, entry `d` on device `d`: all CUDA
/// arrays of GPU ordinals `0 .. p`, in order, or all host arrays.
fn import_list<'py>(name: &'static str, objs: &[Bound<'py, PyAny>]) -> PyResult<Vec<Arr<'py>>> {
    let arrs = objs.iter().map(|o| import(name, o)).collect::<PyResult<Vec<_>>>()?;
    for (d, a) in arrs.iter().enumerate() {
        let ok = match (arrs[0].place, a.place) {
            (Place::Cpu, Place::Cpu) => true,
            (Place::Cuda(_), Place::Cuda(o)) => o as usize == d,
            _ => false,
        };
        if !ok {
            return Err(PyValueError::new_err(format!(
                "`{name}[{d}]` is {}: entry d of each list must be on device d (CUDA arrays on GPUs 0, 1, .. in order, or NumPy arrays \
                 for the emulator, one kind for the whole call)",
                a.describe()
            )));
        }
    }
    Ok(arrs)
}

/// Checks that every list has one array per device (`p` of them, at
/// least 2) and that all are on one kind of device and of one 16-bit dtype;
/// returns `(p, GPUs?, dtype)`.
fn check_lists(lists: &[(&'static str, &[Arr])]) -> PyResult<(usize, bool, Dtype)> {
    let p = lists[0].1.len();
    for (name, l) in lists {
        if l.len() != p || p < 2 {
            return Err(PyValueError::new_err(format!(
                "`{name}` has {} arrays and `{}` {p}: give one array per device, at least 2 devices",
                l.len(),
                lists[0].0
            )));
        }
    }
    let all: Vec<&Arr> = lists.iter().flat_map(|(_, l)| l.iter()).collect();
    let gpus = matches!(all[0].place, Place::Cuda(_));
    if let Some(a) = all.iter().find(|a| matches!(a.place, Place::Cuda(_)) != gpus) {
        return Err(PyValueError::new_err(format!("{} and {}: every array of the call on GPUs, or every one on the host", all[0].describe(), a.describe())));
    }
    let dt = same_dtype(&all, &[Dtype::F16, Dtype::Bf16])?;
    Ok((p, gpus, dt))
}

/// A 2-dimensional array's `(rows, cols)`.
fn matrix(a: &Arr) -> PyResult<(usize, usize)> {
    match a.shape[..] {
        [r, c] => Ok((r, c)),
        _ => Err(PyValueError::new_err(format!("{}: a matrix (2 dimensions) expected", a.describe()))),
    }
}

/// Every array of `arrs` has `shape`.
fn want_all(arrs: &[Arr], shape: (usize, usize), rule: &str) -> PyResult<()> {
    for a in arrs {
        if matrix(a)? != shape {
            return Err(PyValueError::new_err(format!("{}: shape {shape:?} expected ({rule})", a.describe())));
        }
    }
    Ok(())
}

/// A peer buffer over the arrays' memory (no copy), entry `d` on device
/// `d`, elements `offset .. offset + len` of each.
///
/// # Safety
/// `T` is the arrays' element type; they live, and nothing else touches
/// them, until the buffer drops and the work using it has completed in
/// stream order; `offset + len` is within each.
unsafe fn peer<T>(g: &DeviceGroup, arrs: &[Arr], offset: usize, len: usize) -> PyResult<PeerBuffer<T>> {
    // SAFETY: the caller's contract; offsets are whole rows of K or N
    // elements, multiples of 8 (checked before the launch by the
    // collectives), so every part keeps the arrays' 16-byte alignment.
    let parts = arrs.iter().enumerate().map(|(d, a)| unsafe { borrow_range::<T>(g.device(d), a, offset, len) }).collect::<PyResult<Vec<_>>>()?;
    g.peer_buffer(parts).map_err(host_err)
}

/// The thread's current CUDA context when made, made current again when
/// dropped: the launches on each device of a group make its context
/// current, and the caller's framework reads its current device from the
/// thread's (torch's `device="cuda"`).
struct RestoreContext(kernel_host::cudarc::driver::sys::CUcontext);

impl RestoreContext {
    fn new() -> Self {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: writes the current context (or null) into `ctx`.
        unsafe { kernel_host::cudarc::driver::sys::cuCtxGetCurrent(&mut ctx) };
        RestoreContext(ctx)
    }
}

impl Drop for RestoreContext {
    fn drop(&mut self) {
        // SAFETY: the context was current on this thread when we started
        // (a primary context the framework retains), or null.
        unsafe { kernel_host::cudarc::driver::sys::cuCtxSetCurrent(self.0) };
    }
}

/// Runs `f` on `g` in stream order with each device's stream of `streams`
/// ([`kernel_py::run_on`]).
fn run_group(g: &DeviceGroup, streams: &[u64], f: impl FnOnce() -> PyResult<()>) -> PyResult<()> {
    let devices: Vec<&kernel_host::Device> = (0..g.len()).map(|d| g.device(d)).collect();
    run_on(&devices, streams, f)
}

/// A cache of one collective per group (the group's address).
type Cache<T> = std::cell::RefCell<Vec<(usize, T)>>;

/// Runs `f` with `cache`'s collective of group `g`, made by `make` at the
/// first call on the group.
fn with_cached<T, R>(
    cache: &'static std::thread::LocalKey<Cache<T>>,
    g: &'static DeviceGroup,
    make: impl FnOnce(&'static DeviceGroup) -> Result<T, kernel_ops::MatmulError>,
    f: impl FnOnce(&T) -> PyResult<R>,
) -> PyResult<R> {
    cache.with(|cell| {
        let mut cache = cell.borrow_mut();
        let key = g as *const DeviceGroup as usize;
        if !cache.iter().any(|(k, _)| *k == key) {
            cache.push((key, make(g).map_err(|e| ops_err(matmul_err(e)))?));
        }
        f(&cache.iter().find(|(k, _)| *k == key).expect("added above").1)
    })
}

/// The reduce-scatter matmul: `c[d]` (`M/p x N`) = row block `d` of `Σ_j
/// a[j] · b[j]ᵀ` (`a[j]` `M x K/p`, `b[j]` `N x K/p` on device `j`), f16
/// or bf16, the sum in f32. Raises ValueError when `M` is not a multiple
/// of `128 p` or `K/p` and `N` of 8.
#[pyfunction]
pub fn reduce_scatter_matmul(a: Vec<Bound<'_, PyAny>>, b: Vec<Bound<'_, PyAny>>, c: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
    sum_matmul(a, b, c, false)
}

/// The all-reduce matmul: `c[d]` (`M x N`) = all of `Σ_j a[j] · b[j]ᵀ` on
/// every device, the operands as [`reduce_scatter_matmul`]'s.
#[pyfunction]
pub fn all_reduce_matmul(a: Vec<Bound<'_, PyAny>>, b: Vec<Bound<'_, PyAny>>, c: Vec<Bound<'_, PyAny>>) -> PyResult<()> {
    sum_matmul(a, b, c, true)
}

/// [`reduce_scatter_matmul`], or with `all_reduce` [`all_reduce_matmul`].
fn sum_matmul(a: Vec<Bound<'_, PyAny>>, b: Vec<Bound<'_, PyAny>>, c: Vec<Bound<'_, PyAny>>, all_reduce: bool) -> PyResult<()> {
    let (a, b, c) = (import_list("a", &a)?, import_list("b", &b)?, import_list("c", &c)?);
    let (p, gpus, dt) = check_lists(&[("a", &a), ("b", &b), ("c", &c)])?;
    // Making the group, loading the kernels and the launches make each
    // device's context current in turn: the caller's, as it was, after.
    let _restore = gpus.then(RestoreContext::new);
    let (m, k) = matrix(&a[0])?;
    let n = matrix(&b[0])?.0;
    let rows = if all_reduce { m } else { m / p };
    want_all(&a, (m, k), "every a[j] is M x K/p")?;
    want_all(&b, (n, k), "every b[j] is N x K/p, K/p as in a")?;
    want_all(&c, (rows, n), if all_reduce { "every c[d] is M x N" } else { "every c[d] is M/p x N" })?;
    let g = group(gpus, p)?;
    let streams = c.iter().map(|x| stream_for(x, None)).collect::<PyResult<Vec<_>>>()?;
    with_cached(&REDUCE_SCATTER, g, ReduceScatterMatmul::new, |rs| {
        with_norm_type!(dt, T => {
            // SAFETY: the arrays live for this call and are handed over
            // until the launches are ordered on the callers' streams.
            let (ba, bb, mut bc) = unsafe { (peer::<T>(g, &a, 0, m * k)?, peer::<T>(g, &b, 0, n * k)?, peer::<T>(g, &c, 0, rows * n)?) };
            run_group(g, &streams, || {
                let r = if all_reduce { rs.run_all_reduce(&ba, &bb, &mut bc, (m, n, k)) } else { rs.run(&ba, &bb, &mut bc, (m, n, k)) };
                r.map_err(|e| ops_err(matmul_err(e)))
            })
        })
    })
}

/// The all-gather matmul in place: `a[d]` (`p m x K` on device `d`) holds
/// device `d`'s shard at rows `d m ..`; on return every `a[d]` holds every
/// shard and `c[d]` (`p m x N`) = `a[d] · b[d]ᵀ` (`b[d]` `N x K`). With
/// `m` a multiple of 128, one kernel per device that forwards the shards
/// itself by TMA (`AllGatherMatmul::run_forwarding`); otherwise copy
/// engines and a matmul per shard (`AllGatherMatmul::run`).
#[pyfunction]
pub fn all_gather_matmul(a: Vec<Bound<'_, PyAny>>, b: Vec<Bound<'_, PyAny>>, c: Vec<Bound<'_, PyAny>>, m: usize) -> PyResult<()> {
    let (a, b, c) = (import_list("a", &a)?, import_list("b", &b)?, import_list("c", &c)?);
    let (p, gpus, dt) = check_lists(&[("a", &a), ("b", &b), ("c", &c)])?;
    // Making the group, loading the kernels and the launches make each
    // device's context current in turn: the caller's, as it was, after.
    let _restore = gpus.then(RestoreContext::new);
    let (rows, k) = matrix(&a[0])?;
    if rows != p * m || m == 0 {
        return Err(PyValueError::new_err(format!("{}: {p} x m = {} rows expected (one shard of m = {m} rows per device)", a[0].describe(), p * m)));
    }
    let n = matrix(&b[0])?.0;
    want_all(&a, (p * m, k), "every a[d] is p m x K")?;
    want_all(&b, (n, k), "every b[d] is N x K, K as in a")?;
    want_all(&c, (p * m, n), "every c[d] is p m x N")?;
    let g = group(gpus, p)?;
    let streams = c.iter().map(|x| stream_for(x, None)).collect::<PyResult<Vec<_>>>()?;
    with_cached(&ALL_GATHER, g, AllGatherMatmul::new, |agm| with_norm_type!(dt, T => all_gather::<T>(g, agm, &a, &b, &c, (m, n, k), &streams)))
}

fn all_gather<T: CollectiveElem>(g: &DeviceGroup, agm: &AllGatherMatmul<'_>, a: &[Arr], b: &[Arr], c: &[Arr], (m, n, k): (usize, usize, usize), streams: &[u64]) -> PyResult<()> {
    let p = g.len();
    // SAFETY (every `peer` below): the arrays live for this call and are
    // handed over until the launches are ordered on the callers' streams;
    // the row blocks lie inside them (shapes checked).
    let bb = unsafe { peer::<T>(g, b, 0, n * k)? };
    if m % FORWARDING_TILE_ROWS == 0 {
        let (mut ba, mut bc) = unsafe { (peer::<T>(g, a, 0, p * m * k)?, peer::<T>(g, c, 0, p * m * n)?) };
        return run_group(g, streams, || agm.run_forwarding(&mut ba, &bb, &mut bc, (m, n, k)).map_err(|e| ops_err(matmul_err(e))));
    }
    // Shard j's rows of every device's `a` and `c`: the slots of `run`.
    let mut slots = (0..p).map(|j| unsafe { peer::<T>(g, a, j * m * k, m * k) }).collect::<PyResult<Vec<_>>>()?;
    let mut blocks = (0..p).map(|j| unsafe { peer::<T>(g, c, j * m * n, m * n) }).collect::<PyResult<Vec<_>>>()?;
    run_group(g, streams, || agm.run(&mut slots, &bb, &mut blocks, (m, n, k)).map_err(|e| ops_err(matmul_err(e))))
}
