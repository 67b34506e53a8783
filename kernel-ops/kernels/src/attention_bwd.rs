//! Attention backward on Hopper (FlashAttention-2/3's algorithm, written in
//! the language): given `q`, `k`, `v`, the forward's `o` and log-sum-exp,
//! and `dO`, computes `dQ`, `dK`, `dV` for the layouts of
//! [`attention`](crate::attention) (`[batch, seq, heads, head_dim]`, K/V
//! with `kv_heads` heads), f16 or bf16, head_dim 64 or 128, causal or not,
//! GQA. Three kernels, launched in this order by
//! `kernel_ops::attention::attention_backward`:
//!
//! 1. [`attention_bwd_pre`] (SIMT): `delta = rowsum(dO ⊙ O)` per query row,
//!    beside the log-sum-exp (times log2 e), in a padded f32 scratch;
//! 2. [`attention_bwd`] (wgmma, warp-specialized): per block of 128 keys of
//!    one K/V head, dK and dV accumulated in registers over every Q block
//!    of every Q head of its group, dQ's partial sums added into an f32
//!    buffer (FlashAttention-2's choice, which measured faster than a
//!    second pass recomputing `P` and `dP`) by one bulk reduction
//!    (`cp.reduce.async.bulk .add.f32`) per step from SMEM, as
//!    FlashAttention-3 does: 1.2-1.5x faster than the consumers' own
//!    `red.global.add.v2.f32` (RESULTS.md, 2026-11-27);
//! 3. [`attention_bwd_dq`] (SIMT): `dQ = scale · dQ_acc` rounded to the
//!    element type, from the accumulator's layout ([`dq_acc_chunk`]) to
//!    dQ's.
//!
//! The forward's variants (sliding window, soft-cap, sinks) have their
//! backward in the same family: [`attention_bwd_ext`] is step 2 with the
//! window (Q blocks outside it skipped, [`window_q_blocks`]) and the
//! soft-cap's derivative, and [`attention_bwd_sinks`] the sinks' gradient
//! from step 1's statistics.
//!
//! With `S = scale Q Kᵀ`, `P = softmax(S)` (recomputed from the saved
//! log-sum-exp), `dV = Pᵀ dO`, `dP = dO Vᵀ`, `dS = P ⊙ (dP − delta)`,
//! `dQ = scale dS K`, `dK = scale dSᵀ Q`.
use kernel_device::array::regs::unroll;
use kernel_device::array::{ArrayLayout, Scalar, Wgmma};
use kernel_device::layout::{Swizzled, Tile};
use kernel_device::math::{ex2_approx_ftz, LOG2_E};
use kernel_device::prelude::*;
use kernel_device::tma::{bulk, commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{pin_entry_registers, setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_device::pipeline::{PhaseBits, Ring, Slot};
use kernel_device::{bf16, f16, Barriers};

use crate::attention::{p_fragments, AttnElem, Dense, Extras, Packed, Packing, Plain, QTileOf, Span, Variant};
use kernel_device::Pack16;

/// Keys per CTA: two consumer warpgroups of 64 keys each.
pub const BWD_BN: usize = 128;
/// Q rows per step of the loop (the N of `Sᵀ = K Qᵀ`, the K of `dV += Pᵀ dO`).
pub const BWD_BM: usize = 64;
/// P's (and dS's) k16 A fragments per step (`BWD_BM / 16`).
const KC: usize = BWD_BM / 16;
/// Register budgets (`setmaxnreg`): producer 24, consumers 240 (24 + 2 x
/// 240 = 504, the register pool of a 384-thread CTA; more would make a
/// `setmaxnreg.inc` wait forever).
const PRODUCER_REGS: u32 = 24;
const CONSUMER_REGS: u32 = 240;
const _: () = assert!(
    kernel_device::wgmma::counts_fit(&[CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS]),
    "setmaxnreg: the roles' counts must sum to at most the CTA's register pool (3 x 168 at 384 threads)"
);
/// The consumers' named barriers: both warpgroups (256 threads), and one
/// per warpgroup (`WG_BARRIER + w`, 128 threads).
const BOTH_BARRIER: u32 = 1;
const WG_BARRIER: u32 = 2;
/// D 64's dSᵀ handover of step `i` (`DQ_BARRIER + i % 2`, 256 threads).
const DQ_BARRIER: u32 = 4;

/// A 64-row tile of K, V, dK or dV (`64 keys x D`).
pub type KHalf<E, const D: usize> = Tile<E, 64, D, Swizzled<128>>;
/// A Q or dO tile of one step: `64 rows x D`.
pub type QStep<E, const D: usize> = QTileOf<E, BWD_BM, D>;
/// `dSᵀ` of one warpgroup and step: `64 keys x 64 queries`.
pub type DsTile<E> = Tile<E, 64, BWD_BM, Swizzled<128>>;

/// The rules every instance passes (compile time): `D` 64 or 128 (the
/// registers: a consumer thread holds `D / 2` dK and `D / 2` dV
/// accumulators, 32 for `Sᵀ`, 32 for `dPᵀ` and 32 for dQ's partial);
/// 2 or more stages of Q/dO; SMEM `K + V + STAGES (Q + dO) + 4 dS + 2 dQ`
/// (the last two f32) fits.
pub const fn check_attention_bwd(d: usize, stages: usize) {
    assert!(d == 64 || d == 128, "attention backward: head_dim (D) must be 64 or 128");
    assert!(stages >= 2, "attention backward: at least 2 Q/dO stages (one loads while the other is read)");
    assert!(
        2 * (2 * BWD_BN * d + stages * 2 * BWD_BM * d + 4 * 64 * BWD_BM) + 4 * 2 * DQ_CHUNK <= kernel_device::launch::MAX_SMEM_BYTES,
        "attention backward: SMEM K + V (128 x D each) + STAGES x (Q + dO) (64 x D each) + 4 dS tiles (64 x 64) + 2 f32 dQ buffers (64 x 64) must fit one CTA (kernel_device::launch::MAX_SMEM_BYTES)"
    );
}

/// The Q blocks (of [`BWD_BM`] rows) key block `nb` (of [`BWD_BN`] keys)
/// meets: from the first whose last row reaches the block's first key
/// (causal), or 0, to `ceil(seq / BWD_BM)`.
#[inline(always)]
pub fn q_blocks(nb: u32, seq: u32, causal: bool) -> (u32, u32) {
    let first = if causal { nb * BWD_BN as u32 / BWD_BM as u32 } else { 0 };
    (first, seq.div_ceil(BWD_BM as u32))
}

/// [`q_blocks`]'s range `m_first .. m_end` narrowed to the Q blocks key
/// block `nb` meets under a variant's window (query `i` sees keys `i - left
/// ..= i + right`, so key `j` is seen by queries `j - right ..= j + left`);
/// unchanged for [`Plain`]. The range may come out empty (`m_end ==
/// m_first`).
#[inline(always)]
pub fn window_q_blocks<X: Extras>(nb: u32, m_first: u32, m_end: u32, x: &X) -> (u32, u32) {
    if !X::ON {
        return (m_first, m_end);
    }
    let (left, right) = x.window();
    let (k_lo, k_hi) = (nb * BWD_BN as u32, nb * BWD_BN as u32 + BWD_BN as u32 - 1);
    let first = m_first.max(k_lo.saturating_sub(right) / BWD_BM as u32);
    let end = m_end.min(k_hi.saturating_add(left) / BWD_BM as u32 + 1);
    (first, end.max(first))
}

/// Floats of one chunk of `dq_acc`: 64 query rows x 64 columns of dQ.
pub const DQ_CHUNK: usize = BWD_BM * 64;

/// Where `dq_acc` (dQ's f32 partial sums) keeps chunk `(m, half)` of Q head
/// `h` of batch `b`: its first element. Per `(b, h)` the buffer holds
/// `seq_pad x D` floats as chunks of 64 rows (row block `m`) by 64 columns
/// (column half `half`, 0 at D 64), chunk `(m, half)` the
/// `(m D / 64 + half)`-th, each in the order the main kernel's dQ
/// accumulator holds it: float `4 (128 j + t) + e` is register `4 j + e`
/// of thread `t` (whose row and column are [`Wgmma<64>`]'s `coords`), so
/// that each thread's stores of it are 16 bytes and conflict-free and the
/// chunk goes to global memory as one bulk reduction. `seq_pad` is `seq`
/// rounded up to 64.
#[inline(always)]
pub fn dq_acc_chunk<const D: usize>(b: u32, h: u32, heads: u32, m: u32, half: u32, seq_pad: usize) -> usize {
    dq_acc_at::<D>((b * heads + h) as usize * seq_pad, m, half)
}

/// [`dq_acc_chunk`] from the padded row `row0` of query 0 of a `(sequence,
/// head)` ([`BwdPacking::pad_row0`]): chunk `(m, half)`'s first float.
#[inline(always)]
pub fn dq_acc_at<const D: usize>(row0: usize, m: u32, half: u32) -> usize {
    (row0 + m as usize * BWD_BM) * D + half as usize * DQ_CHUNK
}

/// Rows of the packed backward's padded layouts per head (the statistics,
/// `dq_acc`): `total_q + 64 batch`, rounded up to 64. Sequence `b`'s rows
/// start at [`varlen_pad_start`], 64-aligned, each sequence's
/// `ceil(lq / 64)` blocks clear of the next's (FlashAttention-3's
/// padded varlen layout).
#[inline(always)]
pub const fn varlen_pad_rows(total_q: usize, batch: usize) -> usize {
    (total_q + BWD_BM * batch).div_ceil(BWD_BM) * BWD_BM
}

/// The first padded row of packed sequence `b` whose first query is row
/// `q0`: `64 floor((q0 + 64 b) / 64)`.
#[inline(always)]
pub const fn varlen_pad_start(q0: usize, b: usize) -> usize {
    (q0 + BWD_BM * b) / BWD_BM * BWD_BM
}

/// Where the padded rows (statistics, `dq_acc`) of a `(sequence, head)`
/// start: dense `[batch, heads, seq_pad]`; packed `[heads, pad_rows]` with
/// sequence `b` from [`varlen_pad_start`] (`batch` is the grid's `z`).
pub trait BwdPacking: Packing {
    fn pad_row0(&self, span: &Span, b: u32, h: u32, heads: u32, seq_pad: usize) -> usize;
}

impl BwdPacking for Dense {
    #[inline(always)]
    fn pad_row0(&self, _span: &Span, b: u32, h: u32, heads: u32, seq_pad: usize) -> usize {
        (b * heads + h) as usize * seq_pad
    }
}

impl BwdPacking for Packed {
    #[inline(always)]
    fn pad_row0(&self, span: &Span, b: u32, h: u32, _heads: u32, _seq_pad: usize) -> usize {
        h as usize * varlen_pad_rows(self.total_q as usize, grid_dim().z as usize) + varlen_pad_start(span.q0 as usize, b as usize)
    }
}

/// The Q blocks key block `nb` of a packed sequence meets: [`q_blocks`]
/// with the mask aligned bottom-right (query `i` sees key `j` when `j +
/// q_extra <= i + k_extra`); none when the sequence has no query.
#[inline(always)]
pub fn q_blocks_span(nb: u32, s: &Span, causal: bool) -> (u32, u32) {
    let end = s.lq.div_ceil(BWD_BM as u32);
    let first = if causal { ((nb * BWD_BN as u32 + s.q_extra).saturating_sub(s.k_extra) / BWD_BM as u32).min(end) } else { 0 };
    (first, end)
}

/// Where dK and dV go once rounded into K's and V's SMEM tiles (warpgroup
/// `w`'s 64 keys): [`store`](KvStore::store) is called, after the
/// warpgroup met, by all its threads ([`KvStore::ALL_THREADS`]) or by its
/// thread 0 only.
pub trait KvStore<E: AttnElem, const D: usize> {
    const ALL_THREADS: bool;
    /// `key0`: the tiles' first key in the sequence; `col`: the K/V head's
    /// first column.
    fn store(&self, dk_tile: Smem<KHalf<E, D>>, dv_tile: Smem<KHalf<E, D>>, col: u32, key0: u32, span: &Span);
}

/// Dense: one TMA store per tile (rows past the sequence clipped per batch).
impl<E: AttnElem, const D: usize> KvStore<E, D> for (Tma<KHalf<E, D>, 3>, Tma<KHalf<E, D>, 3>) {
    const ALL_THREADS: bool = false;
    #[inline(always)]
    fn store(&self, dk_tile: Smem<KHalf<E, D>>, dv_tile: Smem<KHalf<E, D>>, col: u32, key0: u32, span: &Span) {
        self.0.store_at(dk_tile, [col, span.k0 + key0, span.z]);
        self.1.store_at(dv_tile, [col, span.k0 + key0, span.z]);
        commit_group();
        wait_group::<0>();
    }
}

/// Packed: dK and dV (`[total_k, kv_heads, D]`) written from the tiles by
/// the warpgroup, 16 bytes per thread and step, only keys inside the
/// sequence.
#[derive(Clone, Copy)]
pub struct PackedKvOut<E> {
    pub dk: Gmem<E>,
    pub dv: Gmem<E>,
    pub kv_heads: u32,
}

impl<E: AttnElem + Pack16, const D: usize> KvStore<E, D> for PackedKvOut<E> {
    const ALL_THREADS: bool = true;
    #[inline(always)]
    fn store(&self, dk_tile: Smem<KHalf<E, D>>, dv_tile: Smem<KHalf<E, D>>, col: u32, key0: u32, span: &Span) {
        let rows = span.lk.saturating_sub(key0).min(64) as usize;
        let per_row = D / E::LANES;
        let mut i = thread_in_warpgroup() as usize;
        while i < rows * per_row {
            let (r, c) = (i / per_row, i % per_row * E::LANES);
            let at = ((span.k0 + key0) as usize + r) * self.kv_heads as usize * D + col as usize + c;
            self.dk.write_v4(at, dk_tile.get_v4(r, c));
            self.dv.write_v4(at, dv_tile.get_v4(r, c));
            i += 128;
        }
        // The warpgroup's dQ reductions read its SMEM until they complete.
        if thread_in_warpgroup() == 0 {
            wait_group::<0>();
        }
    }
}

/// The per-query statistics the main kernel reads, one pair per row of
/// `[batch, heads, seq_pad]` (`seq_pad = 64 ceil(seq / 64)`, so every step's
/// 64 rows are in bounds and each thread's two adjacent rows are one
/// 16-byte load): `(lse log2 e, delta)` with `delta = Σ_d dO ⊙ O` of query
/// `(b, s, h)`; padding rows get `(+inf, 0)`, which make `P` and `dS` 0.
/// One warp per row: lane `l` reads elements `l, l + 32, ..`, then a
/// butterfly; the warps stride over the rows by the grid. Launch: any
/// grid (up to `ceil(batch heads seq_pad / 4)`), one warpgroup.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_pre_of<E: Scalar, const D: usize>(o: GmemRef<E>, d_o: GmemRef<E>, lse: GmemRef<f32>, stats: Gmem<f32>, batch: u32, seq: u32, heads: u32, seq_pad: u32) {
    let lane = lane_id() as usize;
    let mut row = block_idx().x * 4 + warp_in_warpgroup();
    while row < batch * heads * seq_pad {
        let (bh, s) = (row / seq_pad, row % seq_pad);
        let pair = if s >= seq {
            [f32::INFINITY, 0.0]
        } else {
            let (b, h) = (bh / heads, bh % heads);
            let base = ((b * seq + s) * heads + h) as usize * D;
            let mut acc = 0f32;
            unroll(D / 32, |i| {
                let at = base + lane + 32 * i;
                acc = o.read(at).to_f32().fma(d_o.read(at).to_f32(), acc);
            });
            [lse.read((bh * seq + s) as usize) * LOG2_E, kernel_device::reduce::warp_sum(acc)]
        };
        if lane == 0 {
            stats.write_v2(2 * row as usize, pair);
        }
        row += grid_dim().x * 4;
    }
}

/// `dQ = scale · dQ_acc` rounded to `E` into `dq` (`[batch, seq, heads,
/// D]`): each thread reads 4 consecutive floats of a chunk of `acc` (see
/// [`dq_acc_chunk`]), registers `4 j .. 4 j + 4` of accumulator thread `t`,
/// and writes them where [`Wgmma<64>`] puts them (rows past `seq`
/// skipped); the threads stride by the grid. Launch: any grid (up to
/// `ceil(acc.len() / 512)`), one warpgroup.
#[inline(always)]
#[track_caller]
pub fn attention_bwd_dq_of<E: Scalar, const D: usize>(acc: GmemRef<f32>, dq: Gmem<E>, seq: u32, heads: u32, scale: f32) {
    let (seq_u, heads_u) = (seq as usize, heads as usize);
    let seq_pad = seq_u.div_ceil(BWD_BM) * BWD_BM;
    // Chunks per `(b, h)`, in `(m, half)` order.
    let (halves, per_head) = (D / 64, seq_pad / BWD_BM * (D / 64));
    let mut u = (block_idx().x * 128 + thread_in_warpgroup()) as usize;
    while 4 * u < acc.len() {
        let (chunk, f) = (4 * u / DQ_CHUNK, 4 * u % DQ_CHUNK);
        let (bh, c) = (chunk / per_head, chunk % per_head);
        let (m, half) = (c / halves, c % halves);
        let (b, h) = (bh / heads_u, bh % heads_u);
        let v = acc.read_nc_v4(dq_acc_chunk::<D>(b as u32, h as u32, heads, m as u32, half as u32, seq_pad) + f);
        let (j, t) = (f / 512, (f / 4) % 128);
        unroll(4, |e| {
            let (row, col) = Wgmma::<64>::coords(t, 4 * j + e);
            let s = m * BWD_BM + row;
            if s < seq_u {
                dq.write(((b * seq_u + s) * heads_u + h) * D + 64 * half + col, E::from_f32(v[e] * scale));
            }
        });
        u += 128 * grid_dim().x as usize;
    }
}

/// The main backward kernel body (see the module and [`attention_bwd`]).
///
/// This kernel works as follows. CTA `(nb, hk, b)` owns keys `128 nb ..
/// 128 nb + 128` of K/V head `hk` of batch `b`.
/// 1. One thread of the producer warpgroup (number 2, 24 registers) loads
///    K and V once (two 64-key tiles each), then for every step `i` (Q
///    head `g` of the group, Q block `m`) loads Q's and dO's `64 x D` tiles
///    into slot `i % STAGES` after the slot's release.
/// 2. Consumer warpgroup `w` (240 registers) owns keys `64 w ..` and keeps
///    dK and dV (`64 x D` each) in registers. Per step:
///    - `Sᵀ = K_w Qᵀ` and `dPᵀ = V_w dOᵀ` (SS wgmmas, `m64n64k16`);
///    - `Pᵀ = 2^(Sᵀ scale log2 e − lse log2 e)` (keys past `seq` or, with
///      the mask, after the query: 0), `dSᵀ = Pᵀ ⊙ (dPᵀ − delta)`;
///    - `dV += Pᵀ dO` and `dK += dSᵀ Q` with Pᵀ and dSᵀ as register A
///      fragments (RS wgmmas, dO and Q MN-major as stored);
///    - dSᵀ to SMEM (double-buffered by step parity), then dQ's partial
///      `dS K` by SS wgmmas with both operands transposed views: at D 128
///      the two warpgroups meet and each takes 64 of dQ's columns over all
///      128 keys; at D 64 the warpgroup of the step's parity takes all
///      columns over all 128 keys while the other only hands its dSᵀ over
///      (a named-barrier arrive): one partial per dQ element and step;
///    - the slot released, dQ's partial stored to the warpgroup's f32 SMEM
///      buffer in its registers' order and added into `dq_acc` by one bulk
///      reduction (thread 0 of the warpgroup; the buffer's next write waits
///      for that reduction to have read it).
/// 3. At the end: both warpgroups meet (every MMA reading K and V is
///    done), dK (times `scale`) and dV are rounded into K's and V's SMEM
///    tiles and stored by TMA (rows past `seq` clipped).
///
/// Launch: grid `(ceil(seq / 128), kv_heads, batch)`, 3 warpgroups;
/// `kv_group = heads / kv_heads`. Constraints: [`check_attention_bwd`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn attention_bwd_of<E: AttnElem, X: Extras, P: BwdPacking, KV: KvStore<E, D>, const D: usize, const STAGES: usize>(
    x: X,
    q: Tma<QStep<E, D>, 3>,
    k: Tma<KHalf<E, D>, 3>,
    v: Tma<KHalf<E, D>, 3>,
    d_o: Tma<QStep<E, D>, 3>,
    dkv: KV,
    stats: GmemRef<f32>,
    dq_acc: Gmem<f32>,
    pk: P,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    k_bufs: Smem<[KHalf<E, D>; 2]>,
    v_bufs: Smem<[KHalf<E, D>; 2]>,
    q_bufs: Smem<[QStep<E, D>; STAGES]>,
    do_bufs: Smem<[QStep<E, D>; STAGES]>,
    ds_bufs: Smem<[DsTile<E>; 4]>,
    stats_bufs: Smem<[[f32; 2 * BWD_BM]; STAGES]>,
    dq_bufs: Smem<[[f32; DQ_CHUNK]; 2]>,
    kv_loaded: Barrier,
    qdo_loaded: Barriers<STAGES>,
    qdo_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
{
    const { check_attention_bwd(D, STAGES) };
    // Without it ptxas drops this kernel's setmaxnreg at D 64 (C7508) and
    // spills; at D 128 ptxas honours them unpinned, and the pinned
    // allocation measured 10 % slower (RESULTS.md, 2026-11-26).
    if D == 64 {
        pin_entry_registers();
    }

    // The Q/dO ring (`qdo_consumed`: 256 consumer threads), made inside
    // each role like the geometry.
    let ring = || Ring::new(&qdo_loaded, &qdo_consumed, 256);
    // The CTA's geometry is derived inside each role, after its
    // `setmaxnreg`: nothing stays live across the register reallocation.
    let geometry = || {
        let (nb, hk, b) = (block_idx().x, block_idx().y, block_idx().z);
        let span = pk.span(b);
        let (m_first, m_end) = if P::VARLEN { q_blocks_span(nb, &span, causal != 0) } else { q_blocks(nb, span.lq, causal != 0) };
        // The statistics' padded rows: every Q block's, whatever the window.
        let seq_pad = m_end as usize * BWD_BM;
        let (m_first, m_end) = window_q_blocks(nb, m_first, m_end, &x);
        Geometry { nb, hk, b, heads: grid_dim().y * kv_group, m_first, per_head: m_end - m_first, seq_pad, col: hk * D as u32, span }
    };
    // Step `i`: Q head `hk kv_group + g`, Q block `m`.
    let step = |g: &Geometry, i: u32| (g.hk * kv_group + i / g.per_head, g.m_first + i % g.per_head);
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<PRODUCER_REGS>();
        if thread_in_warpgroup() == 0 {
            let g = geometry();
            // Packed: this key block lies past its sequence (the grid
            // covers the longest one). Each role exits on its own, after
            // its `setmaxnreg` (an exit before them cost the consumers
            // their 240 registers: ptxas spilled).
            if P::VARLEN && g.nb * BWD_BN as u32 >= g.span.lk {
                return;
            }
            let Geometry { nb, b, heads, seq_pad, col, span, .. } = g;
            let half = <KHalf<E, D> as TileLayout>::BYTES as u32;
            kv_loaded.arrive_expect_tx(4 * half);
            unroll(2, |t| {
                let row = span.k0 + nb * BWD_BN as u32 + 64 * t as u32;
                k.load_at(k_bufs.at(t), [col, row, span.z], kv_loaded.as_ref());
                v.load_at(v_bufs.at(t), [col, row, span.z], kv_loaded.as_ref());
            });
            let bytes = 2 * <QStep<E, D> as TileLayout>::BYTES as u32 + bulk::bytes::<f32, { 2 * BWD_BM }>();
            let fill = |slot: Slot<'_>| {
                let (i, s, bar) = (slot.step(), slot.index(), slot.barrier());
                let (h, m) = step(&g, i);
                q.load_at(q_bufs.at(s), [h * D as u32, span.q0 + m * BWD_BM as u32, span.z], bar);
                d_o.load_at(do_bufs.at(s), [h * D as u32, span.q0 + m * BWD_BM as u32, span.z], bar);
                let row0 = pk.pad_row0(&span, b, h, heads, seq_pad) + m as usize * BWD_BM;
                bulk::load(stats_bufs.at(s), stats, 2 * row0, bar);
            };
            // The parity: at D 128 one bit per slot (`PhaseBits`): with the
            // parity derived from the step, ptxas spilled the SMEM base on
            // this thread's 24 registers (one reload per step, 8 bytes of
            // spill instead of 4); at D 64 derived from the step (the
            // shorter loop there: 114 SASS instructions against 118).
            if D == 128 {
                let mut producer = ring().producer_with::<PhaseBits>();
                for _ in 0..kv_group * g.per_head {
                    fill(producer.acquire_tx(bytes));
                }
            } else {
                let mut producer = ring().producer();
                for _ in 0..kv_group * g.per_head {
                    fill(producer.acquire_tx(bytes));
                }
            }
        }
        return;
    }
    setmaxnreg_inc::<CONSUMER_REGS>();
    let g = geometry();
    if P::VARLEN && g.nb * BWD_BN as u32 >= g.span.lk {
        return;
    }
    // The span is read again where it is used (packed: two cached loads
    // each time, no register held across the steps; dense: constants).
    let Geometry { nb, b, heads, col, .. } = g;
    let causal = causal != 0;
    let w = warpgroup_idx() as usize;
    let wg_bar = NamedBarrier::new(WG_BARRIER + w as u32, 128);
    let both = NamedBarrier::new(BOTH_BARRIER, 256);
    let mut acc_dk = Acc::<D>::undefined();
    let mut acc_dv = Acc::<D>::undefined();
    kv_loaded.wait();
    let mut consumer = ring().consumer();
    for i in 0..kv_group * g.per_head {
        let (h, m) = step(&g, i);
        let slot = consumer.wait();
        let s = slot.index();
        // Sᵀ = K_w Qᵀ, dPᵀ = V_w dOᵀ.
        let mut acc_s = Acc::<BWD_BM>::undefined();
        // The soft-cap's derivative per score (a variant with a cap only).
        let mut dcap = [1f32; BWD_BM / 2];
        acc_s.mma(k_bufs.at(w), 0, q_bufs.at(s), 0, false);
        wgmma_commit_group();
        let mut acc_dp = Acc::<BWD_BM>::undefined();
        acc_dp.mma(v_bufs.at(w), 0, do_bufs.at(s), 0, false);
        wgmma_commit_group();
        // This thread's 16 queries (columns): `q0 + 8 c + 2 (l % 4) + e`.
        let t = thread_in_warpgroup() as usize;
        let l = t % 32;
        // Their `(lse log2 e, delta)` pairs, in the slot's SMEM copy, read
        // where each value is used (no registers held across the waits;
        // the SASS loads only the floats used, one `LDS` each).
        let st = stats_bufs.at(s).ptr().cast::<Quad>();
        // SAFETY: 16-byte aligned (the copy is; 8 c + 2 (l % 4) is even), in
        // the slot's 128 floats (c < 8).
        let pair = |c: usize| unsafe { st.add((8 * c + 2 * (l % 4)) / 2).read().0 };
        wgmma_wait::<1>();
        acc_s.fence_operands();
        // The mask aligned bottom-right: keys shifted by `q_extra`, queries
        // by `k_extra` (both 0 dense: the dense code), the span read here
        // (packed: no register held across the GEMMs' issue).
        let span = pk.span(block_idx().z);
        // Positions in `u32` (one 32-bit compare each; `usize` made them
        // 64-bit pairs).
        let key0 = nb * BWD_BN as u32 + 64 * w as u32 + span.q_extra;
        let seq_u = span.lk + span.q_extra;
        let q0 = m * BWD_BM as u32 + span.k_extra;
        let qcol = |c: usize, e: usize| q0 + (8 * c + 2 * (l % 4) + e) as u32;
        {
            let sr = acc_s.regs.as_mut();
            if X::ON {
                variant_probabilities(sr, &mut dcap, &x, scale_log2, key0, q0, seq_u, causal, |r| pair(r / 4)[2 * (r % 2)]);
            } else {
                // Register `i`: key (row) `key0 + 16 (t / 32) + l / 4 + 8 ((i / 2) % 2)`,
                // query (column) `qcol(i / 4, i % 2)`. Two copies of the loop:
                // the mask's compares and selects only on the blocks it cuts.
                let masked = key0 + 64 > seq_u || (causal && key0 + 63 > q0);
                if masked {
                    unroll(BWD_BM / 2, |r| {
                        let key = key0 + (16 * (t / 32) + l / 4 + 8 * ((r / 2) % 2)) as u32;
                        let p = ex2_approx_ftz(sr[r].fma(scale_log2, -pair(r / 4)[2 * (r % 2)]));
                        sr[r] = if key >= seq_u || (causal && key > qcol(r / 4, r % 2)) { 0.0 } else { p };
                    });
                } else {
                    unroll(BWD_BM / 2, |r| sr[r] = ex2_approx_ftz(sr[r].fma(scale_log2, -pair(r / 4)[2 * (r % 2)])));
                }
            }
        }
        wgmma_wait::<0>();
        acc_dp.fence_operands();
        {
            let (pr, dr) = (acc_s.regs.as_ref(), acc_dp.regs.as_mut());
            unroll(BWD_BM / 2, |r| dr[r] = pr[r] * (dr[r] - pair(r / 4)[2 * (r % 2) + 1]));
            if X::ON && x.softcap().is_some() {
                unroll(BWD_BM / 2, |r| dr[r] *= dcap[r]);
            }
        }
        let mut pf = [[0u32; 4]; KC];
        let mut dsf = [[0u32; 4]; KC];
        p_fragments::<E, KC>(acc_s.regs.as_ref(), &mut pf);
        p_fragments::<E, KC>(acc_dp.regs.as_ref(), &mut dsf);
        // dV += Pᵀ dO, dK += dSᵀ Q (dO and Q stored queries x D: B K x N).
        acc_dv.mma_rs_kn_chain(&pf, do_bufs.at(s), 0, i > 0);
        acc_dk.mma_rs_kn_chain(&dsf, q_bufs.at(s), 0, i > 0);
        wgmma_commit_group();
        // dSᵀ into this warpgroup's tile of the step's parity.
        let parity = 2 * (i as usize % 2);
        let ds = ds_bufs.at(parity + w);
        let base = ds.ptr().cast::<u8>();
        unroll(BWD_BM / 4, |p| {
            let (r, c) = (16 * (t / 32) + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4));
            let off = DsTile::<E>::offset_of(r, c);
            // SAFETY: inside the tile (r < 64, c < 64); 4-byte aligned (even column).
            unsafe { kernel_device::smem::write_word(base.add(off), dsf[p / 4][p % 4]) };
        });
        commit_smem();
        // dQ's partial: dS K (dS = the stored dSᵀ transposed; K stored keys
        // x D, so its view is transposed too).
        // At D 128 the two warpgroups meet and each takes 64 of dQ's columns
        // over all 128 keys; at D 64 the warpgroup of the step's parity takes
        // all of them over all 128 keys, the other only hands over its dSᵀ
        // (an arrive, no wait): one partial per element of dQ per step either
        // way. Everything touching dQ's accumulator stays inside one branch
        // (ptxas serializes a wgmma whose accumulator is live across a
        // branch it cannot prove warpgroup-uniform, C7520).
        let dq_mine = D == 128 || i as usize % 2 == w;
        let handover = NamedBarrier::new(DQ_BARRIER + i % 2, 256);
        if dq_mine {
            if D == 128 {
                both.sync();
            } else {
                handover.sync();
            }
            let half = if D == 128 { w } else { 0 };
            let mut acc_dq = Acc::<64>::undefined();
            acc_dq.mma_view(ds_bufs.at(parity).transposed(), 0, k_bufs.at(0).transposed(), 64 * half, false);
            acc_dq.mma_view(ds_bufs.at(parity + 1).transposed(), 0, k_bufs.at(1).transposed(), 64 * half, true);
            wgmma_commit_group();
            wgmma_wait::<0>();
            consumer.release_slot(slot);
            // dQ's partial to this warpgroup's SMEM buffer in the order of
            // the accumulator's registers (16-byte stores, no bank
            // conflicts; `dq_acc`'s layout, see [`dq_acc_chunk`]), after the
            // previous reduction from it has read it, then added into
            // `dq_acc` by one bulk reduction.
            let buf = dq_bufs.at(w);
            if t == 0 {
                wait_group_read::<0>();
            }
            wg_bar.sync();
            let regs = acc_dq.regs.as_ref();
            unroll(BWD_BM / 8, |j| buf.write_v4(4 * (128 * j + t), [regs[4 * j], regs[4 * j + 1], regs[4 * j + 2], regs[4 * j + 3]]));
            commit_smem();
            wg_bar.sync();
            if t == 0 {
                bulk::reduce_add(buf, dq_acc, dq_acc_at::<D>(pk.pad_row0(&pk.span(block_idx().z), b, h, heads, g.seq_pad), m, half as u32));
                commit_group();
            }
        } else {
            handover.arrive();
            wgmma_wait::<0>();
            consumer.release_slot(slot);
        }
    }
    // Every MMA reading K and V (both warpgroups' dQ) is done.
    both.sync();
    let scale = scale_log2 * (1.0 / LOG2_E);
    let t = thread_in_warpgroup() as usize;
    let l = t % 32;
    acc_dk.fence_operands();
    acc_dv.fence_operands();
    let (kb, vb) = (k_bufs.at(w).ptr().cast::<u8>(), v_bufs.at(w).ptr().cast::<u8>());
    let (dkr, dvr) = (acc_dk.regs.as_ref(), acc_dv.regs.as_ref());
    // Packed, a sequence without queries: no step ran, dK = dV = 0.
    // A window can leave a key block none either.
    let empty = (P::VARLEN || X::ON) && g.per_head == 0;
    unroll(D / 4, |p| {
        let (r, c) = (16 * (t / 32) + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4));
        let off = KHalf::<E, D>::offset_of(r, c);
        // SAFETY: inside the tiles (r < 64, c < D); 4-byte aligned (even column).
        unsafe {
            kernel_device::smem::write_word(kb.add(off), if empty { 0 } else { E::pack(dkr[2 * p] * scale, dkr[2 * p + 1] * scale) });
            kernel_device::smem::write_word(vb.add(off), if empty { 0 } else { E::pack(dvr[2 * p], dvr[2 * p + 1]) });
        }
    });
    commit_smem();
    wg_bar.sync();
    if KV::ALL_THREADS || thread_in_warpgroup() == 0 {
        dkv.store(k_bufs.at(w), v_bufs.at(w), col, nb * BWD_BN as u32 + 64 * w as u32, &pk.span(block_idx().z));
    }
}

