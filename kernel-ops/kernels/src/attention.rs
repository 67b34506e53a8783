//! Attention forward on Hopper, FlashAttention-3's schedule written in the
//! language: `O = softmax(scale · Q Kᵀ [+ causal mask]) V` and the
//! log-sum-exp of each row, for `q`, `k`, `v`, `o` in `[batch, seq, heads,
//! head_dim]` layout (row-major, `head_dim` contiguous), f16 or bf16 in and
//! out, f32 accumulation and softmax. K/V heads may be fewer than Q heads
//! (GQA/MQA: Q head `h` reads K/V head `h / (heads / kv_heads)`). The host
//! entry point is `kernel_ops::attention`.
//!
//! Tensor maps: each of `q`, `k`, `v`, `o` is seen as `batch` row-major
//! `seq x (heads · head_dim)` matrices (a rank-3 map, coordinates
//! `[column, row, batch]`): a head's `rows x head_dim` block is one tile
//! at column `head · head_dim`; rows past `seq` are zero-filled on loads
//! and clipped on stores, per batch.
use kernel_device::array::regs::unroll;
use kernel_device::layout::{Swizzled, Tile};
use kernel_device::math::{ex2_approx_ftz, lg2_approx_ftz, max, LN_2};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::sync::TurnOrder;
use kernel_device::warp::shfl_xor;
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_device::pipeline::Ring;
use kernel_device::{bf16, f16, Barriers, Pack16};

