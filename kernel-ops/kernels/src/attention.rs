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
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_wait, Acc, Cols, WgmmaInput, WgmmaShape};
use kernel_device::{bf16, f16, Barriers};

/// Rows of Q per CTA: two consumer warpgroups of 64 rows each.
pub const BM: usize = 128;
/// Consumer warpgroups (0 and 1); the producer is warpgroup 2.
pub const CONSUMERS: u32 = 2;
/// The named barrier of the two consumer warpgroups (256 threads; ids
/// 8..=15 are the emulator's).
pub const CONSUMER_BARRIER: NamedBarrier = NamedBarrier::new(1, 256);
/// Register budgets per role (`setmaxnreg`): 24 + 2 x 240 = 504 <= 512.
pub const PRODUCER_REGS: u32 = 24;
pub const CONSUMER_REGS: u32 = 240;

/// Q's tile (and O's, which reuses its buffer): `128 x D`, 128-byte
/// swizzle, `D / 64` column blocks.
pub type QTile<E, const D: usize> = Tile<E, BM, D, Swizzled<128>>;
/// A K or V tile: `BN` keys x `D`.
pub type KvTile<E, const BN: usize, const D: usize> = Tile<E, BN, D, Swizzled<128>>;

/// The 16-bit element types of the attention kernels: the wgmma input and
/// the f32 pair packing of P's and O's registers.
pub trait AttnElem: WgmmaInput {
    /// Two f32 to a packed pair of `Self` (`lo` in bits 0..16).
    fn pack(lo: f32, hi: f32) -> u32;
}
impl AttnElem for f16 {
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        kernel_device::cvt::pack_f16x2(lo, hi)
    }
}
impl AttnElem for bf16 {
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        kernel_device::cvt::pack_bf16x2(lo, hi)
    }
}

/// The rules every instance passes (checked at compile time): `D` 64, 128
/// or 256 (whole 128-byte swizzle blocks of f16, and a wgmma N); `BN` 64,
/// 128 or 176/192.. (a wgmma N, a multiple of 16 for P's k16 fragments);
/// the register rule: a consumer thread holds `D / 2` O registers, `BN / 2`
/// S registers and `BN / 4` P registers, at most 192 in all, so the 240 of
/// `setmaxnreg` leave room for the rest; SMEM `Q + STAGES (K + V)` <= 227 KB.
pub const fn check_attention(d: usize, bn: usize, stages: usize) {
    assert!(d == 64 || d == 128 || d == 256, "attention: head_dim (D) must be 64, 128 or 256");
    assert!(bn % 16 == 0 && bn >= 64 && bn <= 256, "attention: BN (keys per block) must be a multiple of 16 in 64..=256");
    assert!(stages >= 2, "attention: at least 2 K/V stages (one loads while the other is read)");
    assert!(d / 2 + bn / 2 + bn / 4 <= 192, "attention: D / 2 + BN / 2 + BN / 4 registers (O, S, P) must be at most 192 per consumer thread");
    assert!(2 * (BM * d + stages * 2 * bn * d) <= 227 * 1024, "attention: SMEM Q (128 x D) + STAGES x (K + V) (BN x D each), f16, must fit 227 KB");
}

/// The K/V blocks Q block `mb` reads: all `ceil(seq / BN)`, or with the
/// causal mask those up to its last row's diagonal.
#[inline(always)]
pub fn kv_blocks(mb: u32, seq: u32, bn: u32, causal: bool) -> u32 {
    let last = if causal { seq.min((mb + 1) * BM as u32) } else { seq };
    last.div_ceil(bn)
}

