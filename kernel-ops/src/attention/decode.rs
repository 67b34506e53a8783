//! Decode attention: one new query token per sequence (and up to 8
//! speculative tokens, causal among themselves) against a K/V cache,
//! contiguous or paged (vLLM's `[num_pages, page_size, kv_heads,
//! head_dim]` with a block table, no copy), f16/bf16 or FP8 e4m3 with
//! scales, split over the keys on the GPU's SMs and combined by
//! log-sum-exp (by the last CTA of each group: one launch per step). The kernels are `kernel_ops_kernels::decode` (a TMA ring
//! and wgmma; see there for the schedule).
//!
//! Layouts (row-major, `head_dim` contiguous):
//!
//! | buffer | layout | type |
//! |---|---|---|
//! | `q`, `out` | `[batch, tokens, heads, head_dim]` | `T` (f16 or bf16) |
//! | `lse` | `[batch, heads, tokens]`, natural log | f32 |
//! | `k`, `v` contiguous | `[batch, max_len, kv_heads, head_dim]` | `T` or [`E4M3`] |
//! | `k`, `v` paged | `[num_pages, page_size, kv_heads, head_dim]` | `T` or [`E4M3`] |
//! | `block_table` | `[batch, max_pages]`: sequence `b`'s key `j` is row `j % page_size` of page `block_table[b, j / page_size]` | i32 |
//! | `lens` | `[batch]`: keys of each sequence, its new tokens included | u32 |
//! | FP8 `scales` | `[2]` (K's, V's) or `[2, kv_heads]` | f32 |
//!
//! Query token `t` (of `tokens = T`) of sequence `b` sees keys
//! `0 .. lens[b] - T + 1 + t` (the last token sees them all), with the
//! softmax scale (`1 / sqrt(head_dim)` unless given); Q head `h` reads KV
//! head `h / G`, where `G = heads / kv_heads`. An empty sequence (`lens[b] = 0`), or a token that
//! sees no key (`t < T - lens[b]`), gets O = 0 and log-sum-exp `-inf`.
//!
//! Everything the host knows is checked before a launch (an
//! [`Error::Shape`] naming the rule, the values and the fix). `lens` and
//! `block_table` stay on the device (a call is capturable in a CUDA graph:
//! the launches depend only on the sizes): a length above `max_len` is
//! clamped to it, a page index outside `0 .. num_pages` reads page 0, and
//! both set a flag that [`Decode::check`] reports (it reads the flags:
//! call it outside a captured region).
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::bf16;
//! use kernel_host::Device;
//! use kernel_ops::attention::decode::{CacheLayout, Decode, DecodeOptions, DecodeShape, KvCache};
//! let dev = Device::emulator();
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! let shape = DecodeShape { batch: 1, heads: 4, kv_heads: 1, head_dim: 64, tokens: 1 };
//! let layout = CacheLayout::Contiguous { max_len: 40 };
//! let q = dev.upload(&vec![bf16::from_f32(0.5); shape.q_len()])?;
//! let kv = dev.upload(&vec![bf16::from_f32(0.25); layout.cache_len(&shape)])?;
//! let lens = dev.upload(&[33u32])?;
//! let (mut out, mut lse) = (dev.zeros::<bf16>(shape.q_len())?, dev.zeros::<f32>(shape.lse_len())?);
//! let mut plan = Decode::new::<bf16, bf16>(&dev, &ops, shape, layout, DecodeOptions::default())?;
//! plan.run(&dev, &ops, &q, &KvCache::contiguous(&kv, &kv), &lens, &mut out, &mut lse)?;
//! // Equal scores: O is the mean of V's rows.
//! assert!(dev.download(&out)?.iter().all(|v| (v.to_f32() - 0.25).abs() < 1e-3));
//! plan.check(&dev)?;
//! # Ok(()) }
//! ```
use crate::{at, Error};
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use kernel_device::{bf16, f16, Gmem, GmemRef, E4M3};
use kernel_host::{Arg, ArgSink, Buffer, Device, Program, TileMap, TmaElement};
use kernel_ops_kernels::decode::{decode_split, decode_split_fp8, decode_split_warp, decode_split_warp8, DecFp8Piece, DecPiece, DecodeDims, DecodeElem, DEC_BN, DEC_BN_WIDE, DEC_MMA_ROWS, DEC_ROWS, ERR_LEN, ERR_PAGE, ERR_WORDS};

/// The sizes of a decode step besides the cache's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeShape {
    pub batch: usize,
    /// Query (and output) heads.
    pub heads: usize,
    /// K/V heads: a divisor of `heads`, with `heads / kv_heads` in 1..=16.
    pub kv_heads: usize,
    /// 64 or 128.
    pub head_dim: usize,
    /// Query tokens per sequence: 1, or up to 8 with speculative tokens.
    pub tokens: usize,
}

impl DecodeShape {
    /// Elements of `q` and `out`.
    pub fn q_len(&self) -> usize {
        self.batch * self.tokens * self.heads * self.head_dim
    }
    /// Elements of `lse`.
    pub fn lse_len(&self) -> usize {
        self.batch * self.heads * self.tokens
    }
    /// Query heads per KV head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }
    /// CTAs per KV head (and split): the KV head's `G T` query rows in
    /// groups of 64 (the wgmma kernel) or 16 (the warp-MMA kernels).
    fn row_groups(&self, warp: bool) -> usize {
        (self.group() * self.tokens).div_ceil(if warp { DEC_MMA_ROWS } else { DEC_ROWS })
    }
}

/// Where the keys of each sequence are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheLayout {
    /// `[batch, max_len, kv_heads, head_dim]`.
    Contiguous { max_len: usize },
    /// `[num_pages, page_size, kv_heads, head_dim]` and a block table
    /// `[batch, max_pages]` (i32); `page_size` one of [`PAGE_SIZES`].
    Paged { num_pages: usize, page_size: usize, max_pages: usize },
}

