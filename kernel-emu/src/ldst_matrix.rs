//! `ldmatrix` (sm_75) and `stmatrix` (sm_90), the PTX ISA's warp-level
//! matrix load and store instructions: warp-collective moves of one, two or four `8 x 8`
//! matrices of 16-bit elements between shared memory and registers.
//!
//! # The fragment
//!
//! Matrix `i` of an instruction is held one 32-bit register per lane:
//! lane `l`'s register `i` is row `l / 4`, columns `2 (l % 4)` and
//! `2 (l % 4) + 1` (the lower half is the lower column). Its row `r` lives
//! in shared memory at the address lane `8 i + r` supplies (16 contiguous
//! bytes, 16-byte aligned); lanes `8 x N ..` supply nothing for `.x1` and
//! `.x2`. With `.trans` the matrix is transposed on the way: memory row `r`
//! (from lane `8 i + r`) holds column `r` of the fragment.
//!
//! # How it runs here
//!
//! Every lane deposits its row address ([`crate::warp_exchange`], with the
//! convergence check), checks the addresses the instruction uses, then moves
//! its own register's bytes to or from the rows they belong to, each move
//! an ordinary shared-memory access of the calling lane for the race
//! detector ([`crate::smem_access`]).
use crate::{lane_id, misuse, smem_access, smem_ptr_range, warp_exchange};

/// The row addresses the instruction uses (lanes `0 .. 8 n`), checked:
/// 16-byte aligned, or the run stops naming the rule and the lane.
#[track_caller]
fn rows(op: &'static str, addr: u32, n: usize) -> [u32; 32] {
    let lanes = warp_exchange(op, addr as u64);
    let mut rows = [0u32; 32];
    for (l, &a) in lanes.iter().enumerate().take(8 * n) {
        let a = a as u32;
        if a % 16 != 0 {
            misuse(
                "ldmatrix/stmatrix row address not 16-byte aligned",
                format_args!("{op}: lane {l} supplies shared address {a:#x} for row {} of matrix {}; every row of an 8 x 8 b16 matrix is 16 contiguous bytes at a multiple of 16", l % 8, l / 8),
            );
        }
        rows[l] = a;
    }
    rows
}

/// Where lane `lane`'s register `i` goes (or comes from): one 4-byte
/// piece without `.trans`, two 2-byte pieces (lower half first) with it;
/// `(shared address, bytes, offset in the register)`, the first `n`.
fn places(rows: &[u32; 32], lane: usize, i: usize, trans: bool) -> ([(u32, usize, usize); 2], usize) {
    let (r, c) = (lane / 4, 2 * (lane % 4));
    if trans {
        // Element (r, c) of the fragment is at memory row c, column r.
        ([(rows[8 * i + c] + 2 * r as u32, 2, 0), (rows[8 * i + c + 1] + 2 * r as u32, 2, 2)], 2)
    } else {
        ([(rows[8 * i + r] + 2 * c as u32, 4, 0), (0, 0, 0)], 1)
    }
}

/// Moves this lane's register `i` to (`store`) or from shared memory, piece
/// by piece, each an access of this lane for the race detector.
#[track_caller]
fn move_reg(rows: &[u32; 32], i: usize, trans: bool, reg: &mut [u8; 4], store: bool) {
    let (places, n) = places(rows, lane_id() as usize, i, trans);
    for &(a, len, at) in &places[..n] {
        let p = smem_ptr_range(a, len);
        smem_access(p, len, store);
        // SAFETY: `smem_ptr_range` checked that `len` bytes at `a` lie in this
        // CTA's shared memory; one emulated thread runs at a time.
        unsafe {
            if store {
                core::ptr::copy_nonoverlapping(reg[at..].as_ptr(), p, len)
            } else {
                core::ptr::copy_nonoverlapping(p, reg[at..].as_mut_ptr(), len)
            }
        }
    }
}

/// `stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 [addr], regs`:
/// `regs.len()` (1, 2 or 4) matrices from this lane's registers to shared
/// memory. `op` names the instruction in reports. Warp-collective.
#[track_caller]
pub fn stmatrix(op: &'static str, addr: u32, regs: &[u32], trans: bool) {
    let rows = rows(op, addr, regs.len());
    for (i, &v) in regs.iter().enumerate() {
        move_reg(&rows, i, trans, &mut v.to_le_bytes(), true);
    }
}

/// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 regs, [addr]`: `N`
/// (1, 2 or 4) matrices from shared memory into this lane's registers.
/// Warp-collective.
#[track_caller]
pub fn ldmatrix<const N: usize>(op: &'static str, addr: u32, trans: bool) -> [u32; N] {
    let rows = rows(op, addr, N);
    core::array::from_fn(|i| {
        let mut bytes = [0u8; 4];
        move_reg(&rows, i, trans, &mut bytes, false);
        u32::from_le_bytes(bytes)
    })
}