/// `O = softmax(scale Q Kᵀ) V`, the kernel body of every element type
/// (see [`attention_fwd`]).
///
/// This kernel works as follows. CTA `(mb, h, b)` owns rows `128 mb ..
/// 128 mb + 128` of Q head `h` of batch `b`.
/// 1. One thread of the producer warpgroup (number 2, registers given back
///    to 24) loads the Q tile once, then for each K/V block `j` waits until
///    slot `j % STAGES` is consumed (from the second round on) and loads K's
///    and V's `BN x D` tiles on their own barriers, so the first GEMM of a
///    block starts when K has landed while V is still in flight.
/// 2. Consumer warpgroup `w` (0 or 1, 240 registers) owns Q rows `64 w ..`
///    and keeps, per thread, its O accumulator (`64 x D` in the WGMMA
///    layout), and the running maximum `m` and partial sum `l` of its two
///    rows. Per block: `S = Q Kᵀ` (`D / 16` SS wgmmas of `m64nBNk16`);
///    the masks (keys past `seq`, and with `causal` keys after the row) set
///    `-inf`; `m_new = max(m, rowmax(S) · scale log2 e)` (4 values per row
///    per thread, then 2 quad shuffles); `P = 2^(S · scale log2 e - m_new)`
///    (one FMA and one `ex2.approx` per element); `l = l 2^(m - m_new) +`
///    this thread's row sums (the quad's partial sums are added only at
///    the end); `O *= 2^(m - m_new)`; P rounded to the element type in
///    registers is exactly the A fragment of `m64nDk16` (pairs `4c ..
///    4c + 4` of S for keys `16c .. 16c + 16`), so `O += P V` is `BN / 16`
///    RS wgmmas with V MN-major (keys x head_dim, as stored) — no trip
///    through SMEM; then the slot is released (256 arrivals).
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
pub fn attention_fwd_of<E: AttnElem, const D: usize, const BN: usize, const STAGES: usize>(
    q: Tma<QTile<E, D>, 3>,
    k: Tma<KvTile<E, BN, D>, 3>,
    v: Tma<KvTile<E, BN, D>, 3>,
    o: Tma<QTile<E, D>, 3>,
    lse: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    q_buf: Smem<QTile<E, D>>,
    k_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    v_bufs: Smem<[KvTile<E, BN, D>; STAGES]>,
    q_loaded: Barrier,
    k_loaded: Barriers<STAGES>,
    v_loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    const { check_attention(D, BN, STAGES) };
    let (mb, h, b) = (block_idx().x, block_idx().y, block_idx().z);
    let heads = grid_dim().y;
    let causal = causal != 0;
    let n_blocks = kv_blocks(mb, seq, BN as u32, causal);
    let slot = |j: u32| (j % STAGES as u32) as usize;
    if warpgroup_idx() == CONSUMERS {
        setmaxnreg_dec::<PRODUCER_REGS>();
        if thread_in_warpgroup() == 0 {
            let kv_col = (h / kv_group) * D as u32;
            q_loaded.arrive_expect_tx(<QTile<E, D> as TileLayout>::BYTES as u32);
            q.load_at(q_buf, [h * D as u32, mb * BM as u32, b], q_loaded.as_ref());
            for j in 0..n_blocks {
                let s = slot(j);
                if j >= STAGES as u32 {
                    consumed.at(s).wait();
                }
                let tile_bytes = <KvTile<E, BN, D> as TileLayout>::BYTES as u32;
                let kb = k_loaded.at(s);
                kb.arrive_expect_tx(tile_bytes);
                k.load_at(k_bufs.at(s), [kv_col, j * BN as u32, b], kb);
                let vb = v_loaded.at(s);
                vb.arrive_expect_tx(tile_bytes);
                v.load_at(v_bufs.at(s), [kv_col, j * BN as u32, b], vb);
            }
        }
        return;
    }
    setmaxnreg_inc::<CONSUMER_REGS>();
    let wg = warpgroup_idx() as usize;
    let row0 = 64 * wg;
    let t = thread_in_warpgroup() as usize;
    let (w, l) = (t / 32, t % 32);
    // This thread's two rows (h = 0, 1) in the whole sequence.
    let my_row = |hh: usize| mb as usize * BM + row0 + 16 * w + l / 4 + 8 * hh;
    let mut acc_o = Acc::<D>::zeros();
    let mut m = [f32::NEG_INFINITY; 2];
    let mut row_l = [0f32; 2];
    q_loaded.wait();
    for j in 0..n_blocks {
        let s = slot(j);
        k_loaded.at(s).wait();
        let mut acc_s = Acc::<BN>::undefined();
        acc_s.mma(q_buf, row0, k_bufs.at(s), 0, false);
        wgmma_commit_group();
        wgmma_wait::<0>();
        acc_s.fence_operands();
        let sr = acc_s.regs.as_mut();
        // Masks: keys past `seq` (the tail block), keys after the row
        // (causal, blocks that reach the diagonal).
        let key0 = j as usize * BN;
        let diag = causal && key0 + BN > mb as usize * BM + row0 + 1;
        if key0 + BN > seq as usize || diag {
            unroll(BN / 2, |i| {
                let key = key0 + 8 * (i / 4) + 2 * (l % 4) + i % 2;
                if key >= seq as usize || (causal && key > my_row((i / 2) % 2)) {
                    sr[i] = f32::NEG_INFINITY;
                }
            });
        }
        // Row maxima (scaled to log2 units), then the new running maxima.
        let mut mx = [f32::NEG_INFINITY; 2];
        unroll(BN / 2, |i| mx[(i / 2) % 2] = max(mx[(i / 2) % 2], sr[i]));
        let mut alpha = [0f32; 2];
        let mut neg_m = [0f32; 2];
        unroll(2, |hh| {
            let v1 = max(mx[hh], kernel_device::warp::shfl_xor(mx[hh], 1));
            let v2 = max(v1, kernel_device::warp::shfl_xor(v1, 2));
            let m_new = max(m[hh], v2 * scale_log2);
            // A row with every key masked so far keeps m = -inf: use 0 so
            // that 2^(-inf - 0) = 0 rather than NaN.
            let ms = if m_new == f32::NEG_INFINITY { 0.0 } else { m_new };
            alpha[hh] = ex2_approx_ftz(m[hh] - ms);
            neg_m[hh] = -ms;
            m[hh] = m_new;
        });
        // P = 2^(S scale log2 e - m): one FMA + ex2 per element; the
        // thread's row sums.
        let mut sum = [0f32; 2];
        unroll(BN / 2, |i| {
            let hh = (i / 2) % 2;
            let p = ex2_approx_ftz(sr[i].fma(scale_log2, neg_m[hh]));
            sr[i] = p;
            sum[hh] += p;
        });
        unroll(2, |hh| row_l[hh] = row_l[hh] * alpha[hh] + sum[hh]);
        // O *= alpha (per row).
        {
            let or = acc_o.regs.as_mut();
            unroll(D / 2, |i| or[i] *= alpha[(i / 2) % 2]);
        }
        // P as the A fragments of O += P V: keys 16c .. 16c + 16 are pairs
        // 4c .. 4c + 4 of S, in the fragment's order.
        // (BN / 16 <= 16 chunks are used; Rust cannot size an array by BN / 16.)
        let mut frag = [[0u32; 4]; 16];
        unroll(BN / 16, |c| unroll(4, |x| frag[c][x] = E::pack(sr[2 * (4 * c + x)], sr[2 * (4 * c + x) + 1])));
        v_loaded.at(s).wait();
        unroll(BN / 16, |c| acc_o.mma_rs_kn(frag[c], v_bufs.at(s), 16 * c, 0, true));
        wgmma_commit_group();
        wgmma_wait::<0>();
        consumed.at(s).arrive();
    }
    acc_o.fence_operands();
    // The quad's partial sums, then O / l and the log-sum-exp.
    let mut inv = [0f32; 2];
    unroll(2, |hh| {
        let v1 = row_l[hh] + kernel_device::warp::shfl_xor(row_l[hh], 1);
        let total = v1 + kernel_device::warp::shfl_xor(v1, 2);
        inv[hh] = if total > 0.0 { 1.0 / total } else { 0.0 };
        let row = my_row(hh);
        if l % 4 == 0 && row < seq as usize {
            let lse_v = if total > 0.0 { (m[hh] + lg2_approx_ftz(total)) * LN_2 } else { f32::NEG_INFINITY };
            lse.write((b as usize * heads as usize + h as usize) * seq as usize + row, lse_v);
        }
    });
    // O over this warpgroup's Q rows (its own GEMMs, which read them, are
    // complete), then one TMA store of the tile.
    let base = q_buf.as_ptr() as *mut u8;
    let regs = acc_o.regs.as_ref();
    unroll(D / 4, |p| {
        let (r, c) = (row0 + 16 * w + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4));
        let off = QTile::<E, D>::offset_of(r, c);
        let hh = p % 2;
        // SAFETY: inside the tile (r < 128, c < D); 4-byte aligned (even column).
        unsafe { (base.add(off) as *mut u32).write(E::pack(regs[2 * p] * inv[hh], regs[2 * p + 1] * inv[hh])) };
    });
    commit_smem();
    CONSUMER_BARRIER.sync();
    if thread_linear() == 0 {
        o.store_at(q_buf, [h * D as u32, mb * BM as u32, b]);
        commit_group();
        wait_group::<0>();
    }
}

