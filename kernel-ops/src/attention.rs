//! Attention forward: `O = softmax(scale · Q Kᵀ [+ causal mask]) V` and the
//! log-sum-exp of every row, on a GPU or the CPU emulator (through
//! [`kernel_host::Device`]); the kernel is
//! `kernel_ops_kernels::attention::attention_fwd` (FlashAttention-3's
//! producer/consumer schedule, P kept in registers).
//!
//! Layout: `q` and `o` hold `[batch, seq, heads, head_dim]`, `k` and `v`
//! `[batch, seq, kv_heads, head_dim]`, row-major (`head_dim` contiguous),
//! f16 or bf16 ([`AttnType`]), head_dim 64, 128 or 256; `lse` holds `[batch, heads, seq]` f32 (natural log, the
//! backward's input). `kv_heads` divides `heads` (GQA/MQA: Q head `h` uses
//! K/V head `h / (heads / kv_heads)`).
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::{bf16, f16};
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
pub mod decode;
use crate::{at, Error};
use kernel_device::gmem::GmemRef;
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use kernel_device::{bf16, f16, Gmem};
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::attention::{attention_fwd, attention_fwd_ext, attention_fwd_wg3, KvTile, QTile, QTileOf, BM, NO_LIMIT};
use kernel_ops_kernels::attention_bwd::{attention_bwd, attention_bwd_dq, attention_bwd_ext, attention_bwd_pre, attention_bwd_sinks, KHalf, QStep, BWD_BM, BWD_BN};

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
    /// 64, 128 or 256.
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
pub const HEAD_DIMS: [usize; 3] = [64, 128, 256];

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
pub fn attention<T: AttnType>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    o: &mut Buffer<T>,
    lse: &mut Buffer<f32>,
    shape: Shape,
    opts: Options,
) -> Result<(), Error> {
    // The first of `configs` built for `T`: measured fastest on an H100
    // (RESULTS.md). An unbuilt head dim is refused by `attention_with`'s
    // checks.
    let config = configs(shape.head_dim).into_iter().find(|c| c.consumers == 2 || T::WG3).unwrap_or(Config { stages: 0, block_n: 0, consumers: 2 });
    attention_with(dev, ops, q, k, v, o, lse, shape, opts, config)
}

/// One built instance of a head dimension: its K/V ring depth and keys per
/// block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub stages: usize,
    pub block_n: usize,
    /// Consumer warpgroups of 64 Q rows: 2 (`attention_fwd`) or 3
    /// (`attention_fwd_wg3`, D 64, f16).
    pub consumers: usize,
}

/// The instances built for `head_dim` (empty if none), the default
/// ([`attention`]'s) first: D 64 takes three consumer warpgroups (f16
/// only; bf16 takes the first two-consumer instance) or two, with
/// 128-key blocks through 2 to 4 slots, D 128 128-key blocks through 2 or 3, D 256 80-key blocks
/// (FlashAttention-3's choice: 188 of the 192 registers the rule allows)
/// or 64-key blocks through 2.
pub fn configs(head_dim: usize) -> Vec<Config> {
    let c = |stages, block_n| Config { stages, block_n, consumers: 2 };
    match head_dim {
        64 => vec![Config { stages: 3, block_n: 128, consumers: 3 }, Config { stages: 2, block_n: 128, consumers: 3 }, c(3, 128), c(4, 128)],
        128 => vec![c(2, 128), c(3, 128)],
        256 => vec![c(2, 80), c(2, 64)],
        _ => vec![],
    }
}

/// [`attention`] with the instance `config` (one of [`configs`]): for
/// benchmarks and tuning.
#[allow(clippy::too_many_arguments)]
pub fn attention_with<T: AttnType>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    o: &mut Buffer<T>,
    lse: &mut Buffer<f32>,
    shape: Shape,
    opts: Options,
    config: Config,
) -> Result<(), Error> {
    check_attention(shape, opts, [("q", q.len()), ("k", k.len()), ("v", v.len()), ("o", o.len()), ("lse", lse.len())])?;
    crate::check_aligned("attention", &[at("q", q), at("k", k), at("v", v), at("o", o), at("lse", lse)])?;
    let _ = dev;
    let key = (shape.head_dim, config.stages, config.block_n);
    match T::FWD.iter().find(|(k, _)| *k == key) {
        Some((_, launch)) if config.consumers == 2 => launch(ops, [q, k, v], o, lse, shape, opts),
        _ if config.consumers == 3 && shape.head_dim == 64 && matches!(config.stages, 2 | 3) && config.block_n == 128 => T::launch_wg3(ops, [q, k, v], o, lse, shape, opts, config.stages),
        _ => Err(Error::Shape { op: "attention", problem: format!("{config:?}: head_dim {} is built as {:?}", shape.head_dim, configs(shape.head_dim)) }),
    }
}

/// The variants models use beyond causal and GQA ([`attention_variant`]):
/// any combination of a sliding window, logit soft-capping and attention
/// sinks. `Variant::default()` is none of them.
#[derive(Clone, Copy, Default)]
pub struct Variant<'a> {
    /// `Some((left, right))`: query `i` sees keys `i - left ..= i + right`
    /// only (Mistral's, Gemma's local layers': `(w - 1, 0)` with causal);
    /// with [`Options::causal`] the right bound is 0 whatever `right` is.
    /// `None`: every key (or up to the diagonal with causal).
    pub window: Option<(usize, usize)>,
    /// `Some(cap)`: the scaled scores become `cap · tanh(scale q·k / cap)`
    /// before the softmax (Gemma 2's logit soft-capping; `cap` finite and
    /// positive).
    pub softcap: Option<f32>,
    /// `Some(sinks)`: one learned logit per Q head (`heads` f32, in the
    /// units of the scaled scores: gpt-oss's attention sinks), one more term
    /// `exp(sinks[h])` of each row's softmax sum with no value; `lse`
    /// includes it.
    pub sinks: Option<&'a Buffer<f32>>,
}

/// The head dimensions [`attention_variant`] is built for.
pub const VARIANT_HEAD_DIMS: [usize; 2] = [64, 128];
/// The head dimensions [`attention_variant_backward`] is built for (at 128
/// its kernel spills: not built until it fits).
pub const VARIANT_BWD_HEAD_DIMS: [usize; 1] = [64];