/// Rows of Q per CTA of the two-consumer kernels (`attention_fwd`): two
/// consumer warpgroups of 64 rows each (`attention_fwd_wg3`: three, 192).
pub const BM: usize = 128;
/// Keys per K/V block of the head-dim 64 and 128 instances (the N of
/// `S = Q Kᵀ` and the K of `O += P V`); head dim 256 takes 64 (its O
/// accumulator needs the registers: 64 or 80).
pub const BN: usize = 128;
/// P's k16 A fragments per block of [`BN`] keys (`BN / 16`).
pub const KC: usize = BN / 16;
/// The named barrier id the consumer warpgroups meet on before the O
/// store (ids 8..=15 are the emulator's; the turns take 2 and up).
pub const CONSUMER_BARRIER_ID: u32 = 1;
/// Register budgets per role (`setmaxnreg`): the producer 24 and two
/// consumers 240 (24 + 2 x 240 = 504, the register pool of a 384-thread
/// CTA, 3 x 168); with three consumers, the producer 32 and the consumers
/// 160 (32 + 3 x 160 = 512, the pool of 512 threads, 4 x 128). The roles
/// may not exceed the pool (`kernel_device::wgmma::counts_fit` checks it): a
/// `setmaxnreg.inc` would wait forever.
pub const PRODUCER_REGS: u32 = 24;
pub const CONSUMER_REGS: u32 = 240;
pub const PRODUCER_REGS_3: u32 = 32;
pub const CONSUMER_REGS_3: u32 = 160;
const _: () = assert!(
    kernel_device::wgmma::counts_fit(&[CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
        && kernel_device::wgmma::counts_fit(&[CONSUMER_REGS_3, CONSUMER_REGS_3, CONSUMER_REGS_3, PRODUCER_REGS_3]),
    "setmaxnreg: the roles' counts must sum to at most the CTA's register pool"
);

/// Q's tile (and O's, which reuses its buffer) of `BM` rows (64 per
/// consumer warpgroup) x `D`, 128-byte swizzle, `D / 64` column blocks.
pub type QTileOf<E, const BM: usize, const D: usize> = Tile<E, BM, D, Swizzled<128>>;
/// The two-consumer kernels' Q tile: `128 x D`.
pub type QTile<E, const D: usize> = QTileOf<E, BM, D>;
/// A K or V tile: `BN` keys x `D`.
pub type KvTile<E, const BN: usize, const D: usize> = Tile<E, BN, D, Swizzled<128>>;

/// The 16-bit element types attention runs on (the GEMMs' [`GemmElem`](crate::gemm::GemmElem)).
pub use crate::gemm::GemmElem as AttnElem;

/// The rules every instance passes (checked at compile time): `D` 64, 128
/// or 256 (whole 128-byte swizzle blocks of f16, and a wgmma N); `BN` a
/// multiple of 16 (P's k16 fragments) in 64..=256 that wgmma implements
/// (`Cols<BN>: WgmmaShape`: 64, 80, 128, 256);
/// the register rule: a consumer thread holds `D / 2` O registers, `BN / 2`
/// S registers and `BN / 4` P registers, at most 192 in all, so the 240 of
/// `setmaxnreg` leave room for the rest; SMEM `Q + STAGES (K + V)` <= 227 KB.
pub const fn check_attention(d: usize, bn: usize, stages: usize) {
    assert!(d == 64 || d == 128 || d == 256, "attention: head_dim (D) must be 64, 128 or 256");
    assert!(bn % 16 == 0 && bn >= 64 && bn <= 256, "attention: BN (keys per block) must be a multiple of 16 in 64..=256");
    assert!(stages >= 2, "attention: at least 2 K/V stages (one loads while the other is read)");
    assert!(d / 2 + bn / 2 + bn / 4 <= 192, "attention: D / 2 + BN / 2 + BN / 4 registers (O, S, P) must be at most 192 per consumer thread");
    assert!(2 * (BM * d + stages * 2 * bn * d) <= kernel_device::launch::MAX_SMEM_BYTES, "attention: SMEM Q (128 x D) + STAGES x (K + V) (BN x D each), f16, must fit the SMEM of one CTA (kernel_device::launch::MAX_SMEM_BYTES)");
}

/// The K/V blocks Q block `mb` (of `bm` rows) reads: all `ceil(seq /
/// BN)`, or with the causal mask those up to its last row's diagonal.
#[inline(always)]
pub fn kv_blocks(mb: u32, bm: u32, seq: u32, bn: u32, causal: bool) -> u32 {
    let last = if causal { seq.min((mb + 1) * bm) } else { seq };
    last.div_ceil(bn)
}

/// Where the sequence of a CTA lies, as its roles read it: the tensor-map
/// row of its first query (`q0`) and key (`k0`), its query and key counts,
/// and the tensor maps' batch coordinate `z`. `q_extra = max(lq - lk, 0)`
/// and `k_extra = max(lk - lq, 0)` align the causal mask bottom-right
/// (query `i` sees keys `j <= i + lk - lq`, i.e. `j + q_extra <= i +
/// k_extra`); both are 0 when `lq == lk` (every dense problem).
#[derive(Clone, Copy)]
pub struct Span {
    pub q0: u32,
    pub k0: u32,
    pub lq: u32,
    pub lk: u32,
    pub z: u32,
    pub q_extra: u32,
    pub k_extra: u32,
}

/// How the sequences of a batch are laid out: [`Dense`] (every sequence
/// `seq` long, batch `b` at tensor-map coordinate `z = b`) or [`Packed`]
/// (variable lengths packed along the rows, offsets on the device). The
/// kernels are generic over it; the dense instances see only constants
/// (`q0 = k0 = 0`, no alignment shift), so their code is the dense code.
pub trait Packing: Copy {
    /// Whether sequences have their own lengths: CTAs past their
    /// sequence's blocks exit, and a causal CTA reads at least one block.
    const VARLEN: bool;
    /// The span of sequence `b`.
    fn span(&self, b: u32) -> Span;
    /// The index in `lse` of query `row` of head `h` of sequence `b`
    /// (dense: `[batch, heads, seq]`; packed: `[heads, total_q]`).
    fn lse_at(&self, span: &Span, b: u32, h: u32, heads: u32, row: usize) -> usize;
    /// Records sequence `b`'s broken offset rules in `errors` (packed
    /// only; one thread per sequence is enough, any number may).
    #[inline(always)]
    fn report(&self, _b: u32, _errors: Gmem<u32>) {}
}

/// Equal lengths: `batch` sequences of `seq` queries and keys.
#[derive(Clone, Copy)]
pub struct Dense {
    pub seq: u32,
}

impl Packing for Dense {
    const VARLEN: bool = false;
    #[inline(always)]
    fn span(&self, b: u32) -> Span {
        Span { q0: 0, k0: 0, lq: self.seq, lk: self.seq, z: b, q_extra: 0, k_extra: 0 }
    }
    #[inline(always)]
    fn lse_at(&self, _span: &Span, b: u32, h: u32, heads: u32, row: usize) -> usize {
        (b as usize * heads as usize + h as usize) * self.seq as usize + row
    }
}

/// Packed variable-length sequences: sequence `b` holds queries
/// `cu_q[b] .. cu_q[b + 1]` of the `total_q` rows of `q` (and keys
/// `cu_k[b] .. cu_k[b + 1]` of `k`/`v`), the maps of batch 1 (`z = 0`).
/// Offsets are read on the device and clamped so that nothing outside
/// the outputs is ever written: a start past the total is the total, an
/// end before the start is the start, an end past the total is the total,
/// a length past `max_q`/`max_k` (the grid's reach) is cut there;
/// [`Packing::report`] records each of those in the error words.
#[derive(Clone, Copy)]
pub struct Packed {
    pub cu_q: GmemRef<u32>,
    pub cu_k: GmemRef<u32>,
    pub total_q: u32,
    pub total_k: u32,
    pub max_q: u32,
    pub max_k: u32,
}

/// The error words of the varlen kernels (`errors[i]`, a `Gmem<u32>` of
/// [`VARLEN_ERROR_WORDS`]): each holds 1 + the largest sequence index whose
/// offsets broke its rule (0: none), set by `atom.max`.
/// `cu_seqlens_q[b + 1] < cu_seqlens_q[b]`, or either past `total_q`.
pub const ERR_Q_OFFSETS: usize = 0;
/// The same for `cu_seqlens_k` and `total_k`.
pub const ERR_K_OFFSETS: usize = 1;
/// A query count above `max_seqlen_q` (rows past it are not computed).
pub const ERR_Q_LEN: usize = 2;
/// A key count above `max_seqlen_k`.
pub const ERR_K_LEN: usize = 3;
/// Words of the error buffer.
pub const VARLEN_ERROR_WORDS: usize = 4;

/// The varlen kernels' offsets made safe before they run: CTA 0 reads
/// `cu_seqlens_q` (`batch + 1` offsets), CTA 1 `cu_seqlens_k`, and each
/// writes `clean[i] = min(total, max(cu[0 ..= i]))`: non-decreasing and at
/// most `total`, so no two sequences share a row however broken `cu` is
/// (offsets that decrease midway, e.g. `[0, 50, 30, 80]`, made sequence 2
/// overlap sequence 0 under the per-sequence clamp of [`Packed::range`],
/// and their CTAs raced on its rows: found by fuzzing). Valid offsets are
/// copied unchanged. Each CTA also records its rule's word in `errors`
/// (`1 +` the last sequence `b` with `cu[b + 1] < cu[b]` or `cu[b + 1] >
/// total`: [`ERR_Q_OFFSETS`], [`ERR_K_OFFSETS`]). One warp per array: lane
/// `l` takes a contiguous chunk, the chunks' maxima are combined by a warp
/// scan. Launch: grid 2, 32 threads; the varlen kernels then read `clean`.
#[kernel(block = threads(32))]
#[allow(clippy::too_many_arguments)]
pub fn varlen_offsets(cu_q: GmemRef<u32>, cu_k: GmemRef<u32>, clean_q: Gmem<u32>, clean_k: Gmem<u32>, errors: Gmem<u32>, batch: u32, totals: u64) {
    let keys = block_idx().x == 1;
    let (cu, clean, total, word) = if keys { (cu_k, clean_k, (totals >> 32) as u32, ERR_K_OFFSETS) } else { (cu_q, clean_q, totals as u32, ERR_Q_OFFSETS) };
    let n = batch + 1;
    let (lane, chunk) = (thread_linear(), n.div_ceil(32));
    let (lo, hi) = ((lane * chunk).min(n), (lane * chunk + chunk).min(n));
    let (mut m, mut bad) = (0u32, 0u32);
    for i in lo..hi {
        let a = cu.read_nc(i as usize);
        m = m.max(a);
        if i < batch {
            let e = cu.read_nc(i as usize + 1);
            if e < a || e > total {
                bad = i + 1;
            }
        }
    }
    // Inclusive max-scan of the chunks' maxima, then this chunk's start.
    let mut d = 1;
    while d < 32 {
        let o = kernel_device::warp::shfl_up(m, d);
        if lane >= d {
            m = m.max(o);
        }
        d *= 2;
    }
    let before = kernel_device::warp::shfl_up(m, 1);
    let mut run = if lane == 0 { 0 } else { before };
    for i in lo..hi {
        run = run.max(cu.read_nc(i as usize));
        clean.write(i as usize, run.min(total));
    }
    if bad > 0 {
        errors.atomic_max(word, bad);
    }
}

/// Two `u32` in one `u64` parameter (`lo` in bits 0..32): the varlen
/// kernels' `(total_q, total_k)` and `(max_seqlen_q, max_seqlen_k)`.
pub const fn pair_u64(lo: u32, hi: u32) -> u64 {
    lo as u64 | (hi as u64) << 32
}

impl Packed {
    /// From the kernels' parameters: `totals` and `max_seqlens` as
    /// [`pair_u64`] (Q's in the low half).
    #[inline(always)]
    pub fn new(cu_q: GmemRef<u32>, cu_k: GmemRef<u32>, totals: u64, max_seqlens: u64) -> Self {
        Packed { cu_q, cu_k, total_q: totals as u32, total_k: (totals >> 32) as u32, max_q: max_seqlens as u32, max_k: (max_seqlens >> 32) as u32 }
    }
    /// The clamped `(start, length)` of `cu[b] .. cu[b + 1]` in `0 ..
    /// total`, the length cut at `max`, and whether the offsets and the
    /// length broke their rules.
    #[inline(always)]
    pub fn range(cu: GmemRef<u32>, b: u32, total: u32, max: u32) -> (u32, u32, bool, bool) {
        let (a, e) = (cu.read_nc(b as usize), cu.read_nc(b as usize + 1));
        let start = a.min(total);
        let end = e.max(start).min(total);
        let len = end - start;
        (start, len.min(max), e < a || e > total, len > max)
    }

}

impl Packing for Packed {
    const VARLEN: bool = true;
    #[inline(always)]
    fn span(&self, b: u32) -> Span {
        let (q0, lq, _, _) = Self::range(self.cu_q, b, self.total_q, self.max_q);
        let (k0, lk, _, _) = Self::range(self.cu_k, b, self.total_k, self.max_k);
        Span { q0, k0, lq, lk, z: 0, q_extra: lq.saturating_sub(lk), k_extra: lk.saturating_sub(lq) }
    }
    #[inline(always)]
    fn lse_at(&self, span: &Span, _b: u32, h: u32, _heads: u32, row: usize) -> usize {
        h as usize * self.total_q as usize + span.q0 as usize + row
    }
    #[inline(always)]
    fn report(&self, b: u32, errors: Gmem<u32>) {
        let (_, _, q_bad, q_long) = Self::range(self.cu_q, b, self.total_q, self.max_q);
        let (_, _, k_bad, k_long) = Self::range(self.cu_k, b, self.total_k, self.max_k);
        // Four ifs, not a loop over an array (which would live in local memory).
        if q_bad {
            errors.atomic_max(ERR_Q_OFFSETS, b + 1);
        }
        if k_bad {
            errors.atomic_max(ERR_K_OFFSETS, b + 1);
        }
        if q_long {
            errors.atomic_max(ERR_Q_LEN, b + 1);
        }
        if k_long {
            errors.atomic_max(ERR_K_LEN, b + 1);
        }
    }
}

/// The K/V blocks Q block `mb` (of `bm` rows) of a packed sequence reads:
/// [`kv_blocks`] with the mask aligned bottom-right, and at least one (a
/// sequence with no key, or causal rows before the first key, reads one
/// fully masked block: O = 0, lse = -inf).
#[inline(always)]
pub fn kv_blocks_span(mb: u32, bm: u32, s: &Span, bn: u32, causal: bool) -> u32 {
    let last = if causal { s.lk.min(((mb + 1) * bm + s.k_extra).saturating_sub(s.q_extra)) } else { s.lk };
    last.div_ceil(bn).max(1)
}

/// Where O goes once the consumers have written it, as the element type,
/// over the Q tile in SMEM: [`store`](OStore::store) is called, after the
/// consumers met on [`CONSUMER_BARRIER_ID`], by every consumer thread
/// ([`OStore::ALL_THREADS`]) or by thread 0 only.
pub trait OStore<E: AttnElem, const QM: usize, const D: usize> {
    const ALL_THREADS: bool;
    fn store(&self, tile: Smem<QTileOf<E, QM, D>>, h: u32, mb: u32, span: &Span, threads: u32);
}

/// Dense: one TMA store of the tile (rows past the sequence clipped by the
/// map, per batch).
impl<E: AttnElem, const QM: usize, const D: usize> OStore<E, QM, D> for Tma<QTileOf<E, QM, D>, 3> {
    const ALL_THREADS: bool = false;
    #[inline(always)]
    fn store(&self, tile: Smem<QTileOf<E, QM, D>>, h: u32, mb: u32, span: &Span, _threads: u32) {
        self.store_at(tile, [h * D as u32, span.q0 + mb * QM as u32, span.z]);
        commit_group();
        wait_group::<0>();
    }
}

/// Packed: O (`[total_q, heads, D]`) written from the tile by the
/// consumers, 16 bytes per thread and step, only rows inside the
/// sequence (a TMA store of the whole tile would overwrite the next
/// sequence's rows).
#[derive(Clone, Copy)]
pub struct PackedOut<E> {
    pub o: Gmem<E>,
    pub heads: u32,
}

impl<E: AttnElem + Pack16, const QM: usize, const D: usize> OStore<E, QM, D> for PackedOut<E> {
    const ALL_THREADS: bool = true;
    #[inline(always)]
    fn store(&self, tile: Smem<QTileOf<E, QM, D>>, h: u32, mb: u32, span: &Span, threads: u32) {
        let first = mb * QM as u32;
        let rows = span.lq.saturating_sub(first).min(QM as u32) as usize;
        let per_row = D / E::LANES;
        let mut i = thread_linear() as usize;
        while i < rows * per_row {
            let (r, c) = (i / per_row, i % per_row * E::LANES);
            let at = ((span.q0 + first) as usize + r) * self.heads as usize + h as usize;
            self.o.write_v4(at * D + c, tile.get_v4(r, c));
            i += threads as usize;
        }
    }
}


/// The two named barriers of the consumers' turns on the tensor pipe
/// (`TurnOrder`): 2 and up, one per consumer (1 is [`CONSUMER_BARRIER_ID`]).
pub const TURN_BARRIERS: u32 = 2;

/// A window bound that does not limit ([`Variant`]'s `left`/`right`): no
/// key is that far from its query (sequences are below 2^31).
pub const NO_LIMIT: u32 = 0x7fff_ffff;

/// What the forward computes beyond `softmax(scale Q Kᵀ [+ causal]) V`:
/// [`Plain`] (nothing: the code of the plain kernels, every `X::ON` branch
/// gone) or a [`Variant`] (sliding window, logit soft-capping, attention
/// sinks, decided at run time by its fields).
pub trait Extras: Copy {
    /// Whether any variant is compiled in.
    const ON: bool;
    /// `(left, right)`: query `i` sees keys `i - left ..= i + right`
    /// ([`NO_LIMIT`]: unbounded; causal is `right = 0`).
    fn window(&self) -> (u32, u32);
    /// `Some((scale / cap, cap log2 e))`: scores become `cap tanh(scale s /
    /// cap)` (in log2 units); `None`: no soft-cap.
    fn softcap(&self) -> Option<(f32, f32)>;
    /// Head `h`'s sink logit in log2 units (`-inf`: no sink).
    fn sink_log2(&self, h: u32) -> f32;
}

/// No variant.
#[derive(Clone, Copy)]
pub struct Plain;

impl Extras for Plain {
    const ON: bool = false;
    #[inline(always)]
    fn window(&self) -> (u32, u32) {
        (NO_LIMIT, NO_LIMIT)
    }
    #[inline(always)]
    fn softcap(&self) -> Option<(f32, f32)> {
        None
    }
    #[inline(always)]
    fn sink_log2(&self, _h: u32) -> f32 {
        f32::NEG_INFINITY
    }
}

/// The variants of [`attention_fwd_ext`], from its parameters: a sliding
/// window (`left`, `right`, [`NO_LIMIT`] for none; causal is folded in as
/// `right = 0` by the host), a soft-cap (`cap_in = scale / cap`, `cap_out =
/// cap log2 e`; `cap_in = 0`: none) and per-head sink logits (`sinks`, one
/// per Q head in natural-log units of the scaled scores, gpt-oss's: the
/// first `n_sinks` of `sinks`, 0 for none).
#[derive(Clone, Copy)]
pub struct Variant {
    pub left: u32,
    pub right: u32,
    pub cap_in: f32,
    pub cap_out: f32,
    pub sinks: GmemRef<f32>,
    pub n_sinks: u32,
}

impl Extras for Variant {
    const ON: bool = true;
    #[inline(always)]
    fn window(&self) -> (u32, u32) {
        (self.left, self.right)
    }
    #[inline(always)]
    fn softcap(&self) -> Option<(f32, f32)> {
        if self.cap_in != 0.0 {
            Some((self.cap_in, self.cap_out))
        } else {
            None
        }
    }
    #[inline(always)]
    fn sink_log2(&self, h: u32) -> f32 {
        if h < self.n_sinks {
            self.sinks.read_nc(h as usize) * kernel_device::math::LOG2_E
        } else {
            f32::NEG_INFINITY
        }
    }
}

/// The first K/V block Q block `mb` (of `bm` rows) reads: 0, or with a
/// left window bound the block of its first row's first key.
#[inline(always)]
pub fn first_kv_block<X: Extras>(mb: u32, bm: u32, bn: u32, x: &X) -> u32 {
    if X::ON {
        (mb * bm).saturating_sub(x.window().0) / bn
    } else {
        0
    }
}

/// [`kv_blocks`] with a right window bound: no block past the last row's
/// last key.
#[inline(always)]
pub fn end_kv_block<X: Extras>(mb: u32, bm: u32, seq: u32, bn: u32, causal: bool, x: &X) -> u32 {
    let n = kv_blocks(mb, bm, seq, bn, causal);
    if X::ON {
        n.min(((mb + 1) * bm).saturating_add(x.window().1).div_ceil(bn))
    } else {
        n
    }
}

/// What the softmax of a consumer thread needs about its two rows.
///
/// Positions are `u32` (the host keeps sequences below 2^31): the mask's
/// compares are then one 32-bit `ISETP` each, where `usize` positions made
/// them 64-bit pairs whose high words ptxas rematerialized in every masked
/// block (25 of the three-consumer loop's instructions).
pub struct Rows {
    pub seq: u32,
    pub causal: bool,
    /// The warpgroup's first row in the sequence (masking is decided per
    /// warpgroup; each thread's two rows are derived from its index, which
    /// costs no register to keep).
    pub wg_first_row: u32,
    pub scale_log2: f32,
}

/// The running maximum (log2 units) and this thread's partial row sums of
/// its two rows.
pub struct SoftmaxState {
    pub m: [f32; 2],
    pub l: [f32; 2],
}

/// One block of the online softmax on a `64 x BN` score block `sr` (the
/// WGMMA layout's registers) whose first key is `key0`: masks keys past
/// `seq` and (causal) after the row with `-inf`; updates the running
/// maxima (4 values per row per thread, then 2 quad shuffles) and partial
/// sums; replaces the scores by `P = 2^(S scale log2 e - m)` (one FMA and
/// one `ex2.approx` per element); returns each row's rescale factor
/// `2^(m_old - m_new)` for O.
#[inline(always)]
pub fn online_softmax<const BN: usize>(sr: &mut [f32], key0: u32, rows: &Rows, st: &mut SoftmaxState) -> [f32; 2] {
    online_softmax_with::<BN, Plain>(sr, key0, rows, st, &Plain)
}

/// [`online_softmax`] with the variants of `x` ([`Extras`]): the scores
/// soft-capped first, the window's keys masked too.
#[inline(always)]
pub fn online_softmax_with<const BN: usize, X: Extras>(sr: &mut [f32], key0: u32, rows: &Rows, st: &mut SoftmaxState, x: &X) -> [f32; 2] {
    let t = kernel_device::thread_in_warpgroup();
    let l = t % 32;
    let first_row = rows.wg_first_row + 16 * (t / 32) + l / 4;
    let bn = BN as u32;
    // Soft-cap (a variant): `cap tanh(scale s / cap)` in log2 units (the
    // host passes `scale_log2 = 1` then).
    if X::ON {
        if let Some((cap_in, cap_out)) = x.softcap() {
            unroll(BN / 2, |i| sr[i] = kernel_device::math::tanh_approx(sr[i] * cap_in) * cap_out);
        }
    }
    // Masks: only blocks that reach past `seq` or the diagonal (or, with a
    // window, past the warpgroup's first row's last key or before its last
    // row's first key).
    let (left, right) = x.window();
    let windowed = X::ON && (key0 + bn > rows.wg_first_row + right + 1 || key0 + left < rows.wg_first_row + 63);
    if key0 + bn > rows.seq || (rows.causal && key0 + bn > rows.wg_first_row + 1) || windowed {
        unroll(BN / 2, |i| {
            let iu = i as u32;
            let key = key0 + 8 * (iu / 4) + 2 * (l % 4) + iu % 2;
            let row = first_row + 8 * ((iu / 2) % 2);
            let outside = X::ON && (key + left < row || key > row + right);
            if key >= rows.seq || (rows.causal && key > row) || outside {
                sr[i] = f32::NEG_INFINITY;
            }
        });
    }
    let mut mx = [f32::NEG_INFINITY; 2];
    unroll(BN / 2, |i| mx[(i / 2) % 2] = max(mx[(i / 2) % 2], sr[i]));
    let mut alpha = [0f32; 2];
    let mut neg_m = [0f32; 2];
    unroll(2, |hh| {
        let v1 = max(mx[hh], shfl_xor(mx[hh], 1));
        let v2 = max(v1, shfl_xor(v1, 2));
        let m_new = max(st.m[hh], v2 * rows.scale_log2);
        // A row with every key masked so far keeps m = -inf: use 0 so that
        // 2^(-inf - 0) = 0 rather than NaN.
        let ms = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
        alpha[hh] = ex2_approx_ftz(st.m[hh] - ms);
        neg_m[hh] = -ms;
        st.m[hh] = m_new;
    });
    let mut sum = [0f32; 2];
    unroll(BN / 2, |i| {
        let hh = (i / 2) % 2;
        let p = ex2_approx_ftz(sr[i].fma(rows.scale_log2, neg_m[hh]));
        sr[i] = p;
        sum[hh] += p;
    });
    unroll(2, |hh| st.l[hh] = st.l[hh] * alpha[hh] + sum[hh]);
    alpha
}

/// P (`64 x BN` in the WGMMA layout, f32) rounded to `E` as the A
/// fragments of `m64nNk16`: keys `16c .. 16c + 16` are register pairs
/// `4c .. 4c + 4`, in the fragment's order `(r, c), (r + 8, c), (r, c +
/// 8), (r + 8, c + 8)` (PTX ISA §9.7.15.5.1): no data movement.
#[inline(always)]
pub fn p_fragments<E: AttnElem, const KC: usize>(sr: &[f32], frag: &mut [[u32; 4]; KC]) {
    unroll(KC, |c| unroll(4, |x| frag[c][x] = E::pack(sr[2 * (4 * c + x)], sr[2 * (4 * c + x) + 1])));
}

/// `O = softmax(scale Q Kᵀ) V`, the kernel body of every element type
/// (see [`attention_fwd`]).
///
/// This kernel works as follows. CTA `(mb, h, b)` owns rows `128 mb ..
/// 128 mb + 128` of Q head `h` of batch `b` (Q blocks are taken from the
/// last, so with the causal mask the longest CTAs start first).
/// 1. One thread of the producer warpgroup (number 2, registers given back
///    to 24) loads the Q tile once, then for each K/V block `j` loads K's
///    and V's `BN x D` tiles into slot `j % STAGES`, each on its own
///    barrier and each after its own release (`k_consumed`, `v_consumed`;
///    from the second round on): K of a slot is free as soon as its `S`
///    GEMM is done, before V's `P V` is.
/// 2. Consumer warpgroup `w` (0 or 1, 240 registers) owns Q rows `64 w ..`
///    and keeps, per thread, its O accumulator (`64 x D` in the WGMMA
///    layout) and the running maximum `m` and partial sum `l` of its two
///    rows. Block 0: `S_0 = Q K_0ᵀ` (`D / 16` SS wgmmas of `m64n128k16`),
///    its softmax, P kept in registers. Then per block `j >= 1`, the
///    schedule of FlashAttention-3:
///    - **ping-pong**: it waits for its turn on the tensor pipe
///      ([`TurnOrder`]: warpgroup 0 first, then strictly alternating),
///      issues `S_j = Q K_jᵀ` and `O += P_(j-1) V_(j-1)` (`BN / 16` RS
///      wgmmas behind one fence, V MN-major as stored), and passes the
///      turn, so the other warpgroup's GEMMs queue behind its own while it
///      does its softmax;
///    - **intra-warpgroup overlap**: it waits for `S_j` only
///      (`wgmma_wait::<1>`), releases K's slot and runs [`online_softmax`]
///      on `S_j` while `P_(j-1) V_(j-1)` is still on the tensor pipe; then
///      waits for it, releases V's slot, rescales O by `2^(m_old - m_new)`
///      and rounds `P_j` into the A fragments ([`p_fragments`]).
///    The last block's `P V` is one more turn; warpgroup 0 ends with
///    [`TurnOrder::finish`].
/// 3. At the end: `l` summed over the quad, `O /= l`, the log-sum-exp
///    `(m + log2 l) ln 2` of each row stored to `lse[(b heads + h) seq +
///    row]` (rows < `seq`), and O written as the element type over its Q
///    rows in the Q buffer (its own rows, which only its finished GEMMs
///    read), then one TMA store of the `128 x D` tile after both consumers
///    meet.
///
/// Launch: grid `(ceil(seq / 128), heads, batch)`, block 3 warpgroups;
/// `kv_group = heads / kv_heads`; `scale_log2 = softmax scale x log2 e`;
/// `causal` 0 or 1. Constraints: [`check_attention`]; `seq >= 1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn attention_fwd_of<E: AttnElem, P: Packing, O: OStore<E, QM, D>, X: Extras, const D: usize, const BN: usize, const KC: usize, const STAGES: usize, const QM: usize, const NC: u32>(
    x: X,
    q: Tma<QTileOf<E, QM, D>, 3>,
    k: Tma<KvTile<E, BN, D>, 3>,
    v: Tma<KvTile<E, BN, D>, 3>,
    o: O,
    lse: Gmem<f32>,
    pk: P,
    errors: Option<Gmem<u32>>,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    q_buf: Smem<QTileOf<E, QM, D>>,
    k_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    v_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    q_loaded: Barrier,
    k_loaded: Barriers<STAGES>,
    v_loaded: Barriers<STAGES>,
    k_consumed: Barriers<STAGES>,
    v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    const {
        check_attention(D, BN, STAGES);
        assert!(KC * 16 == BN, "attention: KC (P's k16 fragments per block) must be BN / 16");
        assert!((NC == 2 || NC == 3) && QM == 64 * NC as usize, "attention: 2 or 3 consumer warpgroups (NC), 64 Q rows each (QM = 64 NC)");
    };
    // Q blocks from the last: with the causal mask the longest CTAs start
    // first, the short ones fill the last wave.
    let (mb, h, b) = (grid_dim().x - 1 - block_idx().x, block_idx().y, block_idx().z);
    let heads = grid_dim().y;
    let causal = causal != 0;
    let span = pk.span(b);
    // Packed: the first CTA of each sequence records its broken offset
    // rules (`Packing::report`'s words): its producer thread, or thread 0
    // when the sequence has no query (here, on the way out: a divergent
    // branch before the roles would serialize the D 256 wgmmas, C7520).
    let report = |errors: Option<Gmem<u32>>| {
        if let Some(errors) = errors {
            if mb == 0 && h == 0 {
                pk.report(b, errors);
            }
        }
    };
    // Packed: this Q block lies past its sequence (the grid covers the
    // longest one).
    if P::VARLEN && mb * QM as u32 >= span.lq {
        if thread_linear() == 0 {
            report(errors);
        }
        return;
    }
    let n_blocks = if P::VARLEN { kv_blocks_span(mb, QM as u32, &span, BN as u32, causal) } else { end_kv_block(mb, QM as u32, span.lk, BN as u32, causal, &x) };
    // The first block (a variant's left window bound skips the blocks
    // before it: they are not loaded, not computed).
    let j0 = if P::VARLEN { 0 } else { first_kv_block(mb, QM as u32, BN as u32, &x) };
    // K and V each have their own ring: K's slot is free as soon as its S
    // GEMM is done, before V's `P V` is.
    let k_ring = Ring::new(&k_loaded, &k_consumed, 128 * NC);
    let v_ring = Ring::new(&v_loaded, &v_consumed, 128 * NC);
    if warpgroup_idx() == NC {
        if NC == 2 {
            setmaxnreg_dec::<PRODUCER_REGS>();
        } else {
            setmaxnreg_dec::<PRODUCER_REGS_3>();
        }
        // The issuing thread. A variant's: one elected lane of warp 0 (with
        // `thread_in_warpgroup() == 0`, whose thread index LLVM computes
        // once for both roles, ptxas spilled that index across this
        // role's `setmaxnreg` on the variants' 128-key blocks).
        let issuer = if X::ON { kernel_device::warp_in_warpgroup() == 0 && kernel_device::warp::elect_one() } else { thread_in_warpgroup() == 0 };
        if issuer {
            let kv_col = (h / kv_group) * D as u32;
            q_loaded.arrive_expect_tx(<QTileOf<E, QM, D> as TileLayout>::BYTES as u32);
            q.load_at(q_buf, [h * D as u32, span.q0 + mb * QM as u32, span.z], q_loaded.as_ref());
            let (mut kp, mut vp) = (k_ring.producer(), v_ring.producer());
            for j in j0..n_blocks {
                let tile_bytes = <KvTile<E, BN, D> as TileLayout>::BYTES as u32;
                let ks = kp.acquire_tx(tile_bytes);
                k.load_at(k_bufs.at(ks.index()), [kv_col, span.k0 + j * BN as u32, span.z], ks.barrier());
                let vs = vp.acquire_tx(tile_bytes);
                v.load_at(v_bufs.at(vs.index()), [kv_col, span.k0 + j * BN as u32, span.z], vs.barrier());
            }
            report(errors);
        }
        return;
    }
    if NC == 2 {
        setmaxnreg_inc::<CONSUMER_REGS>();
    } else {
        setmaxnreg_inc::<CONSUMER_REGS_3>();
    }
    // Thread-index-derived values are recomputed where they are used (a
    // special-register read) rather than kept live across the main loop:
    // with three consumers every register counts.
    let wg = warpgroup_idx();
    let row0 = 64 * wg as usize;
    // The mask aligned bottom-right: keys shifted by `q_extra`, rows by
    // `k_extra` (both 0 dense: the dense code).
    let rows = Rows { seq: span.lk + span.q_extra, causal, wg_first_row: mb * QM as u32 + row0 as u32 + span.k_extra, scale_log2 };
    let key_shift = span.q_extra;
    let turns = TurnOrder::<TURN_BARRIERS, NC>;
    let (mut kc, mut vc) = (k_ring.consumer(), v_ring.consumer());
    // O is first written by block 0's `P V` (`accumulate = false`): no
    // zeroing (at D 256 LLVM lowers a zeroed 512-byte array through local
    // memory).
    let mut acc_o = Acc::<D>::undefined();
    let mut st = SoftmaxState { m: [f32::NEG_INFINITY; 2], l: [0.0; 2] };
    q_loaded.wait();
    turns.start(wg);
    // Block 0: S = Q K0ᵀ, then its softmax, P kept as A fragments.
    let k0 = kc.wait();
    turns.wait_turn(wg);
    let mut acc_s = Acc::<BN>::undefined();
    acc_s.mma(q_buf, row0, k_bufs.at(k0.index()), 0, false);
    wgmma_commit_group();
    turns.pass_turn(wg);
    wgmma_wait::<0>();
    kc.release_slot(k0);
    acc_s.fence_operands();
    let _ = online_softmax_with::<BN, X>(acc_s.regs.as_mut(), j0 * BN as u32 + key_shift, &rows, &mut st, &x);
    let mut frag = [[0u32; 4]; KC];
    p_fragments::<E, KC>(acc_s.regs.as_ref(), &mut frag);
    for j in j0 + 1..n_blocks {
        let ks = kc.wait();
        // On the tensor pipe in turn: S_j = Q K_jᵀ, then O += P_(j-1) V_(j-1).
        turns.wait_turn(wg);
        acc_s.mma(q_buf, row0, k_bufs.at(ks.index()), 0, false);
        wgmma_commit_group();
        let vs = vc.wait();
        acc_o.mma_rs_kn_chain(&frag, v_bufs.at(vs.index()), 0, j > j0 + 1);
        wgmma_commit_group();
        turns.pass_turn(wg);
        // S_j's softmax while P V runs (and the other warpgroup's GEMMs).
        wgmma_wait::<1>();
        kc.release_slot(ks);
        acc_s.fence_operands();
        let alpha = online_softmax_with::<BN, X>(acc_s.regs.as_mut(), j * BN as u32 + key_shift, &rows, &mut st, &x);
        wgmma_wait::<0>();
        vc.release_slot(vs);
        acc_o.fence_operands();
        {
            let or = acc_o.regs.as_mut();
            unroll(D / 2, |i| or[i] *= alpha[(i / 2) % 2]);
        }
        p_fragments::<E, KC>(acc_s.regs.as_ref(), &mut frag);
    }
    // The last block's O += P V.
    let vs = vc.wait();
    turns.wait_turn(wg);
    acc_o.mma_rs_kn_chain(&frag, v_bufs.at(vs.index()), 0, n_blocks > j0 + 1);
    wgmma_commit_group();
    turns.pass_turn(wg);
    wgmma_wait::<0>();
    vc.release_slot(vs);
    turns.finish(wg);
    let m = st.m;
    let row_l = st.l;
    let t = thread_in_warpgroup() as usize;
    let (w, l) = (t / 32, t % 32);
    // This thread's two rows in the sequence.
    let my_row = |hh: usize| mb as usize * QM + row0 + 16 * w + l / 4 + 8 * hh;
    acc_o.fence_operands();
    // The quad's partial sums, then O / l and the log-sum-exp.
    let mut inv = [0f32; 2];
    // A sink (a variant): one more term `2^(sink - m)` of each row's sum,
    // with no value: the sum and the max taken over it too.
    let sink = x.sink_log2(h);
    unroll(2, |hh| {
        let v1 = row_l[hh] + kernel_device::warp::shfl_xor(row_l[hh], 1);
        let total = v1 + kernel_device::warp::shfl_xor(v1, 2);
        if X::ON && sink != f32::NEG_INFINITY {
            // O holds `Σ 2^(s - m) v`: over the sum with the sink, taken
            // at `mx = max(m, sink)`, its factor is `2^(m - mx) / total`.
            let mx = max(m[hh], sink);
            let o_factor = ex2_approx_ftz(m[hh] - mx);
            let total = total * o_factor + ex2_approx_ftz(sink - mx);
            inv[hh] = o_factor / total;
            let row = my_row(hh);
            if l % 4 == 0 && row < span.lq as usize {
                lse.write(pk.lse_at(&span, b, h, heads, row), (mx + lg2_approx_ftz(total)) * LN_2);
            }
        } else {
            // (Written as in the plain kernels, whose epilogue this is: at
            // 160 registers ptxas serializes the three-consumer kernel's
            // wgmmas for less.)
            inv[hh] = if total > 0.0 { 1.0 / total } else { 0.0 };
            let row = my_row(hh);
            if l % 4 == 0 && row < span.lq as usize {
                let lse_v = if total > 0.0 { (m[hh] + lg2_approx_ftz(total)) * LN_2 } else { f32::NEG_INFINITY };
                lse.write(pk.lse_at(&span, b, h, heads, row), lse_v);
            }
        }
    });
    // O over this warpgroup's Q rows (its own GEMMs, which read them, are
    // complete), then one TMA store of the tile.
    let base = q_buf.ptr().cast::<u8>();
    let regs = acc_o.regs.as_ref();
    unroll(D / 4, |p| {
        let (r, c) = (row0 + 16 * w + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4));
        let off = QTileOf::<E, QM, D>::offset_of(r, c);
        let hh = p % 2;
        // SAFETY: inside the tile (r < QM, c < D); 4-byte aligned (even column).
        unsafe { kernel_device::smem::write_word(base.add(off), E::pack(regs[2 * p] * inv[hh], regs[2 * p + 1] * inv[hh])) };
    });
    commit_smem();
    NamedBarrier::new(CONSUMER_BARRIER_ID, 128 * NC).sync();
    if O::ALL_THREADS || thread_linear() == 0 {
        o.store(q_buf, h, mb, &span, 128 * NC);
    }
}