/// A variant's `Pᵀ` block in place of the scores `sr` of one consumer
/// thread ([`attention_bwd_of`]'s register layout: register `r` is key
/// `key0 + 16 (t / 32) + l / 4 + 8 ((r / 2) % 2)` and query `q0 + 8 (r / 4)
/// + 2 (l % 4) + r % 2`; `lse(r)` its query's `lse log2 e`): with a
/// soft-cap the score is `cap tanh(scale s / cap)` (`t cap_out` in log2
/// units) and `dcap[r]` its derivative's `1 - t²` (the `scale` is applied
/// at the end, as without a cap); keys past `seq`, after the query
/// (causal) or outside the window get 0. The mask's compares only on the
/// blocks it cuts.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn variant_probabilities<X: Extras>(sr: &mut [f32], dcap: &mut [f32; BWD_BM / 2], x: &X, scale_log2: f32, key0: u32, q0: u32, seq: u32, causal: bool, lse: impl Fn(usize) -> f32) {
    let t = thread_in_warpgroup() as usize;
    let l = t % 32;
    let score_scale = match x.softcap() {
        Some((cap_in, cap_out)) => {
            unroll(BWD_BM / 2, |r| {
                let th = kernel_device::math::tanh_approx(sr[r] * cap_in);
                dcap[r] = th.fma(-th, 1.0);
                sr[r] = th * cap_out;
            });
            1.0
        }
        None => scale_log2,
    };
    let (left, right) = x.window();
    // A window cuts this block: some key past the first query's right
    // bound or before the last query's left bound.
    let windowed = key0 + 63 > q0 + right || key0 + left < q0 + 63;
    if key0 + 64 > seq || (causal && key0 + 63 > q0) || windowed {
        unroll(BWD_BM / 2, |r| {
            let key = key0 + (16 * (t / 32) + l / 4 + 8 * ((r / 2) % 2)) as u32;
            let query = q0 + (8 * (r / 4) + 2 * (l % 4) + r % 2) as u32;
            let p = ex2_approx_ftz(sr[r].fma(score_scale, -lse(r)));
            let outside = key + left < query || key > query + right;
            sr[r] = if key >= seq || (causal && key > query) || outside { 0.0 } else { p };
        });
    } else {
        unroll(BWD_BM / 2, |r| sr[r] = ex2_approx_ftz(sr[r].fma(score_scale, -lse(r))));
    }
}