/// The page sizes the paged cache takes.
pub const PAGE_SIZES: [usize; 5] = [16, 32, 64, 128, 256];
/// The head dimensions decode is built for.
pub const DECODE_HEAD_DIMS: [usize; 2] = [64, 128];
/// Largest query heads per KV head.
pub const MAX_GROUP: usize = 16;
/// Largest query tokens per sequence.
pub const MAX_TOKENS: usize = 8;

impl CacheLayout {
    /// Keys a sequence can hold (`max_pages * page_size` when paged).
    pub fn max_len(&self) -> usize {
        match *self {
            CacheLayout::Contiguous { max_len } => max_len,
            CacheLayout::Paged { page_size, max_pages, .. } => page_size * max_pages,
        }
    }
    /// Rows of the cache seen as a `rows x (kv_heads head_dim)` matrix.
    fn rows(&self, batch: usize) -> usize {
        match *self {
            CacheLayout::Contiguous { max_len } => batch * max_len,
            CacheLayout::Paged { num_pages, page_size, .. } => num_pages * page_size,
        }
    }
    /// Elements of `k` and of `v`.
    pub fn cache_len(&self, shape: &DecodeShape) -> usize {
        self.rows(shape.batch) * shape.kv_heads * shape.head_dim
    }
    /// Keys per TMA box: 64, or 16 for pages of 16 and 32 keys.
    fn piece(&self) -> usize {
        match *self {
            CacheLayout::Paged { page_size, .. } if page_size < DEC_BN => 16,
            _ => DEC_BN,
        }
    }
}

/// The cache of one call: K and V in the plan's [`CacheLayout`], the block
/// table when paged, the scales when FP8.
#[derive(Clone, Copy, Debug)]
pub struct KvCache<'a, C> {
    pub k: &'a Buffer<C>,
    pub v: &'a Buffer<C>,
    pub block_table: Option<&'a Buffer<i32>>,
    /// FP8 only: `[2]` (per tensor: K's, V's) or `[2, kv_heads]` (per KV
    /// head: K's, then V's) f32; the cache holds `value / scale`.
    pub scales: Option<&'a Buffer<f32>>,
}

impl<'a, C> KvCache<'a, C> {
    pub fn contiguous(k: &'a Buffer<C>, v: &'a Buffer<C>) -> Self {
        KvCache { k, v, block_table: None, scales: None }
    }
    pub fn paged(k: &'a Buffer<C>, v: &'a Buffer<C>, block_table: &'a Buffer<i32>) -> Self {
        KvCache { k, v, block_table: Some(block_table), scales: None }
    }
    /// The FP8 scales.
    pub fn with_scales(self, scales: &'a Buffer<f32>) -> Self {
        KvCache { scales: Some(scales), ..self }
    }
}

/// What a plan computes besides the shapes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DecodeOptions {
    /// The softmax scale; `None` is `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
    /// Splits of each sequence's keys; `None` picks them from the shape
    /// and the device ([`splits_for`]). At most the cache's blocks of 64
    /// keys.
    pub splits: Option<usize>,
    /// Which kernel runs a 16-bit cache ([`DecodeKernel::Auto`]: by the
    /// shape). An FP8 cache always runs on warp MMAs.
    pub kernel: DecodeKernel,
}

/// The kernel of a 16-bit cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DecodeKernel {
    /// Warp MMAs when a KV head's query rows (`heads / kv_heads x tokens`)
    /// are at most 16 and the head dimension is 128: on 4 consumer warps
    /// when the cache is paged in pages of 16 or 32 keys or the plan has
    /// one split, else on 8 ([`DecodeKernel::WarpMma8`]); the wgmma
    /// kernel otherwise. Measured on the H200 (bf16, D 128, at the same
    /// split counts): warp MMAs 1.09x with pages of 16 and 1.02x at one
    /// split (64 x 8 x 2048, 128 x 8 x 1024), within 1.5 % either way at
    /// the other shapes; head dimension 64 was not measured.
    #[default]
    Auto,
    /// `decode_split`: 64 query rows per CTA on wgmmas (one pass over K
    /// and V for up to 64 rows), one CTA per SM.
    Wgmma,
    /// `decode_split_warp`: 16 query rows per CTA on `mma.sync` (wider
    /// groups take several row groups, each reading K and V), two CTAs per
    /// SM.
    WarpMma,
    /// `decode_split_warp8`: as [`DecodeKernel::WarpMma`] with 8 consumer
    /// warps of 16 keys each per 128-key step, one CTA per SM (head
    /// dimension 128 only).
    WarpMma8,
}

/// The kernel a plan launches.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitKernel {
    Wgmma,
    Warp,
    Warp8,
}

/// What the kernels flagged on the device since the plan was made (or its
/// flags cleared).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeErrors {
    /// The largest `lens[b]` above `max_len` (clamped to `max_len`).
    pub length_over_max: Option<u32>,
    /// A block-table entry outside `0 .. num_pages` (page 0 was read).
    pub bad_page: Option<i32>,
}

/// The split count [`Decode::new`] picks for `groups` (`batch x kv_heads x
/// row groups`) sequences of `max_len` keys on `sms` SMs: as many splits
/// as keep the launch within one round of `per_sm` CTAs per SM (`groups x
/// splits <= sms x per_sm`), at least 1 and at most the blocks of 64 keys
/// of `max_len`, then as few as still give each split the same number of
/// blocks. Measured on the H200 (bf16, D 128, 2026-11-28): every CTA past
/// one round costs its start and end (~3-10 us each, more when it
/// combines), and one CTA per SM already draws ~30 GB/s; so 2 splits at
/// 8x8x8192 (0.072 ms) beat 4 (0.075) and 8 (0.085, the old 2-wave
/// choice), 16 at 1x8x32768 (0.045) beat 32 (0.049) and 64 (0.062). The
/// FP8 kernel is bound by its consumers and wants 2 CTAs per SM (4 splits
/// at 8x8x8192: 0.097 ms, 2: 0.143), and so do pages of 16 keys (4 boxes
/// of 16 keys per block: 4 splits 0.081 ms, 2: 0.096). Tried and dropped: persistent CTAs
/// looping over the items (1-2% slower at 64x8x2048 and 128x8x1024), and
/// for one CTA per SM a 6-slot ring filling the shared memory (~3% slower
/// than 3 slots: a lone CTA is bound by its consumers' serial per-block
/// loop, ~1 us per 64 keys, not by its loads in flight).
pub fn splits_for(groups: usize, max_len: usize, sms: usize, per_sm: usize) -> usize {
    let blocks = max_len.div_ceil(DEC_BN).max(1);
    let want = (sms.max(1) * per_sm.max(1) / groups.max(1)).clamp(1, blocks);
    blocks.div_ceil(blocks.div_ceil(want))
}