/// [`attention`] with the variants of `variant` (a sliding window, a
/// soft-cap, sinks: [`Variant`]), in one kernel of the forward's family
/// (`attention_fwd_ext`: 128-key blocks at head dim 64, 64-key blocks at
/// 128): the K/V blocks wholly outside a
/// Q block's window are neither loaded nor computed.
///
/// Errors (nothing is launched): everything [`check_attention`] checks; a
/// head dim outside [`VARIANT_HEAD_DIMS`]; a soft-cap that is not finite
/// and positive; a window bound above 2^31 - 1; `sinks` not holding
/// `heads` values.
#[allow(clippy::too_many_arguments)]
pub fn attention_variant<T: AttnType>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    o: &mut Buffer<T>,
    lse: &mut Buffer<f32>,
    shape: Shape,
    opts: Options,
    variant: Variant<'_>,
) -> Result<(), Error> {
    check_attention(shape, opts, [("q", q.len()), ("k", k.len()), ("v", v.len()), ("o", o.len()), ("lse", lse.len())])?;
    check_variant("attention_variant", VARIANT_BUILT, shape, &variant)?;
    crate::check_aligned("attention_variant", &[at("q", q), at("k", k), at("v", v), at("o", o), at("lse", lse)])?;
    match T::EXT.iter().find(|(d, _)| *d == shape.head_dim) {
        Some((_, launch)) => launch(dev, ops, [q, k, v], o, lse, shape, opts, variant),
        None => Err(Error::Shape { op: "attention_variant", problem: format!("head_dim = {}: not built for this element type", shape.head_dim) }),
    }
}

/// What is built of the variants, as [`check_variant`] names it: the
/// forward's head dims, the backward's.
const VARIANT_BUILT: (&[usize], &str) = (&VARIANT_HEAD_DIMS, "the variants are");
const VARIANT_BWD_BUILT: (&[usize], &str) = (&VARIANT_BWD_HEAD_DIMS, "the variants' backward is");

/// A [`Variant`]'s rules, for the forward and the backward (`op` names
/// the entry point in the error): the head dim one of `built` (the
/// forward's [`VARIANT_HEAD_DIMS`], the backward's [`VARIANT_BWD_HEAD_DIMS`]), a soft-cap finite and positive, window bounds
/// at most 2^31 - 1, one sink per Q head.
fn check_variant(op: &'static str, (dims, what): (&[usize], &str), shape: Shape, variant: &Variant<'_>) -> Result<(), Error> {
    let err = |problem: String| Error::Shape { op, problem };
    if !dims.contains(&shape.head_dim) {
        return Err(err(format!("head_dim = {}: {what} built for head_dim in {dims:?}", shape.head_dim)));
    }
    if let Some(cap) = variant.softcap {
        if !(cap.is_finite() && cap > 0.0) {
            return Err(err(format!("softcap = {cap}: the soft-cap must be finite and positive (None for no soft-cap)")));
        }
    }
    if let Some((left, right)) = variant.window {
        for (name, w) in [("left", left), ("right", right)] {
            if w > i32::MAX as usize {
                return Err(err(format!("window {name} = {w}: at most 2^31 - 1 (a larger bound is no bound: None)")));
            }
        }
    }
    if let Some(sinks) = variant.sinks {
        if sinks.len() != shape.heads {
            return Err(err(format!("`sinks` holds {} values; one per Q head ({}) expected", sinks.len(), shape.heads)));
        }
        crate::check_aligned(op, &[at("sinks", sinks)])?;
    }
    Ok(())
}

/// The backward of [`attention_variant`]: from the forward's inputs, its
/// `o` and `lse` (which include the sinks) and `d_o`, writes `dq`, `dk`,
/// `dv` as [`attention_backward`] does and, with sinks, their gradient
/// `d_sinks` (`heads` f32: `-Σ exp(sinks[h] - lse) rowsum(dO ⊙ O)` over
/// the rows of Q head `h`). `opts` and `variant` must be the forward's.
/// Kernels: `attention_bwd_pre`, `attention_bwd_ext` (the plain backward's
/// schedule; the Q blocks wholly outside a key block's window are not
/// loaded; `P` recomputed through the soft-cap and `dS` times its
/// derivative `1 - tanh²`), `attention_bwd_dq`, then with sinks
/// `attention_bwd_sinks` (one CTA per Q head, a fixed summation order:
/// deterministic).
///
/// Errors (nothing is launched): everything [`attention_backward`] and
/// [`attention_variant`] check, a head dim outside
/// [`VARIANT_BWD_HEAD_DIMS`], and `d_sinks` given without sinks, missing
/// with them, or not holding `heads` values.
#[allow(clippy::too_many_arguments)]
pub fn attention_variant_backward<T: AttnType>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    o: &Buffer<T>,
    lse: &Buffer<f32>,
    d_o: &Buffer<T>,
    dq: &mut Buffer<T>,
    dk: &mut Buffer<T>,
    dv: &mut Buffer<T>,
    d_sinks: Option<&mut Buffer<f32>>,
    shape: Shape,
    opts: Options,
    variant: Variant<'_>,
) -> Result<(), Error> {
    const OP: &str = "attention_variant_backward";
    check_variant(OP, VARIANT_BWD_BUILT, shape, &variant)?;
    check_backward(OP, shape, opts, [q, k, v, o, d_o], lse, [&*dq, &*dk, &*dv])?;
    let err = |problem: String| Error::Shape { op: OP, problem };
    match (&variant.sinks, &d_sinks) {
        (Some(_), None) => return Err(err("sinks given without `d_sinks`: their gradient needs a buffer of `heads` f32".into())),
        (None, Some(_)) => return Err(err("`d_sinks` given without sinks: pass None (no sink, no gradient)".into())),
        (Some(_), Some(ds)) if ds.len() != shape.heads => return Err(err(format!("`d_sinks` holds {} values; one per Q head ({}) expected", ds.len(), shape.heads))),
        _ => {}
    }
    if let Some(ds) = &d_sinks {
        crate::check_aligned(OP, &[at("d_sinks", &**ds)])?;
    }
    crate::check_aligned(OP, &[at("q", q), at("k", k), at("v", v), at("o", o), at("lse", lse), at("d_o", d_o), at("dq", dq), at("dk", dk), at("dv", dv)])?;
    match T::BWD_EXT.iter().find(|(d, _)| *d == shape.head_dim) {
        Some((_, launch)) => launch(dev, ops, [q, k, v, o, d_o], lse, [dq, dk, dv], d_sinks, shape, opts, variant),
        None => Err(err(format!("head_dim = {}: not built for this element type", shape.head_dim))),
    }
}

