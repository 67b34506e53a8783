//! Deliberately broken kernels: each breaks one synchronization rule, and the
//! CPU emulator's test suite checks that it is caught with the expected
//! message. Never launch them on a GPU (most would hang).
use kernel_device::prelude::*;

/// Thread 0 returns before the CTA barrier: the other threads wait forever
/// (deadlock on `barrier.sync 0`).
#[kernel(block = threads(64))]
pub fn skip_barrier(y: *mut f32) {
    let t = thread_idx().x;
    if t == 0 {
        return;
    }
    sync_threads();
    // SAFETY: `y` holds 64 floats.
    unsafe { *y.add(t as usize) = 1.0 };
}

/// The producer warpgroup's last thread never arrives: the barrier expects
/// 128 arrivals and gets 127, so the consumer waits forever (deadlock on the
/// mbarrier, "1 of 128 arrivals pending").
#[kernel(block = warpgroups(2))]
pub fn missing_arrive(y: *mut f32, #[scratch] buf: Smem<[f32; 128]>, #[scratch(arrivals = 128)] full: Barrier) {
    let t = thread_in_warpgroup() as usize;
    if warpgroup_idx() == 0 {
        buf.write(t, t as f32);
        if t != 127 {
            full.arrive();
        }
    } else {
        full.wait();
        // SAFETY: `y` holds 128 floats.
        unsafe { *y.add(t) = buf.read(t) };
    }
}

/// Every producer thread arrives twice in one phase of a barrier that
/// expects 128 arrivals: more arrivals than the count.
#[kernel(block = warpgroups(2))]
pub fn extra_arrive(y: *mut f32, #[scratch(arrivals = 128)] full: Barrier) {
    if warpgroup_idx() == 0 {
        full.arrive();
        full.arrive();
    } else {
        full.wait();
        // SAFETY: `y` holds 128 floats.
        unsafe { *y.add(thread_in_warpgroup() as usize) = 1.0 };
    }
}

/// One thread announces 1024 bytes of asynchronous copies that are never
/// issued: the phase cannot complete (deadlock, transaction count pending).
#[kernel(block = threads(32))]
pub fn missing_copy(y: *mut f32, #[scratch] full: Barrier) {
    if thread_idx().x == 0 {
        full.arrive_expect_tx(1024);
    }
    full.wait();
    // SAFETY: `y` holds 32 floats.
    unsafe { *y.add(thread_idx().x as usize) = 1.0 };
}
