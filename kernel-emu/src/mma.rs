//! The emulator's warp-level MMA, `mma.sync.aligned.m16n8k16.row.col`
//! with f16 or bf16 inputs and an f32 accumulator (PTX ISA §9.7.14.5.8):
//! the host body of `kernel_device::mma`.
//!
//! # The fragments (lane `l`, `g = l / 4`, `t = l % 4`)
//!
//! * A (`16 x 16`, row): register `i` holds row `g + 8 (i % 2)`, columns
//!   `2 t + 8 (i / 2)` and `+ 1` (the lower half is the lower column);
//! * B (`16 x 8`, col): register `i` holds rows `2 t + 8 i` and `+ 1`
//!   (the lower half is the lower row) of column `g`;
//! * C and D (`16 x 8`, f32): element `i` is row `g + 8 (i / 2)`, column
//!   `2 t + i % 2`.
//!
//! # How it runs here
//!
//! Every lane deposits its A and B registers (three warp exchanges, with
//! the convergence check of any `.sync.aligned` op), then computes its own
//! four outputs: the 16 products of a row of A and a column of B, exact in
//! f32, summed in f32 in `k` order and added to the accumulator. The
//! hardware's order and internal precision differ in the low bits: compare
//! GPU and emulator results with a bound, never bit for bit.
use crate::warp_exchange;
use kernel_spec::desc_tcgen05::Elem;

/// The 32 lanes' two registers `(r0, r1)`, one exchange.
#[track_caller]
fn pairs(op: &'static str, r0: u32, r1: u32) -> [(u32, u32); 32] {
    let all = warp_exchange(op, u64::from(r0) | u64::from(r1) << 32);
    core::array::from_fn(|l| (all[l] as u32, (all[l] >> 32) as u32))
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`
/// for the calling lane: `d = a · b + c` on this lane's fragments (module
/// docs). `elem` is the inputs' type (f16 or bf16); `op` names the
/// instruction in reports. Warp-collective.
#[track_caller]
pub fn mma_m16n8k16(op: &'static str, elem: Elem, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    assert!(matches!(elem, Elem::F16 | Elem::Bf16), "{op}: {elem:?} inputs are not emulated (f16 and bf16 are)");
    let a01 = pairs(op, a[0], a[1]);
    let a23 = pairs(op, a[2], a[3]);
    let bs = pairs(op, b[0], b[1]);
    let half = |w: u32, k: usize| crate::tcgen05::decode(elem, (w >> (16 * (k % 2))) & 0xFFFF);
    // A[r][k]: lane 4 (r % 8) + (k % 8) / 2, register r / 8 + 2 (k / 8).
    let a_at = |r: usize, k: usize| {
        let (lo, hi) = (a01[4 * (r % 8) + (k % 8) / 2], a23[4 * (r % 8) + (k % 8) / 2]);
        let w = match (r / 8, k / 8) {
            (0, 0) => lo.0,
            (1, 0) => lo.1,
            (0, _) => hi.0,
            _ => hi.1,
        };
        half(w, k)
    };
    // B[k][n]: lane 4 n + (k % 8) / 2, register k / 8.
    let b_at = |k: usize, n: usize| {
        let p = bs[4 * n + (k % 8) / 2];
        half(if k < 8 { p.0 } else { p.1 }, k)
    };
    let l = crate::lane_id() as usize;
    let (g, t) = (l / 4, l % 4);
    core::array::from_fn(|i| {
        let (r, n) = (g + 8 * (i / 2), 2 * t + i % 2);
        c[i] + (0..16).fold(0f32, |s, k| s + a_at(r, k) * b_at(k, n))
    })
}
