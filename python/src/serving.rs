//! The serving attention ops: decode against a (paged, FP8) K/V cache and
//! attention over packed variable-length sequences, forward and backward
//! (`kernel_ops::attention::{decode, varlen}`).
//!
//! Sizes the kernels need on the host come from the arrays' shapes and the
//! arguments (`max_seqlen_*`); lengths, offsets and block tables stay on
//! the device, so a call is capturable in a CUDA graph once its plan
//! exists: decode plans (their workspace and error flags) and the varlen
//! error flags are made at the first call of a shape on a stream and kept
//! per thread, so later calls allocate nothing. `check=True` reads the
//! flags after the call (a synchronization: not inside a capture) and
//! raises `ValueError` naming a clamped length, page or offset.
use crate::{ops_err, run_op, OPS};
use kernel_device::{bf16, f16, E4M3};
use kernel_ops::attention::decode::{CacheLayout, Decode, DecodeOptions, DecodeShape, KvCache};
use kernel_ops::attention::varlen::{VarlenErrors, VarlenShape};
use kernel_py::{borrow, device, import, same_dtype, same_place, want_shape, Arr, Dtype, Place};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// A decode plan's identity: the device kind, the element types, the
/// shape, the cache layout, the options' bits and the stream (a plan's
/// workspace is used in its stream's order only).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    gpu: bool,
    bf16: bool,
    fp8: bool,
    shape: (usize, usize, usize, usize, usize),
    layout: (usize, usize, usize, usize),
    scale: Option<u32>,
    splits: Option<usize>,
    stream: u64,
}

thread_local! {
    static PLANS: RefCell<HashMap<PlanKey, Decode>> = RefCell::new(HashMap::new());
    /// The varlen error flags per device kind and stream.
    static VARLEN_ERRORS: RefCell<HashMap<(bool, u64), VarlenErrors>> = RefCell::new(HashMap::new());
}

fn value_err(msg: String) -> PyErr {
    PyValueError::new_err(msg)
}

/// The `u32` view of a lengths/offsets array (int32 or uint32: the bits of
/// a negative int32 read as a huge length, which the kernels clamp and
/// flag).
fn want_index(a: &Arr) -> PyResult<()> {
    same_dtype(&[a], &[Dtype::I32, Dtype::U32]).map(|_| ())
}