/// The CPU reference of [`attention_variant_backward`] over f32 copies of
/// the inputs (f64 arithmetic, the softmax exact): returns `(dq, dk, dv,
/// d_sinks)` (`d_sinks` empty without sinks).
///
/// # Panics
/// When a slice does not hold its layout's elements.
#[allow(clippy::too_many_arguments)]
pub fn reference_variant_backward(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    d_o: &[f32],
    shape: Shape,
    opts: Options,
    window: Option<(usize, usize)>,
    softcap: Option<f32>,
    sinks: Option<&[f32]>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let Shape { batch, seq, heads, kv_heads, head_dim: d } = shape;
    assert!(
        q.len() == shape.q_len() && d_o.len() == shape.q_len() && k.len() == shape.kv_len() && v.len() == shape.kv_len(),
        "attention::reference_variant_backward: slices do not match {shape:?}"
    );
    let scale = f64::from(opts.scale_for(d));
    let (mut dq, mut dk, mut dv) = (vec![0f64; shape.q_len()], vec![0f64; shape.kv_len()], vec![0f64; shape.kv_len()]);
    let mut d_sinks = vec![0f64; if sinks.is_some() { heads } else { 0 }];
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>();
    for b in 0..batch {
        for h in 0..heads {
            let kh = h / (heads / kv_heads);
            let qi = |i: usize| ((b * seq + i) * heads + h) * d;
            let kj = |j: usize| ((b * seq + j) * kv_heads + kh) * d;
            for i in 0..seq {
                let (lo, hi) = visible_range(i, seq, opts.causal, window);
                // The scores, and each one's derivative by its scaled dot
                // product (the soft-cap's `1 - tanh²`, or 1).
                let (s, ds_dx): (Vec<f64>, Vec<f64>) = (lo..=hi)
                    .map(|j| {
                        let x = dot(&q[qi(i)..][..d], &k[kj(j)..][..d]) * scale;
                        softcap.map_or((x, 1.0), |c| {
                            let t = (x / f64::from(c)).tanh();
                            (f64::from(c) * t, 1.0 - t * t)
                        })
                    })
                    .unzip();
                let sink = sinks.map(|s| f64::from(s[h]));
                let mx = s.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = s.iter().map(|x| (x - mx).exp()).sum::<f64>() + sink.map_or(0.0, |x| (x - mx).exp());
                let p: Vec<f64> = s.iter().map(|x| (x - mx).exp() / sum).collect();
                let dp: Vec<f64> = (lo..=hi).map(|j| dot(&d_o[qi(i)..][..d], &v[kj(j)..][..d])).collect();
                // delta = dO · O (the sink adds no value).
                let delta: f64 = p.iter().zip(&dp).map(|(a, b)| a * b).sum();
                if let Some(x) = sink {
                    d_sinks[h] -= (x - mx).exp() / sum * delta;
                }
                for (jj, j) in (lo..=hi).enumerate() {
                    let ds = p[jj] * (dp[jj] - delta) * ds_dx[jj] * scale;
                    for x in 0..d {
                        dq[qi(i) + x] += ds * f64::from(k[kj(j) + x]);
                        dk[kj(j) + x] += ds * f64::from(q[qi(i) + x]);
                        dv[kj(j) + x] += p[jj] * f64::from(d_o[qi(i) + x]);
                    }
                }
            }
        }
    }
    let f = |x: Vec<f64>| x.into_iter().map(|v| v as f32).collect();
    (f(dq), f(dk), f(dv), f(d_sinks))
}

/// The keys `lo ..= hi` query `i` of a `seq`-long sequence sees: up to the
/// diagonal with `causal` (the window's right bound then 0), inside
/// `window` `(left, right)` when there is one.
fn visible_range(i: usize, seq: usize, causal: bool, window: Option<(usize, usize)>) -> (usize, usize) {
    match window {
        Some((l, r)) => (i.saturating_sub(l), (i + if causal { 0 } else { r }).min(seq - 1)),
        None => (0, if causal { i } else { seq - 1 }),
    }
}

/// The CPU reference of [`attention_variant`] over f32 copies of the
/// inputs (f64 arithmetic): `(o, lse)` in [`attention`]'s layouts; `sinks`
/// as the variant's, on the host.
///
/// # Panics
/// When a slice does not hold its layout's elements.
pub fn reference_variant(q: &[f32], k: &[f32], v: &[f32], shape: Shape, opts: Options, window: Option<(usize, usize)>, softcap: Option<f32>, sinks: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
    let Shape { batch, seq, heads, kv_heads, head_dim: d } = shape;
    assert!(q.len() == shape.q_len() && k.len() == shape.kv_len() && v.len() == shape.kv_len(), "attention::reference_variant: slices do not match {shape:?}");
    let scale = f64::from(opts.scale_for(d));
    let (mut o, mut lse) = (vec![0f32; shape.q_len()], vec![0f32; shape.lse_len()]);
    for b in 0..batch {
        for h in 0..heads {
            let kh = h / (heads / kv_heads);
            for i in 0..seq {
                let qrow = &q[((b * seq + i) * heads + h) * d..][..d];
                let krow = |j: usize| ((b * seq + j) * kv_heads + kh) * d;
                let (lo, hi) = visible_range(i, seq, opts.causal, window);
                let s: Vec<f64> = (lo..=hi)
                    .map(|j| {
                        let x = qrow.iter().zip(&k[krow(j)..krow(j) + d]).map(|(a, c)| f64::from(*a) * f64::from(*c)).sum::<f64>() * scale;
                        softcap.map_or(x, |c| f64::from(c) * (x / f64::from(c)).tanh())
                    })
                    .collect();
                let sink = sinks.map(|s| f64::from(s[h]));
                let mx = s.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                let sum: f64 = p.iter().sum::<f64>() + sink.map_or(0.0, |x| (x - mx).exp());
                let orow = &mut o[((b * seq + i) * heads + h) * d..][..d];
                for (jj, pj) in p.iter().enumerate() {
                    let vr = &v[krow(lo + jj)..][..d];
                    for (ox, vx) in orow.iter_mut().zip(vr) {
                        *ox += (pj / sum * f64::from(*vx)) as f32;
                    }
                }
                lse[(b * heads + h) * seq + i] = (mx + sum.ln()) as f32;
            }
        }
    }
    (o, lse)
}

