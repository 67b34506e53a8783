//! The emulator's Hopper `wgmma` (PTX ISA §9.7.15): the host bodies of
//! `kernel_device::wgmma`'s operations.
//!
//! Each emulated thread computes only its own fragment elements (thread `t`
//! of the warpgroup, warp `w = t / 32`, lane `l = t % 32`, holds for
//! register pair `p` the elements `(16 w + l / 4 + 8 (p % 2), 8 (p / 2) +
//! 2 (l % 4) + {0, 1})`), reading A and B from SMEM through the
//! descriptors when it issues the MMA, so the result is complete when the
//! MMA returns. The SMEM operands are decoded as the canonical layouts of
//! the swizzled descriptors (documented on [`kernel_spec::desc_wgmma::SmemDescriptor`]): A and B K-major, A
//! MN-major ([`A::SmemMnMajor`], `imm-trans-a = 1`), B MN-major with `trans_b`. Elements are f16, bf16 (`k16`) or FP8 e4m3/e5m2
//! (`k32`: 32 bytes of each row either way), decoded exactly to f32.
//! Products are summed in f32 (in `k` order) and added to the accumulator
//! (the hardware's FP8 MMAs accumulate with less precision than f32, so
//! GPU results differ from these in the low bits: compare with a bound); `scale_d = false` overwrites it. With an f16
//! accumulator the stored f16 pair is converted to f32, the f32 sum added,
//! and the result rounded back to f16 (round to nearest even) once per MMA.
//!
//! `wgmma.wait_group` ([`wait_group`]) is a barrier of the warpgroup on the
//! emulator (named barrier `15 - warpgroup`, 128 threads): the hardware
//! instruction is warpgroup-aligned, and without the barrier a thread that
//! ran ahead could let SMEM be overwritten before a slower thread of its
//! warpgroup issued its MMA. So kernels run on the emulator must leave
//! named barriers 8..=15 to it. The A fragments of the register-A form are
//! exchanged among the lanes of a warp through the run's warp exchange (a
//! warp barrier, per launch: concurrent runs cannot see each other's).
//!
//! `setmaxnreg` ([`setmaxnreg_inc`], [`setmaxnreg_dec`]) moves registers
//! between the warpgroups of a CTA within the pool the CTA was launched
//! with (`kernel_spec::registers`): the emulator keeps each warpgroup's
//! count, checks that `.dec` lowers it and `.inc` raises it, and blocks an
//! `.inc` until the pool has the registers. A kernel whose counts are over
//! the pool hangs on the GPU; on the emulator it is a deadlock whose report
//! gives the pool, the counts and the rule. Both are collectives of the
//! warpgroup's 128 threads (the engine's model is described in its
//! `regs` module).
use crate::operand::{chunk_ranges, read_bits, Desc};
use kernel_spec::desc_tcgen05::{Elem, Major};
use kernel_spec::desc_wgmma::{SmemDescriptor, WARPGROUP_THREADS};
use std::panic::Location;

/// Where A comes from.
#[derive(Clone, Copy, Debug)]
pub enum A {
    /// SMEM, through a K-major descriptor.
    Smem(SmemDescriptor),
    /// SMEM, through an MN-major descriptor (`imm-trans-a = 1`: A stored
    /// `K x M`, M contiguous; 16-bit inputs only).
    SmemMnMajor(SmemDescriptor),
    /// Registers: this thread's fragment (4 x f16x2 in the WGMMA
    /// A-fragment layout).
    Regs([u32; 4]),
}

/// This thread's linear index in its CTA.
fn thread_linear() -> u32 {
    crate::warp_id() * 32 + crate::lane_id()
}

/// The named barrier the emulator's `wgmma.wait_group` uses for this
/// thread's warpgroup.
fn sync_warpgroup() {
    let wg = thread_linear() / WARPGROUP_THREADS;
    assert!(wg < 8, "wgmma: warpgroup {wg} (the emulator's wgmma barriers are 15 - warpgroup, 8 warpgroups at most)");
    crate::bar_sync(15 - wg, WARPGROUP_THREADS);
}

/// `wgmma.commit_group.sync.aligned`: closes this thread's group of
/// operand reads (emulated MMAs complete at issue; the group only tracks
/// the SMEM they read, for the in-flight check); a scheduling point.
#[track_caller]
pub fn commit_group() {
    crate::wgmma_commit_group();
    crate::yield_point("wgmma.commit_group")
}

/// `wgmma.wait_group.sync.aligned n`: retires all but the newest `n`
/// groups of this thread's operand reads (emulated MMAs complete at issue),
/// then the warpgroup's barrier (see the module docs).
#[track_caller]
pub fn wait_group(n: u32) {
    crate::wgmma_wait_group(n);
    sync_warpgroup()
}

