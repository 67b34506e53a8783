//! Decode attention on Hopper: one new query token per sequence (plus up to
//! 8 speculative tokens, causal among themselves) against a long K/V cache,
//! contiguous or paged (vLLM's block table), f16/bf16 or FP8 e4m3, split
//! over the keys and combined by log-sum-exp. The host entry point is
//! `kernel_ops::attention::decode`.
//!
//! This kernel works as follows ([`decode_split`], [`decode_split_fp8`]):
//! 1. CTA `(split, kv_head x row group, b)` owns keys `split * chunk ..
//!    (split + 1) * chunk` of sequence `b` (cut at its length `lens[b]`,
//!    read on the device: the grid depends only on host-known sizes) for
//!    one KV head, and the `G * T` query rows that share that head (`G =
//!    heads / kv_heads` query heads times `T` query tokens; row `r = t G +
//!    g`), 64 rows per row group (16 on warp MMAs): those rows share ONE pass
//!    over K and V;
//! 2. warp 4 is the producer: one lane streams the chunk's blocks of
//!    [`DEC_BN`] keys of K and V into an `S`-slot ring ([`Ring`], one full
//!    barrier per slot expecting both tiles' bytes). A block is `BN / P`
//!    TMA boxes of `P` keys (`P = 64` for a contiguous cache and pages of
//!    64 keys or more, 16 for pages of 16 or 32); a paged cache looks each
//!    box's page up in the block table one step ahead (the load's latency
//!    hides under the ring wait);
//! 3. warps 0-3 (one warpgroup) load the Q rows into a `64 x D` tile (rows
//!    past `G * T` zero) and per block: `S = Q Kᵀ` (`m64n64k16` wgmmas),
//!    the online softmax on the accumulator fragment (keys masked per row:
//!    token `t` sees keys `< len - T + 1 + t`, and the split's end), `P`
//!    rounded to the element type in registers, `O = O alpha + P V` (RS
//!    wgmmas, V MN-major as stored), then the slot goes back to the
//!    producer. The cache's rows past the sequence's end may hold anything
//!    (NaN included): their scores are replaced by `-inf`, and the one
//!    block that reaches past the end has its V rows there zeroed in shared
//!    memory before `P V`, so `0 * NaN` never happens;
//! 4. with one split the CTA writes O (normalized, the element type) and
//!    the log-sum-exp (natural log); with several it writes the partial O
//!    (f32) and the partial log-sum-exp (log2 units); the last CTA of each
//!    `(b, kv_head, row group)` to finish (an arrival counter) weighs the
//!    splits by `2^(lse_i - max)` and writes O and the log-sum-exp
//!    (`combine_row`): one launch per step, no second kernel.
//!
//! On warp-level MMAs ([`decode_split_warp`] for a 16-bit cache,
//! [`decode_split_fp8`] for FP8, one consumer body: `warp_consume`): a
//! CTA takes 16 query rows (`mma.sync.m16n8k16`), each consumer warp 16
//! keys of every block, read into registers (trait `WarpKv`: as loaded, or
//! FP8 converted there, exact: every e4m3 value is an f16 and a bf16) and
//! the slot released at once; the warps merge their softmax states at the
//! end. Two CTAs share an SM. [`decode_split_warp8`] is the same body on
//! 8 consumer warps (steps of [`DEC_BN_WIDE`] = 128 keys, one CTA per SM).
//! The host picks [`decode_split_fp8`] for every FP8 cache, whose
//! per-KV-head scales multiply the softmax scale (K) and the output (V),
//! and a warp-MMA kernel for a 16-bit cache where it measured faster than
//! the wgmma kernel (`DecodeOptions::kernel`).
//!
//! Bad device values never reach outside the buffers: a length above
//! `max_len` is clamped to it, a page index outside `0..num_pages` to page
//! 0, and each sets a word of `errors` ([`ERR_LEN`], [`ERR_PAGE`]).
//!
//! Empty sequences (`lens[b] = 0`), and query tokens that see no key (`t <
//! T - len`), give O = 0 and log-sum-exp `-inf`.
use kernel_device::array::regs::unroll;
use kernel_device::layout::{Layout, Swizzled, Tile, Unswizzled};
use kernel_device::math::{ex2_approx_ftz, lg2_approx_ftz, max, LN_2};
use kernel_device::pipeline::Ring;
use kernel_device::prelude::*;
use kernel_device::tma::raw as tma_raw;
use kernel_device::warp::shfl_xor;
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaShape};
use kernel_device::cvt::e4m3x2_to_f16x2;
use kernel_device::mma::{mma_m16n8k16, MmaInput};
use kernel_device::warp::vote_all;
use kernel_device::pack::pack_words;
use kernel_device::{bf16, f16, Barriers, Pack16, E4M3};

use crate::attention::{p_fragments, AttnElem};

/// Keys per ring step (the N of `S = Q Kᵀ`, the K of `O += P V`).
pub const DEC_BN: usize = 64;
/// P's k16 A fragments per step.
pub const DEC_KC: usize = DEC_BN / 16;
/// Query rows per CTA (the wgmma M): `G * T` rows of a KV head, padded.
pub const DEC_ROWS: usize = 64;
/// Threads per CTA: one consumer warpgroup and one producer warp.
pub const DEC_THREADS: u32 = 160;
/// The consumers' named barrier (the producer warp does not take part).
pub const DEC_BARRIER: u32 = 1;
/// `errors[ERR_LEN]` is 1 when some `lens[b] > max_len` (clamped);
/// `errors[ERR_LEN + 1]` holds the largest such length.
pub const ERR_LEN: usize = 0;
/// `errors[ERR_PAGE]` is 1 when a block-table entry needed for a key below
/// the sequence's length was outside `0..num_pages` (page 0 was read
/// instead); `errors[ERR_PAGE + 1]` holds one such entry (as `u32` bits).
pub const ERR_PAGE: usize = 2;
/// Words of the error buffer.
pub const ERR_WORDS: usize = 4;

/// The Q tile: 64 rows x `D`, 128-byte swizzle.
pub type DecQTile<E, const D: usize> = Tile<E, DEC_ROWS, D, Swizzled<128>>;
/// One ring slot of K or V (16-bit cache): [`DEC_BN`] keys x `D`.
pub type DecKvTile<E, const D: usize> = Tile<E, DEC_BN, D, Swizzled<128>>;
/// The TMA box of `P` keys (one page piece) of a 16-bit cache.
pub type DecPiece<E, const P: usize, const D: usize> = Tile<E, P, D, Swizzled<128>>;
/// The swizzle of an FP8 tile of `D` columns: the row's bytes (64 or 128).
pub type Fp8Sw<const D: usize> = Swizzled<D>;
/// One ring slot of K or V (FP8 cache).
pub type DecFp8Tile<const D: usize> = Tile<E4M3, DEC_BN, D, Fp8Sw<D>>;
/// The TMA box of `P` keys of an FP8 cache.
pub type DecFp8Piece<const P: usize, const D: usize> = Tile<E4M3, P, D, Fp8Sw<D>>;

/// The 16-bit element types decode runs on (Q, O, and the cache unless
/// FP8).
pub trait DecodeElem: AttnElem + MmaInput + Pack16<Pack = [Self; 8]> {}
impl DecodeElem for f16 {}
impl DecodeElem for bf16 {}

/// The rules of every instance (compile time): `D` 64 or 128; `P` 16 or
/// 64 keys per box (a divisor of [`DEC_BN`], a multiple of 8); at least 2
/// slots.
pub const fn check_decode(d: usize, p: usize, stages: usize) {
    assert!(d == 64 || d == 128, "decode: head_dim (D) must be 64 or 128");
    assert!(p == 16 || p == 64, "decode: P (keys per TMA box) must be 16 or 64");
    assert!(stages >= 2, "decode: at least 2 ring slots");
}

/// What every CTA derives from the launch and the sequence's length.
#[derive(Clone, Copy)]
struct Work {
    b: u32,
    kvh: u32,
    rg: u32,
    split: u32,
    splits: u32,
    /// `lens[b]`, clamped to `max_len`.
    len: u32,
    /// The split's first key.
    start: u32,
    /// One past the split's last key (at most `len`).
    end: u32,
    steps: u32,
}