/// A decode step's launches for one shape and cache layout, with their
/// workspace (partial outputs when split) and error flags: make it once
/// (outside a captured region), [`Decode::run`] it every step.
pub struct Decode {
    shape: DecodeShape,
    layout: CacheLayout,
    fp8: bool,
    /// The kernel launched: warp MMAs (16 rows per CTA) for an FP8 cache,
    /// [`DecodeKernel`]'s choice for a 16-bit one.
    kernel: SplitKernel,
    splits: usize,
    chunk: usize,
    scale: f32,
    o_part: Buffer<f32>,
    lse_part: Buffer<f32>,
    /// The split kernels' arrival counters, one per `(b, kv_head, row
    /// group)`: zero between launches (the last CTA resets its own).
    counters: Buffer<u32>,
    errors: Buffer<u32>,
    no_table: Buffer<i32>,
}

impl std::fmt::Debug for Decode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Decode {{ {:?}, {:?}, fp8: {}, kernel: {:?}, splits: {} of {} keys }}", self.shape, self.layout, self.fp8, self.kernel, self.splits, self.chunk)
    }
}

fn shape_err(problem: String) -> Error {
    Error::Shape { op: "decode", problem }
}

/// The host-side rules of a plan (see [`Decode::new`]).
pub fn check_plan(shape: DecodeShape, layout: CacheLayout, opts: DecodeOptions) -> Result<(), Error> {
    let DecodeShape { batch, heads, kv_heads, head_dim, tokens } = shape;
    for (name, v) in [("batch", batch), ("heads", heads), ("kv_heads", kv_heads), ("head_dim", head_dim), ("tokens", tokens)] {
        if v == 0 {
            return Err(shape_err(format!("{name} = 0: every size must be at least 1 ({shape:?})")));
        }
    }
    if !DECODE_HEAD_DIMS.contains(&head_dim) {
        return Err(shape_err(format!("head_dim = {head_dim}: decode is built for head_dim in {DECODE_HEAD_DIMS:?}; pad the heads with zeros to the next one")));
    }
    if heads % kv_heads != 0 {
        return Err(shape_err(format!("heads = {heads}, kv_heads = {kv_heads}: kv_heads must divide heads (each K/V head serves heads / kv_heads query heads)")));
    }
    let g = heads / kv_heads;
    if g > MAX_GROUP {
        return Err(shape_err(format!("heads / kv_heads = {g} ({heads} / {kv_heads}): at most {MAX_GROUP} query heads per KV head are supported; split the heads over several calls")));
    }
    if tokens > MAX_TOKENS {
        return Err(shape_err(format!("tokens = {tokens}: at most {MAX_TOKENS} query tokens per sequence (1 plus speculative tokens); use the prefill attention for longer queries")));
    }
    match layout {
        CacheLayout::Contiguous { max_len: 0 } => return Err(shape_err("max_len = 0: the cache must hold at least one key per sequence".into())),
        CacheLayout::Paged { num_pages, page_size, max_pages } => {
            if !PAGE_SIZES.contains(&page_size) {
                return Err(shape_err(format!("page_size = {page_size}: the paged cache takes page sizes {PAGE_SIZES:?}")));
            }
            if num_pages == 0 || max_pages == 0 {
                return Err(shape_err(format!("num_pages = {num_pages}, max_pages = {max_pages}: both must be at least 1")));
            }
        }
        _ => {}
    }
    let rows = layout.rows(batch);
    if rows > i32::MAX as usize || kv_heads * head_dim > i32::MAX as usize || layout.max_len() > u32::MAX as usize / 2 {
        return Err(shape_err(format!("{layout:?} with batch {batch}: the cache's rows ({rows}) must be at most 2^31 - 1 (a TMA coordinate)")));
    }
    let scale = opts.scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    if !(scale.is_finite() && scale > 0.0) {
        return Err(shape_err(format!("scale = {scale}: the softmax scale must be finite and positive")));
    }
    if let Some(s) = opts.splits {
        let blocks = layout.max_len().div_ceil(DEC_BN);
        if s == 0 || s > blocks {
            return Err(shape_err(format!("splits = {s}: between 1 and the cache's blocks of {DEC_BN} keys ({blocks} for max_len {})", layout.max_len())));
        }
    }
    Ok(())
}

