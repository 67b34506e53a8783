//! Attention forward: `O = softmax(scale · Q Kᵀ [+ causal mask]) V` and the
//! log-sum-exp of every row, on a GPU or the CPU emulator (through
//! [`kernel_host::Device`]); the kernel is
//! `kernel_ops_kernels::attention::attention_fwd` (FlashAttention-3's
//! producer/consumer schedule, P kept in registers).
//!
//! Layout: `q` and `o` hold `[batch, seq, heads, head_dim]`, `k` and `v`
//! `[batch, seq, kv_heads, head_dim]`, row-major (`head_dim` contiguous),
//! f16; `lse` holds `[batch, heads, seq]` f32 (natural log, the
//! backward's input). `kv_heads` divides `heads` (GQA/MQA: Q head `h` uses
//! K/V head `h / (heads / kv_heads)`).
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::f16;
//! use kernel_host::Device;
//! use kernel_ops::attention::{attention, Shape, Options};
//! let dev = Device::emulator();
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! let shape = Shape { batch: 1, seq: 5, heads: 1, kv_heads: 1, head_dim: 64 };
//! let x = dev.upload(&vec![f16::from_f32(0.5); shape.q_len()])?;
//! let mut o = dev.zeros::<f16>(shape.q_len())?;
//! let mut lse = dev.zeros::<f32>(shape.lse_len())?;
//! attention(&dev, &ops, &x, &x, &x, &mut o, &mut lse, shape, Options::default())?;
//! // Equal scores: every output row is the mean of V's rows, 0.5.
//! assert!(dev.download(&o)?.iter().all(|v| (v.to_f32() - 0.5).abs() < 1e-3));
//! # Ok(()) }
//! ```
use crate::Error;
use kernel_device::f16;
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::attention::{attention_fwd, KvTile, QTile, BM};

/// The sizes of one attention problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub batch: usize,
    /// Sequence length of Q and of K/V (self-attention).
    pub seq: usize,
    /// Q (and O) heads.
    pub heads: usize,
    /// K/V heads: `heads` (multi-head), or a divisor of it (GQA; 1 is MQA).
    pub kv_heads: usize,
    /// 64 or 128.
    pub head_dim: usize,
}

impl Shape {
    /// Elements of `q` and `o`.
    pub fn q_len(&self) -> usize {
        self.batch * self.seq * self.heads * self.head_dim
    }
    /// Elements of `k` and of `v`.
    pub fn kv_len(&self) -> usize {
        self.batch * self.seq * self.kv_heads * self.head_dim
    }
    /// Elements of `lse`.
    pub fn lse_len(&self) -> usize {
        self.batch * self.heads * self.seq
    }
    /// FLOPs of the forward pass as the field counts them: `4 B H S² D`,
    /// halved with the causal mask.
    pub fn flops(&self, causal: bool) -> f64 {
        let f = 4.0 * (self.batch * self.heads) as f64 * (self.seq as f64).powi(2) * self.head_dim as f64;
        if causal {
            f / 2.0
        } else {
            f
        }
    }
}

/// What the forward pass computes besides the shapes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Options {
    /// Key `j` is masked for query `i` when `j > i`.
    pub causal: bool,
    /// The softmax scale; `None` is `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
}

impl Options {
    /// The scale the kernel applies.
    pub fn scale_for(&self, head_dim: usize) -> f32 {
        self.scale.unwrap_or(1.0 / (head_dim as f32).sqrt())
    }
}

/// The head dimensions the kernel is built for.
pub const HEAD_DIMS: [usize; 2] = [64, 128];

/// Checks an attention problem before anything is launched: no size is 0;
/// `head_dim` is one of [`HEAD_DIMS`]; `kv_heads` divides `heads`; `seq`
/// and `batch` fit a TMA coordinate; each buffer holds exactly its
/// layout's elements; the scale is finite and positive.
pub fn check_attention(shape: Shape, opts: Options, lens: [(&str, usize); 5]) -> Result<(), Error> {
    let err = |problem: String| Error::Shape { op: "attention", problem };
    let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
    for (name, v) in [("batch", batch), ("seq", seq), ("heads", heads), ("kv_heads", kv_heads), ("head_dim", head_dim)] {
        if v == 0 {
            return Err(err(format!("{name} = 0: every size must be at least 1 ({shape:?})")));
        }
    }
    if !HEAD_DIMS.contains(&head_dim) {
        return Err(err(format!("head_dim = {head_dim}: the kernel is built for head_dim in {HEAD_DIMS:?}; pad the heads with zeros to the next one")));
    }
    if heads % kv_heads != 0 {
        return Err(err(format!(
            "heads = {heads}, kv_heads = {kv_heads}: kv_heads must divide heads (each K/V head serves heads / kv_heads Q heads)"
        )));
    }
    for (name, v) in [("seq", seq), ("batch", batch), ("heads x head_dim", heads * head_dim)] {
        if v > i32::MAX as usize {
            return Err(err(format!("{name} = {v}: at most 2^31 - 1 (a TMA coordinate)")));
        }
    }
    let scale = opts.scale_for(head_dim);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(err(format!("scale = {scale}: the softmax scale must be finite and positive")));
    }
    let want = [shape.q_len(), shape.kv_len(), shape.kv_len(), shape.q_len(), shape.lse_len()];
    let what = ["batch x seq x heads x head_dim", "batch x seq x kv_heads x head_dim", "batch x seq x kv_heads x head_dim", "batch x seq x heads x head_dim", "batch x heads x seq"];
    for (((name, got), want), what) in lens.into_iter().zip(want).zip(what) {
        if got != want {
            return Err(err(format!("`{name}` holds {got} elements; {what} = {want} expected for {shape:?}")));
        }
    }
    Ok(())
}

