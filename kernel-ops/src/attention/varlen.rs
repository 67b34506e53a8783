//! Attention over packed variable-length sequences (serving prefill):
//! [`attention_varlen`] and [`attention_varlen_backward`], the dense
//! kernels' schedule on a packed layout (`kernel_ops_kernels::attention::
//! attention_fwd_varlen`, `kernel_ops_kernels::attention_bwd::attention_bwd_varlen`).
//!
//! Layout: `q` and `o` hold `[total_q, heads, head_dim]`, `k` and `v`
//! `[total_k, kv_heads, head_dim]` (row-major, `head_dim` contiguous), `lse`
//! `[heads, total_q]` f32 (natural log). Sequence `b` of `batch` is
//! queries `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]` and keys
//! `cu_seqlens_k[b] .. cu_seqlens_k[b + 1]`; both offset arrays (`batch + 1`
//! `u32`; [`CuSeqlens`] is the hook for `i32`, not implemented yet) stay on the device: nothing is
//! read back, so a call can be captured in a CUDA graph; the launch
//! depends only on `batch`, `max_seqlen_q`, `max_seqlen_k` and the heads.
//! With the causal mask, query `i` of a sequence with `lq` queries and
//! `lk` keys sees keys `j <= i + lk - lq` (aligned bottom-right, as
//! FlashAttention's varlen does); a query that sees no key gets O = 0 and
//! lse = -inf.
//!
//! Offsets that are only on the device are checked there: a decreasing
//! pair, an offset past the total, or a length past `max_seqlen_*` is
//! clamped (nothing outside the outputs is ever written) and recorded in
//! a [`VarlenErrors`], which [`VarlenErrors::check`] reads on request.
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::f16;
//! use kernel_host::Device;
//! use kernel_ops::attention::Options;
//! use kernel_ops::attention::varlen::{attention_varlen, VarlenErrors, VarlenShape};
//! let dev = Device::emulator();
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! // Two sequences of 3 and 2 tokens.
//! let shape = VarlenShape { batch: 2, total_q: 5, total_k: 5, heads: 1, kv_heads: 1, head_dim: 64, max_seqlen_q: 3, max_seqlen_k: 3 };
//! let cu = dev.upload(&[0u32, 3, 5])?;
//! let x = dev.upload(&vec![f16::from_f32(0.5); shape.q_len()])?;
//! let mut o = dev.zeros::<f16>(shape.q_len())?;
//! let mut lse = dev.zeros::<f32>(shape.lse_len())?;
//! let mut errors = VarlenErrors::new(&dev)?;
//! attention_varlen(&dev, &ops, &x, &x, &x, &cu, &cu, &mut o, &mut lse, shape, Options::default(), &mut errors)?;
//! errors.check(&dev)?;
//! assert!(dev.download(&o)?.iter().all(|v| (v.to_f32() - 0.5).abs() < 1e-3));
//! # Ok(()) }
//! ```
use super::{AttnType, Options, BWD_HEAD_DIMS, HEAD_DIMS};
use crate::{at, Error};
use kernel_device::gmem::GmemRef;
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use kernel_device::{bf16, f16, Gmem};
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::attention_bwd::{attention_bwd_dq_varlen, attention_bwd_pre_varlen, attention_bwd_varlen, varlen_pad_rows, KHalf, QStep, BWD_BM, BWD_BN};
use kernel_ops_kernels::attention::{attention_fwd_varlen, pair_u64, varlen_offsets, KvTile, QTile, BM, ERR_K_LEN, ERR_K_OFFSETS, ERR_Q_LEN, ERR_Q_OFFSETS, VARLEN_ERROR_WORDS};

/// The sizes of one packed problem (the host-known ones: the offsets
/// themselves stay on the device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarlenShape {
    /// Sequences (`cu_seqlens_*` hold `batch + 1` offsets).
    pub batch: usize,
    /// Rows of `q` and `o` (the last query offset, at most).
    pub total_q: usize,
    /// Rows of `k` and `v`.
    pub total_k: usize,
    pub heads: usize,
    /// A divisor of `heads` (GQA; 1 is MQA).
    pub kv_heads: usize,
    /// 64, 128 or 256 (forward); 64 or 128 (backward).
    pub head_dim: usize,
    /// The longest sequence's queries (the grid covers this many), at
    /// least 1 and at most `total_q`.
    pub max_seqlen_q: usize,
    /// The longest sequence's keys, at least 1 and at most `total_k`.
    pub max_seqlen_k: usize,
}