/// The head dimensions the backward pass is built for.
pub const BWD_HEAD_DIMS: [usize; 2] = [64, 128];

/// The backward pass: from `q`, `k`, `v`, the forward's `o` and `lse` (as
/// [`attention`] wrote them) and the gradient `d_o` of the loss with
/// respect to `o`, writes `dq`, `dk`, `dv` (the layouts of `q`, `k`, `v`;
/// with GQA, `dk`/`dv` sum over the Q heads of each K/V head). `opts` must
/// be the forward's. Head dims [`BWD_HEAD_DIMS`]. Asynchronous on a GPU,
/// like [`attention`]; allocates its scratch (`delta`, f32 of `lse`'s
/// length, and dQ's f32 accumulator, of `q`'s) on `dev` for the call.
///
/// Kernels: `attention_bwd_pre` (`delta = rowsum(dO ⊙ O)`), `attention_bwd`
/// (per block of 128 keys: `P` recomputed from `lse`, dK and dV in
/// registers, dQ's partial sums added into the f32 accumulator), then
/// `attention_bwd_dq` (`dQ = scale · acc`, rounded); see
/// `kernel_ops_kernels::attention_bwd`.
///
/// Errors (nothing is launched): everything [`check_attention`] checks,
/// a head dim outside [`BWD_HEAD_DIMS`], and `d_o`, `dq`, `dk`, `dv` not
/// holding their layouts' elements.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<T: AttnType>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    o: &Buffer<T>,
    lse: &Buffer<f32>,
    d_o: &Buffer<T>,
    dq: &mut Buffer<T>,
    dk: &mut Buffer<T>,
    dv: &mut Buffer<T>,
    shape: Shape,
    opts: Options,
) -> Result<(), Error> {
    check_backward("attention_backward", shape, opts, [q, k, v, o, d_o], lse, [&*dq, &*dk, &*dv])?;
    crate::check_aligned("attention_backward", &[at("q", q), at("k", k), at("v", v), at("o", o), at("lse", lse), at("d_o", d_o), at("dq", dq), at("dk", dk), at("dv", dv)])?;
    match T::BWD.iter().find(|(d, _)| *d == shape.head_dim) {
        Some((_, launch)) => launch(dev, ops, [q, k, v, o, d_o], lse, [dq, dk, dv], shape, opts),
        None => Err(Error::Shape { op: "attention_backward", problem: format!("head_dim = {}: the backward pass is built for head_dim in {BWD_HEAD_DIMS:?}", shape.head_dim) }),
    }
}

/// [`attention_backward`]'s checks (see its errors), reported as `op`'s.
fn check_backward<T: AttnType>(op: &'static str, shape: Shape, opts: Options, [q, k, v, o, d_o]: [&Buffer<T>; 5], lse: &Buffer<f32>, [dq, dk, dv]: [&Buffer<T>; 3]) -> Result<(), Error> {
    let rename = |e: Error| match e {
        Error::Shape { problem, .. } => Error::Shape { op, problem },
        e => e,
    };
    check_attention(shape, opts, [("q", q.len()), ("k", k.len()), ("v", v.len()), ("o", o.len()), ("lse", lse.len())]).map_err(rename)?;
    if !BWD_HEAD_DIMS.contains(&shape.head_dim) {
        return Err(Error::Shape { op, problem: format!("head_dim = {}: the backward pass is built for head_dim in {BWD_HEAD_DIMS:?}", shape.head_dim) });
    }
    let (ql, kl) = (shape.q_len(), shape.kv_len());
    for (name, got, want, what) in [
        ("d_o", d_o.len(), ql, "batch x seq x heads x head_dim"),
        ("dq", dq.len(), ql, "batch x seq x heads x head_dim"),
        ("dk", dk.len(), kl, "batch x seq x kv_heads x head_dim"),
        ("dv", dv.len(), kl, "batch x seq x kv_heads x head_dim"),
    ] {
        if got != want {
            return Err(Error::Shape { op, problem: format!("`{name}` holds {got} elements; {what} = {want} expected for {shape:?}") });
        }
    }
    Ok(())
}

/// The CPU reference of the backward pass over f32 copies of the inputs
/// (f64 arithmetic, `P` and `delta` exact): returns `(dq, dk, dv)` in the
/// layouts of `q`, `k`, `v`.
///
/// # Panics
/// When a slice does not hold its layout's elements.
pub fn reference_backward(q: &[f32], k: &[f32], v: &[f32], d_o: &[f32], shape: Shape, opts: Options) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let Shape { batch, seq, heads, kv_heads, head_dim: d } = shape;
    assert!(q.len() == shape.q_len() && d_o.len() == shape.q_len() && k.len() == shape.kv_len() && v.len() == shape.kv_len(), "attention::reference_backward: slices do not match {shape:?}");
    // Equal-length sequences are packed ones at offsets `b seq` (the causal
    // mask, top-left, is the bottom-right one when lq = lk): one reference.
    let cu: Vec<u32> = (0..=batch).map(|b| (b * seq) as u32).collect();
    let packed = varlen::VarlenShape { batch, total_q: batch * seq, total_k: batch * seq, heads, kv_heads, head_dim: d, max_seqlen_q: seq, max_seqlen_k: seq };
    varlen::reference_varlen_backward(q, k, v, d_o, &cu, &cu, packed, opts)
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kernel_device::f16 {}
    impl Sealed for kernel_device::bf16 {}
}