/// Two queries' `(lse log2 e, delta)` pairs of the statistics' SMEM copy,
/// 16-byte aligned.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Quad([f32; 4]);

/// Where a CTA of [`attention_bwd_of`] works: key block `nb` of K/V head
/// `hk` of batch `b`; Q blocks `m_first ..` (`per_head` of them) of each
/// of the group's Q heads; `seq_pad` the statistics' padded rows; `col`
/// the K/V head's first column.
struct Geometry {
    nb: u32,
    hk: u32,
    b: u32,
    heads: u32,
    m_first: u32,
    per_head: u32,
    seq_pad: usize,
    col: u32,
    span: Span,
}

/// Attention backward's main kernel on element type `E` (f16 or bf16;
/// see [`attention_bwd_of`] for the schedule and the launch). Instances
/// `(E, D, STAGES)`.
#[kernel(
    block = warpgroups(3),
    arch = sm_90a,
    instances(E = [f16, bf16], (64, 2), (128, 2)),
    allow_spills = "head dim 128: the step's dQ-reduction address base, hoisted out of the step loop, is reloaded once per step by one thread (4 bytes; KNOWN_SPILLS in kernel-ops/tests/ptx.rs)"
)]
pub fn attention_bwd<E: AttnElem, const D: usize, const STAGES: usize>(
    q: Tma<QStep<E, D>, 3>,
    k: Tma<KHalf<E, D>, 3>,
    v: Tma<KHalf<E, D>, 3>,
    d_o: Tma<QStep<E, D>, 3>,
    dk: Tma<KHalf<E, D>, 3>,
    dv: Tma<KHalf<E, D>, 3>,
    stats: GmemRef<f32>,
    dq_acc: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] k_bufs: Smem<[KHalf<E, D>; 2]>,
    #[scratch] v_bufs: Smem<[KHalf<E, D>; 2]>,
    #[scratch] q_bufs: Smem<[QStep<E, D>; STAGES]>,
    #[scratch] do_bufs: Smem<[QStep<E, D>; STAGES]>,
    #[scratch] ds_bufs: Smem<[DsTile<E>; 4]>,
    #[scratch] stats_bufs: Smem<[[f32; 2 * BWD_BM]; STAGES]>,
    #[scratch] dq_bufs: Smem<[[f32; DQ_CHUNK]; 2]>,
    #[scratch] kv_loaded: Barrier,
    #[scratch] qdo_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] qdo_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
{
    attention_bwd_of::<E, _, _, _, D, STAGES>(
        Plain, q, k, v, d_o, (dk, dv), stats, dq_acc, Dense { seq }, kv_group, scale_log2, causal, k_bufs, v_bufs, q_bufs, do_bufs, ds_bufs, stats_bufs, dq_bufs, kv_loaded, qdo_loaded, qdo_consumed,
    );
}