/// Attention forward on element type `E` (q, k, v, o: f16 or bf16; P
/// rounded to `E` for `P V`; see [`attention_fwd_of`] for the schedule and
/// the launch): `O = softmax(scale Q Kᵀ) V` and the log-sum-exp per row.
/// Instances `(E, D, BN, KC = BN / 16, STAGES)`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (64, 128, 8, 3), (64, 128, 8, 4), (128, 128, 8, 2), (128, 128, 8, 3), (256, 64, 4, 2), (256, 80, 5, 2)))]
pub fn attention_fwd<E: AttnElem, const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    q: Tma<QTile<E, D>, 3>,
    k: Tma<KvTile<E, BN, D>, 3>,
    v: Tma<KvTile<E, BN, D>, 3>,
    o: Tma<QTile<E, D>, 3>,
    lse: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<QTile<E, D>>,
    #[scratch] k_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    #[scratch] v_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] k_consumed: Barriers<STAGES>,
    #[scratch(arrivals = 256)] v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    attention_fwd_of::<E, _, _, _, D, BN, KC, STAGES, BM, 2>(Plain, q, k, v, o, lse, Dense { seq }, None, kv_group, scale_log2, causal, q_buf, k_bufs, v_bufs, q_loaded, k_loaded, v_loaded, k_consumed, v_consumed);
}