impl Decode {
    /// A plan for queries of type `T` (f16 or bf16) against a cache of `C`
    /// (`T`, or [`E4M3`] for FP8): checks the shape (head_dim in
    /// [`DECODE_HEAD_DIMS`], `kv_heads` divides `heads`, at most
    /// [`MAX_GROUP`] query heads per KV head and [`MAX_TOKENS`] tokens, page
    /// size in [`PAGE_SIZES`], sizes within TMA's coordinates), picks the
    /// split count ([`splits_for`] with the device's SM count and the
    /// kernel's CTAs per SM, unless `opts.splits` says), and allocates the
    /// workspace (`batch heads tokens splits (head_dim + 1)` f32 when split)
    /// and the error flags (zeroed).
    pub fn new<T: DecodeType, C: CacheElem<T>>(dev: &Device, ops: &Program, shape: DecodeShape, layout: CacheLayout, opts: DecodeOptions) -> Result<Self, Error> {
        check_plan(shape, layout, opts)?;
        let fits = shape.group() * shape.tokens <= DEC_MMA_ROWS;
        // Rows in groups of 16 (warp MMAs) or 64 (wgmma); at most 16 rows
        // make one group either way, so the split count below does not
        // depend on `Auto`'s choice.
        let rows16 = C::FP8
            || match opts.kernel {
                DecodeKernel::Auto => fits,
                DecodeKernel::Wgmma => false,
                DecodeKernel::WarpMma | DecodeKernel::WarpMma8 => true,
            };
        if opts.kernel == DecodeKernel::WarpMma8 && (C::FP8 || shape.head_dim != 128) {
            return Err(shape_err(format!("DecodeKernel::WarpMma8 is built for a 16-bit cache at head_dim 128 (head_dim {}, {} cache): use Auto", shape.head_dim, if C::FP8 { "an FP8" } else { "a 16-bit" })));
        }
        let ctas = shape.batch * shape.kv_heads * shape.row_groups(rows16);
        let sms = dev.sm_count().max(1) as usize;
        // The split count aims at one CTA per SM for a 16-bit cache in
        // boxes of 64 keys (either kernel: the warp-MMA one measured slower
        // at twice the splits), and at the kernel's occupancy (2) for FP8
        // and pages of 16 or 32 keys ([`splits_for`]).
        let per_sm = if opts.kernel == DecodeKernel::WarpMma8 {
            1
        } else if C::FP8 || layout.piece() < DEC_BN {
            C::blocks_per_sm(ops, shape.head_dim, layout.piece(), rows16).unwrap_or(2).max(1)
        } else {
            1
        };
        let splits = match opts.splits {
            Some(s) => s,
            None => splits_for(ctas, layout.max_len(), sms, per_sm),
        };
        let tuned = fits && shape.head_dim == 128;
        let kernel = match opts.kernel {
            _ if C::FP8 => SplitKernel::Warp,
            DecodeKernel::Wgmma => SplitKernel::Wgmma,
            DecodeKernel::WarpMma => SplitKernel::Warp,
            DecodeKernel::WarpMma8 => SplitKernel::Warp8,
            // (Measured at head dim 128 only: 64 keeps the wgmma kernel.)
            DecodeKernel::Auto if tuned && (layout.piece() < DEC_BN || splits == 1) => SplitKernel::Warp,
            DecodeKernel::Auto if tuned => SplitKernel::Warp8,
            DecodeKernel::Auto => SplitKernel::Wgmma,
        };
        // Keys per split: whole steps of the kernel's ring (64 keys; 128
        // for the 8-warp kernel).
        let step = if kernel == SplitKernel::Warp8 { DEC_BN_WIDE } else { DEC_BN };
        let blocks = layout.max_len().div_ceil(step);
        let chunk = blocks.div_ceil(splits) * step;
        let splits = layout.max_len().div_ceil(chunk);
        let rows = shape.lse_len();
        let part = if splits > 1 { rows * splits } else { 1 };
        Ok(Decode {
            shape,
            layout,
            fp8: C::FP8,
            kernel,
            splits,
            chunk,
            scale: opts.scale.unwrap_or(1.0 / (shape.head_dim as f32).sqrt()),
            o_part: dev.zeros::<f32>(part * if splits > 1 { shape.head_dim } else { 1 })?,
            lse_part: dev.zeros::<f32>(part)?,
            counters: dev.zeros::<u32>(ctas)?,
            errors: dev.zeros::<u32>(ERR_WORDS)?,
            no_table: dev.zeros::<i32>(1)?,
        })
    }

    /// Whether the plan runs on warp MMAs (an FP8 cache, or
    /// [`DecodeOptions::kernel`]'s choice for a 16-bit one) rather than the
    /// wgmma kernel.
    pub fn warp_mma(&self) -> bool {
        self.kernel != SplitKernel::Wgmma
    }
    /// The kernel the plan launches: [`DecodeKernel::Wgmma`],
    /// [`DecodeKernel::WarpMma`] (every FP8 cache) or
    /// [`DecodeKernel::WarpMma8`] (never `Auto`).
    pub fn kernel(&self) -> DecodeKernel {
        match self.kernel {
            SplitKernel::Wgmma => DecodeKernel::Wgmma,
            SplitKernel::Warp => DecodeKernel::WarpMma,
            SplitKernel::Warp8 => DecodeKernel::WarpMma8,
        }
    }
    /// Splits of each sequence's keys (1: no partial outputs, no combine).
    pub fn splits(&self) -> usize {
        self.splits
    }
    /// Keys per split (a multiple of 64).
    pub fn chunk(&self) -> usize {
        self.chunk
    }
    pub fn shape(&self) -> DecodeShape {
        self.shape
    }
    pub fn layout(&self) -> CacheLayout {
        self.layout
    }