/// `setmaxnreg.inc.sync.aligned.u32 n` for the calling thread's warpgroup:
/// once all 128 threads of the warpgroup reached it, waits until the CTA's
/// register pool has `n` per thread for it (the other warpgroups' counts
/// plus `n` at most the pool), then raises the warpgroup's count to `n`.
/// A misuse if `n` is below the warpgroup's count, or other threads of the
/// warpgroup are at another `setmaxnreg`. A scheduling point.
#[track_caller]
pub fn setmaxnreg_inc(n: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = crate::enter("setmaxnreg_inc") {
        e.setmaxnreg(tid, loc, true, n);
    }
}

/// `setmaxnreg.dec.sync.aligned.u32 n` for the calling thread's warpgroup:
/// once all 128 threads of the warpgroup reached it, lowers the
/// warpgroup's count to `n`, returning the rest to the CTA's pool (which
/// serves waiting [`setmaxnreg_inc`]s). A misuse if `n` is above the
/// warpgroup's count. A scheduling point.
#[track_caller]
pub fn setmaxnreg_dec(n: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = crate::enter("setmaxnreg_dec") {
        e.setmaxnreg(tid, loc, false, n);
    }
}

/// An element at SMEM offset `off` of this CTA, as f32.
#[track_caller]
fn value(smem: *const u8, size: usize, off: usize, elem: Elem, seen: &mut Vec<u32>) -> f32 {
    crate::tcgen05::decode(elem, read_bits(smem, size, off, elem.bits() / 8, seen))
}

/// K of one wgmma of `elem`: 32 bytes of each row (16 for 16-bit types,
/// 32 for FP8).
fn k_of(elem: Elem) -> usize {
    256 / elem.bits()
}

/// The fragments of the 4 lanes of this thread's quad (the lanes that
/// hold rows `r` and `r + 8` of A), exchanged among the warp's lanes
/// through the run's warp exchange (two warp barriers).
#[track_caller]
fn quad_fragments(mine: [u32; 4]) -> [[u32; 4]; 4] {
    let lane = crate::lane_id() as usize;
    let lo = warp_values("wgmma.mma_async (RS): A fragments", u64::from(mine[0]) | u64::from(mine[1]) << 32);
    let hi = warp_values("wgmma.mma_async (RS): A fragments", u64::from(mine[2]) | u64::from(mine[3]) << 32);
    let q = lane / 4 * 4;
    core::array::from_fn(|i| [lo[q + i] as u32, (lo[q + i] >> 32) as u32, hi[q + i] as u32, (hi[q + i] >> 32) as u32])
}

/// The 32 lanes' `value`s (index = lane): a barrier of the calling warp
/// through the run's exchange buffers (all lanes call it; unchecked like
/// `bar.warp.sync`: the warpgroup-wide MMA's own rules apply).
#[track_caller]
fn warp_values(op: &'static str, value: u64) -> [u64; 32] {
    let loc = Location::caller();
    match crate::enter(op) {
        Some((e, tid)) => crate::warp_ops::collective(&e, tid, loc, op, false, !0, value),
        None => [value; 32],
    }
}