impl VarlenShape {
    /// Elements of `q` and `o` (and `d_o`, `dq`).
    pub fn q_len(&self) -> usize {
        self.total_q * self.heads * self.head_dim
    }
    /// Elements of `k` and of `v` (and `dk`, `dv`).
    pub fn kv_len(&self) -> usize {
        self.total_k * self.kv_heads * self.head_dim
    }
    /// Elements of `lse`: `heads x total_q`.
    pub fn lse_len(&self) -> usize {
        self.heads * self.total_q
    }
    /// Forward FLOPs of the sequences `cu_q`/`cu_k` describe (host copies):
    /// `4 H D Σ lq lk`, with the causal mask only the visible pairs.
    pub fn flops(&self, cu_q: &[u32], cu_k: &[u32], causal: bool) -> f64 {
        let mut pairs = 0f64;
        for b in 0..self.batch {
            let (lq, lk) = ((cu_q[b + 1] - cu_q[b]) as usize, (cu_k[b + 1] - cu_k[b]) as usize);
            pairs += (0..lq).map(|i| visible_keys(i, lq, lk, causal)).sum::<usize>() as f64;
        }
        4.0 * (self.heads * self.head_dim) as f64 * pairs
    }
}

/// The keys query `i` of a sequence of `lq` queries and `lk` keys sees:
/// all, or with the mask aligned bottom-right `j <= i + lk - lq`.
pub fn visible_keys(i: usize, lq: usize, lk: usize, causal: bool) -> usize {
    if causal {
        (i + lk + 1).saturating_sub(lq).min(lk)
    } else {
        lk
    }
}

/// The element type of `cu_seqlens_*`: `u32` today. `i32` (torch's and
/// FlashAttention's) is meant to join it (the kernels would read its words
/// as `u32`, a negative offset then reading as one past the total: clamped
/// and reported); that needs a `&Buffer<i32>` argument for a
/// `GmemRef<u32>` parameter in `kernel-host`, not written yet. Sealed.
pub trait CuSeqlens: sealed::Sealed + Copy + 'static {
    #[doc(hidden)]
    fn as_u32(buf: &Buffer<Self>) -> &Buffer<u32>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
}

impl CuSeqlens for u32 {
    fn as_u32(buf: &Buffer<u32>) -> &Buffer<u32> {
        buf
    }
}

/// The device-side error words of the varlen kernels (a buffer of
/// `VARLEN_ERROR_WORDS` u32 that the kernels only raise): zero after
/// [`VarlenErrors::new`] and [`VarlenErrors::clear`]; each call of
/// [`attention_varlen`] / [`attention_varlen_backward`] given it records
/// there which sequence's offsets it had to clamp. Reading it
/// ([`VarlenErrors::check`]) waits for the queued work; the calls never do.
pub struct VarlenErrors {
    words: Buffer<u32>,
    /// The offsets the kernels read (`varlen_offsets`'s output: `cu_q`
    /// and `cu_k` made non-decreasing and clamped), `batch + 1` each;
    /// made at the first call of a batch size.
    clean: Option<(Buffer<u32>, Buffer<u32>)>,
}

impl VarlenErrors {
    /// Zeroed error words on `dev`.
    pub fn new(dev: &Device) -> Result<Self, Error> {
        Ok(VarlenErrors { words: dev.zeros(VARLEN_ERROR_WORDS)?, clean: None })
    }

    /// Queues `varlen_offsets` (one launch of 2 x 32 threads): the
    /// offsets made safe for the kernels (see its docs: no two sequences
    /// can share a row however broken `cu_q`/`cu_k` are; valid ones are
    /// copied unchanged), their broken rules recorded. Returns the clean
    /// offsets and the error words.
    fn prepare(&mut self, dev: &Device, ops: &Program, [cu_q, cu_k]: [&Buffer<u32>; 2], shape: VarlenShape) -> Result<([&Buffer<u32>; 2], &mut Buffer<u32>), Error> {
        let n = shape.batch + 1;
        if self.clean.as_ref().is_none_or(|(q, _)| q.len() != n) {
            self.clean = Some((dev.zeros(n)?, dev.zeros(n)?));
        }
        let (clean_q, clean_k) = self.clean.as_mut().expect("made above");
        let totals = pair_u64(shape.total_q as u32, shape.total_k as u32);
        ops.kernel::<varlen_offsets>()?.launch(2, (cu_q, cu_k, &mut *clean_q, &mut *clean_k, &mut self.words, shape.batch as u32, totals))?;
        Ok(([clean_q, clean_k], &mut self.words))
    }