/// Decode attention: one step of `tokens` new query tokens per sequence
/// against a K/V cache. q, out `[batch, tokens, heads, head_dim]` (float16
/// or bfloat16); lse `[batch, heads, tokens]` float32; the cache
/// `[batch, max_len, kv_heads, head_dim]` or, with `block_table` `[batch,
/// max_pages]` int32, `[num_pages, page_size, kv_heads, head_dim]`; of q's
/// dtype, or uint8 holding e4m3 values (`fp8 = True`) with `kv_scales`
/// float32 `[2]` or `[2, kv_heads]`; lens `[batch]` int32/uint32 on the
/// device.
#[pyfunction]
#[pyo3(signature = (q, k, v, lens, out, lse, block_table = None, kv_scales = None, fp8 = false, scale = None, splits = None, check = false, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn attention_decode(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    lens: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    block_table: Option<&Bound<'_, PyAny>>,
    kv_scales: Option<&Bound<'_, PyAny>>,
    fp8: bool,
    scale: Option<f32>,
    splits: Option<usize>,
    check: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v, lens, o, l) = (import("q", q)?, import("k", k)?, import("v", v)?, import("lens", lens)?, import("out", out)?, import("lse", lse)?);
    let table = block_table.map(|t| import("block_table", t)).transpose()?;
    let scales = kv_scales.map(|s| import("kv_scales", s)).transpose()?;
    let mut all = vec![&q, &k, &v, &lens, &o, &l];
    all.extend(table.iter());
    all.extend(scales.iter());
    let place = same_place(&all)?;
    let dt = same_dtype(&[&q, &o], &[Dtype::F16, Dtype::Bf16])?;
    if fp8 {
        same_dtype(&[&k, &v], &[Dtype::U8])?;
    } else {
        same_dtype(&[&q, &k, &v], &[dt])?;
    }
    same_dtype(&[&l], &[Dtype::F32])?;
    want_index(&lens)?;
    for (x, what) in [(&q, "[batch, tokens, heads, head_dim]"), (&k, "the cache's 4 dimensions"), (&v, "the cache's 4 dimensions")] {
        if x.shape.len() != 4 {
            return Err(value_err(format!("{}: {what} expected", x.describe())));
        }
    }
    let shape = DecodeShape { batch: q.shape[0], tokens: q.shape[1], heads: q.shape[2], kv_heads: k.shape[2], head_dim: q.shape[3] };
    let layout = match &table {
        None => {
            want_shape(&k, &[shape.batch, k.shape[1], shape.kv_heads, shape.head_dim])?;
            CacheLayout::Contiguous { max_len: k.shape[1] }
        }
        Some(t) => {
            same_dtype(&[t], &[Dtype::I32])?;
            if t.shape.len() != 2 || t.shape[0] != shape.batch {
                return Err(value_err(format!("{}: [batch = {}, max_pages] expected", t.describe(), shape.batch)));
            }
            want_shape(&k, &[k.shape[0], k.shape[1], shape.kv_heads, shape.head_dim])?;
            CacheLayout::Paged { num_pages: k.shape[0], page_size: k.shape[1], max_pages: t.shape[1] }
        }
    };
    want_shape(&v, &k.shape)?;
    want_shape(&o, &q.shape)?;
    want_shape(&l, &[shape.batch, shape.heads, shape.tokens])?;
    want_shape(&lens, &[shape.batch])?;
    match (&scales, fp8) {
        (Some(s), true) => same_dtype(&[s], &[Dtype::F32]).map(|_| ())?,
        (None, true) => return Err(value_err("an FP8 cache (fp8=True) needs kv_scales: float32 [2] (K's, V's) or [2, kv_heads]".into())),
        (Some(_), false) => return Err(value_err("kv_scales were given for a 16-bit cache: only an FP8 cache (fp8=True, uint8 e4m3 values) takes scales".into())),
        (None, false) => {}
    }
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    let stream_id = kernel_py::stream_for(&q, stream)?;
    let key = PlanKey {
        gpu: place != Place::Cpu,
        bf16: dt == Dtype::Bf16,
        fp8,
        shape: (shape.batch, shape.tokens, shape.heads, shape.kv_heads, shape.head_dim),
        layout: match layout {
            CacheLayout::Contiguous { max_len } => (0, max_len, 0, 0),
            CacheLayout::Paged { num_pages, page_size, max_pages } => (1, num_pages, page_size, max_pages),
        },
        scale: scale.map(f32::to_bits),
        splits,
        stream: stream_id,
    };
    let opts = DecodeOptions { scale, splits, ..DecodeOptions::default() };
    macro_rules! go {
        ($T:ty, $C:ty) => {{
            // SAFETY: as in `matmul` (lib.rs): the dtypes were checked
            // above (uint8 for E4M3's bytes; uint32/int32 lengths).
            let (bq, bk, bv, blens, mut bo, mut bl) = unsafe { (borrow::<$T>(dev, &q)?, borrow::<$C>(dev, &k)?, borrow::<$C>(dev, &v)?, borrow::<u32>(dev, &lens)?, borrow::<$T>(dev, &o)?, borrow::<f32>(dev, &l)?) };
            // SAFETY: as above (int32 block table, float32 scales).
            let bt = match &table { Some(t) => Some(unsafe { borrow::<i32>(dev, t)? }), None => None };
            let bs = match &scales { Some(s) => Some(unsafe { borrow::<f32>(dev, s)? }), None => None };
            PLANS.with(|plans| -> PyResult<()> {
                let mut plans = plans.borrow_mut();
                if !plans.contains_key(&key) {
                    let plan = Decode::new::<$T, $C>(dev, ops, shape, layout, opts).map_err(ops_err)?;
                    plans.insert(key, plan);
                }
                let plan = plans.get_mut(&key).expect("inserted above");
                let mut cache = match &bt { Some(t) => KvCache::paged(&bk, &bv, t), None => KvCache::contiguous(&bk, &bv) };
                if let Some(s) = &bs {
                    cache = cache.with_scales(s);
                }
                run_op(dev, &q, stream, || plan.run(dev, ops, &bq, &cache, &blens, &mut bo, &mut bl))?;
                if check {
                    let r = plan.check(dev);
                    plan.clear_errors(dev).map_err(ops_err)?;
                    r.map_err(ops_err)?;
                }
                Ok(())
            })
        }};
    }
    match (dt, fp8) {
        (Dtype::F16, false) => go!(f16, f16),
        (Dtype::F16, true) => go!(f16, E4M3),
        (_, false) => go!(bf16, bf16),
        (_, true) => go!(bf16, E4M3),
    }
}