/// The backward of [`attention_fwd_ext`](crate::attention::attention_fwd_ext)'s
/// variants: [`attention_bwd_of`] with a sliding window (`left`, `right`
/// as the forward's, causal folded in as `right = 0`; the Q blocks wholly
/// outside a key block's window are not loaded: [`window_q_blocks`]) and
/// a soft-cap (`cap_in = scale / cap`, `cap_out = cap log2 e`, `cap_in =
/// 0` for none: `P` recomputed through the cap, `dS` times its derivative
/// `1 - tanh²`). `scale_log2` is `scale log2 e` with or without a cap (it
/// scales dK here and dQ in [`attention_bwd_dq`]). Sinks change nothing
/// here (the forward's `lse` includes them; their gradient is
/// [`attention_bwd_sinks`]'s). Launch and constraints: as
/// [`attention_bwd`]. Instances `(E, D, STAGES)`: the variants' forward's
/// head dim.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (64, 2)))]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_ext<E: AttnElem, const D: usize, const STAGES: usize>(
    q: Tma<QStep<E, D>, 3>,
    k: Tma<KHalf<E, D>, 3>,
    v: Tma<KHalf<E, D>, 3>,
    d_o: Tma<QStep<E, D>, 3>,
    dk: Tma<KHalf<E, D>, 3>,
    dv: Tma<KHalf<E, D>, 3>,
    stats: GmemRef<f32>,
    dq_acc: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    left: u32,
    right: u32,
    cap_in: f32,
    cap_out: f32,
    #[scratch] k_bufs: Smem<[KHalf<E, D>; 2]>,
    #[scratch] v_bufs: Smem<[KHalf<E, D>; 2]>,
    #[scratch] q_bufs: Smem<[QStep<E, D>; STAGES]>,
    #[scratch] do_bufs: Smem<[QStep<E, D>; STAGES]>,
    #[scratch] ds_bufs: Smem<[DsTile<E>; 4]>,
    #[scratch] stats_bufs: Smem<[[f32; 2 * BWD_BM]; STAGES]>,
    #[scratch] dq_bufs: Smem<[[f32; DQ_CHUNK]; 2]>,
    #[scratch] kv_loaded: Barrier,
    #[scratch] qdo_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] qdo_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
{
    // No sink is read here (`n_sinks = 0`): `stats` stands in for the
    // sinks' pointer.
    let x = Variant { left, right, cap_in, cap_out, sinks: stats, n_sinks: 0 };
    attention_bwd_of::<E, _, _, _, D, STAGES>(
        x, q, k, v, d_o, (dk, dv), stats, dq_acc, Dense { seq }, kv_group, scale_log2, causal, k_bufs, v_bufs, q_bufs, do_bufs, ds_bufs, stats_bufs, dq_bufs, kv_loaded, qdo_loaded, qdo_consumed,
    );
}

