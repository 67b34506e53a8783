//! SIMT building blocks: warp collectives, warp and block reductions and
//! scans, f32 math and f16/bf16 conversions, vector and read-only global
//! loads, atomics, 16-byte vector memory on bf16 (global, shared, a
//! swizzled tile), and a user-defined operation (`device_op!`).
//!
//! Each kernel writes what its operations return, per thread, so the host
//! (`examples::simt`) can compare every lane with a CPU reference, on the
//! emulator and on the GPU.
use kernel_device::cvt::{self, Bf16x2, F16x2};
use kernel_device::gmem::{AtomicOp, Scope};
use kernel_device::math;
use kernel_device::prelude::*;
use kernel_device::reduce::{self, Max, Min, Sum};
use kernel_device::warp::{self, ReduxInt};
use kernel_device::bf16;

/// Outputs per thread of [`warp_collectives`] (`f32` and `i32` each).
pub const WARP_OUTS: usize = 8;

/// Every warp collective once, on 2 warps.
///
/// This kernel works as follows: thread `t` reads `x[t]` and `xi[t]`, and
/// writes to `out_f[8 t..]` `shfl_idx(x, 3)`, `shfl_up(x, 1)`,
/// `shfl_down(x, 2)`, `shfl_xor(x, 5)`, the warp's sum, max and min, and its
/// inclusive prefix sum; to `out_i[8 t..]` the ballot of `xi > 0`,
/// `vote_all`/`any`/`uni` of `xi > -100`, `redux.sync` sum, max, min of
/// `xi`, and `match_any(xi & 3)`.
///
/// Constraints: 64 threads; `x`, `xi` hold 64 elements, `out_*` 512.
#[kernel(block = threads(64))]
pub fn warp_collectives(x: GmemRef<f32>, xi: GmemRef<i32>, out_f: Gmem<f32>, out_i: Gmem<i32>) {
    let t = thread_idx().x as usize;
    let (v, k) = (x.read(t), xi.read(t));
    let o = t * WARP_OUTS;
    out_f.write(o, warp::shfl_idx(v, 3));
    out_f.write(o + 1, warp::shfl_up(v, 1));
    out_f.write(o + 2, warp::shfl_down(v, 2));
    out_f.write(o + 3, warp::shfl_xor(v, 5));
    out_f.write(o + 4, reduce::warp_sum(v));
    out_f.write(o + 5, reduce::warp_max(v));
    out_f.write(o + 6, reduce::warp_min(v));
    out_f.write(o + 7, reduce::warp_inclusive_scan::<Sum, f32>(v));
    out_i.write(o, warp::ballot(k > 0) as i32);
    let big = k > -100;
    out_i.write(o + 1, warp::vote_all(big) as i32 | (warp::vote_any(k > 0) as i32) << 1 | (warp::vote_uni(k > 0) as i32) << 2);
    out_i.write(o + 2, k.redux_sum());
    out_i.write(o + 3, k.redux_max());
    out_i.write(o + 4, k.redux_min());
    out_i.write(o + 5, warp::match_any((k & 3) as u32) as i32);
    out_i.write(o + 6, reduce::warp_exclusive_scan::<Max, i32>(k));
    out_i.write(o + 7, warp::match_all(7).map_or(0, |m| m as i32));
}

/// The warpgroup index two ways, on 3 warpgroups: thread `t` writes
/// `warpgroup_idx()` to `out[2 t]` and `warpgroup_idx_sync()` (the same
/// value broadcast from lane 0, which ptxas knows is warp-uniform) to
/// `out[2 t + 1]`.
///
/// Constraints: 384 threads; `out` holds 768 elements.
#[kernel(block = threads(384))]
pub fn warpgroup_indices(out: Gmem<u32>) {
    let t = thread_idx().x as usize;
    out.write(2 * t, warpgroup_idx());
    out.write(2 * t + 1, warpgroup_idx_sync());
}

/// Outputs per thread of [`block_reductions`] (`f32` and `i32` each).
pub const BLOCK_OUTS: usize = 5;

