//! Deliberately broken kernels: each breaks one synchronization rule, and the
//! CPU emulator's test suite checks that it is caught with the expected
//! message. Never launch them on a GPU (most would hang).
use crate::hopper::{ATile, BTile, OTile, TILE_M, TILE_N};
use kernel_device::pipeline::{emit_pipeline, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Acc};
use kernel_device::Barriers;

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
pub fn missing_arrive(
    y: *mut f32,
    #[scratch] buf: Smem<[f32; 128]>,
    #[scratch(arrivals = 128)] full: Barrier,
) {
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

/// Tile of [`store_without_commit`]: `64 x 32` f32 (128-byte rows), 128B
/// swizzle.
pub type PlantTile = Tile<f32, 64, 32, Swizzled<128>>;

/// The first 64 threads fill a tile with ordinary stores and the CTA
/// synchronizes, but nobody calls `commit_smem` (`fence.proxy.async`)
/// before thread 0 TMA-stores the tile: the async proxy may read stale SMEM
/// ("SMEM written by ordinary stores and read by the async proxy ...").
/// `y` is a writable `64 x 32` f32 map.
#[kernel(block = warpgroups(1))]
pub fn store_without_commit(y: Tma<PlantTile>, #[scratch] tile: Smem<PlantTile>) {
    let t = thread_in_warpgroup() as usize;
    if t < 64 {
        for c in 0..32 {
            tile.set(t, c, (t * 32 + c) as f32);
        }
    }
    // Missing here: commit_smem();
    sync_threads();
    if t == 0 {
        y.store(tile, 0, 0);
        kernel_device::tma::commit_group();
        kernel_device::tma::wait_group::<0>();
    }
}

/// `hopper::matmul_pipelined` with `delay_release = 0` but still
/// `wgmma_wait::<1>()`: a slot is refilled by TMA right after the step that
/// read it, while that step's wgmma group is still in flight ("TMA overwrites
/// SMEM still read by an in-flight wgmma"). Same parameters and constraints
/// as `matmul_pipelined`; needs `K / 64 > 2` to reuse a slot.
#[kernel(block = warpgroups(1), arch = sm_90a)]
pub fn release_too_early(
    a: Tma<ATile>,
    b: Tma<BTile>,
    c: Tma<OTile>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; 2]>,
    #[scratch] b_bufs: Smem<[BTile; 2]>,
    #[scratch] c_smem: Smem<OTile>,
    #[scratch] loaded: Barriers<2>,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
    let mut acc = [Acc::<TILE_N>::undefined(), Acc::<TILE_N>::undefined()];
    emit_pipeline(
        k_steps,
        (
            BlockSpec::new(a, a_bufs, |k| (pm, k)),
            BlockSpec::new(b, b_bufs, |k| (pn, k)),
        ),
        &loaded,
        0, // the bug: the previous step's wgmma group is still in flight
        |step, (a_tile, b_tile)| {
            acc[0].mma(a_tile, 0, b_tile, 0, step > 0);
            acc[1].mma(a_tile, 64, b_tile, 0, step > 0);
            wgmma_commit_group();
            wgmma_wait::<1>();
        },
    );
    wgmma_wait::<0>();
    acc[0].store_f16(c_smem, 0, 0);
    acc[1].store_f16(c_smem, 64, 0);
    commit_smem();
    sync_threads();
    if thread_linear() == 0 {
        c.store(c_smem, pm * TILE_M as u32, pn * TILE_N as u32);
        kernel_device::tma::commit_group();
        kernel_device::tma::wait_group::<0>();
    }
}

/// A waiter observes phase 0 of a barrier, then three more phases complete
/// before its next wait: it skipped phases 1 and 2 (its parity bit now
/// aliases phase 3 with phase 1).
#[kernel(block = threads(64))]
pub fn skip_phase(y: *mut f32, #[scratch] ready: Barrier) {
    let t = thread_idx().x;
    if t == 0 {
        ready.arrive(); // completes phase 0
    }
    sync_threads();
    if t == 32 {
        ready.wait(); // observes phase 0
    }
    sync_threads();
    if t == 0 {
        for _ in 0..3 {
            ready.arrive(); // completes phases 1, 2, 3
        }
    }
    sync_threads();
    if t == 32 {
        ready.wait(); // meant phase 1; phases 1 to 3 are all done
        // SAFETY: `y` holds 64 floats.
        unsafe { *y.add(t as usize) = 1.0 };
    }
}

/// A barrier expecting 2 arrivals gets 1 and nobody waits: the kernel ends
/// with an arrival pending.
#[kernel(block = threads(32))]
pub fn pending_at_exit(y: *mut f32, #[scratch(arrivals = 2)] half_done: Barrier) {
    if thread_idx().x == 0 {
        half_done.arrive();
        // SAFETY: `y` holds 32 floats.
        unsafe { *y = 1.0 };
    }
}

/// A tile of [`smem_out_of_bounds`]: `8 x 32` f32 (1 KB).
pub type SmallTile = Tile<f32, 8, 32, Swizzled<128>>;