/// The sinks' gradient: with `p_h = exp(sinks[h] - lse)` the sink's share
/// of a row's softmax (no value: `O = Σ_j p_j v_j`), `∂L/∂sinks[h] = -Σ
/// p_h delta` over the rows of Q head `h` (every batch and query; `delta
/// = rowsum(dO ⊙ O)`), from [`attention_bwd_pre`]'s statistics (padding
/// rows `(+inf, 0)` add 0). CTA `h` sums its head's rows in a fixed order
/// (each thread a strided partial, then a block sum: deterministic) into
/// `d_sinks[h]`. Launch: grid `(heads, 1, 1)`, one warpgroup.
#[kernel(block = warpgroups(1))]
pub fn attention_bwd_sinks(stats: GmemRef<f32>, sinks: GmemRef<f32>, d_sinks: Gmem<f32>, batch: u32, seq_pad: u32, #[scratch] partials: Smem<[f32; 32]>) {
    let (h, heads) = (block_idx().x, grid_dim().x);
    let sink_log2 = sinks.read_nc(h as usize) * LOG2_E;
    let mut acc = 0f32;
    for b in 0..batch {
        let row0 = ((b * heads + h) * seq_pad) as usize;
        let mut s = thread_in_warpgroup() as usize;
        while s < seq_pad as usize {
            let [lse_log2, delta] = stats.read_nc_v2(2 * (row0 + s));
            acc = ex2_approx_ftz(sink_log2 - lse_log2).fma(-delta, acc);
            s += 128;
        }
    }
    let total = kernel_device::reduce::block_sum(acc, partials);
    if thread_in_warpgroup() == 0 {
        d_sinks.write(h as usize, total);
    }
}

