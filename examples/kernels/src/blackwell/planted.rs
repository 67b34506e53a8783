//! Deliberately broken tensor-memory protocols, each beside its race-free
//! twin, for the emulator's TMEM and tcgen05 checks
//! (`tests/tests/blackwell_emulator.rs`). One kernel per family; the
//! `variant` parameter picks the bug or its twin (constants below).
use super::{my_row, Sw};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{raw, tcgen05_commit_arrive, tcgen05_mma, tcgen05_mma_ts, TcBarrier};
use kernel_device::tmem::{commit_tmem, wait_load_tmem, LdSt32x32b, Rep, Tmem};
use kernel_device::f16;

/// A operand of [`tmem_protocol`]: `128 x 64` f16, K-major.
pub type PA = Tile<f16, 128, 64, Sw>;
/// B operand of [`tmem_protocol`]: `128 x 64` f16 (N x K, K-major): `D = A · Bᵀ`.
pub type PB = Tile<f16, 128, 64, Sw>;

/// Twin: MMA (A, B in SMEM), commit, every thread waits on the commit's
/// barrier, reads the accumulator: `out = A · Bᵀ`.
pub const OK_SS: u32 = 0;
/// Bug: the accumulator is read without waiting for the commit-arrive.
pub const READ_BEFORE_COMMIT_WAIT: u32 = 1;
/// Bug: readers take the TMA barrier's completion for the MMA's.
pub const TMA_BARRIER_AS_MMA_DONE: u32 = 2;
/// Bug: thread 0 issues the MMA, thread 32 commits (covers only its own).
pub const COMMIT_BY_OTHER_THREAD: u32 = 3;
/// Bug: each warp loads the lane quarter of the next warp.
pub const WRONG_LANE_QUARTER: u32 = 4;
/// Bug: a load past the allocated columns.
pub const OUTSIDE_ALLOCATION: u32 = 5;
/// Bug: accumulator cells stored over while this thread's load of them is in flight.
pub const STORE_OVER_INFLIGHT_LOAD: u32 = 6;
/// Twin of 6: `wait_load_tmem` before the store.
pub const STORE_AFTER_WAIT_LOAD: u32 = 7;
/// Bug: A stored to TMEM, then the MMA reads it without `commit_tmem`.
pub const MMA_AFTER_STORE_WITHOUT_COMMIT: u32 = 8;
/// Twin of 8: `commit_tmem` + a CTA barrier before the MMA (A from TMEM).
pub const MMA_AFTER_COMMIT_TMEM: u32 = 9;
/// Bug: a TMA load overwrites the A tile while the MMA reading it is in flight.
pub const SMEM_OPERAND_OVERWRITTEN: u32 = 10;
/// Twin of 10: the reload waits for the MMA's commit first.
pub const SMEM_RELOAD_AFTER_COMMIT: u32 = 11;
/// Bug: the accumulator is stored over while the MMA writing it is in flight.
pub const TMEM_OPERAND_OVERWRITTEN: u32 = 12;
/// Twin of 12: stored over after the commit's wait (and the reads' wait).
pub const TMEM_STORE_AFTER_COMMIT: u32 = 13;