    /// Writes `out` and `lse` (the module's layouts) for queries `q`, the
    /// cache `cache` and the lengths `lens` (on the device, never read by
    /// the host). Asynchronous on a GPU's stream. Checks every buffer's
    /// length first, and that the cache's type and table and scales match
    /// the plan.
    #[allow(clippy::too_many_arguments)]
    pub fn run<T: DecodeType, C: CacheElem<T>>(
        &mut self,
        dev: &Device,
        ops: &Program,
        q: &Buffer<T>,
        cache: &KvCache<'_, C>,
        lens: &Buffer<u32>,
        out: &mut Buffer<T>,
        lse: &mut Buffer<f32>,
    ) -> Result<(), Error> {
        let _ = dev;
        let shape = self.shape;
        if C::FP8 != self.fp8 {
            return Err(shape_err(format!("the plan was made for {} cache, the call passes {}: make the plan with the cache's element type", if self.fp8 { "an FP8" } else { "a 16-bit" }, std::any::type_name::<C>())));
        }
        let cache_len = self.layout.cache_len(&shape);
        let mut want = vec![("q", q.len(), shape.q_len(), "batch x tokens x heads x head_dim"), ("out", out.len(), shape.q_len(), "batch x tokens x heads x head_dim"), ("lse", lse.len(), shape.lse_len(), "batch x heads x tokens"), ("lens", lens.len(), shape.batch, "batch")];
        let what = match self.layout {
            CacheLayout::Contiguous { .. } => "batch x max_len x kv_heads x head_dim",
            CacheLayout::Paged { .. } => "num_pages x page_size x kv_heads x head_dim",
        };
        want.push(("k", cache.k.len(), cache_len, what));
        want.push(("v", cache.v.len(), cache_len, what));
        let (table, max_pages, num_pages, page_size) = match (self.layout, cache.block_table) {
            (CacheLayout::Contiguous { .. }, None) => (&self.no_table, 0, 0, 0),
            (CacheLayout::Paged { num_pages, page_size, max_pages }, Some(t)) => {
                want.push(("block_table", t.len(), shape.batch * max_pages, "batch x max_pages"));
                (t, max_pages, num_pages, page_size)
            }
            (CacheLayout::Contiguous { .. }, Some(_)) => return Err(shape_err("a block table was passed for a contiguous cache: make the plan with CacheLayout::Paged, or pass KvCache::contiguous".into())),
            (CacheLayout::Paged { .. }, None) => return Err(shape_err("a paged cache needs its block table: pass KvCache::paged(k, v, block_table)".into())),
        };
        for (name, got, want, what) in want {
            if got != want {
                return Err(shape_err(format!("`{name}` holds {got} elements; {what} = {want} expected for {shape:?}, {:?}", self.layout)));
            }
        }
        let mut starts = vec![at("q", q), at("k", cache.k), at("v", cache.v), at("lens", lens), at("out", out), at("lse", lse)];
        starts.extend(cache.block_table.map(|t| at("block_table", t)));
        starts.extend(cache.scales.map(|s| at("scales", s)));
        crate::check_aligned("decode", &starts)?;
        let scale_heads = match (self.fp8, cache.scales) {
            (false, None) => 0,
            (false, Some(_)) => return Err(shape_err("scales were passed for a 16-bit cache: only an FP8 (E4M3) cache takes scales".into())),
            (true, None) => return Err(shape_err("an FP8 cache needs its scales: KvCache::with_scales([k_scale, v_scale]) per tensor or [2, kv_heads] per KV head".into())),
            (true, Some(s)) if s.len() == 2 => 1,
            (true, Some(s)) if s.len() == 2 * shape.kv_heads => shape.kv_heads,
            (true, Some(s)) => return Err(shape_err(format!("`scales` holds {} elements: 2 (per tensor) or 2 x kv_heads = {} (per KV head) expected", s.len(), 2 * shape.kv_heads))),
        };
        let dims = DecodeDims {
            max_len: self.layout.max_len() as u32,
            heads: shape.heads as u32,
            group: shape.group() as u32,
            t_q: shape.tokens as u32,
            row_groups: shape.row_groups(self.warp_mma()) as u32,
            chunk: self.chunk as u32,
            page_size: page_size as u32,
            max_pages: max_pages as u32,
            num_pages: num_pages as u32,
            scale_heads: scale_heads as u32,
            scale_log2: self.scale * std::f32::consts::LOG2_E,
        };
        let grid = (self.splits as u32, (shape.kv_heads * shape.row_groups(self.warp_mma())) as u32, shape.batch as u32);
        let rows = self.layout.rows(shape.batch);
        let args = SplitArgs { q, k: cache.k, v: cache.v, scales: cache.scales, rows, lens, table, out: &mut *out, lse: &mut *lse, o_part: &mut self.o_part, lse_part: &mut self.lse_part, counters: &mut self.counters, errors: &mut self.errors, dims, grid };
        C::launch(ops, shape, self.layout.piece(), self.kernel, args)?;
        Ok(())
    }

    /// Reads the device's error flags (a synchronizing download: not
    /// inside a captured region).
    pub fn errors(&self, dev: &Device) -> Result<DecodeErrors, Error> {
        let w = dev.download(&self.errors)?;
        Ok(DecodeErrors {
            length_over_max: (w[ERR_LEN] != 0).then_some(w[ERR_LEN + 1]),
            bad_page: (w[ERR_PAGE] != 0).then_some(w[ERR_PAGE + 1] as i32),
        })
    }

    /// `Ok` when no kernel of this plan flagged a bad device value; else
    /// an error naming it, the clamp the kernel applied, and the fix.
    pub fn check(&self, dev: &Device) -> Result<(), Error> {
        let e = self.errors(dev)?;
        let max_len = self.layout.max_len();
        let mut problems = Vec::new();
        if let Some(len) = e.length_over_max {
            problems.push(format!("lens holds {len} > max_len = {max_len} ({:?}): the kernel used {max_len} keys; keep every length within the cache", self.layout));
        }
        if let (Some(p), CacheLayout::Paged { num_pages, .. }) = (e.bad_page, self.layout) {
            problems.push(format!("block_table holds page {p}, outside 0..{num_pages} for a key below its sequence's length: the kernel read page 0 instead; fill the table's first ceil(len / page_size) entries of each sequence with valid pages"));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Shape { op: "decode (device values)", problem: problems.join("; ") })
        }
    }

    /// Zeroes the error flags.
    pub fn clear_errors(&mut self, dev: &Device) -> Result<(), Error> {
        dev.write(&mut self.errors, &[0; ERR_WORDS])?;
        Ok(())
    }
}