/// The forward launch of one instance, after the checks.
type FwdLaunch<E> = fn(&Program, [&Buffer<E>; 3], &mut Buffer<E>, &mut Buffer<f32>, Shape, Options) -> Result<(), Error>;
/// The variants' launch at one head dim, after the checks.
type ExtLaunch<E> = fn(&Device, &Program, [&Buffer<E>; 3], &mut Buffer<E>, &mut Buffer<f32>, Shape, Options, Variant<'_>) -> Result<(), Error>;
/// The backward's launches at one head dim, after the checks.
type BwdLaunch<E> = fn(&Device, &Program, [&Buffer<E>; 5], &Buffer<f32>, [&mut Buffer<E>; 3], Shape, Options) -> Result<(), Error>;
/// The variants' backward launches at one head dim, after the checks.
type BwdExtLaunch<E> = fn(&Device, &Program, [&Buffer<E>; 5], &Buffer<f32>, [&mut Buffer<E>; 3], Option<&mut Buffer<f32>>, Shape, Options, Variant<'_>) -> Result<(), Error>;

/// The element types of q, k, v and o: `f16` and `bf16` (the kernels are
/// generic over it: `attention_fwd<E, ..>`, `attention_bwd<E, ..>`). Sealed.
pub trait AttnType: sealed::Sealed + Copy + kernel_host::TmaElement + 'static {
    /// Whether the three-consumer kernel is built for this type (f16).
    #[doc(hidden)]
    const WG3: bool = false;
    /// The forward's two-consumer instances: `((head_dim, stages,
    /// block_n), launch)`.
    #[doc(hidden)]
    const FWD: [((usize, usize, usize), FwdLaunch<Self>); 6];
    /// The backward's: `(head_dim, launch)`.
    #[doc(hidden)]
    const BWD: [(usize, BwdLaunch<Self>); 2];
    /// The variants' (`attention_fwd_ext`): `(head_dim, launch)`.
    #[doc(hidden)]
    const EXT: [(usize, ExtLaunch<Self>); 2];
    /// The variants' backward (`attention_bwd_ext`): `(head_dim, launch)`.
    #[doc(hidden)]
    const BWD_EXT: [(usize, BwdExtLaunch<Self>); 1];
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch_wg3(_ops: &Program, _qkv: [&Buffer<Self>; 3], _o: &mut Buffer<Self>, _lse: &mut Buffer<f32>, shape: Shape, _opts: Options, _stages: usize) -> Result<(), Error> {
        Err(Error::Shape { op: "attention", problem: format!("{shape:?}: three consumer warpgroups (consumers = 3) are built for f16 only; use consumers = 2 for bf16") })
    }
}

impl AttnType for f16 {
    const WG3: bool = true;
    const FWD: [((usize, usize, usize), FwdLaunch<Self>); 6] = fwd_table::<Self>();
    const BWD: [(usize, BwdLaunch<Self>); 2] = bwd_table::<Self>();
    const EXT: [(usize, ExtLaunch<Self>); 2] = ext_table::<Self>();
    const BWD_EXT: [(usize, BwdExtLaunch<Self>); 1] = bwd_ext_table::<Self>();
    fn launch_wg3(ops: &Program, [q, k, v]: [&Buffer<f16>; 3], o: &mut Buffer<f16>, lse: &mut Buffer<f32>, shape: Shape, opts: Options, stages: usize) -> Result<(), Error> {
        let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
        let grid = (seq.div_ceil(192) as u32, heads as u32, batch as u32);
        let scale_log2 = opts.scale_for(head_dim) * std::f32::consts::LOG2_E;
        let (group, causal) = ((heads / kv_heads) as u32, opts.causal as u32);
        let qm = TileMap::<QTileOf<f16, 192, 64>, 3>::new_batched(q, batch, seq, heads * head_dim)?;
        let km = TileMap::<KvTile<f16, 128, 64>, 3>::new_batched(k, batch, seq, kv_heads * head_dim)?;
        let vm = TileMap::<KvTile<f16, 128, 64>, 3>::new_batched(v, batch, seq, kv_heads * head_dim)?;
        let om = TileMap::<QTileOf<f16, 192, 64>, 3>::new_batched_mut(o, batch, seq, heads * head_dim)?;
        let args = (&qm, &km, &vm, &om, lse, seq as u32, group, scale_log2, causal);
        match stages {
            2 => ops.kernel::<attention_fwd_wg3<64, 128, 8, 2>>()?.launch(grid, args)?,
            _ => ops.kernel::<attention_fwd_wg3<64, 128, 8, 3>>()?.launch(grid, args)?,
        };
        Ok(())
    }
}

impl AttnType for bf16 {
    const FWD: [((usize, usize, usize), FwdLaunch<Self>); 6] = fwd_table::<Self>();
    const BWD: [(usize, BwdLaunch<Self>); 2] = bwd_table::<Self>();
    const EXT: [(usize, ExtLaunch<Self>); 2] = ext_table::<Self>();
    const BWD_EXT: [(usize, BwdExtLaunch<Self>); 1] = bwd_ext_table::<Self>();
}

/// The parameters of `attention_fwd_ext<E, D, BN, ..>`: the forward's,
/// then the window, the soft-cap and the sinks.
type ExtParams<E, const D: usize, const BN: usize> = (
    TensorMapParam<QTile<E, D>, 3>,
    TensorMapParam<KvTile<E, BN, D>, 3>,
    TensorMapParam<KvTile<E, BN, D>, 3>,
    TensorMapParam<QTile<E, D>, 3>,
    Gmem<f32>,
    u32,
    u32,
    f32,
    u32,
    u32,
    u32,
    f32,
    f32,
    GmemRef<f32>,
    u32,
);

/// The variants' instances on `E`.
const fn ext_table<E: AttnType>() -> [(usize, ExtLaunch<E>); 2]
where
    attention_fwd_ext<E, 64, 128, 8, 3>: HostEntry<Params = ExtParams<E, 64, 128>>,
    attention_fwd_ext<E, 128, 64, 4, 2>: HostEntry<Params = ExtParams<E, 128, 64>>,
{
    [(64, ext::<E, 64, 128, 8, 3>), (128, ext::<E, 128, 64, 4, 2>)]
}

/// A [`Variant`]'s kernel parameters (`attention_fwd_ext`'s and
/// `attention_bwd_ext`'s): the window's bounds ([`NO_LIMIT`] for none,
/// causal folded in as `right = 0`) and the soft-cap's `scale / cap` and
/// `cap log2 e` (0 and 0: none).
struct VariantArgs {
    left: u32,
    right: u32,
    cap_in: f32,
    cap_out: f32,
}

impl VariantArgs {
    fn of(variant: &Variant<'_>, opts: Options, scale: f32) -> Self {
        let (cap_in, cap_out) = match variant.softcap {
            Some(cap) => (scale / cap, cap * std::f32::consts::LOG2_E),
            None => (0.0, 0.0),
        };
        let bound = |w: usize| (w.min(NO_LIMIT as usize)) as u32;
        let (left, right) = match variant.window {
            Some((l, r)) => (bound(l), if opts.causal { 0 } else { bound(r) }),
            None => (NO_LIMIT, if opts.causal { 0 } else { NO_LIMIT }),
        };
        VariantArgs { left, right, cap_in, cap_out }
    }
}

/// The launch of `attention_fwd_ext<E, D, BN, KC, STAGES>`.
#[allow(clippy::too_many_arguments)]
fn ext<E: AttnType, const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    dev: &Device,
    ops: &Program,
    [q, k, v]: [&Buffer<E>; 3],
    o: &mut Buffer<E>,
    lse: &mut Buffer<f32>,
    shape: Shape,
    opts: Options,
    variant: Variant<'_>,
) -> Result<(), Error>
where
    attention_fwd_ext<E, D, BN, KC, STAGES>: HostEntry<Params = ExtParams<E, D, BN>>,
{
    let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
    let grid = (seq.div_ceil(BM) as u32, heads as u32, batch as u32);
    let scale = opts.scale_for(head_dim);
    let VariantArgs { left, right, cap_in, cap_out } = VariantArgs::of(&variant, opts, scale);
    // With a soft-cap the kernel computes `cap log2 e · tanh(s · scale /
    // cap)` itself: the softmax's scale is then 1.
    let scale_log2 = if variant.softcap.is_some() { 1.0 } else { scale * std::f32::consts::LOG2_E };
    let (group, causal) = ((heads / kv_heads) as u32, opts.causal as u32);
    let qm = TileMap::<QTile<E, D>, 3>::new_batched(q, batch, seq, heads * head_dim)?;
    let km = TileMap::<KvTile<E, BN, D>, 3>::new_batched(k, batch, seq, kv_heads * head_dim)?;
    let vm = TileMap::<KvTile<E, BN, D>, 3>::new_batched(v, batch, seq, kv_heads * head_dim)?;
    let om = TileMap::<QTile<E, D>, 3>::new_batched_mut(o, batch, seq, heads * head_dim)?;
    // No sinks: a one-value stand-in the kernel never reads (`n_sinks = 0`).
    let none;
    let (sinks, n_sinks) = match variant.sinks {
        Some(s) => (s, heads as u32),
        None => {
            none = dev.zeros::<f32>(1)?;
            (&none, 0)
        }
    };
    ops.kernel::<attention_fwd_ext<E, D, BN, KC, STAGES>>()?.launch(grid, (&qm, &km, &vm, &om, lse, seq as u32, group, scale_log2, causal, left, right, cap_in, cap_out, sinks, n_sinks))?;
    Ok(())
}