    /// Zeroes the words again (asynchronous on a GPU).
    pub fn clear(&mut self, dev: &Device) -> Result<(), Error> {
        dev.write(&mut self.words, &[0; VARLEN_ERROR_WORDS])?;
        Ok(())
    }

    /// The raw words (`1 + b` of the last sequence `b` that broke each
    /// rule, 0 for none; indices `kernel_ops_kernels::attention::ERR_*`).
    pub fn words(&self, dev: &Device) -> Result<Vec<u32>, Error> {
        Ok(dev.download(&self.words)?)
    }

    /// `Ok` when no kernel given these words had to clamp an offset;
    /// otherwise an error naming the rule, the sequence and the fix. Waits
    /// for the work queued before it.
    pub fn check(&self, dev: &Device) -> Result<(), Error> {
        let w = self.words(dev)?;
        let mut problems = Vec::new();
        for (word, name, total) in [(ERR_Q_OFFSETS, "cu_seqlens_q", "total_q"), (ERR_K_OFFSETS, "cu_seqlens_k", "total_k")] {
            if w[word] > 0 {
                let b = w[word] - 1;
                problems.push(format!(
                    "{name}[{b}..={}] decreases or passes {total} (sequence {b}, the last such): offsets must be non-decreasing and at most {total}; the kernels clamped them, so that sequence's outputs are not meaningful",
                    b + 1
                ));
            }
        }
        for (word, name, max) in [(ERR_Q_LEN, "queries", "max_seqlen_q"), (ERR_K_LEN, "keys", "max_seqlen_k")] {
            if w[word] > 0 {
                let b = w[word] - 1;
                problems.push(format!("sequence {b} (the last such) has more {name} than {max}: pass the longest sequence's length as {max}; rows past it were not computed"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Shape { op: "attention_varlen (device check)", problem: problems.join("; ") })
        }
    }
}

/// Checks a packed problem before anything is launched (`op` names the
/// entry point in the errors): no size 0; `head_dim` in `head_dims`;
/// `kv_heads` divides `heads`; the maxima within the totals; the batch and
/// heads within the grid; each buffer holding its layout's elements.
pub fn check_varlen(op: &'static str, shape: VarlenShape, opts: Options, head_dims: &[usize], lens: &[(&str, usize, usize, &str)]) -> Result<(), Error> {
    let err = |problem: String| Error::Shape { op, problem };
    let VarlenShape { batch, total_q, total_k, heads, kv_heads, head_dim, max_seqlen_q, max_seqlen_k } = shape;
    for (name, v) in [("batch", batch), ("heads", heads), ("kv_heads", kv_heads), ("head_dim", head_dim)] {
        if v == 0 {
            return Err(err(format!("{name} = 0: every size must be at least 1 ({shape:?})")));
        }
    }
    if !head_dims.contains(&head_dim) {
        return Err(err(format!("head_dim = {head_dim}: this pass is built for head_dim in {head_dims:?}; pad the heads with zeros to the next one")));
    }
    if heads % kv_heads != 0 {
        return Err(err(format!("heads = {heads}, kv_heads = {kv_heads}: kv_heads must divide heads (each K/V head serves heads / kv_heads Q heads)")));
    }
    for (name, max, total, total_name) in [("max_seqlen_q", max_seqlen_q, total_q, "total_q"), ("max_seqlen_k", max_seqlen_k, total_k, "total_k")] {
        if max == 0 || max > total {
            return Err(err(format!(
                "{name} = {max}, {total_name} = {total}: {name} must be at least 1 and at most {total_name} (the longest sequence, which the grid covers, lies inside the buffers)"
            )));
        }
    }
    for (name, v, lim) in [("batch", batch, 65535), ("heads", heads, 65535), ("total_q", total_q, i32::MAX as usize), ("total_k", total_k, i32::MAX as usize)] {
        if v > lim {
            return Err(err(format!("{name} = {v}: at most {lim} (a grid dimension or a TMA coordinate)")));
        }
    }
    let scale = opts.scale_for(head_dim);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(err(format!("scale = {scale}: the softmax scale must be finite and positive")));
    }
    for &(name, got, want, what) in lens {
        if got != want {
            return Err(err(format!("`{name}` holds {got} elements; {what} = {want} expected for {shape:?}")));
        }
    }
    Ok(())
}

/// `o = softmax(scale q kᵀ) v` and `lse` per packed sequence (see the
/// module), on `dev` with `ops` this crate's kernels loaded there.
/// Asynchronous on a GPU, like a kernel launch, and capturable: the
/// offsets are not read on the host. Device-only offset errors go to
/// `errors` ([`VarlenErrors::check`]).
///
/// Errors (nothing launched): [`check_varlen`]'s rules with head dims
/// [`HEAD_DIMS`], `cu_seqlens_*` not holding `batch + 1` offsets.
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen<T: VarlenType, I: CuSeqlens>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    cu_seqlens_q: &Buffer<I>,
    cu_seqlens_k: &Buffer<I>,
    o: &mut Buffer<T>,
    lse: &mut Buffer<f32>,
    shape: VarlenShape,
    opts: Options,
    errors: &mut VarlenErrors,
) -> Result<(), Error> {
    let (ql, kl, cu) = (shape.q_len(), shape.kv_len(), shape.batch + 1);
    let (qd, kd) = ("total_q x heads x head_dim", "total_k x kv_heads x head_dim");
    check_varlen(
        "attention_varlen",
        shape,
        opts,
        &HEAD_DIMS,
        &[
            ("q", q.len(), ql, qd),
            ("k", k.len(), kl, kd),
            ("v", v.len(), kl, kd),
            ("o", o.len(), ql, qd),
            ("lse", lse.len(), shape.lse_len(), "heads x total_q"),
            ("cu_seqlens_q", cu_seqlens_q.len(), cu, "batch + 1"),
            ("cu_seqlens_k", cu_seqlens_k.len(), cu, "batch + 1"),
        ],
    )?;
    let (cq, ck) = (I::as_u32(cu_seqlens_q), I::as_u32(cu_seqlens_k));
    crate::check_aligned("attention_varlen", &[at("q", q), at("k", k), at("v", v), at("o", o), at("lse", lse), at("cu_seqlens_q", cq), at("cu_seqlens_k", ck)])?;
    // `check_varlen` admitted only built head dims.
    let (_, launch) = T::VARLEN_FWD.into_iter().find(|(d, _)| *d == shape.head_dim).expect("a built head dim");
    let (clean, words) = errors.prepare(dev, ops, [cq, ck], shape)?;
    launch(ops, [q, k, v], o, lse, clean, words, shape, opts)
}