/// The launch-wide sizes and scale, one kernel parameter (plain data).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DecodeDims {
    /// Keys per sequence the cache holds (paged: `max_pages * page_size`).
    pub max_len: u32,
    pub heads: u32,
    /// Query heads per KV head (`G`).
    pub group: u32,
    /// Query tokens per sequence (`T`).
    pub t_q: u32,
    /// Row groups of 64 rows per KV head (`ceil(G T / 64)`).
    pub row_groups: u32,
    /// Keys per split, a multiple of [`DEC_BN`].
    pub chunk: u32,
    /// 0: contiguous cache; otherwise the page size.
    pub page_size: u32,
    pub max_pages: u32,
    pub num_pages: u32,
    /// FP8 scales: 1 (per tensor) or `kv_heads` (per KV head).
    pub scale_heads: u32,
    /// The softmax scale times `log2 e`.
    pub scale_log2: f32,
}

// SAFETY: a `#[repr(C)]` struct of u32 and f32, the same bytes on both sides.
unsafe impl kernel_device::launch::DeviceParam for DecodeDims {
    type Abi = DecodeDims;
    #[inline(always)]
    fn from_abi(abi: DecodeDims, _: u64) -> DecodeDims {
        abi
    }
}

type Dims = DecodeDims;

impl Dims {
    /// The CTA's work, in steps of `bn` keys (the kernel's ring slot).
    #[inline(always)]
    fn work(&self, lens: GmemRef<u32>, bn: usize) -> Work {
        let (split, y, b) = (block_idx().x, block_idx().y, block_idx().z);
        let raw = lens.read(b as usize);
        let len = raw.min(self.max_len);
        let start = split * self.chunk;
        let end = (start + self.chunk).min(len);
        Work {
            b,
            kvh: y / self.row_groups,
            rg: y % self.row_groups,
            split,
            splits: grid_dim().x,
            len,
            start,
            end,
            steps: end.saturating_sub(start).div_ceil(bn as u32),
        }
    }
}

/// Producer (one lane of the producer warp): for each step of `w`, the
/// `BN / P` (at most 8) boxes of K and of V into the next slot (tiles `KT`
/// of `BN` keys, boxes
/// `PT` of `P` keys placed at rows `P i` of each column block), one
/// `expect_tx` of both tiles' bytes. Row of key `key`: `b max_len + key`
/// (contiguous), `page P_size + key % P_size` with `page` the block
/// table's entry (paged; keys at or past the length read row 0).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn produce<KT: TileLayout, PT: TileLayout, const S: usize>(
    k: Tma<PT>,
    v: Tma<PT>,
    k_bufs: Smem<[KT; S]>,
    v_bufs: Smem<[KT; S]>,
    ring: Ring<'_, S>,
    table: GmemRef<i32>,
    errors: Gmem<u32>,
    d: &Dims,
    w: &Work,
) {
    const {
        assert!(PT::COLS == KT::COLS && KT::ROWS % PT::ROWS == 0 && KT::ROWS / PT::ROWS <= 8 && PT::BLOCK_ROW_BYTES == KT::BLOCK_ROW_BYTES);
    }
    let pieces = KT::ROWS / PT::ROWS;
    let col = w.kvh * KT::COLS as u32;
    // The rows of step `s`'s boxes (at most 8).
    let rows_of = |s: u32| {
        let mut rows = [0u32; 8];
        unroll(8, |i| {
            if i < pieces {
                let key = w.start + s * KT::ROWS as u32 + (i * PT::ROWS) as u32;
                rows[i] = if d.page_size == 0 {
                    w.b * d.max_len + key
                } else if key < w.len {
                    let entry = table.read((w.b * d.max_pages + key / d.page_size) as usize);
                    let page = if entry < 0 || entry as u32 >= d.num_pages {
                        if w.kvh == 0 && w.rg == 0 {
                            errors.atomic_max(ERR_PAGE, 1);
                            errors.atomic_exch(ERR_PAGE + 1, entry as u32);
                        }
                        0
                    } else {
                        entry as u32
                    };
                    page * d.page_size + key % d.page_size
                } else {
                    0
                };
            }
        });
        rows
    };
    k.prefetch();
    v.prefetch();
    let mut producer = ring.producer();
    let mut rows = rows_of(0);
    for s in 0..w.steps {
        let slot = producer.acquire_tx(2 * KT::BYTES as u32);
        let (kd, vd) = (k_bufs.at(slot.index()).smem_addr(), v_bufs.at(slot.index()).smem_addr());
        let bar = slot.barrier().smem_addr();
        unroll(8, |i| {
            if i < pieces {
                let piece = (i * PT::ROWS * PT::BLOCK_ROW_BYTES) as u32;
                for j in 0..KT::BLOCKS {
                    let off = piece + (j * KT::BLOCK_BYTES) as u32;
                    let c = (col as usize + j * KT::BLOCK_COLS) as i32;
                    // SAFETY: one thread; the box (`P` rows of one column
                    // block, the map's tile type) lands inside slot tile
                    // `KT` at rows `P i` of block `j` (asserted shapes),
                    // 1024-byte aligned for the 128-byte swizzle (`P`
                    // rows of 128 bytes are whole 1024-byte patterns);
                    // the slot's barrier expects both tiles' bytes.
                    unsafe {
                        tma_raw::load_2d(kd + off, k.desc_addr(), c, rows[i] as i32, bar);
                        tma_raw::load_2d(vd + off, v.desc_addr(), c, rows[i] as i32, bar);
                    }
                }
            }
        });
        if s + 1 < w.steps {
            rows = rows_of(s + 1);
        }
    }
}

/// Loads this CTA's Q rows into `q_buf` (rows past `G T` zero): consumer
/// threads, 16 bytes at a time (`64 D / 8` packs, `D / 16` per thread);
/// then a fence for the wgmmas and the consumers' barrier.
#[inline(always)]
fn load_q<E: DecodeElem, const D: usize>(q: GmemRef<E>, q_buf: Smem<DecQTile<E, D>>, d: &Dims, w: &Work) {
    let t = thread_linear() as usize;
    let gt = (d.group * d.t_q) as usize;
    let per_row = D / 8;
    // `D / 16` packs per thread, every load issued before the first store
    // (one global round trip, not one per pack).
    let mut packs = [[E::default(); 8]; 16];
    unroll(D / 16, |j| {
        let i = t + 128 * j;
        let (r, c) = (i / per_row, 8 * (i % per_row));
        let rr = w.rg as usize * DEC_ROWS + r;
        if rr < gt {
            let (tok, g) = (rr / d.group as usize, rr % d.group as usize);
            let h = w.kvh as usize * d.group as usize + g;
            packs[j] = q.read_nc_v4(((w.b as usize * d.t_q as usize + tok) * d.heads as usize + h) * D + c);
        }
    });
    unroll(D / 16, |j| {
        let i = t + 128 * j;
        q_buf.set_v4(i / per_row, 8 * (i % per_row), packs[j]);
    });
    commit_smem();
    NamedBarrier::new(DEC_BARRIER, 128).sync();
}

/// Zeroes rows `from ..` of a V tile (keys past the sequence's end, which
/// the cache may fill with anything), then fences it for the wgmmas and
/// meets the other consumers.
#[inline(always)]
fn zero_rows<E: DecodeElem, const D: usize>(tile: Smem<DecKvTile<E, D>>, from: usize) {
    let per_row = D / 8;
    let mut i = from * per_row + thread_linear() as usize;
    while i < DEC_BN * per_row {
        tile.set_v4(i / per_row, 8 * (i % per_row), [E::default(); 8]);
        i += 128;
    }
    commit_smem();
    NamedBarrier::new(DEC_BARRIER, 128).sync();
}