/// One call: a plan ([`Decode::new`]) run once ([`Decode::run`]); the plan
/// is returned for its [`Decode::check`]. Reuse a plan across steps rather
/// than this (it allocates).
#[allow(clippy::too_many_arguments)]
pub fn decode<T: DecodeType, C: CacheElem<T>>(
    dev: &Device,
    ops: &Program,
    q: &Buffer<T>,
    cache: &KvCache<'_, C>,
    lens: &Buffer<u32>,
    out: &mut Buffer<T>,
    lse: &mut Buffer<f32>,
    shape: DecodeShape,
    layout: CacheLayout,
    opts: DecodeOptions,
) -> Result<Decode, Error> {
    let mut plan = Decode::new::<T, C>(dev, ops, shape, layout, opts)?;
    plan.run(dev, ops, q, cache, lens, out, lse)?;
    Ok(plan)
}

/// The arguments of a split kernel's launch, after the checks.
#[doc(hidden)]
pub struct SplitArgs<'a, T, C> {
    q: &'a Buffer<T>,
    k: &'a Buffer<C>,
    v: &'a Buffer<C>,
    scales: Option<&'a Buffer<f32>>,
    /// Rows of the cache matrix.
    rows: usize,
    lens: &'a Buffer<u32>,
    table: &'a Buffer<i32>,
    out: &'a mut Buffer<T>,
    lse: &'a mut Buffer<f32>,
    o_part: &'a mut Buffer<f32>,
    lse_part: &'a mut Buffer<f32>,
    counters: &'a mut Buffer<u32>,
    errors: &'a mut Buffer<u32>,
    dims: DecodeDims,
    grid: (u32, u32, u32),
}

/// [`DecodeDims`] as a launch argument (plain data on both backends).
struct DimsArg(DecodeDims);

impl Arg<DecodeDims> for DimsArg {
    fn gpu<'a>(self, _sink: &mut ArgSink<'a>) -> kernel_host::Result<DecodeDims>
    where
        Self: 'a,
    {
        Ok(self.0)
    }
    fn emulator(self) -> kernel_host::Result<DecodeDims> {
        Ok(self.0)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for kernel_device::f16 {}
    impl Sealed for kernel_device::bf16 {}
    impl Sealed for kernel_device::E4M3 {}
}

type SplitFn<T, C> = fn(&Program, SplitArgs<'_, T, C>) -> Result<(), Error>;

/// The query and output types: f16 and bf16 (the kernels are generic over
/// it). Sealed.
pub trait DecodeType: sealed::Sealed + DecodeElem + TmaElement + 'static {
    /// The 16-bit cache's wgmma instances `((head_dim, keys per box),
    /// launch)`.
    #[doc(hidden)]
    const SPLIT16: [((usize, usize), SplitFn<Self, Self>); 4];
    /// The 16-bit cache's warp-MMA instances.
    #[doc(hidden)]
    const SPLIT16_WARP: [((usize, usize), SplitFn<Self, Self>); 4];
    /// The 16-bit cache's 8-warp instances (head dim 128).
    #[doc(hidden)]
    const SPLIT16_WARP8: [((usize, usize), SplitFn<Self, Self>); 2];
    /// The FP8 cache's.
    #[doc(hidden)]
    const SPLIT_FP8: [((usize, usize), SplitFn<Self, E4M3>); 4];
}

/// The cache's element type for queries of `T`: `T` itself, or [`E4M3`]
/// (FP8, with scales). Sealed.
pub trait CacheElem<T: DecodeType>: sealed::Sealed + Copy + TmaElement + 'static {
    /// Whether the cache is FP8.
    const FP8: bool;
    /// The instances of `kernel`.
    #[doc(hidden)]
    fn table(kernel: SplitKernel) -> &'static [((usize, usize), SplitFn<T, Self>)];
    #[doc(hidden)]
    fn launch(ops: &Program, shape: DecodeShape, piece: usize, kernel: SplitKernel, args: SplitArgs<'_, T, Self>) -> Result<(), Error> {
        match Self::table(kernel).iter().find(|(k, _)| *k == (shape.head_dim, piece)) {
            Some((_, f)) => f(ops, args),
            None => Err(shape_err(format!("head_dim = {}, {piece} keys per box: not built", shape.head_dim))),
        }
    }
    /// CTAs of the split kernel per SM (the occupancy of the instance).
    #[doc(hidden)]
    fn blocks_per_sm(ops: &Program, head_dim: usize, piece: usize, warp: bool) -> Option<usize>;
}

macro_rules! cache16 {
    ($t:ty) => {
        impl CacheElem<$t> for $t {
            const FP8: bool = false;
            fn table(kernel: SplitKernel) -> &'static [((usize, usize), SplitFn<$t, $t>)] {
                match kernel {
                    SplitKernel::Wgmma => &<$t as DecodeType>::SPLIT16,
                    SplitKernel::Warp => &<$t as DecodeType>::SPLIT16_WARP,
                    SplitKernel::Warp8 => &<$t as DecodeType>::SPLIT16_WARP8,
                }
            }
            fn blocks_per_sm(ops: &Program, head_dim: usize, _piece: usize, warp: bool) -> Option<usize> {
                let o = match (head_dim, warp) {
                    (64, false) => ops.kernel::<decode_split<$t, 64, 64, 6>>().ok()?.occupancy().ok()?,
                    (_, false) => ops.kernel::<decode_split<$t, 128, 64, 3>>().ok()?.occupancy().ok()?,
                    (64, true) => ops.kernel::<decode_split_warp<$t, 64, 64, 4>>().ok()?.occupancy().ok()?,
                    (_, true) => ops.kernel::<decode_split_warp<$t, 128, 64, 2>>().ok()?.occupancy().ok()?,
                };
                Some(o.blocks_per_sm as usize)
            }
        }
    };
}
// One impl per element type (a `CacheElem<T> for T` blanket impl would
// overlap the FP8 one in coherence's eyes).
cache16!(f16);
cache16!(bf16);

impl<T: DecodeType> CacheElem<T> for E4M3 {
    const FP8: bool = true;
    fn table(_kernel: SplitKernel) -> &'static [((usize, usize), SplitFn<T, E4M3>)] {
        &T::SPLIT_FP8
    }
    fn blocks_per_sm(_ops: &Program, _head_dim: usize, _piece: usize, _warp: bool) -> Option<usize> {
        // Built for 2 CTAs per SM (`min_blocks_per_sm = 2`).
        Some(2)
    }
}