/// The parameters of `attention_fwd<E, D, BN, ..>`.
type FwdParams<E, const D: usize, const BN: usize> = (
    TensorMapParam<QTile<E, D>, 3>,
    TensorMapParam<KvTile<E, BN, D>, 3>,
    TensorMapParam<KvTile<E, BN, D>, 3>,
    TensorMapParam<QTile<E, D>, 3>,
    Gmem<f32>,
    u32,
    u32,
    f32,
    u32,
);

/// The forward's instances on `E` (`attention_fwd`'s `instances(E = [f16,
/// bf16], ..)`; the `where` clause says each is compiled for `E`).
const fn fwd_table<E: AttnType>() -> [((usize, usize, usize), FwdLaunch<E>); 6]
where
    attention_fwd<E, 64, 128, 8, 3>: HostEntry<Params = FwdParams<E, 64, 128>>,
    attention_fwd<E, 64, 128, 8, 4>: HostEntry<Params = FwdParams<E, 64, 128>>,
    attention_fwd<E, 128, 128, 8, 2>: HostEntry<Params = FwdParams<E, 128, 128>>,
    attention_fwd<E, 128, 128, 8, 3>: HostEntry<Params = FwdParams<E, 128, 128>>,
    attention_fwd<E, 256, 80, 5, 2>: HostEntry<Params = FwdParams<E, 256, 80>>,
    attention_fwd<E, 256, 64, 4, 2>: HostEntry<Params = FwdParams<E, 256, 64>>,
{
    [
        ((64, 3, 128), fwd::<E, 64, 128, 8, 3>),
        ((64, 4, 128), fwd::<E, 64, 128, 8, 4>),
        ((128, 2, 128), fwd::<E, 128, 128, 8, 2>),
        ((128, 3, 128), fwd::<E, 128, 128, 8, 3>),
        ((256, 2, 80), fwd::<E, 256, 80, 5, 2>),
        ((256, 2, 64), fwd::<E, 256, 64, 4, 2>),
    ]
}

/// The launch of `attention_fwd<E, D, BN, KC, STAGES>`: the maps over
/// `[batch, seq, heads x head_dim]`, then the kernel.
fn fwd<E: AttnType, const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    ops: &Program,
    [q, k, v]: [&Buffer<E>; 3],
    o: &mut Buffer<E>,
    lse: &mut Buffer<f32>,
    shape: Shape,
    opts: Options,
) -> Result<(), Error>
where
    attention_fwd<E, D, BN, KC, STAGES>: HostEntry<Params = FwdParams<E, D, BN>>,
{
    let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
    let grid = (seq.div_ceil(BM) as u32, heads as u32, batch as u32);
    let scale_log2 = opts.scale_for(head_dim) * std::f32::consts::LOG2_E;
    let (group, causal) = ((heads / kv_heads) as u32, opts.causal as u32);
    let qm = TileMap::<QTile<E, D>, 3>::new_batched(q, batch, seq, heads * head_dim)?;
    let km = TileMap::<KvTile<E, BN, D>, 3>::new_batched(k, batch, seq, kv_heads * head_dim)?;
    let vm = TileMap::<KvTile<E, BN, D>, 3>::new_batched(v, batch, seq, kv_heads * head_dim)?;
    let om = TileMap::<QTile<E, D>, 3>::new_batched_mut(o, batch, seq, heads * head_dim)?;
    ops.kernel::<attention_fwd<E, D, BN, KC, STAGES>>()?.launch(grid, (&qm, &km, &vm, &om, lse, seq as u32, group, scale_log2, causal))?;
    Ok(())
}