/// Attention forward, f16 (see [`attention_fwd_of`] for the schedule and
/// the launch): `O = softmax(scale Q Kᵀ) V` and the log-sum-exp per row.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((64, 128, 3), (128, 128, 2)))]
pub fn attention_fwd<const D: usize, const BN: usize, const STAGES: usize>(
    q: Tma<QTile<f16, D>, 3>,
    k: Tma<KvTile<f16, BN, D>, 3>,
    v: Tma<KvTile<f16, BN, D>, 3>,
    o: Tma<QTile<f16, D>, 3>,
    lse: Gmem<f32>,
    seq: u32,
    kv_group: u32,
    scale_log2: f32,
    causal: u32,
    #[scratch] q_buf: Smem<QTile<f16, D>>,
    #[scratch] k_bufs: Smem<[KvTile<f16, BN, D>; STAGES]>,
    #[scratch] v_bufs: Smem<[KvTile<f16, BN, D>; STAGES]>,
    #[scratch] q_loaded: Barrier,
    #[scratch] k_loaded: Barriers<STAGES>,
    #[scratch] v_loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<D>: WgmmaShape,
    Cols<BN>: WgmmaShape,
{
    attention_fwd_of::<f16, D, BN, STAGES>(q, k, v, o, lse, seq, kv_group, scale_log2, causal, q_buf, k_bufs, v_bufs, q_loaded, k_loaded, v_loaded, consumed);
}