/// `o = softmax(scale q kᵀ) v` and `lse` (see the module for the layouts)
/// on `dev` (a GPU or the emulator), with `ops` this crate's kernels loaded
/// there. Asynchronous on a GPU's stream, like a kernel launch. Checks
/// everything first ([`check_attention`]). Grid `(ceil(seq / 128), heads,
/// batch)`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    dev: &Device,
    ops: &Program,
    q: &Buffer<f16>,
    k: &Buffer<f16>,
    v: &Buffer<f16>,
    o: &mut Buffer<f16>,
    lse: &mut Buffer<f32>,
    shape: Shape,
    opts: Options,
) -> Result<(), Error> {
    check_attention(shape, opts, [("q", q.len()), ("k", k.len()), ("v", v.len()), ("o", o.len()), ("lse", lse.len())])?;
    let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
    let grid = (seq.div_ceil(BM) as u32, heads as u32, batch as u32);
    let scale_log2 = opts.scale_for(head_dim) * std::f32::consts::LOG2_E;
    let (group, causal) = ((heads / kv_heads) as u32, opts.causal as u32);
    // One launch per instance (the tile types differ by D): the maps over
    // `[batch, seq, heads x head_dim]`, then the kernel.
    macro_rules! launch {
        ($d:literal, $bn:literal, $stages:literal) => {{
            let qm = TileMap::<QTile<f16, $d>, 3>::new_batched(q, batch, seq, heads * head_dim)?;
            let km = TileMap::<KvTile<f16, $bn, $d>, 3>::new_batched(k, batch, seq, kv_heads * head_dim)?;
            let vm = TileMap::<KvTile<f16, $bn, $d>, 3>::new_batched(v, batch, seq, kv_heads * head_dim)?;
            let om = TileMap::<QTile<f16, $d>, 3>::new_batched_mut(o, batch, seq, heads * head_dim)?;
            ops.kernel::<attention_fwd<$d, $bn, $stages>>()?.launch(grid, (&qm, &km, &vm, &om, lse, seq as u32, group, scale_log2, causal))?;
        }};
    }
    match head_dim {
        64 => launch!(64, 128, 3),
        128 => launch!(128, 128, 2),
        _ => unreachable!("checked by check_attention"),
    }
    let _ = dev;
    Ok(())
}

/// The CPU reference over f32 copies of the inputs (f64 arithmetic):
/// returns `(o, lse)` in the module's layouts.
///
/// # Panics
/// When a slice does not hold its layout's elements.
pub fn reference(q: &[f32], k: &[f32], v: &[f32], shape: Shape, opts: Options) -> (Vec<f32>, Vec<f32>) {
    let Shape { batch, seq, heads, kv_heads, head_dim: d } = shape;
    assert!(q.len() == shape.q_len() && k.len() == shape.kv_len() && v.len() == shape.kv_len(), "attention::reference: slices do not match {shape:?}");
    let scale = f64::from(opts.scale_for(d));
    let group = heads / kv_heads;
    let mut o = vec![0f32; shape.q_len()];
    let mut lse = vec![0f32; shape.lse_len()];
    let qi = |b: usize, s: usize, h: usize| ((b * seq + s) * heads + h) * d;
    let ki = |b: usize, s: usize, h: usize| ((b * seq + s) * kv_heads + h) * d;
    let mut p = vec![0f64; seq];
    for b in 0..batch {
        for h in 0..heads {
            let kh = h / group;
            for i in 0..seq {
                let keys = if opts.causal { i + 1 } else { seq };
                let mut mx = f64::NEG_INFINITY;
                for (j, pj) in p.iter_mut().enumerate().take(keys) {
                    let dot: f64 = (0..d).map(|x| f64::from(q[qi(b, i, h) + x]) * f64::from(k[ki(b, j, kh) + x])).sum();
                    *pj = dot * scale;
                    mx = mx.max(*pj);
                }
                let mut sum = 0f64;
                for pj in p.iter_mut().take(keys) {
                    *pj = (*pj - mx).exp();
                    sum += *pj;
                }
                for x in 0..d {
                    let acc: f64 = (0..keys).map(|j| p[j] * f64::from(v[ki(b, j, kh) + x])).sum();
                    o[qi(b, i, h) + x] = (acc / sum) as f32;
                }
                lse[(b * heads + h) * seq + i] = (mx + sum.ln()) as f32;
            }
        }
    }
    (o, lse)
}