/// The tensor-memory protocol kernel: one `128 x 128 x 64` MMA and its
/// epilogue, done right (`variant` 0, 7, 9, 11, 13) or with one planted
/// mistake (the odd constants above).
///
/// This kernel works as follows: thread 0 loads A and B (TMA, barrier
/// `loaded`); thread 0 issues the MMA into `acc` (A from SMEM, or for 8/9
/// from `a_tm`, which the warpgroup first fills from the A tile) and commits
/// it to `done`; every thread waits on `done` and writes its accumulator row
/// (lane quarter of its warp + lane) to `out` (`128 x 128` f32, row-major).
///
/// Constraints: grid 1; `a`, `b` are `128 x 64` f16.
#[kernel(block = warpgroups(1), arch = sm_100a)]
pub fn tmem_protocol(
    a: Tma<PA>,
    b: Tma<PB>,
    out: *mut f32,
    variant: u32,
    #[scratch] a_s: Smem<PA>,
    #[scratch] b_s: Smem<PB>,
    #[scratch] acc: Tmem<f32, 128, 128>,
    #[scratch] a_tm: Tmem<f16, 128, 64, true>,
    #[scratch] loaded: Barrier,
    #[scratch] done: TcBarrier,
) {
    let t = thread_linear();
    let row = my_row();
    if t == 0 {
        loaded.arrive_expect_tx(Tma::<PA>::BYTES + Tma::<PB>::BYTES);
        a.load(a_s, 0, 0, loaded.as_ref());
        b.load(b_s, 0, 0, loaded.as_ref());
    }
    loaded.wait();
    let a_from_tmem = variant == MMA_AFTER_STORE_WITHOUT_COMMIT || variant == MMA_AFTER_COMMIT_TMEM;
    if a_from_tmem {
        // Row `row` of A, packed two f16 per 32-bit column, 8 columns per
        // store (small constant-indexed arrays stay in registers).
        let mut j = 0;
        while j < 32 {
            let words: [u32; 8] = core::array::from_fn(|i| {
                u32::from(a_s.get(row, 2 * (j + i)).to_bits()) | (u32::from(a_s.get(row, 2 * (j + i) + 1).to_bits()) << 16)
            });
            a_tm.store_32x32b::<8>(j, words);
            j += 8;
        }
        if variant == MMA_AFTER_COMMIT_TMEM {
            commit_tmem();
        }
        sync_threads();
        raw::fence_after_thread_sync();
    }
    if t == 0 {
        if a_from_tmem {
            tcgen05_mma_ts(&acc, &a_tm, b_s, false);
        } else {
            tcgen05_mma(&acc, a_s, b_s, false);
        }
        if variant == SMEM_OPERAND_OVERWRITTEN {
            // Reload A while the MMA may still read it.
            loaded.arrive_expect_tx(Tma::<PA>::BYTES);
            a.load(a_s, 0, 0, loaded.as_ref());
        }
        if variant != COMMIT_BY_OTHER_THREAD {
            tcgen05_commit_arrive(done.as_ref());
        }
    }
    if variant == READ_BEFORE_COMMIT_WAIT || variant == TMA_BARRIER_AS_MMA_DONE || variant == COMMIT_BY_OTHER_THREAD {
        // A CTA barrier after the issue orders the issue, not the MMA's completion.
        sync_threads();
    }
    if variant == COMMIT_BY_OTHER_THREAD && t == 32 {
        tcgen05_commit_arrive(done.as_ref());
    }
    if variant == TMEM_OPERAND_OVERWRITTEN {
        // After the MMA was issued (the barrier orders it), before its commit is observed.
        sync_threads();
        acc.store_32x32b::<8>(0, [0; 8]);
        commit_tmem();
    }
    if variant != READ_BEFORE_COMMIT_WAIT && variant != TMA_BARRIER_AS_MMA_DONE {
        done.wait();
    }
    if variant == SMEM_RELOAD_AFTER_COMMIT && t == 0 {
        loaded.arrive_expect_tx(Tma::<PA>::BYTES);
        a.load(a_s, 0, 0, loaded.as_ref());
    }
    let mut c = 0;
    while c < 128 {
        let v: [u32; 8] = if variant == WRONG_LANE_QUARTER {
            let other = (warp_idx() + 1) % 4;
            <Rep<8> as LdSt32x32b>::ld(acc.addr() + ((32 * other) << 16) + c as u32)
        } else if variant == OUTSIDE_ALLOCATION {
            <Rep<8> as LdSt32x32b>::ld(acc.addr() + ((32 * (warp_idx() % 4)) << 16) + 480 + c as u32)
        } else {
            acc.load_32x32b::<8>(c)
        };
        for (i, x) in v.iter().enumerate() {
            // SAFETY: `out` holds 128 x 128 f32; row < 128, c + i < 128.
            unsafe { *out.add(row * 128 + c + i) = f32::from_bits(*x) };
        }
        c += 8;
    }
    if variant == STORE_AFTER_WAIT_LOAD || variant == TMEM_STORE_AFTER_COMMIT {
        wait_load_tmem();
    }
    if variant == STORE_OVER_INFLIGHT_LOAD || variant == STORE_AFTER_WAIT_LOAD || variant == TMEM_STORE_AFTER_COMMIT {
        acc.store_32x32b::<8>(0, [0; 8]);
        commit_tmem();
    }
    wait_load_tmem();
    if variant == SMEM_OPERAND_OVERWRITTEN || variant == SMEM_RELOAD_AFTER_COMMIT {
        // The reload's phase, so no arrival is left pending.
        loaded.wait();
    }
}

/// Twin: allocate 64 columns and free them.
pub const ALLOC_FREED: u32 = 0;
/// Bug: allocate 64 columns and never free them.
pub const ALLOC_NOT_FREED: u32 = 1;
/// Bug: 512 columns, then 32 more.
pub const ALLOC_OVER_512: u32 = 2;
/// Twin of 2: 256 + 256 columns, both freed.
pub const ALLOC_TWO_HALVES: u32 = 3;

/// Raw TMEM allocation by warp 0 (`tcgen05.alloc` / `dealloc`), done right
/// or wrong (`variant`, constants above); the other warps do nothing.
///
/// Constraints: grid 1.
#[kernel(block = warpgroups(1), arch = sm_100a)]
pub fn tmem_alloc_misuse(variant: u32, #[scratch] slots: Smem<[u32; 4]>) {
    if warp_idx() != 0 {
        return;
    }
    let (first, second) = match variant {
        ALLOC_OVER_512 => (512, 32),
        ALLOC_TWO_HALVES => (256, 256),
        _ => (64, 0),
    };
    // SAFETY: warp 0, converged; powers of two in 32..=512; 4-byte slots.
    unsafe {
        raw::alloc(kernel_device::smem::shared_addr(slots.elem_ptr(0)), first);
        if second > 0 {
            raw::alloc(kernel_device::smem::shared_addr(slots.elem_ptr(1)), second);
        }
        raw::relinquish_alloc_permit();
    }
    sync_warp_all();
    if variant != ALLOC_NOT_FREED {
        // SAFETY: warp 0 frees what it allocated; nothing uses it.
        unsafe {
            raw::dealloc(slots.read(0), first);
            if second > 0 {
                raw::dealloc(slots.read(1), second);
            }
        }
    }
}

/// `bar.warp.sync` of the whole warp.
#[inline(always)]
fn sync_warp_all() {
    kernel_device::warp::sync_warp();
}