/// The statistics `(lse log2 e, rowsum(dO ⊙ O))` per query, on element
/// type `E` (see [`attention_bwd_pre_of`]). Instances `(E, D)`.
#[kernel(block = warpgroups(1), instances(E = [f16, bf16], (64), (128)))]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_pre<E: Scalar, const D: usize>(o: GmemRef<E>, d_o: GmemRef<E>, lse: GmemRef<f32>, stats: Gmem<f32>, batch: u32, seq: u32, heads: u32, seq_pad: u32) {
    attention_bwd_pre_of::<E, D>(o, d_o, lse, stats, batch, seq, heads, seq_pad);
}

/// `dQ = scale · dQ_acc` on element type `E` (see [`attention_bwd_dq_of`]). Instances `(E, D)`.
#[kernel(block = warpgroups(1), instances(E = [f16, bf16], (64), (128)))]
pub fn attention_bwd_dq<E: Scalar, const D: usize>(acc: GmemRef<f32>, dq: Gmem<E>, seq: u32, heads: u32, scale: f32) {
    attention_bwd_dq_of::<E, D>(acc, dq, seq, heads, scale);
}

/// The backward over packed variable-length sequences: [`attention_bwd_of`]
/// on a [`Packed`] layout (`q`, `d_o`: `[total_q, heads, D]`; `k`, `v`,
/// `dk`, `dv`: `[total_k, kv_heads, D]`; the maps of batch 1). CTA `(nb,
/// hk, b)` exits when key block `nb` lies past sequence `b`'s keys; the
/// statistics and `dq_acc` are in the padded packed layout
/// ([`varlen_pad_rows`], [`varlen_pad_start`]); dK and dV are written row
/// by row inside the sequence ([`PackedKvOut`]); a sequence without
/// queries gets dK = dV = 0. `totals` and `max_seqlens` as
/// [`pair_u64`](crate::attention::pair_u64). Launch: grid
/// `(ceil(max_seqlen_k / 128), kv_heads, batch)`, 3 warpgroups. Instances
/// `(E, D, STAGES)`.
#[kernel(
    block = warpgroups(3),
    arch = sm_90a,
    instances(E = [f16, bf16], (64, 2), (128, 2)),
    allow_spills = "head dim 128: as attention_bwd's (KNOWN_SPILLS in kernel-ops/tests/ptx.rs)"
)]
pub fn attention_bwd_varlen<E: AttnElem + Pack16, const D: usize, const STAGES: usize>(
    q: Tma<QStep<E, D>, 3>,
    k: Tma<KHalf<E, D>, 3>,
    v: Tma<KHalf<E, D>, 3>,
    d_o: Tma<QStep<E, D>, 3>,
    dk: Gmem<E>,
    dv: Gmem<E>,
    stats: GmemRef<f32>,
    dq_acc: Gmem<f32>,
    cu_seqlens_q: GmemRef<u32>,
    cu_seqlens_k: GmemRef<u32>,
    totals: u64,
    max_seqlens: u64,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] k_bufs: Smem<[KHalf<E, D>; 2]>,
    #[scratch] v_bufs: Smem<[KHalf<E, D>; 2]>,
    #[scratch] q_bufs: Smem<[QStep<E, D>; STAGES]>,
    #[scratch] do_bufs: Smem<[QStep<E, D>; STAGES]>,
    #[scratch] ds_bufs: Smem<[DsTile<E>; 4]>,
    #[scratch] stats_bufs: Smem<[[f32; 2 * BWD_BM]; STAGES]>,
    #[scratch] dq_bufs: Smem<[[f32; DQ_CHUNK]; 2]>,
    #[scratch] kv_loaded: Barrier,
    #[scratch] qdo_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] qdo_consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
{
    let pk = Packed::new(cu_seqlens_q, cu_seqlens_k, totals, max_seqlens);
    let dkv = PackedKvOut { dk, dv, kv_heads: grid_dim().y };
    attention_bwd_of::<E, _, _, _, D, STAGES>(
        Plain, q, k, v, d_o, dkv, stats, dq_acc, pk, kv_group, scale_log2, causal, k_bufs, v_bufs, q_bufs, do_bufs, ds_bufs, stats_bufs, dq_bufs, kv_loaded, qdo_loaded, qdo_consumed,
    );
}