/// The consumer warpgroup of [`decode_split`] (module docs, step 3 and 4):
/// `tiles(slot)` gives the K and V tiles of a waited-for slot; `scale_log2`
/// is the softmax scale times `log2 e`, `o_scale` multiplies O.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn consume<E: DecodeElem, const D: usize, const S: usize>(
    q: GmemRef<E>,
    q_buf: Smem<DecQTile<E, D>>,
    ring: Ring<'_, S>,
    mut tiles: impl FnMut(usize) -> (Smem<DecKvTile<E, D>>, Smem<DecKvTile<E, D>>),
    outs: Outs<E>,
    scale_log2: f32,
    o_scale: f32,
    d: &Dims,
    w: &Work,
) where
    Cols<D>: WgmmaShape,
{
    let Outs { out, lse, o_part, lse_part, .. } = outs;
    load_q::<E, D>(q, q_buf, d, w);
    let t = thread_linear() as usize;
    let (wp, l) = (t / 32, t % 32);
    let gt = d.group * d.t_q;
    // This thread's two rows: their last visible key (exclusive) within
    // the split; 0 for padding rows.
    let mut lim = [0u32; 2];
    unroll(2, |hh| {
        let rr = w.rg * DEC_ROWS as u32 + (16 * wp + l / 4 + 8 * hh) as u32;
        if rr < gt {
            let tok = rr / d.group;
            lim[hh] = (w.len + 1 + tok).saturating_sub(d.t_q).min(w.end);
        }
    });
    let lim_min = lim[0].min(lim[1]);
    let mut consumer = ring.consumer();
    let mut acc_o = Acc::<D>::zeros();
    let (mut m, mut lsum) = ([f32::NEG_INFINITY; 2], [0f32; 2]);
    let mut frag = [[0u32; 4]; DEC_KC];
    for s in 0..w.steps {
        let key0 = w.start + s * DEC_BN as u32;
        let slot = consumer.wait();
        let (kt, vt) = tiles(slot.index());
        let mut acc_s = Acc::<DEC_BN>::undefined();
        acc_s.mma(q_buf, 0, kt, 0, false);
        wgmma_commit_group();
        wgmma_wait::<0>();
        acc_s.fence_operands();
        let sr = acc_s.regs.as_mut();
        if key0 + DEC_BN as u32 > lim_min {
            unroll(DEC_BN / 2, |i| {
                let key = key0 + (8 * (i / 4) + 2 * (l % 4) + i % 2) as u32;
                if key >= lim[(i / 2) % 2] {
                    sr[i] = f32::NEG_INFINITY;
                }
            });
        }
        let mut mx = [f32::NEG_INFINITY; 2];
        unroll(DEC_BN / 2, |i| mx[(i / 2) % 2] = max(mx[(i / 2) % 2], sr[i]));
        let mut alpha = [0f32; 2];
        let mut neg_m = [0f32; 2];
        unroll(2, |hh| {
            let v1 = max(mx[hh], shfl_xor(mx[hh], 1));
            let v2 = max(v1, shfl_xor(v1, 2));
            let m_new = max(m[hh], v2 * scale_log2);
            // A row with every key masked so far keeps m = -inf: use 0 so
            // that 2^(-inf - 0) = 0 rather than NaN.
            let ms = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
            alpha[hh] = ex2_approx_ftz(m[hh] - ms);
            neg_m[hh] = -ms;
            m[hh] = m_new;
        });
        let mut sum = [0f32; 2];
        unroll(DEC_BN / 2, |i| {
            let hh = (i / 2) % 2;
            let p = ex2_approx_ftz(sr[i].fma(scale_log2, neg_m[hh]));
            sr[i] = p;
            sum[hh] += p;
        });
        unroll(2, |hh| lsum[hh] = lsum[hh] * alpha[hh] + sum[hh]);
        p_fragments::<E, DEC_KC>(acc_s.regs.as_ref(), &mut frag);
        {
            let or = acc_o.regs.as_mut();
            unroll(D / 2, |i| or[i] *= alpha[(i / 2) % 2]);
        }
        if key0 + DEC_BN as u32 > w.len {
            zero_rows::<E, D>(vt, (w.len - key0) as usize);
        }
        acc_o.mma_rs_kn_chain(&frag, vt, 0, true);
        wgmma_commit_group();
        wgmma_wait::<0>();
        acc_o.fence_operands();
        consumer.release_slot(slot);
    }
    // The quad's partial sums, O / l, the log-sum-exp.
    let mut inv = [0f32; 2];
    let mut lse2 = [f32::NEG_INFINITY; 2];
    unroll(2, |hh| {
        let v1 = lsum[hh] + shfl_xor(lsum[hh], 1);
        let total = v1 + shfl_xor(v1, 2);
        if total > 0.0 {
            inv[hh] = o_scale / total;
            lse2[hh] = m[hh] + lg2_approx_ftz(total);
        }
    });
    let (heads, t_q, group) = (d.heads as usize, d.t_q as usize, d.group as usize);
    // Row `r` of the tile: `(token, query head)`, or None for padding.
    let row_at = |r: usize| {
        let rr = w.rg as usize * DEC_ROWS + r;
        (rr < gt as usize).then(|| (rr / group, w.kvh as usize * group + rr % group))
    };
    let single = w.splits == 1;
    unroll(2, |hh| {
        let r = 16 * wp + l / 4 + 8 * hh;
        if let (Some((tok, h)), 0) = (row_at(r), l % 4) {
            let row = (w.b as usize * heads + h) * t_q + tok;
            if single {
                lse.write(row, if lse2[hh] == f32::NEG_INFINITY { lse2[hh] } else { lse2[hh] * LN_2 });
            } else {
                lse_part.write(row * w.splits as usize + w.split as usize, lse2[hh]);
            }
        }
    });
    acc_o.for_each_pair(|r, c, v0, v1| {
        if let Some((tok, h)) = row_at(r) {
            let x = inv[(r / 8) % 2];
            if single {
                let at = ((w.b as usize * t_q + tok) * heads + h) * D + c;
                out.write(at, E::from_f32(v0 * x));
                out.write(at + 1, E::from_f32(v1 * x));
            } else {
                let row = (w.b as usize * heads + h) * t_q + tok;
                o_part.write_v2((row * w.splits as usize + w.split as usize) * D + c, [v0 * x, v1 * x]);
            }
        }
    });
    if !single {
        combine_if_last::<E, D>(outs, DEC_ROWS, 128, d, w);
    }
}

/// The outputs of a split CTA.
#[derive(Clone, Copy)]
struct Outs<E> {
    out: Gmem<E>,
    lse: Gmem<f32>,
    o_part: Gmem<f32>,
    lse_part: Gmem<f32>,
    /// One arrival counter per `(b, kv_head, row group)`, zero between
    /// launches.
    counters: Gmem<u32>,
    /// One word of shared memory: the consumers' "this CTA is the last".
    last: Smem<[u32; 1]>,
}

/// The "last CTA combines" step of a split launch: every consumer thread
/// published its partial rows (a GPU-scope fence, then the consumers'
/// barrier); one thread counts the CTA in (`Semaphore::fetch_signal`,
/// acquire and release); the CTA that completes the count of its `(b,
/// kv_head, row group)` combines that group's rows over the splits
/// ([`combine_row`], a warp per row) and resets the counter for the next
/// launch. No second kernel, so no launch gap. `threads`: the
/// consumers (a multiple of 32), every one of which calls this.
#[inline(always)]
fn combine_if_last<E: DecodeElem, const D: usize>(outs: Outs<E>, rows: usize, threads: u32, d: &Dims, w: &Work) {
    let barrier = NamedBarrier::new(DEC_BARRIER, threads);
    kernel_device::fence::fence_acq_rel_gpu();
    barrier.sync();
    let group = (w.b * grid_dim().y + block_idx().y) as usize;
    if thread_linear() == 0 {
        assert!(group < outs.counters.len());
        // The counter buffer's element `group`, used only as this
        // semaphore during the launch.
        let sem = outs.counters.semaphore(group);
        let seen = sem.fetch_signal(1);
        outs.last.write(0, (seen + 1 == w.splits) as u32);
    }
    barrier.sync();
    if outs.last.read(0) == 0 {
        return;
    }
    kernel_device::fence::fence_acq_rel_gpu();
    let gt = (d.group * d.t_q) as usize;
    let first = w.rg as usize * rows;
    let rows_here = gt.saturating_sub(first).min(rows);
    let mut r = warp_idx() as usize;
    while r < rows_here {
        let rr = first + r;
        let (tok, h) = (rr / d.group as usize, w.kvh as usize * d.group as usize + rr % d.group as usize);
        let row = (w.b as usize * d.heads as usize + h) * d.t_q as usize + tok;
        combine_row::<E, D>(|i| outs.o_part.read(i), |i| outs.lse_part.read(i), outs.out, outs.lse, row as u32, w.splits, d.heads, d.t_q);
        r += threads as usize / 32;
    }
    if thread_linear() == 0 {
        outs.counters.atomic_exch(group, 0);
    }
}

