//! Split-KV flash decoding (one query token per sequence), written with
//! `emit_pipeline` and element-offset block specs: the book's example of a
//! K/V ring whose blocks start anywhere in the cache (`docs/src/hopper.md`,
//! "Pipelines").
//!
//! This kernel works as follows ([`decode_split`], then [`decode_combine`]):
//! 1. CTA `(split, kv_head, b)` owns rows `split * chunk ..` of sequence
//!    `b`'s K/V cache for KV head `kv_head`, cut at the sequence's length
//!    `lens[b]` (ragged lengths, on the device), and the `G` query heads
//!    that share that KV head (GQA: one pass over K/V serves them all);
//! 2. the cache is one rank-2 tensor per operand, `[batch * max_len,
//!    kv_heads * D]` (bf16): step `s`'s block of `BN` keys starts at
//!    element row `b * max_len + split * chunk + s * BN`, column `kv_head *
//!    D`, which no block index in tiles can name: [`BlockSpec::at_elements`]
//!    gives the pipeline that element offset. `emit_pipeline` keeps the
//!    next blocks' TMA copies in flight in a 2-slot ring while the CTA
//!    computes on the current one;
//! 3. warp `g < G` computes query head `g`: lane `r` scores key `r` of the
//!    block (`q · k_r · scale`, FMAs over `D`, K read 16 bytes at a time
//!    from the swizzled tile), keys past the split's end masked to `-inf`;
//!    an online softmax over the warp (max and sum by shuffles) rescales
//!    the running output, then each lane adds `p_r v_r` for its two of the
//!    `D = 64` output columns, `p_r` broadcast by a shuffle;
//! 4. each warp writes its head's partial output (f32, `D` per split) and
//!    its log-sum-exp; a split with no keys writes `lse = -inf`;
//! 5. [`decode_combine`] (one CTA per `(head, b)`, one thread per column)
//!    weighs the splits by `exp(lse_i - max lse)` and writes O in bf16.
//!
//! Constraints: `D = 64`, `BN = 32`, `G <= 4` query heads per KV head
//! (block of 4 warps), `1 <= lens[b] <= max_len`, `chunk = ceil(max_len /
//! splits)`; the scores are SIMT FMAs (a teaching example: the library's
//! decode with tensor cores is issue 38's).
use kernel_device::cvt::bf16_to_f32;
use kernel_device::math::{ex2_approx_ftz, lg2_approx_ftz, max, LOG2_E};
use kernel_device::pipeline::{emit_pipeline, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::warp::{shfl_idx, shfl_xor};
use kernel_device::array::regs::unroll;
use kernel_device::{bf16, Barriers};

/// Head dimension.
pub const DEC_D: usize = 64;
/// Keys per pipeline step.
pub const DEC_BN: usize = 32;
/// Largest number of query heads per KV head (one warp each).
pub const DEC_MAX_G: usize = 4;
/// Slots of the K/V ring.
pub const DEC_STAGES: usize = 2;
/// One step's block of K or V: `BN` keys x `D` bf16 (128-byte rows).
pub type KvBlock = Tile<bf16, DEC_BN, DEC_D, Swizzled<128>>;

/// Phase 1 of split-KV decoding (module docs): per `(split, kv_head, b)`,
/// the partial output `o_part[((b * heads + h) * splits + split) * D ..]`
/// (f32) and `lse[(b * heads + h) * splits + split]` of each of the `G =
/// heads / kv_heads` query heads `h` of KV head `kv_head`.
///
/// Launch: grid `(splits, kv_heads, batch)`, block 128 threads; `k`, `v`
/// map `[batch * max_len, kv_heads * D]` bf16 with [`KvBlock`] tiles; `q`
/// is `[batch, heads, D]` bf16; `scale` the softmax scale.
#[kernel(block = threads(128))]
#[allow(clippy::too_many_arguments)]
pub fn decode_split(
    q: GmemRef<bf16>,
    k: Tma<KvBlock>,
    v: Tma<KvBlock>,
    lens: GmemRef<u32>,
    o_part: Gmem<f32>,
    lse: Gmem<f32>,
    max_len: u32,
    heads: u32,
    scale: f32,
    #[scratch] k_bufs: Smem<[KvBlock; DEC_STAGES]>,
    #[scratch] v_bufs: Smem<[KvBlock; DEC_STAGES]>,
    #[scratch] loaded: Barriers<DEC_STAGES>,
) {
    let (split, kvh, b) = (block_idx().x, block_idx().y, block_idx().z);
    let (splits, kv_heads) = (grid_dim().x, grid_dim().y);
    let g_count = heads / kv_heads;
    let chunk = max_len.div_ceil(splits);
    let start = split * chunk;
    let end = (start + chunk).min(lens.read(b as usize));
    let keys = end.saturating_sub(start);
    let steps = keys.div_ceil(DEC_BN as u32);
    // The K/V blocks at element offsets of the cache: row `b * max_len +
    // start + step * BN`, column `kv_head * D`.
    let row0 = b * max_len + start;
    let col0 = kvh * DEC_D as u32;
    let at = move |step: u32| (row0 + step * DEC_BN as u32, col0);
    let specs = (BlockSpec::at_elements(k, k_bufs, at), BlockSpec::at_elements(v, v_bufs, at));

    let (g, lane) = (warp_idx(), lane_id());
    let h = kvh * g_count + g;
    let active = g < g_count;
    // This warp's query head, read 16 bytes (8 bf16) at a time as needed:
    // lane `r` needs all of it for its key's score.
    let q_at = (b * heads + h.min(heads - 1)) as usize * DEC_D;
    // Online softmax state (the same in every lane of the warp) and this
    // lane's two output columns `2 lane`, `2 lane + 1`.
    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
    let mut o = [0.0f32; 2];
    let scale_log2 = scale * LOG2_E;
    emit_pipeline(steps, specs, &loaded, 0, |step, (kt, vt)| {
        if !active {
            return;
        }
        // Lane `r`'s score of key `r` of the block, masked past the split.
        let key = start + step * DEC_BN as u32 + lane;
        let mut s = 0.0f32;
        unroll(DEC_D / 8, |c| {
            let qs = q.read_v4(q_at + 8 * c);
            let ks = kt.get_v4(lane as usize, 8 * c);
            unroll(8, |e| s = bf16_to_f32(qs[e]).fma(bf16_to_f32(ks[e]), s));
        });
        let s = if key < end { s * scale_log2 } else { f32::NEG_INFINITY };
        // The block's maximum and the rescale of what came before.
        let mut mx = s;
        unroll(5, |i| mx = max(mx, shfl_xor(mx, 1 << i)));
        let m_new = max(m, mx);
        let alpha = ex2_approx_ftz(m - m_new);
        let p = ex2_approx_ftz(s - m_new);
        let mut sum = p;
        unroll(5, |i| sum += shfl_xor(sum, 1 << i));
        l = l * alpha + sum;
        m = m_new;
        o[0] *= alpha;
        o[1] *= alpha;
        // O += P V: key `r`'s probability from lane `r`.
        unroll(DEC_BN, |r| {
            let pr = shfl_idx(p, r as u32);
            let c = 2 * lane as usize;
            o[0] = pr.fma(bf16_to_f32(vt.get(r, c)), o[0]);
            o[1] = pr.fma(bf16_to_f32(vt.get(r, c + 1)), o[1]);
        });
    });
    if active {
        let row = (b * heads + h) * splits + split;
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        o_part.write(row as usize * DEC_D + 2 * lane as usize, o[0] * inv);
        o_part.write(row as usize * DEC_D + 2 * lane as usize + 1, o[1] * inv);
        if lane == 0 {
            // log-sum-exp in base 2 (m and the scores are scaled by log2 e).
            let v = if l > 0.0 { m + lg2_approx_ftz(l) } else { f32::NEG_INFINITY };
            lse.write(row as usize, v);
        }
    }
}

/// Phase 2 (module docs): `O[b, h, :] = Σ_i w_i o_part[b, h, i, :]` with
/// `w_i = 2^(lse_i - max lse) / Σ_j 2^(lse_j - max lse)`, written as bf16 to
/// `out[(b * heads + h) * D ..]`. Launch: grid `(heads, batch)`, block `D`
/// threads.
#[kernel(block = threads(64))]
pub fn decode_combine(o_part: GmemRef<f32>, lse: GmemRef<f32>, out: Gmem<bf16>, splits: u32) {
    let (h, b) = (block_idx().x, block_idx().y);
    let heads = grid_dim().x;
    let d = thread_idx().x as usize;
    let row0 = ((b * heads + h) * splits) as usize;
    let mut mx = f32::NEG_INFINITY;
    for i in 0..splits as usize {
        mx = max(mx, lse.read(row0 + i));
    }
    let (mut acc, mut wsum) = (0.0f32, 0.0f32);
    for i in 0..splits as usize {
        let li = lse.read(row0 + i);
        if li > f32::NEG_INFINITY {
            let w = ex2_approx_ftz(li - mx);
            acc = w.fma(o_part.read((row0 + i) * DEC_D + d), acc);
            wsum += w;
        }
    }
    out.write((b * heads + h) as usize * DEC_D + d, bf16::from_f32(acc / wsum));
}