/// The parameters of `attention_bwd_pre<E, D>`, `attention_bwd<E, D, 2>`
/// and `attention_bwd_dq<E, D>`.
type PreParams<E> = (GmemRef<E>, GmemRef<E>, GmemRef<f32>, Gmem<f32>, u32, u32, u32, u32);
type BwdParams<E, const D: usize> = (
    TensorMapParam<QStep<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<QStep<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    GmemRef<f32>,
    Gmem<f32>,
    u32,
    u32,
    f32,
    u32,
);
type DqParams<E> = (GmemRef<f32>, Gmem<E>, u32, u32, f32);
/// The parameters of `attention_bwd_ext<E, D, 2>`: `attention_bwd`'s, then
/// the window and the soft-cap.
type BwdExtParams<E, const D: usize> = (
    TensorMapParam<QStep<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<QStep<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    GmemRef<f32>,
    Gmem<f32>,
    u32,
    u32,
    f32,
    u32,
    u32,
    u32,
    f32,
    f32,
);

/// The variants' backward instances on `E`.
const fn bwd_ext_table<E: AttnType>() -> [(usize, BwdExtLaunch<E>); 1]
where
    attention_bwd_pre<E, 64>: HostEntry<Params = PreParams<E>>,
    attention_bwd_ext<E, 64, 2>: HostEntry<Params = BwdExtParams<E, 64>>,
    attention_bwd_dq<E, 64>: HostEntry<Params = DqParams<E>>,
{
    [(64, bwd_ext::<E, 64>)]
}

/// The backward's instances on `E` (`instances(E = [f16, bf16], ..)` of
/// its three kernels).
const fn bwd_table<E: AttnType>() -> [(usize, BwdLaunch<E>); 2]
where
    attention_bwd_pre<E, 64>: HostEntry<Params = PreParams<E>>,
    attention_bwd<E, 64, 2>: HostEntry<Params = BwdParams<E, 64>>,
    attention_bwd_dq<E, 64>: HostEntry<Params = DqParams<E>>,
    attention_bwd_pre<E, 128>: HostEntry<Params = PreParams<E>>,
    attention_bwd<E, 128, 2>: HostEntry<Params = BwdParams<E, 128>>,
    attention_bwd_dq<E, 128>: HostEntry<Params = DqParams<E>>,
{
    [(64, bwd_plain::<E, 64>), (128, bwd_plain::<E, 128>)]
}

/// The TMA maps of the backward's main kernel at head dim `D`.
struct BwdMaps<'a, E: AttnType, const D: usize> {
    q: TileMap<'a, QStep<E, D>, 3>,
    k: TileMap<'a, KHalf<E, D>, 3>,
    v: TileMap<'a, KHalf<E, D>, 3>,
    d_o: TileMap<'a, QStep<E, D>, 3>,
    dk: TileMap<'a, KHalf<E, D>, 3>,
    dv: TileMap<'a, KHalf<E, D>, 3>,
}