/// The parameters of `attention_fwd_varlen<E, D, BN, ..>`.
type FwdParams<E, const D: usize, const BN: usize> = (
    TensorMapParam<QTile<E, D>, 3>,
    TensorMapParam<KvTile<E, BN, D>, 3>,
    TensorMapParam<KvTile<E, BN, D>, 3>,
    Gmem<E>,
    Gmem<f32>,
    GmemRef<u32>,
    GmemRef<u32>,
    Gmem<u32>,
    u64,
    u64,
    u32,
    f32,
    u32,
);

/// The launch of `attention_fwd_varlen<E, D, BN, KC, STAGES>`: maps of
/// batch 1 over the packed rows, then the kernel.
#[allow(clippy::too_many_arguments)]
fn fwd<E: AttnType, const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    ops: &Program,
    [q, k, v]: [&Buffer<E>; 3],
    o: &mut Buffer<E>,
    lse: &mut Buffer<f32>,
    [cu_q, cu_k]: [&Buffer<u32>; 2],
    errors: &mut Buffer<u32>,
    shape: VarlenShape,
    opts: Options,
) -> Result<(), Error>
where
    attention_fwd_varlen<E, D, BN, KC, STAGES>: HostEntry<Params = FwdParams<E, D, BN>>,
{
    let VarlenShape { batch, total_q, total_k, heads, kv_heads, head_dim, max_seqlen_q, max_seqlen_k } = shape;
    let grid = (max_seqlen_q.div_ceil(BM) as u32, heads as u32, batch as u32);
    let scale_log2 = opts.scale_for(head_dim) * std::f32::consts::LOG2_E;
    let (group, causal) = ((heads / kv_heads) as u32, opts.causal as u32);
    let qm = TileMap::<QTile<E, D>, 3>::new_batched(q, 1, total_q, heads * head_dim)?;
    let km = TileMap::<KvTile<E, BN, D>, 3>::new_batched(k, 1, total_k, kv_heads * head_dim)?;
    let vm = TileMap::<KvTile<E, BN, D>, 3>::new_batched(v, 1, total_k, kv_heads * head_dim)?;
    let totals = pair_u64(total_q as u32, total_k as u32);
    let maxes = pair_u64(max_seqlen_q as u32, max_seqlen_k as u32);
    ops.kernel::<attention_fwd_varlen<E, D, BN, KC, STAGES>>()?.launch(grid, (&qm, &km, &vm, o, lse, cu_q, cu_k, errors, totals, maxes, group, scale_log2, causal))?;
    Ok(())
}