/// Attention forward with THREE consumer warpgroups (192 Q rows per CTA,
/// 160 registers each), f16: [`attention_fwd_of`]'s schedule with the
/// turns on the tensor pipe going round robin over three warpgroups, so
/// each one's softmax hides under two others' GEMMs (FlashAttention-3's
/// head-dim-64 configuration: there the softmax's `ex2` costs as many
/// cycles as the GEMMs). Launch: grid `(ceil(seq / 192), heads, batch)`,
/// 4 warpgroups. Instances `(D, BN, KC, STAGES)`.
#[kernel(block = warpgroups(4), arch = sm_90a, instances((64, 128, 8, 2), (64, 128, 8, 3)))]
pub fn attention_fwd_wg3<const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    q: Tma<QTileOf<f16, 192, D>, 3>,
    k: Tma<KvTile<f16, BN, D>, 3>,
    v: Tma<KvTile<f16, BN, D>, 3>,
    o: Tma<QTileOf<f16, 192, D>, 3>,
    lse: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<QTileOf<f16, 192, D>>,
    #[scratch] k_bufs: Smem<[KvTile<f16, BN, D>; STAGES]>,
    #[scratch] v_bufs: Smem<[KvTile<f16, BN, D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 384)] k_consumed: Barriers<STAGES>,
    #[scratch(arrivals = 384)] v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    attention_fwd_of::<f16, _, _, _, D, BN, KC, STAGES, 192, 3>(Plain, q, k, v, o, lse, Dense { seq }, None, kv_group, scale_log2, causal, q_buf, k_bufs, v_bufs, q_loaded, k_loaded, v_loaded, k_consumed, v_consumed);
}