/// The packed backward's statistics ([`attention_bwd_pre_of`]'s pairs, in
/// the padded packed layout `[heads, varlen_pad_rows]`): CTAs `(x, 0, b)`
/// stride over sequence `b`'s `heads x ceil(lq / 64) x 64` rows (one warp
/// per row; padding rows `(+inf, 0)`); `lse` is `[heads, total_q]`. The
/// first CTA of each sequence records its broken offset rules in `errors`
/// ([`Packing::report`]). Launch: grid `(x, 1, batch)`, one warpgroup.
#[kernel(block = warpgroups(1), instances(E = [f16, bf16], (64), (128)))]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_pre_varlen<E: Scalar, const D: usize>(
    o: GmemRef<E>,
    d_o: GmemRef<E>,
    lse: GmemRef<f32>,
    stats: Gmem<f32>,
    cu_seqlens_q: GmemRef<u32>,
    cu_seqlens_k: GmemRef<u32>,
    errors: Gmem<u32>,
    totals: u64,
    max_seqlens: u64,
    heads: u32,
) {
    let pk = Packed::new(cu_seqlens_q, cu_seqlens_k, totals, max_seqlens);
    let b = block_idx().z;
    let span = pk.span(b);
    if block_idx().x == 0 && thread_in_warpgroup() == 0 {
        pk.report(b, errors);
    }
    let lq_pad = span.lq.div_ceil(BWD_BM as u32);
    let lq_pad = lq_pad * BWD_BM as u32;
    let lane = lane_id() as usize;
    let mut row = block_idx().x * 4 + warp_in_warpgroup();
    while row < heads * lq_pad {
        let (h, s) = (row / lq_pad, row % lq_pad);
        let pair = if s >= span.lq {
            [f32::INFINITY, 0.0]
        } else {
            let base = ((span.q0 + s) * heads + h) as usize * D;
            let mut acc = 0f32;
            unroll(D / 32, |i| {
                let at = base + lane + 32 * i;
                acc = o.read(at).to_f32().fma(d_o.read(at).to_f32(), acc);
            });
            [lse.read(pk.lse_at(&span, b, h, heads, s as usize)) * LOG2_E, kernel_device::reduce::warp_sum(acc)]
        };
        if lane == 0 {
            stats.write_v2(2 * (pk.pad_row0(&span, b, h, heads, 0) + s as usize), pair);
        }
        row += grid_dim().x * 4;
    }
}