/// A TMA load whose destination is placed (with `cast_at`) past the end of
/// the CTA's shared memory: an out-of-bounds shared-memory access.
#[kernel(block = threads(32))]
pub fn smem_out_of_bounds(x: Tma<SmallTile>, #[scratch] tile: Smem<SmallTile>, #[scratch] full: Barrier) {
    if thread_idx().x == 0 {
        full.arrive_expect_tx(Tma::<SmallTile>::BYTES);
        // SAFETY: deliberately wrong: 64 KB past a 1 KB tile.
        let past_the_end: Smem<SmallTile> = unsafe { tile.cast_at(64 * 1024) };
        x.load(past_the_end, 0, 0, full.as_ref());
    }
    full.wait();
}

/// The collective copy of `multicast_copy` with CTA 1 not issuing its half:
/// CTA 0's barrier waits for bytes that never come (and so does CTA 1's):
/// caught as a deadlock naming the pending transaction bytes.
#[kernel(block = warpgroups(1), cluster = 2)]
pub fn multicast_one_sided(
    x: Tma<crate::hopper::McHalf>,
    #[scratch] tile: Smem<crate::hopper::McTile>,
    #[scratch] full: Barrier,
) {
    use crate::hopper::McHalf;
    let r = cluster_ctarank();
    if thread_linear() == 0 {
        full.arrive_expect_tx(Tma::<crate::hopper::McTile>::BYTES);
        if r == 0 {
            // SAFETY: half 0 of the tile (1024 B, pattern-aligned).
            let half: Smem<McHalf> = unsafe { tile.cast_at(0) };
            x.load_multicast(half, 0, 0, full.as_ref(), 0b11);
        }
    }
    full.wait();
}

/// Each of 32 threads writes element `t + 1` of a 32-element `Gmem`: thread
/// 31 writes past the end (an out-of-bounds global-memory access; on a GPU
/// the bounds check traps).
#[kernel(block = threads(32))]
pub fn gmem_out_of_bounds(y: Gmem<f32>) {
    let t = thread_idx().x as usize;
    y.write(t + 1, 1.0);
}

// ----- races (the emulator's happens-before detector) ---------------------------

/// Thread 0 issues a TMA load, the CTA passes a barrier, then only thread 0
/// waits for the load and every thread reads the tile: the other threads'
/// reads are not ordered after the load's completion (a write-read or
/// read-write race with the asynchronous copy, whichever runs first; a wait
/// *before* the barrier would have been a valid hand-over). `x` is a
/// `64 x 32` f32 map, `y` holds 128 floats.
#[kernel(block = warpgroups(1))]
pub fn tma_read_without_wait(
    x: Tma<PlantTile>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<PlantTile>,
    #[scratch] full: Barrier,
) {
    let t = thread_in_warpgroup() as usize;
    if t == 0 {
        full.arrive_expect_tx(Tma::<PlantTile>::BYTES);
        x.load(tile, 0, 0, full.as_ref());
    }
    sync_threads();
    if t == 0 {
        full.wait();
    } // Missing for t != 0: full.wait();
    y.write(t, tile.get(t % 64, 1));
}

/// Thread 0 fills a tile, TMA-stores it, then overwrites the tile before
/// `wait_group_read`: the store may still be reading it (a race between the
/// thread's write and the copy's read of the source). `y` is a writable
/// `64 x 32` f32 map.
#[kernel(block = threads(32))]
pub fn tma_store_source_reused(y: Tma<PlantTile>, #[scratch] tile: Smem<PlantTile>) {
    if thread_idx().x == 0 {
        for r in 0..64 {
            tile.set(r, 0, r as f32);
        }
        commit_smem();
        y.store(tile, 0, 0);
        kernel_device::tma::commit_group();
        // Missing here: kernel_device::tma::wait_group_read::<0>();
        tile.set(0, 0, -1.0);
        kernel_device::tma::wait_group::<0>();
    }
}

/// A tree reduction of 64 values in SMEM that leaves out the CTA barrier
/// between its last two steps: thread 0 reads `buf[1]` while thread 1 may
/// still be adding into it (a write-read race on shared memory). `x` holds
/// 64 floats, `y` one.
#[kernel(block = threads(64))]
pub fn reduction_missing_sync(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 64]>) {
    let t = thread_idx().x as usize;
    buf.write(t, x.read(t));
    sync_threads();
    let mut s = 32;
    while s > 0 {
        if t < s {
            buf.write(t, buf.read(t) + buf.read(t + s));
        }
        if s != 2 {
            sync_threads();
        } // Missing: the barrier after the step with s == 2.
        s /= 2;
    }
    if t == 0 {
        y.write(0, buf.read(0));
    }
}

/// Thread 0 of each of 2 CTAs writes element 0 of the same `Gmem`: a
/// write-write race on global memory (nothing orders two CTAs).
#[kernel(block = threads(32))]
pub fn gmem_two_ctas_write_one_element(y: Gmem<f32>) {
    if thread_idx().x == 0 {
        y.write(0, block_idx().x as f32);
    }
}