/// Phase 1 of decode attention on a 16-bit cache (module docs).
///
/// Launch: grid `(splits, kv_heads * row_groups, batch)`, block
/// [`DEC_THREADS`]. `q` `[batch, T, heads, D]`; `k`, `v` rank-2 maps over
/// the cache's rows (`[batch * max_len, kv_heads * D]` contiguous,
/// `[num_pages * page_size, kv_heads * D]` paged) with boxes of `P` keys;
/// `lens` `[batch]`; `table` `[batch, max_pages]` (unread when contiguous);
/// `out` `[batch, T, heads, D]` and `lse` `[batch, heads, T]` (written when
/// `splits = 1`), else `o_part` `[batch, heads, T, splits, D]` f32 and
/// `lse_part` `[batch, heads, T, splits]` (log2 units) and the last CTA
/// of each group combines them into `out` and `lse`; `counters` `[batch,
/// kv_heads * row_groups]` zeros (left zero); `errors` [`ERR_WORDS`] words;
/// `d` the sizes. Instances `(E, D, P, S)`.
#[kernel(block = threads(160), arch = sm_90a, min_blocks_per_sm = 2, instances(E = [f16, bf16], (64, 64, 6), (64, 16, 6), (128, 64, 3), (128, 16, 3)))]
#[allow(clippy::too_many_arguments)]
pub fn decode_split<E: DecodeElem, const D: usize, const P: usize, const S: usize>(
    q: GmemRef<E>,
    k: Tma<DecPiece<E, P, D>>,
    v: Tma<DecPiece<E, P, D>>,
    lens: GmemRef<u32>,
    table: GmemRef<i32>,
    out: Gmem<E>,
    lse: Gmem<f32>,
    o_part: Gmem<f32>,
    lse_part: Gmem<f32>,
    counters: Gmem<u32>,
    errors: Gmem<u32>,
    d: DecodeDims,
    #[scratch] q_buf: Smem<DecQTile<E, D>>,
    #[scratch] k_bufs: Smem<[DecKvTile<E, D>; S]>,
    #[scratch] v_bufs: Smem<[DecKvTile<E, D>; S]>,
    #[scratch] full: Barriers<S>,
    #[scratch(arrivals = 128)] empty: Barriers<S>,
    #[scratch] last: Smem<[u32; 1]>,
) where
    Cols<D>: WgmmaShape,
{
    const { check_decode(D, P, S) };
    let w = d.work(lens, DEC_BN);
    report_len(lens, errors, &d, &w);
    let ring = Ring::new(&full, &empty, 128);
    if warp_idx() == 4 {
        if lane_id() == 0 {
            produce::<DecKvTile<E, D>, DecPiece<E, P, D>, S>(k, v, k_bufs, v_bufs, ring, table, errors, &d, &w);
        }
        return;
    }
    consume::<E, D, S>(q, q_buf, ring, |i| (k_bufs.at(i), v_bufs.at(i)), Outs { out, lse, o_part, lse_part, counters, last }, d.scale_log2, 1.0, &d, &w);
}

/// The first CTA of each sequence reports a length above `max_len`.
#[inline(always)]
fn report_len(lens: GmemRef<u32>, errors: Gmem<u32>, d: &Dims, w: &Work) {
    if w.split == 0 && block_idx().y == 0 && thread_linear() == 0 {
        let raw = lens.read(w.b as usize);
        if raw > d.max_len {
            errors.atomic_max(ERR_LEN, 1);
            errors.atomic_max(ERR_LEN + 1, raw);
        }
    }
}

/// Query rows per CTA of the FP8 kernel ([`decode_split_fp8`]): the M of
/// `mma.sync.m16n8k16`.
pub const DEC_MMA_ROWS: usize = 16;
/// Q's A fragments in [`decode_split_fp8`]: row `32 kk + lane` holds lane
/// `lane`'s four registers of k16 step `kk` (at most 16 steps, `D = 256`).
pub type DecQFrags = Tile<u32, { 16 * 32 }, 4, Unswizzled>;
/// Keys of a ring step each consumer warp of the warp-MMA kernels takes
/// (one k16 of `P V`): a slot holds `16 W` keys for `W` consumer warps.
const WARP_KEYS: usize = 16;
/// Keys per ring step of [`decode_split_warp8`]: 16 for each of its 8
/// consumer warps.
pub const DEC_BN_WIDE: usize = 8 * WARP_KEYS;
/// A ring slot of K or V of [`decode_split_warp8`].
pub type DecWideTile<E, const D: usize> = Tile<E, DEC_BN_WIDE, D, Swizzled<128>>;
/// [`merge_warps`]' shared memory per consumer warp: its O registers
/// (at most 64, `D / 2`), 32 lanes each.
type MergeSmem<const W: usize> = Smem<[[f32; 64 * 32]; W]>;
/// [`merge_warps`]' per-warp row maxima (`[0, 16)`) and sums (`[16,
/// 32)`).
type StatsSmem<const W: usize> = Smem<[[f32; 2 * DEC_MMA_ROWS]; W]>;

/// The `D / 16` A fragments (of the MMAs' input type `M`) of this lane's Q
/// rows `g`, `g + 8` (rows past `G T` zero) for `S = Q Kᵀ` over a permuted
/// head dimension, and each row's scale: k16 step `kk` takes dimensions
/// `(D / 4) t + 4 kk ..+ 4` (lane `t = l % 4`; positions `2 t, 2 t + 1`
/// the first two, `2 t + 8, 2 t + 9` the last two), the order
/// [`WarpKv::load_k`] reads K in (the sum over the dimension is the same in
/// any order). Each row is multiplied by a power of two `2^-e` that puts
/// its largest magnitude in `[2^14, 2^15)` before the rounding to `M`, so a
/// bf16 query keeps its 8 significant bits at any magnitude in f16 (11
/// bits, and the range to `2^-24` below the row's largest); `2^e` comes
/// back to multiply the row's scores (exact: powers of two, in either `M`).
#[inline(always)]
fn q_fragments<E: DecodeElem, M: AttnElem, const D: usize>(q: GmemRef<E>, d: &Dims, w: &Work) -> ([[u32; 4]; 16], [f32; 2]) {
    let l = lane_id() as usize;
    let (g, t) = (l / 4, l % 4);
    let gt = (d.group * d.t_q) as usize;
    // Row `g + 8 hh`'s `D / 4` elements, all loads issued before the first
    // use.
    let mut x = [[0f32; 32]; 2];
    unroll(2, |hh| {
        let rr = w.rg as usize * DEC_MMA_ROWS + g + 8 * hh;
        if rr < gt {
            let (tok, gi) = (rr / d.group as usize, rr % d.group as usize);
            let h = w.kvh as usize * d.group as usize + gi;
            let base = ((w.b as usize * d.t_q as usize + tok) * d.heads as usize + h) * D + (D / 4) * t;
            unroll(D / 32, |j| {
                let v = q.read_nc_v4(base + 8 * j);
                unroll(8, |e| x[hh][8 * j + e] = v[e].to_f32());
            });
        }
    });
    let mut scale = [1f32; 2];
    let mut inv = [1f32; 2];
    unroll(2, |hh| {
        let mut m = 0f32;
        unroll(D / 4, |e| m = max(m, x[hh][e].abs()));
        m = max(m, shfl_xor(m, 1));
        m = max(m, shfl_xor(m, 2));
        if m > 0.0 && m.is_finite() {
            // `m` in [2^k, 2^(k+1)): e = k - 14, as exact powers of two.
            let k = ((m.to_bits() >> 23) & 0xFF) as i32 - 127;
            let e = (k - 14).clamp(-126, 127);
            scale[hh] = f32::from_bits(((e + 127) as u32) << 23);
            inv[hh] = f32::from_bits(((127 - e).clamp(1, 254) as u32) << 23);
        }
    });
    let mut qa = [[0u32; 4]; 16];
    unroll(D / 16, |kk| {
        let pair = |hh: usize, i: usize| M::pack(x[hh][4 * kk + i] * inv[hh], x[hh][4 * kk + i + 1] * inv[hh]);
        qa[kk] = [pair(0, 0), pair(1, 0), pair(0, 2), pair(1, 2)];
    });
    (qa, scale)
}

/// Four e4m3 bytes `[b0, b1, b2, b3]` of one K row as the two f16 B
/// registers of a k16 step: `(b0, b1)` and `(b2, b3)`, one exact
/// conversion each.
#[inline(always)]
fn k_pairs(w: u32) -> [u32; 2] {
    [e4m3x2_to_f16x2(w as u16), e4m3x2_to_f16x2((w >> 16) as u16)]
}

/// `prmt.b32 d, a, b, sel` (PTX ISA §9.7.8.7, default mode): byte `i` of
/// `d` is byte `sel[4 i .. 4 i + 3]` of `{b, a}` (0-3 from `a`, 4-7 from
/// `b`).
#[inline(always)]
fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    kernel_device::cvt::prmt(a, b, sel)
}

/// One consumer warp's state over its rows (lane `l`: rows `l / 4` and
/// `l / 4 + 8`): the running maximum (log2 units) and partial sum, and
/// O's `D / 8` n8 blocks (block `nd`, column `n` is head dimension
/// `(D / 8) n + nd`: [`WarpKv::v_frags`]' V order).
struct WarpO {
    m: [f32; 2],
    l: [f32; 2],
    o: [[f32; 4]; 16],
}