/// The varlen problem of packed q `[total_q, heads, head_dim]` and k
/// `[total_k, kv_heads, head_dim]`, with the offsets' dtypes and shapes
/// checked (`[batch + 1]` int32/uint32 each).
fn varlen_shape(q: &Arr, k: &Arr, cu_q: &Arr, cu_k: &Arr, max_seqlen_q: usize, max_seqlen_k: usize) -> PyResult<VarlenShape> {
    want_index(cu_q)?;
    want_index(cu_k)?;
    for x in [q, k] {
        if x.shape.len() != 3 {
            return Err(value_err(format!("{}: 3 dimensions [total_tokens, heads, head_dim] expected (sequences packed)", x.describe())));
        }
    }
    if cu_q.shape.len() != 1 || cu_q.shape[0] < 2 {
        return Err(value_err(format!("{}: [batch + 1] offsets expected (at least 2)", cu_q.describe())));
    }
    want_shape(cu_k, &cu_q.shape)?;
    Ok(VarlenShape {
        batch: cu_q.shape[0] - 1,
        total_q: q.shape[0],
        total_k: k.shape[0],
        heads: q.shape[1],
        kv_heads: k.shape[1],
        head_dim: q.shape[2],
        max_seqlen_q,
        max_seqlen_k,
    })
}

/// Runs `f` with this thread's varlen error flags for the device kind and
/// stream; with `check`, reads them afterwards (and clears them).
fn with_varlen_errors(dev: &'static kernel_host::Device, gpu: bool, stream: u64, check: bool, f: impl FnOnce(&mut VarlenErrors) -> PyResult<()>) -> PyResult<()> {
    VARLEN_ERRORS.with(|m| -> PyResult<()> {
        let mut m = m.borrow_mut();
        if !m.contains_key(&(gpu, stream)) {
            m.insert((gpu, stream), VarlenErrors::new(dev).map_err(ops_err)?);
        }
        let e = m.get_mut(&(gpu, stream)).expect("inserted above");
        f(e)?;
        if check {
            let r = e.check(dev);
            e.clear(dev).map_err(ops_err)?;
            r.map_err(ops_err)?;
        }
        Ok(())
    })
}

/// Attention over packed variable-length sequences: q, o `[total_q, heads,
/// head_dim]`, k, v `[total_k, kv_heads, head_dim]` (float16 or bfloat16),
/// lse `[heads, total_q]` float32, cu_seqlens_q/k `[batch + 1]`
/// int32/uint32 on the device; causal is aligned bottom-right.
#[pyfunction]
#[pyo3(signature = (q, k, v, cu_seqlens_q, cu_seqlens_k, o, lse, max_seqlen_q, max_seqlen_k, causal = false, scale = None, check = false, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    cu_seqlens_q: &Bound<'_, PyAny>,
    cu_seqlens_k: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    max_seqlen_q: usize,
    max_seqlen_k: usize,
    causal: bool,
    scale: Option<f32>,
    check: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v, cq, ck, o, l) = (import("q", q)?, import("k", k)?, import("v", v)?, import("cu_seqlens_q", cu_seqlens_q)?, import("cu_seqlens_k", cu_seqlens_k)?, import("o", o)?, import("lse", lse)?);
    let place = same_place(&[&q, &k, &v, &cq, &ck, &o, &l])?;
    let dt = same_dtype(&[&q, &k, &v, &o], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&l], &[Dtype::F32])?;
    let shape = varlen_shape(&q, &k, &cq, &ck, max_seqlen_q, max_seqlen_k)?;
    want_shape(&v, &k.shape)?;
    want_shape(&o, &q.shape)?;
    want_shape(&l, &[shape.heads, shape.total_q])?;
    let opts = kernel_ops::attention::Options { causal, scale };
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    let sid = kernel_py::stream_for(&q, stream)?;
    macro_rules! go {
        ($T:ty) => {{
            // SAFETY: as in `matmul` (lib.rs); offsets int32/uint32.
            let (bq, bk, bv, bcq, bck, mut bo, mut bl) = unsafe { (borrow::<$T>(dev, &q)?, borrow::<$T>(dev, &k)?, borrow::<$T>(dev, &v)?, borrow::<u32>(dev, &cq)?, borrow::<u32>(dev, &ck)?, borrow::<$T>(dev, &o)?, borrow::<f32>(dev, &l)?) };
            with_varlen_errors(dev, place != Place::Cpu, sid, check, |e| {
                run_op(dev, &q, stream, || kernel_ops::attention::varlen::attention_varlen(dev, ops, &bq, &bk, &bv, &bcq, &bck, &mut bo, &mut bl, shape, opts, e))
            })
        }};
    }
    if dt == Dtype::F16 {
        go!(f16)
    } else {
        go!(bf16)
    }
}