/// One query row of the CPU reference (f64 arithmetic over f32 copies):
/// O's `head_dim` values and the log-sum-exp of query `i` of head `h` of
/// sequence `b` (`cu_q`, `cu_k`: host copies of the offsets, valid).
/// A query that sees no key: zeros and `-inf`.
#[allow(clippy::too_many_arguments)]
pub fn reference_varlen_row(q: &[f32], k: &[f32], v: &[f32], cu_q: &[u32], cu_k: &[u32], shape: VarlenShape, opts: Options, (b, h, i): (usize, usize, usize)) -> (Vec<f32>, f32) {
    let VarlenShape { heads, kv_heads, head_dim: d, .. } = shape;
    let (q0, lq, k0, lk) = (cu_q[b] as usize, (cu_q[b + 1] - cu_q[b]) as usize, cu_k[b] as usize, (cu_k[b + 1] - cu_k[b]) as usize);
    assert!(i < lq, "attention::varlen::reference_varlen_row: query {i} outside sequence {b} of {lq}");
    let scale = f64::from(opts.scale_for(d));
    let kh = h / (heads / kv_heads);
    let qrow = &q[((q0 + i) * heads + h) * d..][..d];
    let krow = |j: usize| ((k0 + j) * kv_heads + kh) * d;
    let keys = visible_keys(i, lq, lk, opts.causal);
    if keys == 0 {
        return (vec![0.0; d], f32::NEG_INFINITY);
    }
    let s: Vec<f64> = (0..keys).map(|j| qrow.iter().zip(&k[krow(j)..krow(j) + d]).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>() * scale).collect();
    let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let p: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
    let sum: f64 = p.iter().sum();
    let mut o = vec![0f64; d];
    for (j, pj) in p.iter().enumerate() {
        for (ox, vx) in o.iter_mut().zip(&v[krow(j)..krow(j) + d]) {
            *ox += pj * f64::from(*vx);
        }
    }
    (o.iter().map(|x| (x / sum) as f32).collect(), (mx + sum.ln()) as f32)
}

/// The CPU reference of [`attention_varlen`]: `(o, lse)` in the module's
/// layouts (rows outside every sequence are left 0; the kernels never
/// write them).
pub fn reference_varlen(q: &[f32], k: &[f32], v: &[f32], cu_q: &[u32], cu_k: &[u32], shape: VarlenShape, opts: Options) -> (Vec<f32>, Vec<f32>) {
    let (d, heads) = (shape.head_dim, shape.heads);
    let mut o = vec![0f32; shape.q_len()];
    let mut lse = vec![0f32; shape.lse_len()];
    for b in 0..shape.batch {
        for i in 0..(cu_q[b + 1] - cu_q[b]) as usize {
            let row = cu_q[b] as usize + i;
            for h in 0..heads {
                let (r, l) = reference_varlen_row(q, k, v, cu_q, cu_k, shape, opts, (b, h, i));
                o[(row * heads + h) * d..][..d].copy_from_slice(&r);
                lse[h * shape.total_q + row] = l;
            }
        }
    }
    (o, lse)
}

/// The forward launch of one head dim, after the checks.
type FwdLaunch<E> = fn(&Program, [&Buffer<E>; 3], &mut Buffer<E>, &mut Buffer<f32>, [&Buffer<u32>; 2], &mut Buffer<u32>, VarlenShape, Options) -> Result<(), Error>;

/// The element types of the varlen passes (`f16`, `bf16`): their built
/// instances, one per head dim. Sealed (through [`AttnType`]).
pub trait VarlenType: AttnType {
    #[doc(hidden)]
    const VARLEN_FWD: [(usize, FwdLaunch<Self>); 3];
    #[doc(hidden)]
    const VARLEN_BWD: [(usize, BwdLaunch<Self>); 2];
}