impl DecodeType for f16 {
    const SPLIT16: [((usize, usize), SplitFn<Self, Self>); 4] = split16_table::<Self>();
    const SPLIT16_WARP: [((usize, usize), SplitFn<Self, Self>); 4] = split16_warp_table::<Self>();
    const SPLIT16_WARP8: [((usize, usize), SplitFn<Self, Self>); 2] = split16_warp8_table::<Self>();
    const SPLIT_FP8: [((usize, usize), SplitFn<Self, E4M3>); 4] = split_fp8_table::<Self>();
}
impl DecodeType for bf16 {
    const SPLIT16: [((usize, usize), SplitFn<Self, Self>); 4] = split16_table::<Self>();
    const SPLIT16_WARP: [((usize, usize), SplitFn<Self, Self>); 4] = split16_warp_table::<Self>();
    const SPLIT16_WARP8: [((usize, usize), SplitFn<Self, Self>); 2] = split16_warp8_table::<Self>();
    const SPLIT_FP8: [((usize, usize), SplitFn<Self, E4M3>); 4] = split_fp8_table::<Self>();
}

type Split16Params<E, const P: usize, const D: usize> = (
    GmemRef<E>,
    TensorMapParam<DecPiece<E, P, D>, 2>,
    TensorMapParam<DecPiece<E, P, D>, 2>,
    GmemRef<u32>,
    GmemRef<i32>,
    Gmem<E>,
    Gmem<f32>,
    Gmem<f32>,
    Gmem<f32>,
    Gmem<u32>,
    Gmem<u32>,
    DecodeDims,
);
type SplitFp8Params<E, const P: usize, const D: usize> = (
    GmemRef<E>,
    TensorMapParam<DecFp8Piece<P, D>, 2>,
    TensorMapParam<DecFp8Piece<P, D>, 2>,
    GmemRef<f32>,
    GmemRef<u32>,
    GmemRef<i32>,
    Gmem<E>,
    Gmem<f32>,
    Gmem<f32>,
    Gmem<f32>,
    Gmem<u32>,
    Gmem<u32>,
    DecodeDims,
);
/// `decode_split`'s instances on `E` (`instances(E = [f16, bf16], ..)`).
const fn split16_table<E: DecodeType>() -> [((usize, usize), SplitFn<E, E>); 4]
where
    decode_split<E, 64, 64, 6>: HostEntry<Params = Split16Params<E, 64, 64>>,
    decode_split<E, 64, 16, 6>: HostEntry<Params = Split16Params<E, 16, 64>>,
    decode_split<E, 128, 64, 3>: HostEntry<Params = Split16Params<E, 64, 128>>,
    decode_split<E, 128, 16, 3>: HostEntry<Params = Split16Params<E, 16, 128>>,
{
    [
        ((64, 64), split16::<decode_split<E, 64, 64, 6>, E, 64, 64>),
        ((64, 16), split16::<decode_split<E, 64, 16, 6>, E, 64, 16>),
        ((128, 64), split16::<decode_split<E, 128, 64, 3>, E, 128, 64>),
        ((128, 16), split16::<decode_split<E, 128, 16, 3>, E, 128, 16>),
    ]
}

/// `decode_split_warp`'s instances on `E`.
const fn split16_warp_table<E: DecodeType>() -> [((usize, usize), SplitFn<E, E>); 4]
where
    decode_split_warp<E, 64, 64, 4>: HostEntry<Params = Split16Params<E, 64, 64>>,
    decode_split_warp<E, 64, 16, 4>: HostEntry<Params = Split16Params<E, 16, 64>>,
    decode_split_warp<E, 128, 64, 2>: HostEntry<Params = Split16Params<E, 64, 128>>,
    decode_split_warp<E, 128, 16, 2>: HostEntry<Params = Split16Params<E, 16, 128>>,
{
    [
        ((64, 64), split16::<decode_split_warp<E, 64, 64, 4>, E, 64, 64>),
        ((64, 16), split16::<decode_split_warp<E, 64, 16, 4>, E, 64, 16>),
        ((128, 64), split16::<decode_split_warp<E, 128, 64, 2>, E, 128, 64>),
        ((128, 16), split16::<decode_split_warp<E, 128, 16, 2>, E, 128, 16>),
    ]
}

/// `decode_split_warp8`'s instances on `E`.
const fn split16_warp8_table<E: DecodeType>() -> [((usize, usize), SplitFn<E, E>); 2]
where
    decode_split_warp8<E, 128, 64, 2>: HostEntry<Params = Split16Params<E, 64, 128>>,
    decode_split_warp8<E, 128, 16, 2>: HostEntry<Params = Split16Params<E, 16, 128>>,
{
    [((128, 64), split16::<decode_split_warp8<E, 128, 64, 2>, E, 128, 64>), ((128, 16), split16::<decode_split_warp8<E, 128, 16, 2>, E, 128, 16>)]
}

/// `decode_split_fp8`'s instances on `E`.
const fn split_fp8_table<E: DecodeType>() -> [((usize, usize), SplitFn<E, E4M3>); 4]
where
    decode_split_fp8<E, 64, 64, 8>: HostEntry<Params = SplitFp8Params<E, 64, 64>>,
    decode_split_fp8<E, 64, 16, 8>: HostEntry<Params = SplitFp8Params<E, 16, 64>>,
    decode_split_fp8<E, 128, 64, 4>: HostEntry<Params = SplitFp8Params<E, 64, 128>>,
    decode_split_fp8<E, 128, 16, 4>: HostEntry<Params = SplitFp8Params<E, 16, 128>>,
{
    [((64, 64), split_fp8::<E, 64, 64, 8>), ((64, 16), split_fp8::<E, 64, 16, 8>), ((128, 64), split_fp8::<E, 128, 64, 4>), ((128, 16), split_fp8::<E, 128, 16, 4>)]
}