/// The backward of [`attention_varlen`]: from q, k, v, its o and lse and
/// d_o, writes dq, dk, dv (the layouts of q, k, v); `causal`, `scale` and
/// the offsets must be the forward's.
#[pyfunction]
#[pyo3(signature = (q, k, v, o, lse, d_o, cu_seqlens_q, cu_seqlens_k, dq, dk, dv, max_seqlen_q, max_seqlen_k, causal = false, scale = None, check = false, stream = None))]
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen_backward(
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    o: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    d_o: &Bound<'_, PyAny>,
    cu_seqlens_q: &Bound<'_, PyAny>,
    cu_seqlens_k: &Bound<'_, PyAny>,
    dq: &Bound<'_, PyAny>,
    dk: &Bound<'_, PyAny>,
    dv: &Bound<'_, PyAny>,
    max_seqlen_q: usize,
    max_seqlen_k: usize,
    causal: bool,
    scale: Option<f32>,
    check: bool,
    stream: Option<u64>,
) -> PyResult<()> {
    let (q, k, v, o, l, g) = (import("q", q)?, import("k", k)?, import("v", v)?, import("o", o)?, import("lse", lse)?, import("d_o", d_o)?);
    let (cq, ck, gq, gk, gv) = (import("cu_seqlens_q", cu_seqlens_q)?, import("cu_seqlens_k", cu_seqlens_k)?, import("dq", dq)?, import("dk", dk)?, import("dv", dv)?);
    let place = same_place(&[&q, &k, &v, &o, &l, &g, &cq, &ck, &gq, &gk, &gv])?;
    let dt = same_dtype(&[&q, &k, &v, &o, &g, &gq, &gk, &gv], &[Dtype::F16, Dtype::Bf16])?;
    same_dtype(&[&l], &[Dtype::F32])?;
    let shape = varlen_shape(&q, &k, &cq, &ck, max_seqlen_q, max_seqlen_k)?;
    for x in [&v, &gk, &gv] {
        want_shape(x, &k.shape)?;
    }
    for x in [&o, &g, &gq] {
        want_shape(x, &q.shape)?;
    }
    want_shape(&l, &[shape.heads, shape.total_q])?;
    let opts = kernel_ops::attention::Options { causal, scale };
    let (dev, ops) = (device(place)?, OPS.get(place)?);
    let sid = kernel_py::stream_for(&q, stream)?;
    macro_rules! go {
        ($T:ty) => {{
            // SAFETY: as in `matmul` (lib.rs); offsets int32/uint32.
            let (bq, bk, bv, bo, bl, bg) = unsafe { (borrow::<$T>(dev, &q)?, borrow::<$T>(dev, &k)?, borrow::<$T>(dev, &v)?, borrow::<$T>(dev, &o)?, borrow::<f32>(dev, &l)?, borrow::<$T>(dev, &g)?) };
            // SAFETY: as above.
            let (bcq, bck, mut bdq, mut bdk, mut bdv) = unsafe { (borrow::<u32>(dev, &cq)?, borrow::<u32>(dev, &ck)?, borrow::<$T>(dev, &gq)?, borrow::<$T>(dev, &gk)?, borrow::<$T>(dev, &gv)?) };
            with_varlen_errors(dev, place != Place::Cpu, sid, check, |e| {
                run_op(dev, &q, stream, || {
                    kernel_ops::attention::varlen::attention_varlen_backward(dev, ops, &bq, &bk, &bv, &bo, &bl, &bg, &bcq, &bck, &mut bdq, &mut bdk, &mut bdv, shape, opts, e)
                })
            })
        }};
    }
    if dt == Dtype::F16 {
        go!(f16)
    } else {
        go!(bf16)
    }
}