/// Attention forward with the variants models use ([`Variant`]): a
/// sliding window (query `i` sees keys `i - left ..= i + right`; with
/// `causal`, `right` is 0), logit soft-capping (Gemma 2: scores `cap
/// tanh(scale s / cap)`), and attention sinks (gpt-oss: a learned logit per
/// Q head, `sinks[h]`, one more term of each row's softmax sum with no
/// value; `lse` includes it). [`attention_fwd_of`]'s schedule; the K/V
/// blocks wholly outside a CTA's window are not loaded or computed. Plain
/// `scale_log2` is `scale log2 e`, or 1 with a soft-cap (`cap_in = scale /
/// cap`, `cap_out = cap log2 e`; `cap_in = 0`: no soft-cap); `left`,
/// `right` [`NO_LIMIT`] for no bound; `sinks[..n_sinks]` (`n_sinks` 0 or
/// `heads`).
///
/// Launch: as [`attention_fwd`]. Instances `(E, D, BN, KC, STAGES)`: head
/// dim 64 on the plain kernels' 128-key blocks (1.09-1.14x the 80-key
/// blocks it ran before on an H200, RESULTS.md 2026-11-29; those spilled
/// 4 bytes until the producer's issuing thread became an elected lane).
/// Head dim 128 on 64-key blocks (on 80 ptxas spilled 12 bytes, on 128
/// it serialized the wgmmas).
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (64, 128, 8, 3), (128, 64, 4, 2)))]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_ext<E: AttnElem, const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    q: Tma<QTile<E, D>, 3>,
    k: Tma<KvTile<E, BN, D>, 3>,
    v: Tma<KvTile<E, BN, D>, 3>,
    o: Tma<QTile<E, D>, 3>,
    lse: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    left: u32,
    right: u32,
    cap_in: f32,
    cap_out: f32,
    sinks: GmemRef<f32>,
    n_sinks: u32,
    #[scratch] q_buf: Smem<QTile<E, D>>,
    #[scratch] k_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    #[scratch] v_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] k_consumed: Barriers<STAGES>,
    #[scratch(arrivals = 256)] v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    // Without it ptxas drops this kernel's setmaxnreg (C7508) and the
    // consumers run on the launch's flat count.
    kernel_device::wgmma::pin_entry_registers();
    let x = Variant { left, right, cap_in, cap_out, sinks, n_sinks };
    attention_fwd_of::<E, _, _, _, D, BN, KC, STAGES, BM, 2>(x, q, k, v, o, lse, Dense { seq }, None, kv_group, scale_log2, causal, q_buf, k_bufs, v_bufs, q_loaded, k_loaded, v_loaded, k_consumed, v_consumed);
}