impl VarlenType for f16 {
    const VARLEN_FWD: [(usize, FwdLaunch<Self>); 3] = fwd_table::<Self>();
    const VARLEN_BWD: [(usize, BwdLaunch<Self>); 2] = bwd_table::<Self>();
}

impl VarlenType for bf16 {
    const VARLEN_FWD: [(usize, FwdLaunch<Self>); 3] = fwd_table::<Self>();
    const VARLEN_BWD: [(usize, BwdLaunch<Self>); 2] = bwd_table::<Self>();
}

/// The backward's launches at one head dim, after the checks.
type BwdLaunch<E> = fn(&Device, &Program, [&Buffer<E>; 5], &Buffer<f32>, [&Buffer<u32>; 2], &mut Buffer<u32>, [&mut Buffer<E>; 3], VarlenShape, Options) -> Result<(), Error>;

type PreParams<E> = (GmemRef<E>, GmemRef<E>, GmemRef<f32>, Gmem<f32>, GmemRef<u32>, GmemRef<u32>, Gmem<u32>, u64, u64, u32);
type BwdParams<E, const D: usize> = (
    TensorMapParam<QStep<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<KHalf<E, D>, 3>,
    TensorMapParam<QStep<E, D>, 3>,
    Gmem<E>,
    Gmem<E>,
    GmemRef<f32>,
    Gmem<f32>,
    GmemRef<u32>,
    GmemRef<u32>,
    u64,
    u64,
    u32,
    f32,
    u32,
);
type DqParams<E> = (GmemRef<f32>, Gmem<E>, GmemRef<u32>, u64, u64, u32, f32);

/// The backward's instances on `E` (the varlen kernels' `instances(E =
/// [f16, bf16], ..)`).
const fn bwd_table<E: AttnType>() -> [(usize, BwdLaunch<E>); 2]
where
    attention_bwd_pre_varlen<E, 64>: HostEntry<Params = PreParams<E>>,
    attention_bwd_varlen<E, 64, 2>: HostEntry<Params = BwdParams<E, 64>>,
    attention_bwd_dq_varlen<E, 64>: HostEntry<Params = DqParams<E>>,
    attention_bwd_pre_varlen<E, 128>: HostEntry<Params = PreParams<E>>,
    attention_bwd_varlen<E, 128, 2>: HostEntry<Params = BwdParams<E, 128>>,
    attention_bwd_dq_varlen<E, 128>: HostEntry<Params = DqParams<E>>,
{
    [(64, bwd::<E, 64>), (128, bwd::<E, 128>)]
}