/// Block reductions and scans over 128 threads (4 warps).
///
/// This kernel works as follows: thread `t` writes to `out_f[5 t..]` the
/// block's sum, max and min of `x`, and `x`'s inclusive and exclusive
/// prefix sums at `t`; to `out_i[5 t..]` the same over `xi` (with min and
/// max scans for the last two). One 32-slot SMEM scratch per type; two
/// `bar.sync` per reduction.
///
/// Constraints: 128 threads; `x`, `xi` hold 128 elements, `out_*` 640.
#[kernel(block = threads(128))]
pub fn block_reductions(
    x: GmemRef<f32>,
    xi: GmemRef<i32>,
    out_f: Gmem<f32>,
    out_i: Gmem<i32>,
    #[scratch] sf: Smem<[f32; 32]>,
    #[scratch] si: Smem<[i32; 32]>,
) {
    let t = thread_idx().x as usize;
    let (v, k) = (x.read(t), xi.read(t));
    let o = t * BLOCK_OUTS;
    out_f.write(o, reduce::block_sum(v, sf));
    out_f.write(o + 1, reduce::block_max(v, sf));
    out_f.write(o + 2, reduce::block_min(v, sf));
    out_f.write(o + 3, reduce::block_inclusive_scan::<Sum, f32>(v, sf));
    out_f.write(o + 4, reduce::block_exclusive_scan::<Sum, f32>(v, sf));
    out_i.write(o, reduce::block_sum(k, si));
    out_i.write(o + 1, reduce::block_max(k, si));
    out_i.write(o + 2, reduce::block_min(k, si));
    out_i.write(o + 3, reduce::block_inclusive_scan::<Max, i32>(k, si));
    out_i.write(o + 4, reduce::block_exclusive_scan::<Min, i32>(k, si));
}