/// How the warp-MMA decode kernels ([`decode_split_warp`],
/// [`decode_split_fp8`]) read a ring slot of their cache into the B
/// fragments of `mma.sync.m16n8k16`: lane `(g, t)` (`g = l / 4`, `t = l %
/// 4`) of consumer warp `wp`, whose keys are rows `row0 = 16 wp ..+ 16` of
/// the slot.
///
/// - K (`S = Q Kᵀ`, two n8 blocks of keys `nb`): the lane reads `D / 4`
///   elements of key row `row0 + 8 nb + g` at `(D / 4) t`; k16 step `kk`
///   takes its elements `4 kk ..+ 4` (the permuted head dimension of
///   [`q_fragments`]);
/// - V (`O += P V`, one k16 step of keys, `D / 8` n8 blocks): the lane
///   reads `D / 8` elements at `(D / 8) g` of key rows `row0 + 2 t, + 1,
///   + 8, + 9`; element `nd` of those rows is the B fragment of O's n8
///   block `nd` (column `n` of block `nd` is head dimension `(D / 8) n +
///   nd`).
trait WarpKv<E: DecodeElem, const D: usize> {
    /// A ring slot of K or V: `16 W` keys x `D` (`W` consumer warps).
    type Tile: TileLayout;
    /// The MMAs' input type (Q's and P's fragments too).
    type M: AttnElem + MmaInput;
    /// The lane's K words of a slot, per n8 block of keys (`Default`:
    /// zeros).
    type K: Copy + Default;
    /// The lane's V words of a slot, per key row (0-3).
    type V: Copy + Default;
    /// Whether K is read one step ahead (step `s + 1`'s slot waited for
    /// and its K loaded before step `s`'s MMAs, hiding the loads'
    /// latency) and V before `S = Q Kᵀ`, at the cost of a second set of K
    /// registers and V's beside them. Without, K is read at its step and V
    /// after `S = Q Kᵀ` (one set of either live at a time).
    const K_AHEAD: bool;
    fn load_k(tile: Smem<Self::Tile>, row0: usize, g: usize, t: usize) -> Self::K;
    /// The B fragment of k16 step `kk` of key block `nb`.
    fn k_frag(k: &Self::K, nb: usize, kk: usize) -> [u32; 2];
    fn load_v(tile: Smem<Self::Tile>, row0: usize, g: usize, t: usize) -> Self::V;
    /// Zeroes key row `r` (0-3) of the lane's V (a key past the sequence's
    /// end: the cache may hold NaN there).
    fn zero_v(v: &mut Self::V, r: usize);
    /// The B fragments of O's n8 blocks `2 np` and `2 np + 1`.
    fn v_frags(v: &Self::V, np: usize) -> [[u32; 2]; 2];
}

/// Words `4 c ..= 4 c + 3` of `out` for `c < packs`: pack `c` of a lane's
/// run of 16-byte packs (`pack(c)`, a shared-memory load), as words.
#[inline(always)]
fn run_words<T: Pack16>(packs: usize, out: &mut [u32], pack: impl Fn(usize) -> T::Pack) {
    unroll(packs, |c| {
        let x = pack_words::<T>(pack(c));
        unroll(4, |i| out[4 * c + i] = x[i]);
    });
}

/// A 16-bit cache (of the queries' type `E`) in slots of `BN` keys: the
/// MMAs run on `E`, the fragments are the cache's words as loaded (V's two
/// rows of a fragment paired by one `prmt` each).
struct Kv16<const BN: usize>;

impl<E: DecodeElem, const D: usize, const BN: usize> WarpKv<E, D> for Kv16<BN> {
    type Tile = Tile<E, BN, D, Swizzled<128>>;
    type M = E;
    type K = [[u32; 16]; 2];
    type V = [[u32; 8]; 4];
    // Two sets of K (64 registers at D = 128) beside V and O spilled at 2
    // CTAs per SM, and in the 8-warp kernel at one (244 bytes).
    const K_AHEAD: bool = false;
    #[inline(always)]
    fn load_k(tile: Smem<Self::Tile>, row0: usize, g: usize, t: usize) -> Self::K {
        let mut kw = [[0u32; 16]; 2];
        unroll(2, |nb| run_words::<E>(D / 32, &mut kw[nb], |c| tile.get_v4(row0 + 8 * nb + g, (D / 4) * t + 8 * c)));
        kw
    }
    #[inline(always)]
    fn k_frag(k: &Self::K, nb: usize, kk: usize) -> [u32; 2] {
        [k[nb][2 * kk], k[nb][2 * kk + 1]]
    }
    #[inline(always)]
    fn load_v(tile: Smem<Self::Tile>, row0: usize, g: usize, t: usize) -> Self::V {
        let mut vw = [[0u32; 8]; 4];
        unroll(4, |r| {
            let row = row0 + 2 * t + (r % 2) + 8 * (r / 2);
            run_words::<E>(D / 64, &mut vw[r], |c| tile.get_v4(row, (D / 8) * g + 8 * c));
        });
        vw
    }
    #[inline(always)]
    fn zero_v(v: &mut Self::V, r: usize) {
        v[r] = [0; 8];
    }
    #[inline(always)]
    fn v_frags(v: &Self::V, np: usize) -> [[u32; 2]; 2] {
        // Word `np` of a row holds its elements `2 np` (low half) and `2 np
        // + 1`: the low halves of rows (2t, 2t+1) and (2t+8, 2t+9) make
        // block `2 np`'s registers, the high halves block `2 np + 1`'s.
        let pair = |a: u32, b: u32, sel: u32| prmt(a, b, sel);
        [
            [pair(v[0][np], v[1][np], 0x5410), pair(v[2][np], v[3][np], 0x5410)],
            [pair(v[0][np], v[1][np], 0x7632), pair(v[2][np], v[3][np], 0x7632)],
        ]
    }
}

/// An FP8 e4m3 cache: the MMAs run on f16 whatever `E` is (e4m3 converts
/// to f16 exactly in one instruction per pair, `cvt.rn.f16x2.e4m3x2`; P in
/// `[0, 1]` is finer in f16 than in bf16; Q is scaled per row into f16's
/// range by [`q_fragments`]).
struct Fp8Kv;

impl<E: DecodeElem, const D: usize> WarpKv<E, D> for Fp8Kv
where
    Fp8Sw<D>: Layout,
{
    type Tile = DecFp8Tile<D>;
    type M = f16;
    type K = [[u32; 8]; 2];
    type V = [[u32; 4]; 4];
    const K_AHEAD: bool = true;
    #[inline(always)]
    fn load_k(tile: Smem<Self::Tile>, row0: usize, g: usize, t: usize) -> Self::K {
        let mut kw = [[0u32; 8]; 2];
        unroll(2, |nb| run_words::<E4M3>(D / 64, &mut kw[nb], |c| tile.get_v4(row0 + 8 * nb + g, (D / 4) * t + 16 * c)));
        kw
    }
    #[inline(always)]
    fn k_frag(k: &Self::K, nb: usize, kk: usize) -> [u32; 2] {
        k_pairs(k[nb][kk])
    }
    #[inline(always)]
    fn load_v(tile: Smem<Self::Tile>, row0: usize, g: usize, t: usize) -> Self::V {
        // This lane's byte offset in a row, and its 16-byte chunk.
        let v_col = (D / 8) * g;
        let (v_chunk, v_word) = (v_col / 16 * 16, (v_col % 16) / 4);
        let mut vw = [[0u32; 4]; 4];
        unroll(4, |r| {
            let row = row0 + 2 * t + (r % 2) + 8 * (r / 2);
            let x = pack_words::<E4M3>(tile.get_v4(row, v_chunk));
            // D = 64: the lane's 8 bytes are the chunk's first or last half.
            unroll(D / 32, |i| vw[r][i] = if v_word == 0 { x[i] } else { x[(i + 2) % 4] });
        });
        vw
    }
    #[inline(always)]
    fn zero_v(v: &mut Self::V, r: usize) {
        v[r] = [0; 4];
    }
    #[inline(always)]
    fn v_frags(v: &Self::V, np: usize) -> [[u32; 2]; 2] {
        let (i, b) = (np / 2, 2 * (np % 2) as u32);
        // Rows (2t, 2t+1) and (2t+8, 2t+9): bytes `b` and `b + 1` of each
        // pair of rows interleaved, `[A_b, B_b, A_b+1, B_b+1]`: the B
        // registers of n8 blocks `2 np` (low half) and `2 np + 1`.
        let sel = b | ((b + 4) << 4) | ((b + 1) << 8) | ((b + 5) << 12);
        let (lo, hi) = (prmt(v[0][i], v[1][i], sel), prmt(v[2][i], v[3][i], sel));
        [
            [e4m3x2_to_f16x2(lo as u16), e4m3x2_to_f16x2(hi as u16)],
            [e4m3x2_to_f16x2((lo >> 16) as u16), e4m3x2_to_f16x2((hi >> 16) as u16)],
        ]
    }
}