/// The backward's three launches at head dim `D`: the statistics, the
/// main kernel (grid `(ceil(max_seqlen_k / 128), kv_heads, batch)`), dQ.
#[allow(clippy::too_many_arguments)]
fn bwd<E: AttnType, const D: usize>(
    dev: &Device,
    ops: &Program,
    [q, k, v, o, d_o]: [&Buffer<E>; 5],
    lse: &Buffer<f32>,
    [cu_q, cu_k]: [&Buffer<u32>; 2],
    errors: &mut Buffer<u32>,
    [dq, dk, dv]: [&mut Buffer<E>; 3],
    shape: VarlenShape,
    opts: Options,
) -> Result<(), Error>
where
    attention_bwd_pre_varlen<E, D>: HostEntry<Params = PreParams<E>>,
    attention_bwd_varlen<E, D, 2>: HostEntry<Params = BwdParams<E, D>>,
    attention_bwd_dq_varlen<E, D>: HostEntry<Params = DqParams<E>>,
{
    let VarlenShape { batch, total_q, total_k, heads, kv_heads, head_dim, max_seqlen_q, max_seqlen_k } = shape;
    let scale = opts.scale_for(head_dim);
    let (group, causal) = ((heads / kv_heads) as u32, opts.causal as u32);
    let totals = pair_u64(total_q as u32, total_k as u32);
    let maxes = pair_u64(max_seqlen_q as u32, max_seqlen_k as u32);
    // Scratch in the padded packed layout (`[heads, pad_rows]` rows, each
    // sequence's from a 64-aligned start): the statistics and dQ's f32
    // accumulator (zeroed: the main kernel adds into it).
    let pad_rows = varlen_pad_rows(total_q, batch);
    let mut stats = dev.zeros::<f32>(2 * heads * pad_rows)?;
    let mut dq_acc = dev.zeros::<f32>(heads * pad_rows * head_dim)?;
    // The SIMT kernels stride over a sequence's rows: sized for the longest
    // on a GPU, one CTA per sequence on the emulator.
    let max_pad = max_seqlen_q.div_ceil(BWD_BM) * BWD_BM;
    let cap = |ctas: usize| (if dev.is_gpu() { ctas } else { 1 }).max(1) as u32;
    let pre_grid = (cap((heads * max_pad).div_ceil(4)), 1, batch as u32);
    ops.kernel::<attention_bwd_pre_varlen<E, D>>()?.launch(pre_grid, (o, d_o, lse, &mut stats, cu_q, cu_k, errors, totals, maxes, heads as u32))?;
    let qm = TileMap::<QStep<E, D>, 3>::new_batched(q, 1, total_q, heads * head_dim)?;
    let dom = TileMap::<QStep<E, D>, 3>::new_batched(d_o, 1, total_q, heads * head_dim)?;
    let km = TileMap::<KHalf<E, D>, 3>::new_batched(k, 1, total_k, kv_heads * head_dim)?;
    let vm = TileMap::<KHalf<E, D>, 3>::new_batched(v, 1, total_k, kv_heads * head_dim)?;
    let grid = (max_seqlen_k.div_ceil(BWD_BN) as u32, kv_heads as u32, batch as u32);
    let args = (&qm, &km, &vm, &dom, dk, dv, &stats, &mut dq_acc, cu_q, cu_k, totals, maxes, group, scale * std::f32::consts::LOG2_E, causal);
    ops.kernel::<attention_bwd_varlen<E, D, 2>>()?.launch(grid, args)?;
    let dq_grid = (cap((heads * max_pad * head_dim / 4).div_ceil(128)), 1, batch as u32);
    ops.kernel::<attention_bwd_dq_varlen<E, D>>()?.launch(dq_grid, (&dq_acc, dq, cu_q, totals, maxes, heads as u32, scale))?;
    Ok(())
}

/// The backward pass over packed sequences: from `q`, `k`, `v`, the
/// forward's `o` and `lse` (as [`attention_varlen`] wrote them) and `d_o`,
/// writes `dq`, `dk`, `dv` (the layouts of `q`, `k`, `v`; with GQA, `dk`
/// and `dv` sum over each K/V head's Q heads; keys of a sequence without
/// queries get 0). `opts` must be the forward's. Head dims
/// [`BWD_HEAD_DIMS`]. Asynchronous and capturable like the forward;
/// allocates its f32 scratch (statistics and dQ's accumulator, `heads x
/// (total_q + 64 batch)` rows) for the call. Device-only offset errors go
/// to `errors`. Rows of `dq` outside every sequence are not written.
///
/// Errors (nothing launched): [`check_varlen`]'s rules with head dims
/// [`BWD_HEAD_DIMS`], every buffer's length, `cu_seqlens_*` not holding
/// `batch + 1` offsets.
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen_backward<T: VarlenType, I: CuSeqlens>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    o: &Buffer<T>,
    lse: &Buffer<f32>,
    d_o: &Buffer<T>,
    cu_seqlens_q: &Buffer<I>,
    cu_seqlens_k: &Buffer<I>,
    dq: &mut Buffer<T>,
    dk: &mut Buffer<T>,
    dv: &mut Buffer<T>,
    shape: VarlenShape,
    opts: Options,
    errors: &mut VarlenErrors,
) -> Result<(), Error> {
    let (ql, kl, cu) = (shape.q_len(), shape.kv_len(), shape.batch + 1);
    let (qd, kd) = ("total_q x heads x head_dim", "total_k x kv_heads x head_dim");
    check_varlen(
        "attention_varlen_backward",
        shape,
        opts,
        &BWD_HEAD_DIMS,
        &[
            ("q", q.len(), ql, qd),
            ("k", k.len(), kl, kd),
            ("v", v.len(), kl, kd),
            ("o", o.len(), ql, qd),
            ("lse", lse.len(), shape.lse_len(), "heads x total_q"),
            ("d_o", d_o.len(), ql, qd),
            ("dq", dq.len(), ql, qd),
            ("dk", dk.len(), kl, kd),
            ("dv", dv.len(), kl, kd),
            ("cu_seqlens_q", cu_seqlens_q.len(), cu, "batch + 1"),
            ("cu_seqlens_k", cu_seqlens_k.len(), cu, "batch + 1"),
        ],
    )?;
    let (cq, ck) = (I::as_u32(cu_seqlens_q), I::as_u32(cu_seqlens_k));
    let starts = [at("q", q), at("k", k), at("v", v), at("o", o), at("lse", lse), at("d_o", d_o), at("dq", dq), at("dk", dk), at("dv", dv), at("cu_seqlens_q", cq), at("cu_seqlens_k", ck)];
    crate::check_aligned("attention_varlen_backward", &starts)?;
    let (_, launch) = T::VARLEN_BWD.into_iter().find(|(d, _)| *d == shape.head_dim).expect("a built head dim");
    let (clean, words) = errors.prepare(dev, ops, [cq, ck], shape)?;
    launch(dev, ops, [q, k, v, o, d_o], lse, clean, words, [dq, dk, dv], shape, opts)
}