/// The packed backward's `dQ = scale · dQ_acc` ([`attention_bwd_dq_of`] on
/// the padded packed layout): CTAs `(x, 0, b)` stride over sequence `b`'s
/// chunks, rows past its queries skipped; `dq` is `[total_q, heads, D]`.
/// Launch: grid `(x, 1, batch)`, one warpgroup.
#[kernel(block = warpgroups(1), instances(E = [f16, bf16], (64), (128)))]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dq_varlen<E: Scalar, const D: usize>(acc: GmemRef<f32>, dq: Gmem<E>, cu_seqlens_q: GmemRef<u32>, totals: u64, max_seqlens: u64, heads: u32, scale: f32) {
    let pk = Packed::new(cu_seqlens_q, cu_seqlens_q, totals, max_seqlens);
    let b = block_idx().z;
    let (q0, lq, _, _) = Packed::range(cu_seqlens_q, b, pk.total_q, pk.max_q);
    let lq_u = lq as usize;
    let blocks = lq_u.div_ceil(BWD_BM);
    // Chunks per head, in `(m, half)` order.
    let (halves, per_head) = (D / 64, blocks * (D / 64));
    let row_base = varlen_pad_start(q0 as usize, b as usize);
    let pad_rows = varlen_pad_rows(pk.total_q as usize, grid_dim().z as usize);
    let mut u = (block_idx().x * 128 + thread_in_warpgroup()) as usize;
    while 4 * u < heads as usize * per_head * DQ_CHUNK {
        let (chunk, f) = (4 * u / DQ_CHUNK, 4 * u % DQ_CHUNK);
        let (h, c) = (chunk / per_head, chunk % per_head);
        let (m, half) = (c / halves, c % halves);
        let v = acc.read_nc_v4(dq_acc_at::<D>(h * pad_rows + row_base, m as u32, half as u32) + f);
        let (j, t) = (f / 512, (f / 4) % 128);
        unroll(4, |e| {
            let (row, col) = Wgmma::<64>::coords(t, 4 * j + e);
            let s = m * BWD_BM + row;
            if s < lq_u {
                dq.write(((q0 as usize + s) * heads as usize + h) * D + 64 * half + col, E::from_f32(v[e] * scale));
            }
        });
        u += 128 * grid_dim().x as usize;
    }
}