/// The `W` consumer warps (`0 .. W`) of the warp-MMA decode kernels: a
/// CTA takes [`DEC_MMA_ROWS`] query rows (`row_groups = ceil(G T / 16)`),
/// each warp 16 keys of every ring step (`16 W` keys a slot), with its own
/// running maximum, sum and O over the CTA's 16 rows:
/// 0. warp 0 builds Q's A fragments once into shared memory (`q_frags`,
///    the rows' scales in `q_scale`; [`q_fragments`]);
/// 1. `S = Q Kᵀ` (16 x 16: two n8 blocks of keys, `D / 16` k16 steps), K
///    read into registers, one step ahead where [`WarpKv::K_AHEAD`]: step
///    `s + 1`'s slot is waited for and its K loads issued before step
///    `s`'s MMAs;
/// 2. V read into registers; rows past the sequence's end zeroed there
///    (the cache may hold NaN). The slot goes back to the producer once
///    its bytes are in registers;
/// 3. the online softmax on S (keys masked per row as in [`decode_split`];
///    O's rescale skipped while no row of the warp has a new maximum), P
///    as the A fragment of `O += P V` (one k16 step, `D / 8` n8 blocks);
/// 4. the warps merge ([`merge_warps`]). `ks` multiplies the scores
///    (K's scale), `vs` the output (V's).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn warp_consume<E: DecodeElem, C: WarpKv<E, D>, const D: usize, const S: usize, const W: usize>(
    q: GmemRef<E>,
    ring: Ring<'_, S>,
    k_bufs: Smem<[C::Tile; S]>,
    v_bufs: Smem<[C::Tile; S]>,
    q_frags: Smem<DecQFrags>,
    q_scale: Smem<[f32; DEC_MMA_ROWS]>,
    merge: MergeSmem<W>,
    stats: StatsSmem<W>,
    outs: Outs<E>,
    (ks, vs): (f32, f32),
    d: &Dims,
    w: &Work,
) {
    const { assert!(<C::Tile as TileLayout>::ROWS == WARP_KEYS * W, "warp_consume: a slot holds 16 keys per consumer warp") };
    let bn = (WARP_KEYS * W) as u32;
    let scale_log2 = d.scale_log2 * ks;
    let wp = warp_idx() as usize;
    let l = lane_id() as usize;
    // Q's A fragments, the same in every consumer warp: built once by warp
    // 0 into shared memory (row `32 kk + lane`), read back per step (one
    // 16-byte load per k16 step) rather than held in 32 registers.
    let (g, t) = (l / 4, l % 4);
    if wp == 0 {
        let (qa, qs) = q_fragments::<E, C::M, D>(q, d, w);
        unroll(D / 16, |kk| q_frags.set_v4(32 * kk + l, 0, qa[kk]));
        if t == 0 {
            unroll(2, |hh| q_scale.write(g + 8 * hh, qs[hh]));
        }
    }
    NamedBarrier::new(DEC_BARRIER, 32 * W as u32).sync();
    // Each row's scores times the softmax scale (log2 units) and the
    // row's power of two from the rounding of Q.
    let row_scale = [scale_log2 * q_scale.read(g), scale_log2 * q_scale.read(g + 8)];
    let gt = d.group * d.t_q;
    // This lane's two rows: their last visible key (exclusive) within the
    // split; 0 for padding rows.
    let mut lim = [0u32; 2];
    unroll(2, |hh| {
        let rr = w.rg * DEC_MMA_ROWS as u32 + (g + 8 * hh) as u32;
        if rr < gt {
            let tok = rr / d.group;
            lim[hh] = (w.len + 1 + tok).saturating_sub(d.t_q).min(w.end);
        }
    });
    let lim_min = lim[0].min(lim[1]);
    let mut st = WarpO { m: [f32::NEG_INFINITY; 2], l: [0.0; 2], o: [[0.0; 4]; 16] };
    let mut consumer = ring.consumer();
    let row0 = WARP_KEYS * wp;
    // With `K_AHEAD`, K is read one step ahead: step `s + 1`'s slot is
    // waited for and its K loads issued before step `s`'s MMAs, which hide
    // their latency (V's loads hide under `S = Q Kᵀ` and the softmax).
    // Without, each step waits for its slot, reads K and V and releases it.
    let steps = w.steps;
    // (An empty split has no step: its state stays empty.)
    let mut cur = if steps > 0 { Some(consumer.wait()) } else { None };
    let mut kw_next = match &cur {
        Some(c) if C::K_AHEAD => C::load_k(k_bufs.at(c.index()), row0, g, t),
        _ => C::K::default(),
    };
    let mut s = 0;
    while let Some(slot) = cur.take() {
        let key0 = w.start + s * bn + row0 as u32;
        let idx = slot.index();
        let mut held = Some(slot);
        let v_early = if C::K_AHEAD { C::load_v(v_bufs.at(idx), row0, g, t) } else { C::V::default() };
        let kw = if C::K_AHEAD { kw_next } else { C::load_k(k_bufs.at(idx), row0, g, t) };
        let more = s + 1 < steps;
        if C::K_AHEAD {
            if more {
                let next = consumer.wait();
                kw_next = C::load_k(k_bufs.at(next.index()), row0, g, t);
                cur = Some(next);
            }
            if let Some(sl) = held.take() {
                consumer.release_slot(sl);
            }
        }
        // S = Q Kᵀ: two n8 blocks of keys (two chains of dependent MMAs).
        let mut sr = [[0f32; 4]; 2];
        unroll(D / 16, |kk| {
            let qa = q_frags.get_v4(32 * kk + l, 0);
            unroll(2, |nb| sr[nb] = mma_m16n8k16::<C::M>(qa, C::k_frag(&kw, nb, kk), sr[nb]));
        });
        let mut vw = if C::K_AHEAD { v_early } else { C::load_v(v_bufs.at(idx), row0, g, t) };
        if let Some(sl) = held.take() {
            consumer.release_slot(sl);
        }
        if key0 + WARP_KEYS as u32 > w.len {
            unroll(4, |r| {
                if key0 + (2 * t + (r % 2) + 8 * (r / 2)) as u32 >= w.len {
                    C::zero_v(&mut vw, r);
                }
            });
        }
        if key0 + WARP_KEYS as u32 > lim_min {
            unroll(8, |i| {
                let (nb, x) = (i / 4, i % 4);
                let key = key0 + (8 * nb + 2 * t + x % 2) as u32;
                if key >= lim[x / 2] {
                    sr[nb][x] = f32::NEG_INFINITY;
                }
            });
        }
        let mut mx = [f32::NEG_INFINITY; 2];
        unroll(8, |i| mx[(i % 4) / 2] = max(mx[(i % 4) / 2], sr[i / 4][i % 4]));
        let mut alpha = [0f32; 2];
        let mut neg_m = [0f32; 2];
        unroll(2, |hh| {
            let v1 = max(mx[hh], shfl_xor(mx[hh], 1));
            let v2 = max(v1, shfl_xor(v1, 2));
            let m_new = max(st.m[hh], v2 * row_scale[hh]);
            // A row with every key masked so far keeps m = -inf: use 0 so
            // that 2^(-inf - 0) = 0 rather than NaN.
            let ms = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
            alpha[hh] = ex2_approx_ftz(st.m[hh] - ms);
            neg_m[hh] = -ms;
            st.m[hh] = m_new;
        });
        let mut sum = [0f32; 2];
        unroll(8, |i| {
            let hh = (i % 4) / 2;
            let p = ex2_approx_ftz(sr[i / 4][i % 4].fma(row_scale[hh], neg_m[hh]));
            sr[i / 4][i % 4] = p;
            sum[hh] += p;
        });
        unroll(2, |hh| st.l[hh] = st.l[hh] * alpha[hh] + sum[hh]);
        // P (in [0, 1]) as the A fragment of its 16 keys.
        let pk = |a: f32, b: f32| <C::M as AttnElem>::pack(a, b);
        let pa = [pk(sr[0][0], sr[0][1]), pk(sr[0][2], sr[0][3]), pk(sr[1][0], sr[1][1]), pk(sr[1][2], sr[1][3])];
        // O's rescale, skipped while no row of the warp has a new maximum
        // (the common case once a long sequence's first blocks are in).
        if !vote_all(alpha[0] == 1.0 && alpha[1] == 1.0) {
            unroll(D / 8, |nd| unroll(4, |x| st.o[nd][x] *= alpha[x / 2]));
        }
        unroll(D / 16, |np| {
            let [b0, b1] = C::v_frags(&vw, np);
            st.o[2 * np] = mma_m16n8k16::<C::M>(pa, b0, st.o[2 * np]);
            st.o[2 * np + 1] = mma_m16n8k16::<C::M>(pa, b1, st.o[2 * np + 1]);
        });
        s += 1;
        if !C::K_AHEAD && more {
            cur = Some(consumer.wait());
        }
    }
    merge_warps::<E, D, W>(st, merge, stats, outs, vs, d, w);
}