/// The forward's instances on `E` (`attention_fwd_varlen`'s
/// `instances(E = [f16, bf16], ..)`): each head dim's dense default.
const fn fwd_table<E: AttnType>() -> [(usize, FwdLaunch<E>); 3]
where
    attention_fwd_varlen<E, 64, 128, 8, 3>: HostEntry<Params = FwdParams<E, 64, 128>>,
    attention_fwd_varlen<E, 128, 128, 8, 2>: HostEntry<Params = FwdParams<E, 128, 128>>,
    attention_fwd_varlen<E, 256, 80, 5, 2>: HostEntry<Params = FwdParams<E, 256, 80>>,
{
    [(64, fwd::<E, 64, 128, 8, 3>), (128, fwd::<E, 128, 128, 8, 2>), (256, fwd::<E, 256, 80, 5, 2>)]
}

/// The CPU reference of [`attention_varlen_backward`] over f32 copies
/// (f64 arithmetic, `P` and `delta` exact; `cu_q`, `cu_k` valid host
/// offsets): `(dq, dk, dv)` in the layouts of `q`, `k`, `v` (rows outside
/// every sequence 0).
#[allow(clippy::too_many_arguments)]
pub fn reference_varlen_backward(q: &[f32], k: &[f32], v: &[f32], d_o: &[f32], cu_q: &[u32], cu_k: &[u32], shape: VarlenShape, opts: Options) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let VarlenShape { batch, heads, kv_heads, head_dim: d, .. } = shape;
    let scale = f64::from(opts.scale_for(d));
    let (mut dq, mut dk, mut dv) = (vec![0f64; shape.q_len()], vec![0f64; shape.kv_len()], vec![0f64; shape.kv_len()]);
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>();
    for b in 0..batch {
        let (q0, lq, k0, lk) = (cu_q[b] as usize, (cu_q[b + 1] - cu_q[b]) as usize, cu_k[b] as usize, (cu_k[b + 1] - cu_k[b]) as usize);
        for h in 0..heads {
            let kh = h / (heads / kv_heads);
            let qi = |i: usize| ((q0 + i) * heads + h) * d;
            let kj = |j: usize| ((k0 + j) * kv_heads + kh) * d;
            for i in 0..lq {
                let keys = visible_keys(i, lq, lk, opts.causal);
                if keys == 0 {
                    continue;
                }
                let s: Vec<f64> = (0..keys).map(|j| dot(&q[qi(i)..][..d], &k[kj(j)..][..d]) * scale).collect();
                let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                let p: Vec<f64> = e.iter().map(|x| x / sum).collect();
                let dp: Vec<f64> = (0..keys).map(|j| dot(&d_o[qi(i)..][..d], &v[kj(j)..][..d])).collect();
                let delta: f64 = p.iter().zip(&dp).map(|(a, b)| a * b).sum();
                for j in 0..keys {
                    let ds = p[j] * (dp[j] - delta);
                    for x in 0..d {
                        dq[qi(i) + x] += scale * ds * f64::from(k[kj(j) + x]);
                        dk[kj(j) + x] += scale * ds * f64::from(q[qi(i) + x]);
                        dv[kj(j) + x] += p[j] * f64::from(d_o[qi(i) + x]);
                    }
                }
            }
        }
    }
    let f = |x: Vec<f64>| x.into_iter().map(|v| v as f32).collect();
    (f(dq), f(dk), f(dv))
}