/// Launches `K`, one of the 16-bit cache's kernels (`decode_split` or
/// `decode_split_warp`: the same parameters).
fn split16<K, E: DecodeType, const D: usize, const P: usize>(ops: &Program, a: SplitArgs<'_, E, E>) -> Result<(), Error>
where
    K: HostEntry<Params = Split16Params<E, P, D>>,
{
    let cols = a.dims.heads as usize / a.dims.group as usize * D;
    let km = TileMap::<DecPiece<E, P, D>>::new_2d(a.k, a.rows, cols)?;
    let vm = TileMap::<DecPiece<E, P, D>>::new_2d(a.v, a.rows, cols)?;
    ops.kernel::<K>()?.launch(a.grid, (a.q, &km, &vm, a.lens, a.table, a.out, a.lse, a.o_part, a.lse_part, a.counters, a.errors, DimsArg(a.dims)))?;
    Ok(())
}

fn split_fp8<E: DecodeType, const D: usize, const P: usize, const S: usize>(ops: &Program, a: SplitArgs<'_, E, E4M3>) -> Result<(), Error>
where
    decode_split_fp8<E, D, P, S>: HostEntry<Params = SplitFp8Params<E, P, D>>,
{
    let cols = a.dims.heads as usize / a.dims.group as usize * D;
    let km = TileMap::<DecFp8Piece<P, D>>::new_2d(a.k, a.rows, cols)?;
    let vm = TileMap::<DecFp8Piece<P, D>>::new_2d(a.v, a.rows, cols)?;
    let scales = a.scales.ok_or_else(|| shape_err("an FP8 cache needs its scales".into()))?;
    ops.kernel::<decode_split_fp8<E, D, P, S>>()?.launch(a.grid, (a.q, &km, &vm, scales, a.lens, a.table, a.out, a.lse, a.o_part, a.lse_part, a.counters, a.errors, DimsArg(a.dims)))?;
    Ok(())
}

/// The CPU reference over f32 copies of the inputs (the cache's values as
/// stored: dequantize FP8 first and pass `kv_scales` `[2, scale_heads]`
/// to multiply K and V by), f64 arithmetic: returns `(out, lse)` in the
/// module's layouts. Lengths above `max_len` are clamped as the kernel
/// does; `block_table` is required for a paged layout (entries outside
/// `0..num_pages` read page 0, as the kernel does).
///
/// # Panics
/// When a slice does not hold its layout's elements.
#[allow(clippy::too_many_arguments)]
pub fn reference(q: &[f32], k: &[f32], v: &[f32], lens: &[u32], block_table: Option<&[i32]>, kv_scales: Option<&[f32]>, shape: DecodeShape, layout: CacheLayout, scale: Option<f32>) -> (Vec<f32>, Vec<f32>) {
    let mut out = vec![0f32; shape.q_len()];
    let mut lse = vec![0f32; shape.lse_len()];
    for b in 0..shape.batch {
        for h in 0..shape.heads {
            for t in 0..shape.tokens {
                let (o, l) = reference_row(q, k, v, lens, block_table, kv_scales, shape, layout, scale, (b, h, t));
                let at = ((b * shape.tokens + t) * shape.heads + h) * shape.head_dim;
                out[at..at + shape.head_dim].copy_from_slice(&o);
                lse[(b * shape.heads + h) * shape.tokens + t] = l;
            }
        }
    }
    (out, lse)
}

/// One row of [`reference()`]: query token `t` of head `h` of sequence `b`.
#[allow(clippy::too_many_arguments)]
pub fn reference_row(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    lens: &[u32],
    block_table: Option<&[i32]>,
    kv_scales: Option<&[f32]>,
    shape: DecodeShape,
    layout: CacheLayout,
    scale: Option<f32>,
    (b, h, t): (usize, usize, usize),
) -> (Vec<f32>, f32) {
    let DecodeShape { batch, heads, kv_heads, head_dim: d, tokens } = shape;
    assert!(q.len() == shape.q_len() && k.len() == layout.cache_len(&shape) && v.len() == k.len() && lens.len() == batch, "decode::reference: slices do not match {shape:?}, {layout:?}");
    let scale = f64::from(scale.unwrap_or(1.0 / (d as f32).sqrt()));
    let kvh = h / (heads / kv_heads);
    let (ks, vs) = match kv_scales {
        None => (1.0, 1.0),
        Some(s) => {
            let n = s.len() / 2;
            (f64::from(s[kvh % n]), f64::from(s[n + kvh % n]))
        }
    };
    let len = (lens[b] as usize).min(layout.max_len());
    let keys = (len + 1 + t).saturating_sub(tokens);
    let row = |j: usize| -> usize {
        let r = match layout {
            CacheLayout::Contiguous { max_len } => b * max_len + j,
            CacheLayout::Paged { num_pages, page_size, max_pages } => {
                let e = block_table.expect("decode::reference: a paged layout needs the block table")[b * max_pages + j / page_size];
                let page = if e < 0 || e as usize >= num_pages { 0 } else { e as usize };
                page * page_size + j % page_size
            }
        };
        (r * kv_heads + kvh) * d
    };
    let qrow = &q[((b * tokens + t) * heads + h) * d..][..d];
    if keys == 0 {
        return (vec![0.0; d], f32::NEG_INFINITY);
    }
    let s: Vec<f64> = (0..keys).map(|j| qrow.iter().zip(&k[row(j)..][..d]).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>() * ks * scale).collect();
    let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let p: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
    let sum: f64 = p.iter().sum();
    let mut o = vec![0f64; d];
    for (j, pj) in p.iter().enumerate() {
        for (ox, vx) in o.iter_mut().zip(&v[row(j)..][..d]) {
            *ox += pj * f64::from(*vx) * vs;
        }
    }
    (o.iter().map(|x| (x / sum) as f32).collect(), (mx + sum.ln()) as f32)
}