/// Phase 1 on a 16-bit cache, on warp-level MMAs (`mma.sync.m16n8k16` on
/// `E`): [`decode_split`]'s launch, layouts and producer, with
/// [`DEC_MMA_ROWS`] query rows per CTA (`row_groups = ceil(G T / 16)`)
/// instead of a wgmma's 64, 2 CTAs per SM, and `warp_consume`'s four
/// consumer warps. The host (`DecodeOptions::kernel`, `Auto`) takes it
/// where it measured faster than [`decode_split`] on the H200: a KV head's
/// `G T` rows fit 16, `D` is 128, and the cache is paged in pages of 16 or
/// 32 keys or the plan has one split. Instances `(E, D, P, S)`.
#[kernel(block = threads(160), arch = sm_90a, min_blocks_per_sm = 2, instances(E = [f16, bf16], (64, 64, 4), (64, 16, 4), (128, 64, 2), (128, 16, 2)))]
#[allow(clippy::too_many_arguments)]
pub fn decode_split_warp<E: DecodeElem, const D: usize, const P: usize, const S: usize>(
    q: GmemRef<E>,
    k: Tma<DecPiece<E, P, D>>,
    v: Tma<DecPiece<E, P, D>>,
    lens: GmemRef<u32>,
    table: GmemRef<i32>,
    out: Gmem<E>,
    lse: Gmem<f32>,
    o_part: Gmem<f32>,
    lse_part: Gmem<f32>,
    counters: Gmem<u32>,
    errors: Gmem<u32>,
    d: DecodeDims,
    #[scratch] k_bufs: Smem<[DecKvTile<E, D>; S]>,
    #[scratch] v_bufs: Smem<[DecKvTile<E, D>; S]>,
    #[scratch] q_frags: Smem<DecQFrags>,
    #[scratch] q_scale: Smem<[f32; DEC_MMA_ROWS]>,
    #[scratch] merge: MergeSmem<4>,
    #[scratch] stats: StatsSmem<4>,
    #[scratch] full: Barriers<S>,
    #[scratch(arrivals = 128)] empty: Barriers<S>,
    #[scratch] last: Smem<[u32; 1]>,
) {
    const { check_decode(D, P, S) };
    let w = d.work(lens, DEC_BN);
    report_len(lens, errors, &d, &w);
    let ring = Ring::new(&full, &empty, 128);
    if warp_idx() == 4 {
        if lane_id() == 0 {
            produce::<DecKvTile<E, D>, DecPiece<E, P, D>, S>(k, v, k_bufs, v_bufs, ring, table, errors, &d, &w);
        }
        return;
    }
    let outs = Outs { out, lse, o_part, lse_part, counters, last };
    warp_consume::<E, Kv16<DEC_BN>, D, S, 4>(q, ring, k_bufs, v_bufs, q_frags, q_scale, merge, stats, outs, (1.0, 1.0), &d, &w);
}

/// [`decode_split_warp`] with twice the consumer warps: 8, each taking
/// 16 keys of every ring step of [`DEC_BN_WIDE`] (128) keys, and warp 8
/// the producer; one CTA per SM (288 threads; at `D` = 128 two slots of K
/// and V, 128 KB, and the 8 warps' merge, 64 KB). At the split counts
/// that give one CTA per SM (the plan's for boxes of 64 keys), each SM
/// scheduler then has two consumer warps to switch between instead of
/// one (ncu of [`decode_split_warp`] at 8 x 4 x 8192, G 8: one eligible
/// warp, stalled on its MMA and shared-memory chains 78 % of cycles).
/// Instances `(E, D, P, S)`.
#[kernel(block = threads(288), arch = sm_90a, min_blocks_per_sm = 1, instances(E = [f16, bf16], (128, 64, 2), (128, 16, 2)))]
#[allow(clippy::too_many_arguments)]
pub fn decode_split_warp8<E: DecodeElem, const D: usize, const P: usize, const S: usize>(
    q: GmemRef<E>,
    k: Tma<DecPiece<E, P, D>>,
    v: Tma<DecPiece<E, P, D>>,
    lens: GmemRef<u32>,
    table: GmemRef<i32>,
    out: Gmem<E>,
    lse: Gmem<f32>,
    o_part: Gmem<f32>,
    lse_part: Gmem<f32>,
    counters: Gmem<u32>,
    errors: Gmem<u32>,
    d: DecodeDims,
    #[scratch] k_bufs: Smem<[DecWideTile<E, D>; S]>,
    #[scratch] v_bufs: Smem<[DecWideTile<E, D>; S]>,
    #[scratch] q_frags: Smem<DecQFrags>,
    #[scratch] q_scale: Smem<[f32; DEC_MMA_ROWS]>,
    #[scratch] merge: MergeSmem<8>,
    #[scratch] stats: StatsSmem<8>,
    #[scratch] full: Barriers<S>,
    #[scratch(arrivals = 256)] empty: Barriers<S>,
    #[scratch] last: Smem<[u32; 1]>,
) {
    const { check_decode(D, P, S) };
    let w = d.work(lens, DEC_BN_WIDE);
    report_len(lens, errors, &d, &w);
    let ring = Ring::new(&full, &empty, 256);
    if warp_idx() == 8 {
        if lane_id() == 0 {
            produce::<DecWideTile<E, D>, DecPiece<E, P, D>, S>(k, v, k_bufs, v_bufs, ring, table, errors, &d, &w);
        }
        return;
    }
    let outs = Outs { out, lse, o_part, lse_part, counters, last };
    warp_consume::<E, Kv16<DEC_BN_WIDE>, D, S, 8>(q, ring, k_bufs, v_bufs, q_frags, q_scale, merge, stats, outs, (1.0, 1.0), &d, &w);
}

/// Phase 1 on an FP8 e4m3 cache, on warp-level MMAs (`warp_consume` with
/// the cache dequantized in registers: `Fp8Kv`; [`decode_split`]'s
/// launch and layouts, the cache in bytes; `kv_scale` `[2, kv_heads]`
/// f32: K's scales, then V's, `scale_heads` each). A CTA takes
/// [`DEC_MMA_ROWS`] query rows (`row_groups = ceil(G T / 16)`). Warp 4
/// streams K and V into the ring as [`decode_split`]'s does. Instances
/// `(E, D, P, S)`.
#[kernel(block = threads(160), arch = sm_90a, min_blocks_per_sm = 2, instances(E = [f16, bf16], (64, 64, 8), (64, 16, 8), (128, 64, 4), (128, 16, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn decode_split_fp8<E: DecodeElem, const D: usize, const P: usize, const S: usize>(
    q: GmemRef<E>,
    k: Tma<DecFp8Piece<P, D>>,
    v: Tma<DecFp8Piece<P, D>>,
    kv_scale: GmemRef<f32>,
    lens: GmemRef<u32>,
    table: GmemRef<i32>,
    out: Gmem<E>,
    lse: Gmem<f32>,
    o_part: Gmem<f32>,
    lse_part: Gmem<f32>,
    counters: Gmem<u32>,
    errors: Gmem<u32>,
    d: DecodeDims,
    #[scratch] k_bufs: Smem<[DecFp8Tile<D>; S]>,
    #[scratch] v_bufs: Smem<[DecFp8Tile<D>; S]>,
    #[scratch] q_frags: Smem<DecQFrags>,
    #[scratch] q_scale: Smem<[f32; DEC_MMA_ROWS]>,
    #[scratch] merge: MergeSmem<4>,
    #[scratch] stats: StatsSmem<4>,
    #[scratch] full: Barriers<S>,
    #[scratch(arrivals = 128)] empty: Barriers<S>,
    #[scratch] last: Smem<[u32; 1]>,
) where
    Fp8Sw<D>: Layout,
{
    const { check_decode(D, P, S) };
    let w = d.work(lens, DEC_BN);
    report_len(lens, errors, &d, &w);
    let ring = Ring::new(&full, &empty, 128);
    if warp_idx() == 4 {
        if lane_id() == 0 {
            produce::<DecFp8Tile<D>, DecFp8Piece<P, D>, S>(k, v, k_bufs, v_bufs, ring, table, errors, &d, &w);
        }
        return;
    }
    let sh = d.scale_heads;
    let scales = (kv_scale.read((w.kvh % sh) as usize), kv_scale.read((sh + w.kvh % sh) as usize));
    let outs = Outs { out, lse, o_part, lse_part, counters, last };
    warp_consume::<E, Fp8Kv, D, S, 4>(q, ring, k_bufs, v_bufs, q_frags, q_scale, merge, stats, outs, scales, &d, &w);
}