/// The backward's three launches at head dim `D`, the main kernel's by
/// `main` (`attention_bwd` or `attention_bwd_ext`: given the grid, the maps,
/// the statistics and dQ's accumulator); returns the statistics `(lse log2
/// e, delta)` (`[batch, heads, seq_pad]` pairs), which the sinks' gradient
/// reads.
#[allow(clippy::too_many_arguments)]
fn bwd<E: AttnType, const D: usize>(
    dev: &Device,
    ops: &Program,
    [q, k, v, o, d_o]: [&Buffer<E>; 5],
    lse: &Buffer<f32>,
    [dq, dk, dv]: [&mut Buffer<E>; 3],
    shape: Shape,
    opts: Options,
    main: impl FnOnce((u32, u32, u32), &BwdMaps<'_, E, D>, &Buffer<f32>, &mut Buffer<f32>) -> Result<(), Error>,
) -> Result<Buffer<f32>, Error>
where
    attention_bwd_pre<E, D>: HostEntry<Params = PreParams<E>>,
    attention_bwd_dq<E, D>: HostEntry<Params = DqParams<E>>,
{
    let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
    let scale = opts.scale_for(head_dim);
    // Scratch: the per-query statistics `(lse log2 e, delta)` over
    // `[batch, heads, seq_pad]`, and dQ's f32 accumulator, which the main
    // kernel adds into (zeroed; its chunks' layout is
    // `kernel_ops_kernels::attention_bwd::dq_acc_chunk`).
    let seq_pad = seq.div_ceil(BWD_BM) * BWD_BM;
    let rows = batch * heads * seq_pad;
    let mut stats = dev.zeros::<f32>(2 * rows)?;
    let acc_len = batch * heads * seq_pad * head_dim;
    let mut dq_acc = dev.zeros::<f32>(acc_len)?;
    // The SIMT kernels stride over their rows: a grid the emulator runs
    // (one coroutine and stack per emulated thread) there.
    let cap = |ctas: usize| (if dev.is_gpu() { ctas } else { ctas.min(8) }).max(1) as u32;
    ops.kernel::<attention_bwd_pre<E, D>>()?.launch((cap(rows.div_ceil(4)), 1, 1), (o, d_o, lse, &mut stats, batch as u32, seq as u32, heads as u32, seq_pad as u32))?;
    let maps = BwdMaps {
        q: TileMap::new_batched(q, batch, seq, heads * head_dim)?,
        d_o: TileMap::new_batched(d_o, batch, seq, heads * head_dim)?,
        k: TileMap::new_batched(k, batch, seq, kv_heads * head_dim)?,
        v: TileMap::new_batched(v, batch, seq, kv_heads * head_dim)?,
        dk: TileMap::new_batched_mut(dk, batch, seq, kv_heads * head_dim)?,
        dv: TileMap::new_batched_mut(dv, batch, seq, kv_heads * head_dim)?,
    };
    let grid = (seq.div_ceil(BWD_BN) as u32, kv_heads as u32, batch as u32);
    main(grid, &maps, &stats, &mut dq_acc)?;
    ops.kernel::<attention_bwd_dq<E, D>>()?.launch((cap((acc_len / 4).div_ceil(128)), 1, 1), (&dq_acc, dq, seq as u32, heads as u32, scale))?;
    Ok(stats)
}

/// The plain backward at head dim `D` ([`bwd`] with `attention_bwd`).
#[allow(clippy::too_many_arguments)]
fn bwd_plain<E: AttnType, const D: usize>(dev: &Device, ops: &Program, inputs: [&Buffer<E>; 5], lse: &Buffer<f32>, grads: [&mut Buffer<E>; 3], shape: Shape, opts: Options) -> Result<(), Error>
where
    attention_bwd_pre<E, D>: HostEntry<Params = PreParams<E>>,
    attention_bwd<E, D, 2>: HostEntry<Params = BwdParams<E, D>>,
    attention_bwd_dq<E, D>: HostEntry<Params = DqParams<E>>,
{
    let scale_log2 = opts.scale_for(shape.head_dim) * std::f32::consts::LOG2_E;
    let (seq, group, causal) = (shape.seq as u32, (shape.heads / shape.kv_heads) as u32, opts.causal as u32);
    bwd::<E, D>(dev, ops, inputs, lse, grads, shape, opts, |grid, m, stats, acc| {
        // Two Q/dO slots: three measured no faster (RESULTS.md).
        ops.kernel::<attention_bwd<E, D, 2>>()?.launch(grid, (&m.q, &m.k, &m.v, &m.d_o, &m.dk, &m.dv, stats, acc, seq, group, scale_log2, causal))?;
        Ok(())
    })?;
    Ok(())
}

/// The variants' backward at head dim `D` ([`bwd`] with
/// `attention_bwd_ext`, then `attention_bwd_sinks` when there are sinks).
#[allow(clippy::too_many_arguments)]
fn bwd_ext<E: AttnType, const D: usize>(
    dev: &Device,
    ops: &Program,
    inputs: [&Buffer<E>; 5],
    lse: &Buffer<f32>,
    grads: [&mut Buffer<E>; 3],
    d_sinks: Option<&mut Buffer<f32>>,
    shape: Shape,
    opts: Options,
    variant: Variant<'_>,
) -> Result<(), Error>
where
    attention_bwd_pre<E, D>: HostEntry<Params = PreParams<E>>,
    attention_bwd_ext<E, D, 2>: HostEntry<Params = BwdExtParams<E, D>>,
    attention_bwd_dq<E, D>: HostEntry<Params = DqParams<E>>,
{
    let scale = opts.scale_for(shape.head_dim);
    let scale_log2 = scale * std::f32::consts::LOG2_E;
    let (seq, group, causal) = (shape.seq as u32, (shape.heads / shape.kv_heads) as u32, opts.causal as u32);
    let VariantArgs { left, right, cap_in, cap_out } = VariantArgs::of(&variant, opts, scale);
    let stats = bwd::<E, D>(dev, ops, inputs, lse, grads, shape, opts, |grid, m, stats, acc| {
        let args = (&m.q, &m.k, &m.v, &m.d_o, &m.dk, &m.dv, stats, acc, seq, group, scale_log2, causal, left, right, cap_in, cap_out);
        ops.kernel::<attention_bwd_ext<E, D, 2>>()?.launch(grid, args)?;
        Ok(())
    })?;
    if let (Some(sinks), Some(d_sinks)) = (variant.sinks, d_sinks) {
        let seq_pad = shape.seq.div_ceil(BWD_BM) * BWD_BM;
        ops.kernel::<attention_bwd_sinks>()?.launch((shape.heads as u32, 1, 1), (&stats, sinks, d_sinks, shape.batch as u32, seq_pad as u32))?;
    }
    Ok(())
}

/// The CPU reference over f32 copies of the inputs (f64 arithmetic):
/// returns `(o, lse)` in the module's layouts.
///
/// # Panics
/// When a slice does not hold its layout's elements.
pub fn reference(q: &[f32], k: &[f32], v: &[f32], shape: Shape, opts: Options) -> (Vec<f32>, Vec<f32>) {
    let Shape { batch, seq, heads, head_dim: d, .. } = shape;
    let mut o = vec![0f32; shape.q_len()];
    let mut lse = vec![0f32; shape.lse_len()];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq {
                let (row, l) = reference_row(q, k, v, shape, opts, (b, h, i));
                let at = ((b * seq + i) * heads + h) * d;
                o[at..at + d].copy_from_slice(&row);
                lse[(b * heads + h) * seq + i] = l;
            }
        }
    }
    (o, lse)
}

/// One row of [`reference()`]: O's `head_dim` values and the log-sum-exp of
/// query `i` of head `h` of batch `b` (benchmarks check rows spread over a
/// problem too large for the whole reference).
///
/// # Panics
/// When a slice does not hold its layout's elements, or `(b, h, i)` is
/// outside the shape.
pub fn reference_row(q: &[f32], k: &[f32], v: &[f32], shape: Shape, opts: Options, (b, h, i): (usize, usize, usize)) -> (Vec<f32>, f32) {
    let Shape { batch, seq, heads, kv_heads, head_dim: d } = shape;
    assert!(q.len() == shape.q_len() && k.len() == shape.kv_len() && v.len() == shape.kv_len(), "attention::reference: slices do not match {shape:?}");
    assert!(b < batch && h < heads && i < seq, "attention::reference_row: ({b}, {h}, {i}) outside {shape:?}");
    // One sequence of `seq` queries and keys at offset `b seq` (see
    // `reference_backward`).
    let cu = [(b * seq) as u32, ((b + 1) * seq) as u32];
    let packed = varlen::VarlenShape { batch: 1, total_q: batch * seq, total_k: batch * seq, heads, kv_heads, head_dim: d, max_seqlen_q: seq, max_seqlen_k: seq };
    varlen::reference_varlen_row(q, k, v, &cu, &cu, packed, opts, (0, h, i))
}

pub mod varlen;
pub use varlen::{attention_varlen, attention_varlen_backward, VarlenErrors, VarlenShape};