/// Attention forward over packed variable-length sequences (the serving
/// prefill): [`attention_fwd_of`]'s schedule on a [`Packed`] layout.
/// `q` and `o` hold `[total_q, heads, D]`, `k` and `v` `[total_k,
/// kv_heads, D]` (the maps of batch 1: `[column, row, 0]`), `lse` `[heads,
/// total_q]`; sequence `b` is queries `cu_seqlens_q[b] ..
/// cu_seqlens_q[b + 1]` and keys `cu_seqlens_k[b] .. cu_seqlens_k[b + 1]`
/// (read on the device: the launch depends only on the batch, the
/// maximum lengths and the heads), the causal mask aligned bottom-right.
/// CTA `(mb, h, b)` exits when Q block `mb` lies past its sequence; keys
/// past the sequence (the next sequence's, or the map's zero fill) are
/// masked to `-inf`; O is written row by row inside the sequence only
/// ([`PackedOut`]); offsets that break their rules are clamped and
/// reported in `errors` ([`Packed`], [`VARLEN_ERROR_WORDS`] words).
///
/// `totals` is `(total_q, total_k)` and `max_seqlens` `(max_seqlen_q,
/// max_seqlen_k)`, each as [`pair_u64`].
///
/// Launch: grid `(ceil(max_seqlen_q / 128), heads, batch)`, 3 warpgroups.
/// Instances `(E, D, BN, KC, STAGES)`: each head dim's dense default.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (64, 128, 8, 3), (128, 128, 8, 2), (256, 80, 5, 2)))]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_varlen<E: AttnElem + Pack16, const D: usize, const BN: usize, const KC: usize, const STAGES: usize>(
    q: Tma<QTile<E, D>, 3>,
    k: Tma<KvTile<E, BN, D>, 3>,
    v: Tma<KvTile<E, BN, D>, 3>,
    o: Gmem<E>,
    lse: Gmem<f32>,
    cu_seqlens_q: GmemRef<u32>,
    cu_seqlens_k: GmemRef<u32>,
    errors: Gmem<u32>,
    totals: u64,
    max_seqlens: u64,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<QTile<E, D>>,
    #[scratch] k_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    #[scratch] v_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] k_consumed: Barriers<STAGES>,
    #[scratch(arrivals = 256)] v_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    let pk = Packed::new(cu_seqlens_q, cu_seqlens_k, totals, max_seqlens);
    let out = PackedOut { o, heads: grid_dim().y };
    attention_fwd_of::<E, _, _, _, D, BN, KC, STAGES, BM, 2>(Plain, q, k, v, out, lse, pk, Some(errors), kv_group, scale_log2, causal, q_buf, k_bufs, v_bufs, q_loaded, k_loaded, v_loaded, k_consumed, v_consumed);
}