/// Step 4 of [`warp_consume`]: the `W` consumer warps' states merged and
/// written: maxima and sums through shared memory, each warp's O scaled
/// by `2^(m_w - M) / L` (times `o_scale`) and summed over the warps (each
/// warp sums `1 / W` of the registers), written as [`decode_split`]'s
/// (O, log-sum-exp, or the split's partials and the last CTA's combine).
#[inline(always)]
fn merge_warps<E: DecodeElem, const D: usize, const W: usize>(st: WarpO, merge: MergeSmem<W>, stats: StatsSmem<W>, outs: Outs<E>, o_scale: f32, d: &Dims, w: &Work) {
    const { assert!((D / 2) % W == 0 && D / 2 <= 64, "merge_warps: each warp sums D / 2W registers of every warp") };
    let wp = warp_idx() as usize;
    let l = lane_id() as usize;
    let (g, t) = (l / 4, l % 4);
    let barrier = NamedBarrier::new(DEC_BARRIER, 32 * W as u32);
    let mut lsum = [0f32; 2];
    unroll(2, |hh| {
        let v1 = st.l[hh] + shfl_xor(st.l[hh], 1);
        lsum[hh] = v1 + shfl_xor(v1, 2);
    });
    if t == 0 {
        unroll(2, |hh| {
            stats.at(wp).write(g + 8 * hh, st.m[hh]);
            stats.at(wp).write(DEC_MMA_ROWS + g + 8 * hh, lsum[hh]);
        });
    }
    barrier.sync();
    // Per row: the maximum M over the warps, the total L, and this warp's
    // weight 2^(m_w - M) / L (0 for a warp, or a row, with no key).
    let (mut big, mut total, mut mine) = ([f32::NEG_INFINITY; 2], [0f32; 2], [0f32; 2]);
    unroll(2, |hh| {
        let r = g + 8 * hh;
        unroll(W, |x| big[hh] = max(big[hh], stats.at(x).read(r)));
        let ms = if big[hh] == f32::NEG_INFINITY { 0.0 } else { big[hh] };
        unroll(W, |x| {
            let mx = stats.at(x).read(r);
            let wt = if mx == f32::NEG_INFINITY { 0.0 } else { ex2_approx_ftz(mx - ms) };
            total[hh] += stats.at(x).read(DEC_MMA_ROWS + r) * wt;
            if x == wp {
                mine[hh] = wt;
            }
        });
        if total[hh] > 0.0 {
            mine[hh] = mine[hh] * o_scale / total[hh];
        }
    });
    let regs = D / 2;
    unroll(D / 8, |nd| unroll(4, |x| merge.at(wp).write((4 * nd + x) * 32 + l, st.o[nd][x] * mine[x / 2])));
    barrier.sync();
    let (heads, t_q, group) = (d.heads as usize, d.t_q as usize, d.group as usize);
    let gt = group * t_q;
    // Row `r` of the CTA: `(token, query head)`, or None for padding.
    let row_at = |r: usize| {
        let rr = w.rg as usize * DEC_MMA_ROWS + r;
        (rr < gt).then(|| (rr / group, w.kvh as usize * group + rr % group))
    };
    let single = w.splits == 1;
    if wp == 0 && t == 0 {
        unroll(2, |hh| {
            if let Some((tok, h)) = row_at(g + 8 * hh) {
                let row = (w.b as usize * heads + h) * t_q + tok;
                let lse2 = if total[hh] > 0.0 { big[hh] + lg2_approx_ftz(total[hh]) } else { f32::NEG_INFINITY };
                if single {
                    outs.lse.write(row, if lse2 == f32::NEG_INFINITY { lse2 } else { lse2 * LN_2 });
                } else {
                    outs.lse_part.write(row * w.splits as usize + w.split as usize, lse2);
                }
            }
        });
    }
    // This warp sums registers `wp regs / W ..` of every warp.
    unroll(regs / W, |j| {
        let i = wp * (regs / W) + j;
        let mut v = 0f32;
        unroll(W, |x| v += merge.at(x).read(i * 32 + l));
        let (nd, x) = (i / 4, i % 4);
        let (r, n) = (g + 8 * (x / 2), 2 * t + x % 2);
        let c = (D / 8) * n + nd;
        if let Some((tok, h)) = row_at(r) {
            if single {
                outs.out.write(((w.b as usize * t_q + tok) * heads + h) * D + c, E::from_f32(v));
            } else {
                let row = (w.b as usize * heads + h) * t_q + tok;
                outs.o_part.write((row * w.splits as usize + w.split as usize) * D + c, v);
            }
        }
    });
    if !single {
        combine_if_last::<E, D>(outs, DEC_MMA_ROWS, 32 * W as u32, d, w);
    }
}

/// Phase 2 for one row `(b, h, t)` (`row = (b heads + h) T + t`), by one
/// warp (lane `x` has columns `x D / 32 ..`): `O = Σ_i w_i o_part_i` with
/// `w_i = 2^(lse_i - max) / Σ_j 2^(lse_j - max)` and `lse = (max + log2
/// Σ_j 2^(lse_j - max)) ln 2`; splits with no key (`lse_i = -inf`) weigh 0,
/// a row with none gives O = 0 and `-inf`. Built for latency (it runs at
/// the tail of the launch): the maximum and the sum over the lanes (split
/// `i` on lane `i % 32`, then shuffles), the weighted sum 8 splits at a
/// time with all their loads issued before the first FMA.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn combine_row<E: DecodeElem, const D: usize>(o_part: impl Fn(usize) -> f32, lse_part: impl Fn(usize) -> f32, out: Gmem<E>, lse: Gmem<f32>, row: u32, splits: u32, heads: u32, t_q: u32) {
    let lane = lane_id() as usize;
    let c0 = lane * (D / 32);
    let (base, n) = ((row * splits) as usize, splits as usize);
    let mut mx = f32::NEG_INFINITY;
    let mut i = lane;
    while i < n {
        mx = max(mx, lse_part(base + i));
        i += 32;
    }
    unroll(5, |k| mx = max(mx, shfl_xor(mx, 1 << k)));
    // 2^(lse_i - max), 0 for a split with no key (or a row with none).
    let weight = |li: f32| if li > f32::NEG_INFINITY { ex2_approx_ftz(li - mx) } else { 0.0 };
    let mut wsum = 0f32;
    let mut i = lane;
    while i < n {
        wsum += weight(lse_part(base + i));
        i += 32;
    }
    unroll(5, |k| wsum += shfl_xor(wsum, 1 << k));
    let mut acc = [0f32; 4];
    let mut i0 = 0;
    while i0 < n {
        let mut ws = [0f32; 8];
        let mut vals = [[0f32; 4]; 8];
        unroll(8, |j| {
            if i0 + j < n {
                ws[j] = lse_part(base + i0 + j);
                unroll(D / 32, |c| vals[j][c] = o_part((base + i0 + j) * D + c0 + c));
            }
        });
        unroll(8, |j| {
            if i0 + j < n {
                let wj = weight(ws[j]);
                unroll(D / 32, |c| acc[c] = wj.fma(vals[j][c], acc[c]));
            }
        });
        i0 += 8;
    }
    let inv = if wsum > 0.0 { 1.0 / wsum } else { 0.0 };
    let (tok, bh) = (row % t_q, row / t_q);
    let (h, b) = (bh % heads, bh / heads);
    let at = ((b * t_q + tok) * heads + h) as usize * D + c0;
    unroll(D / 32, |c| out.write(at + c, E::from_f32(acc[c] * inv)));
    if lane == 0 {
        lse.write(row as usize, if wsum > 0.0 { (mx + lg2_approx_ftz(wsum)) * LN_2 } else { f32::NEG_INFINITY });
    }
}