/// Computes this thread's `pairs` accumulator pairs of
/// `A[64 x 16] · B` and hands each to `out(pair, v0, v1)`.
/// The SMEM chunks this thread reads are checked against the async
/// proxy's view and recorded in its open wgmma group
/// ([`crate::wgmma_operand_reads`]).
#[track_caller]
fn mma(pairs: usize, a: A, b: SmemDescriptor, trans_b: bool, (elem, elem_b): (Elem, Elem), op: &str, mut out: impl FnMut(usize, f32, f32)) {
    assert!(
        matches!(elem, Elem::F16 | Elem::Bf16 | Elem::E4M3 | Elem::E5M2),
        "{op}: {elem:?} inputs are not emulated (f16, bf16, e4m3, e5m2 are)"
    );
    // PTX ISA: A and B have the same type, except that the FP8 types mix
    // (`.e4m3.e5m2`, `.e5m2.e4m3`).
    assert!(
        elem == elem_b || (matches!(elem, Elem::E4M3 | Elem::E5M2) && matches!(elem_b, Elem::E4M3 | Elem::E5M2)),
        "{op}: A {elem:?} with B {elem_b:?}: wgmma mixes only e4m3 with e5m2"
    );
    assert!(!trans_b || elem.bits() == 16, "{op}: an MN-major B needs 16-bit inputs (PTX ISA: no transpose for 8-bit types)");
    let kk = k_of(elem);
    let bytes = elem.bits() / 8;
    crate::yield_point("wgmma.mma_async");
    let mut seen: Vec<u32> = Vec::new();
    let smem = crate::smem_base() as *const u8;
    let size = crate::smem_size();
    let t = (thread_linear() % WARPGROUP_THREADS) as usize;
    let (w, l) = (t / 32, t % 32);
    let (row0, col0) = (16 * w + l / 4, 2 * (l % 4));
    let b = (Desc::from(b), if trans_b { Major::MN } else { Major::K });
    // This thread's two A rows (the first `kk` entries).
    let mut arow = [[0f32; 32]; 2];
    match a {
        A::Smem(da) | A::SmemMnMajor(da) => {
            // The descriptor's canonical layout, as `imm-trans-a` selects it.
            let major = if matches!(a, A::SmemMnMajor(_)) {
                assert!(elem.bits() == 16, "{op}: an MN-major A needs 16-bit inputs (PTX ISA: no transpose for 8-bit types)");
                Major::MN
            } else {
                Major::K
            };
            let da = Desc::from(da);
            for (h, row) in arow.iter_mut().enumerate() {
                for (k, v) in row.iter_mut().take(kk).enumerate() {
                    *v = value(smem, size, da.offset(major, row0 + 8 * h, k, bytes, op, "wgmma"), elem, &mut seen);
                }
            }
        }
        A::Regs(mine) => {
            assert!(elem.bits() == 16, "{op}: A from registers is emulated for 16-bit inputs only");
            let quad = quad_fragments(mine);
            let cvt = |bits: u16| crate::tcgen05::decode(elem, u32::from(bits));
            for (h, row) in arow.iter_mut().enumerate() {
                for (k, v) in row.iter_mut().take(kk).enumerate() {
                    // Lane l%4 = (k % 8) / 2 of the quad; word h + 2 (k / 8); half k % 2.
                    let word = quad[(k % 8) / 2][h + 2 * (k / 8)];
                    *v = cvt((word >> (16 * (k % 2))) as u16);
                }
            }
        }
    }
    for q in 0..pairs / 2 {
        let c = col0 + 8 * q;
        let mut bcol = [[0f32; 32]; 2];
        for (j, col) in bcol.iter_mut().enumerate() {
            for (k, v) in col.iter_mut().take(kk).enumerate() {
                *v = value(smem, size, b.0.offset(b.1, c + j, k, bytes, op, "wgmma"), elem_b, &mut seen);
            }
        }
        for h in 0..2 {
            let dot = |col: &[f32; 32]| arow[h][..kk].iter().zip(&col[..kk]).fold(0f32, |s, (x, y)| s + x * y);
            out(2 * q + h, dot(&bcol[0]), dot(&bcol[1]));
        }
    }
    crate::wgmma_operand_reads(&chunk_ranges(seen), op);
}

/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}` (SS or RS) or
/// `m64nNk32.f32.{e4m3,e5m2}` (SS) for the calling thread: its
/// `d.len() / 2` register pairs (`d[2p]`, `d[2p + 1]` for pair `p`), N =
/// `d.len() * 2`. `trans_b`: B MN-major (16-bit only); `elem`: the inputs'
/// type; `op` names the form in reports.
#[track_caller]
pub fn mma_f32(d: &mut [f32], a: A, b: SmemDescriptor, scale_d: bool, trans_b: bool, elem: Elem, op: &str) {
    mma_f32_mixed(d, a, b, scale_d, trans_b, (elem, elem), op)
}

/// [`mma_f32`] with A's and B's element types apart (`elems = (A, B)`):
/// `m64nNk32.f32.e4m3.e5m2` and `.e5m2.e4m3`, the FP8 types mixed (both
/// the same: [`mma_f32`]).
#[track_caller]
pub fn mma_f32_mixed(d: &mut [f32], a: A, b: SmemDescriptor, scale_d: bool, trans_b: bool, elems: (Elem, Elem), op: &str) {
    mma(d.len() / 2, a, b, trans_b, elems, op, |p, v0, v1| {
        if scale_d {
            d[2 * p] += v0;
            d[2 * p + 1] += v1;
        } else {
            d[2 * p] = v0;
            d[2 * p + 1] = v1;
        }
    });
}

/// `wgmma.mma_async.sync.aligned.m64nNk16.f16.f16.f16` (SS) for the calling
/// thread: its `d.len()` f16x2 registers (register `p` holds pair `p`).
#[track_caller]
pub fn mma_f16(d: &mut [u32], a: SmemDescriptor, b: SmemDescriptor, scale_d: bool, op: &str) {
    mma(d.len(), A::Smem(a), b, false, (Elem::F16, Elem::F16), op, |p, v0, v1| {
        let (lo, hi) = if scale_d {
            (half::f16::from_bits(d[p] as u16).to_f32(), half::f16::from_bits((d[p] >> 16) as u16).to_f32())
        } else {
            (0.0, 0.0)
        };
        let pack = |x: f32| u32::from(half::f16::from_f32(x).to_bits());
        d[p] = pack(lo + v0) | (pack(hi + v1) << 16);
    });
}