/// `brev.b32 d, a;` (PTX ISA §9.7.1.15): a user-defined operation, written
/// with [`kernel_device::device_op!`] (a PTX body and an emulator body).
#[inline(always)]
pub fn brev(a: u32) -> u32 {
    kernel_device::device_op!("brev.b32", {
        let d: u32;
        // SAFETY: register-only.
        unsafe {
            core::arch::asm!("brev.b32 {0}, {1};", out(reg32) d, in(reg32) a,
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: { a.reverse_bits() })
}

/// Outputs per thread of [`math_ops`].
pub const MATH_OUTS: usize = 24;

/// Every math and conversion operation on one input per thread.
///
/// This kernel works as follows: thread `t` reads `x = x[t]` and writes, in
/// order, to `out[24 t..]`: `exp`, `exp2`, `ln |x|`, `log2 |x|`, `rcp`,
/// `rcp_approx`, `sqrt_rn |x|`, `sqrt_approx |x|`, `rsqrt |x|`, `tanh`,
/// `sin`, `cos`, `fma(x, x, 1)`, `max_nan(x, NaN)` (NaN), `max(x, NaN)`
/// (`x`), the f16 and bf16 round trips of `1000 x`, the satfinite f16 of
/// `1e5 x`, the packed f16x2 `fma(a, b, a)` lanes and bf16x2 `a * b + a`
/// lanes of `(x, 2x)` and `(0.5, -x)`, the user op `brev` of `x`'s bits (as
/// bits), `ex2_approx_ftz(-140)` (0: flushed), and `max_nan(1, x)`.
///
/// Constraints: 64 threads; `x` holds 64 elements, `out` 1536.
#[kernel(block = threads(64))]
pub fn math_ops(x: GmemRef<f32>, out: Gmem<f32>) {
    let t = thread_idx().x as usize;
    let v = x.read(t);
    let a = v.abs();
    let o = t * MATH_OUTS;
    out.write(o, v.exp());
    out.write(o + 1, v.exp2());
    out.write(o + 2, a.ln());
    out.write(o + 3, a.log2());
    out.write(o + 4, v.rcp());
    out.write(o + 5, v.rcp_approx());
    out.write(o + 6, a.sqrt_rn());
    out.write(o + 7, a.sqrt_approx());
    out.write(o + 8, a.rsqrt());
    out.write(o + 9, v.tanh());
    out.write(o + 10, v.sin());
    out.write(o + 11, v.cos());
    out.write(o + 12, v.fma(v, 1.0));
    out.write(o + 13, v.max_nan(f32::NAN));
    out.write(o + 14, math::max(v, f32::NAN));
    out.write(o + 15, cvt::f16_to_f32(cvt::f32_to_f16(1000.0 * v)));
    out.write(o + 16, cvt::bf16_to_f32(cvt::f32_to_bf16(1000.0 * v)));
    out.write(o + 17, cvt::f16_to_f32(cvt::f32_to_f16_satfinite(1e5 * v)));
    out.write(o + 18, {
        let (p, q) = (F16x2::from_f32(v, 2.0 * v), F16x2::from_f32(0.5, -v));
        p.fma(q, p).to_f32().0
    });
    out.write(o + 19, {
        let (p, q) = (F16x2::from_f32(v, 2.0 * v), F16x2::from_f32(0.5, -v));
        p.fma(q, p).to_f32().1
    });
    out.write(o + 20, {
        let (p, q) = (Bf16x2::from_f32(v, 2.0 * v), Bf16x2::from_f32(0.5, -v));
        (p * q + p).to_f32().1
    });
    out.write(o + 21, f32::from_bits(brev(v.to_bits())));
    out.write(o + 22, math::ex2_approx_ftz(-140.0));
    out.write(o + 23, 1.0f32.max_nan(v));
}

/// Threads per CTA of [`gmem_ops`].
pub const GMEM_BLOCK: u32 = 64;

/// Vector, read-only and atomic global-memory accesses, over a grid of CTAs.
///
/// This kernel works as follows: thread `g` (global index) reads `x[4 g..4 g
/// + 4]` with one `ld.global.nc.v4` and `x[2 g..]` with one
/// `ld.global.nc.v2`, writes their sum to `y[4 g..]` with one
/// `st.global.v4`, reads it back with `ld.global.v2`; then adds 1 to
/// `counts[0]` (`atom.add.u32`, gpu scope), `x[4 g]` to `fsum[0]`
/// (`atom.add.f32`), `g` to `wide[0]` (`atom.add.u64`), takes the max and
/// min of `x[4 g]` into `fext[0..2]` (f32 CAS loops) and of `g - 50` into
/// `iext[0..2]` (`atom.max/min.s32`, cta scope for the min), swaps `g + 1`
/// into `counts[1]` (`atom.exch`) and claims `counts[2]` with a CAS from 0.
///
/// Constraints: `GMEM_BLOCK` threads per CTA; `x`, `y` hold `4 n` elements
/// for `n` threads in all.
#[kernel(block = threads(64))]
pub fn gmem_ops(
    x: GmemRef<f32>,
    y: Gmem<f32>,
    counts: Gmem<u32>,
    fsum: Gmem<f32>,
    wide: Gmem<u64>,
    fext: Gmem<f32>,
    iext: Gmem<i32>,
) {
    let g = (block_idx().x * GMEM_BLOCK + thread_idx().x) as usize;
    let v = x.read_nc_v4(4 * g);
    let w = x.read_nc_v2(2 * g);
    y.write_v4(4 * g, [v[0] + w[0], v[1] + w[1], v[2], v[3]]);
    let back = y.read_v2(4 * g);
    y.write(4 * g + 2, back[0] + back[1] + v[2]);
    counts.atomic_add(0, 1);
    fsum.atomic_add(0, v[0]);
    wide.atomic_add(0, g as u64);
    fext.atomic_max(0, v[0]);
    fext.atomic_min(1, v[0]);
    iext.atomic_max(0, g as i32 - 50);
    iext.atomic(Scope::Cta, AtomicOp::Min, 1, g as i32 - 50, 0);
    counts.atomic_exch(1, g as u32 + 1);
    counts.atomic_cas(2, 0, g as u32 + 1);
}

/// Elements every CTA of [`reduce_adds`] adds into each output.
pub const REDUCE_LEN: usize = 256;

/// Reductions into global memory from every CTA: `sums` and `pairs`
/// (`REDUCE_LEN` f32 each, zeroed by the host) end up as the column sums
/// of `x` seen as `grid x REDUCE_LEN`.
///
/// This kernel works as follows: CTA `b` copies its row of `x` into SMEM
/// (`st.shared.v4` by the first 64 threads), `commit_smem`, a CTA
/// barrier, then thread 0 adds the whole row into `sums` with one bulk
/// reduction (`cp.reduce.async.bulk .add.f32`, a bulk group it waits for);
/// meanwhile every thread adds two elements of the row into `pairs` with
/// `red.global.add.v2.f32`.
///
/// Constraints: 128 threads; `x` holds `grid * REDUCE_LEN` elements.
#[kernel(block = threads(128))]
pub fn reduce_adds(x: GmemRef<f32>, sums: Gmem<f32>, pairs: Gmem<f32>, #[scratch] row: Smem<[f32; REDUCE_LEN]>) {
    let t = thread_idx().x as usize;
    let base = block_idx().x as usize * REDUCE_LEN;
    if t < REDUCE_LEN / 4 {
        row.write_v4(4 * t, x.read_nc_v4(base + 4 * t));
    }
    kernel_device::tma::commit_smem();
    sync_threads();
    if t == 0 {
        kernel_device::tma::bulk::reduce_add(row, sums, 0);
        kernel_device::tma::commit_group();
        kernel_device::tma::wait_group::<0>();
    }
    pairs.red_add_v2(2 * t, x.read_nc_v2(base + 2 * t));
}

/// Rows of [`softmax_rows`] per CTA (one warp each).
pub const SOFTMAX_ROWS: u32 = 4;
/// Columns of [`softmax_rows`] (4 per lane).
pub const SOFTMAX_COLS: usize = 128;

/// Row softmax with one warp per row: no shared memory, no block barrier.
///
/// This kernel works as follows: warp `w` of CTA `b` owns row `4 b + w`;
/// lane `l` loads columns `4 l..4 l + 4` with one `ld.global.nc.v4`, the
/// warp takes the row max (5 `shfl.sync.bfly`), each lane computes
/// `exp(x - max)` (`ex2.approx`), the warp sums them, and each lane stores
/// `e * rcp(sum)` with one `st.global.v4`.
///
/// Constraints: 128 threads; `x`, `y` hold `rows * 128` elements,
/// `rows = 4 * grid`.
#[kernel(block = threads(128))]
pub fn softmax_rows(x: GmemRef<f32>, y: Gmem<f32>) {
    let row = (block_idx().x * SOFTMAX_ROWS + warp_idx()) as usize;
    let i = row * SOFTMAX_COLS + 4 * lane_id() as usize;
    let v = x.read_nc_v4(i);
    let m = reduce::warp_max(math::max(math::max(v[0], v[1]), math::max(v[2], v[3])));
    let e = [(v[0] - m).exp(), (v[1] - m).exp(), (v[2] - m).exp(), (v[3] - m).exp()];
    let inv = reduce::warp_sum(e[0] + e[1] + e[2] + e[3]).rcp();
    y.write_v4(i, [e[0] * inv, e[1] * inv, e[2] * inv, e[3] * inv]);
}

/// The `b16` element at row `r`, column `c` of matrix `i` of area `area`
/// in [`smem_matrices`]: a value the host recomputes.
pub const fn matrix_elem(area: u32, i: u32, r: u32, c: u32) -> u32 {
    100 * area + 64 * i + 8 * r + c
}

/// Where row `r` of matrix `i` of an area lives in [`smem_matrices`]: a
/// permutation of the 8 rows (`3 r mod 8`), so that the rows are not in
/// order and the addresses the lanes name are what places them.
pub const fn matrix_row_slot(i: u32, r: u32) -> u32 {
    8 * i + (3 * r) % 8
}

/// `u32`s of [`smem_matrices`]' output: per area (`.x4`, `.x2 .trans`,
/// `.x1`: 4, 2 and 1 matrices), the area's shared-memory image (128 bytes
/// per matrix) then the 32 lanes' registers read back (a `u32` per lane
/// and matrix).
pub const MATRIX_OUTS: usize = (4 + 2 + 1) * (32 + 32);

/// `stmatrix` and `ldmatrix` (`kernel_device::ldst_matrix`) on one warp,
/// over three areas of shared memory: `.x4`, `.x2` transposed and `.x1`.
///
/// This kernel works as follows: for each area, lane `l` holds, for each
/// matrix `i`, the fragment register of row `l / 4`, columns `2 (l % 4)`
/// and `+ 1` of the matrix whose elements are [`matrix_elem`]; lane `8 i +
/// r` names the shared address of row `r` of matrix `i`,
/// [`matrix_row_slot`]`(i, r)` 16-byte rows into the area. The warp stores
/// the matrices (`stmatrix`, `stmatrix_trans` for the second area), meets
/// (`bar.warp.sync`), loads them back with the matching `ldmatrix`
/// (`ldmatrix_trans`), and writes the area's image (copied by the lanes)
/// and every lane's loaded registers to `out`.
///
/// Constraints: 32 threads; `out` holds [`MATRIX_OUTS`] elements.
#[kernel(block = threads(32))]
pub fn smem_matrices(out: Gmem<u32>, #[scratch] smem: Smem<[u32; 7 * 32]>) {
    use kernel_device::ldst_matrix::{ldmatrix, ldmatrix_trans, stmatrix, stmatrix_trans};
    let l = lane_id();
    // This lane's register of matrix `i` of `area`.
    let reg = |area: u32, i: u32| {
        let (r, c) = (l / 4, 2 * (l % 4));
        matrix_elem(area, i, r, c) | matrix_elem(area, i, r, c + 1) << 16
    };
    // The row this lane names, in an area starting `first` matrices in.
    let row = |first: u32, count: u32| {
        let (i, r) = ((l / 8) % count, l % 8);
        smem.smem_addr() + 128 * first + 16 * matrix_row_slot(i, r)
    };
    stmatrix::<4>(row(0, 4), [reg(0, 0), reg(0, 1), reg(0, 2), reg(0, 3)]);
    stmatrix_trans::<2>(row(4, 2), [reg(1, 0), reg(1, 1)]);
    stmatrix::<1>(row(6, 1), [reg(2, 0)]);
    kernel_device::warp::sync_warp();
    let x4 = ldmatrix::<4>(row(0, 4));
    let x2 = ldmatrix_trans::<2>(row(4, 2));
    let x1 = ldmatrix::<1>(row(6, 1));
    // The images: 224 words (32 per matrix), copied by the lanes in turn
    // to the start of their area's output (64 words per matrix).
    let mut w = l as usize;
    while w < 7 * 32 {
        let shift = if w < 128 { 0 } else if w < 192 { 4 * 64 - 128 } else { 6 * 64 - 192 };
        out.write(w + shift, smem.read(w));
        w += 32;
    }
    // The registers read back, after each area's image.
    let regs = |base: usize, i: usize, v: u32| out.write(base + 32 * i + l as usize, v);
    for (i, &v) in x4.iter().enumerate() {
        regs(128, i, v);
    }
    for (i, &v) in x2.iter().enumerate() {
        regs(4 * 64 + 64, i, v);
    }
    regs(6 * 64 + 32, 0, x1[0]);
}

/// Rows of `x` and `y` per CTA of [`bf16_vectors`].
pub const BF16_ROWS: usize = 8;
/// Columns of `x`, `y` and `scale` in [`bf16_vectors`] (8 chunks of 16 bytes).
pub const BF16_COLS: usize = 64;
/// The staging tile of [`bf16_vectors`]: 8 x 64 bf16, 128-byte rows, 128-byte
/// swizzle (16-byte chunk `c` of row `r` stored at chunk `c ^ r`).
pub type Bf16Tile = Tile<bf16, BF16_ROWS, BF16_COLS, Swizzled<128>>;

/// 16-byte vector memory on bf16 (8 elements per access, [`Pack16`]):
/// `y[r] += x[7 - r] * scale`, with the 16-byte chunks of each row rotated
/// by 3, per CTA of 8 rows.
///
/// This kernel works as follows: thread `t` owns chunk `c = t % 8` of row
/// `r = t / 8` of its CTA's rows. It loads its chunk of `x` (8 bf16) with
/// one `ld.global.nc.v4` and stores it to the swizzled tile (`set_v4`,
/// `st.shared.v4`); threads 0-7 copy chunk `t` of `scale` into an SMEM
/// vector (`ld.global.v4`, `Smem::write_v4`). After a CTA barrier it reads
/// what other threads stored: chunk `c' = (c + 3) % 8` of tile row `7 - r`
/// (`get_v4`, `ld.shared.v4`) and of the scale vector (`Smem::read_v4`),
/// loads its chunk of `y` (`ld.global.v4`), and stores
/// `bf16(x * s + y)` (f32 arithmetic, `cvt.rn.bf16.f32`) with one
/// `st.global.v4`.
///
/// Constraints: 64 threads; `x` and `y` hold `8 * grid` rows of 64 bf16,
/// `scale` 64.
///
/// [`Pack16`]: kernel_device::Pack16
#[kernel(block = threads(64))]
pub fn bf16_vectors(
    x: GmemRef<bf16>,
    scale: GmemRef<bf16>,
    y: Gmem<bf16>,
    #[scratch] tile: Smem<Bf16Tile>,
    #[scratch] s: Smem<[bf16; BF16_COLS]>,
) {
    let t = thread_idx().x as usize;
    let (r, c) = (t / 8, t % 8);
    let row0 = block_idx().x as usize * BF16_ROWS;
    tile.set_v4(r, 8 * c, x.read_nc_v4((row0 + r) * BF16_COLS + 8 * c));
    if t < 8 {
        s.write_v4(8 * t, scale.read_v4(8 * t));
    }
    sync_threads();
    let c2 = (c + 3) % 8;
    let (xv, sv) = (tile.get_v4(BF16_ROWS - 1 - r, 8 * c2), s.read_v4(8 * c2));
    let i = (row0 + r) * BF16_COLS + 8 * c;
    let yv = y.read_v4(i);
    let f = cvt::bf16_to_f32;
    y.write_v4(i, core::array::from_fn(|k| cvt::f32_to_bf16(f(xv[k]) * f(sv[k]) + f(yv[k]))));
}

/// Outputs (f32) of [`warp_mma`]: `16 x 8` for bf16 inputs,
/// then `16 x 8` for f16.
pub const MMA_OUTS: usize = 2 * 16 * 8;

/// The warp-level tensor-core MMA (`kernel_device::mma`), bf16 and f16 on
/// one warp: `d = a · b + c` with `a` `16 x 16` and `b` `16 x 8` (both
/// row-major in global memory), `c` `16 x 8` f32.
///
/// This kernel works as follows: lane `l` (`g = l / 4`, `t = l % 4`) packs
/// its A registers (rows `g`, `g + 8`, columns `2 t`, `2 t + 8` and their
/// neighbours) and B registers (rows `2 t`, `2 t + 8` and their
/// neighbours of column `g`) from the inputs, its four C elements (rows
/// `g`, `g + 8`, columns `2 t`, `2 t + 1`), runs one
/// `mma.sync.m16n8k16` per type, and writes its four outputs where they
/// belong: `out[r 8 + n]` (bf16), `out[128 + r 8 + n]` (f16).
///
/// Constraints: 32 threads; `a_*` 256 elements, `b_*` and `c` 128, `out`
/// [`MMA_OUTS`].
#[kernel(block = threads(32))]
pub fn warp_mma(a_bf: GmemRef<bf16>, b_bf: GmemRef<bf16>, a_h: GmemRef<kernel_device::f16>, b_h: GmemRef<kernel_device::f16>, c: GmemRef<f32>, out: Gmem<f32>) {
    use kernel_device::mma::{mma_m16n8k16, MmaInput};
    // Two 16-bit values as one register, the first in the low half.
    fn pair<E: Copy>(x: GmemRef<E>, i: usize, j: usize, bits: impl Fn(E) -> u16) -> u32 {
        u32::from(bits(x.read(i))) | u32::from(bits(x.read(j))) << 16
    }
    fn run<E: MmaInput>(a: GmemRef<E>, b: GmemRef<E>, c: GmemRef<f32>, out: Gmem<f32>, base: usize, bits: impl Fn(E) -> u16 + Copy) {
        let l = lane_id() as usize;
        let (g, t) = (l / 4, l % 4);
        let ra: [u32; 4] = core::array::from_fn(|i| {
            let (r, k) = (g + 8 * (i % 2), 2 * t + 8 * (i / 2));
            pair(a, 16 * r + k, 16 * r + k + 1, bits)
        });
        let rb: [u32; 2] = core::array::from_fn(|i| {
            let k = 2 * t + 8 * i;
            pair(b, 8 * k + g, 8 * (k + 1) + g, bits)
        });
        let at = |i: usize| 8 * (g + 8 * (i / 2)) + 2 * t + i % 2;
        let rc: [f32; 4] = core::array::from_fn(|i| c.read(at(i)));
        let d = mma_m16n8k16::<E>(ra, rb, rc);
        for (i, v) in d.into_iter().enumerate() {
            out.write(base + at(i), v);
        }
    }
    run(a_bf, b_bf, c, out, 0, |x: bf16| x.to_bits());
    run(a_h, b_h, c, out, 128, |x: kernel_device::f16| x.to_bits());
}
