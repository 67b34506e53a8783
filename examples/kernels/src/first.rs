//! The first examples of the Pallas:MGPU reference (`core_map`, multiple
//! threads per block, clusters, semaphores), as Rust kernels.
use kernel_device::prelude::*;

/// Elements handled by each block of [`increment`].
pub const INCREMENT_BLOCK: u32 = 128;

/// `y = x + 1` over a grid of blocks of 128 threads, one element per thread.
///
/// Constraints: `n == grid.x * 128`.
#[kernel(block = threads(128))]
pub fn increment(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    let i = block_idx().x * INCREMENT_BLOCK + thread_idx().x;
    if i < n {
        let i = i as usize;
        y.write(i, x.read(i) + 1.0); // bounds-checked
    }
}

/// Slots in [`producer_consumer`]'s SMEM queue.
pub const QUEUE_SLOTS: usize = 2;
/// Elements per queue item (one per producer thread).
pub const QUEUE_ITEM: usize = 128;

/// Two warpgroups in one block hand `steps` rows of 128 floats from a
/// producer to a consumer through a 2-slot SMEM queue.
///
/// This kernel works as follows:
/// 1. warpgroup 0 (producer), for each step `s`: waits until slot `s % 2` is
///    free (`consumed`, from step 2 on), writes `x[s] + 1` into it, arrives on
///    `produced[s % 2]` (128 arrivals complete the phase);
/// 2. warpgroup 1 (consumer), for each step: waits on `produced[s % 2]`,
///    writes `slot + 1` to `y[s]`, arrives on `consumed[s % 2]`.
///
/// So `y = x + 2`. Each barrier goes through `steps / 2` phases; the barrier
/// handles track the parity each thread waits for.
///
/// Constraints: `x` and `y` hold `steps * 128` floats.
#[kernel(block = warpgroups(2))]
pub fn producer_consumer(
    x: GmemRef<f32>,
    y: Gmem<f32>,
    steps: u32,
    #[scratch] queue: Smem<[[f32; QUEUE_ITEM]; QUEUE_SLOTS]>,
    #[scratch(arrivals = 128)] produced: Barriers<QUEUE_SLOTS>,
    #[scratch(arrivals = 128)] consumed: Barriers<QUEUE_SLOTS>,
) {
    let t = thread_in_warpgroup() as usize;
    let base = queue.ptr().cast::<f32>();
    for s in 0..steps as usize {
        let slot = s % QUEUE_SLOTS;
        // SAFETY: `slot < QUEUE_SLOTS`, `t < QUEUE_ITEM`: inside `queue`.
        let cell = unsafe { base.add(slot * QUEUE_ITEM + t) };
        if warpgroup_idx() == 0 {
            if s >= QUEUE_SLOTS {
                consumed.at(slot).wait();
            }
            // SAFETY: the slot is free (waited above).
            unsafe { cell.write(x.read(s * QUEUE_ITEM + t) + 1.0) };
            produced.at(slot).arrive();
        } else {
            produced.at(slot).wait();
            // SAFETY: the slot is filled (waited above).
            y.write(s * QUEUE_ITEM + t, unsafe { cell.read() } + 1.0);
            consumed.at(slot).arrive();
        }
    }
}

/// Elements each CTA of [`cluster_exchange`] sends.
pub const EXCHANGE_LEN: usize = 128;

/// A cluster of 2 CTAs swaps data through distributed shared memory.
///
/// This kernel works as follows:
/// 1. CTA `r` of the cluster writes `x[r] * 2 + r` into the `inbox` SMEM of
///    CTA `1 - r` (`mapa`: the peer's shared memory as a generic pointer);
/// 2. a cluster barrier (release/acquire) makes those remote writes visible;
/// 3. each CTA copies its own `inbox` to `y[r]`.
///
/// So `y[r] = x[1 - r] * 2 + (1 - r)`. The `#[kernel]` epilogue's cluster
/// barrier keeps each CTA's SMEM alive until its peer is done.
///
/// Constraints: grid = (2 * clusters, 1, 1); `x`, `y` hold `grid.x * 128` floats.
#[kernel(block = threads(128), cluster = 2)]
pub fn cluster_exchange(x: GmemRef<f32>, y: Gmem<f32>, #[scratch] inbox: Smem<[f32; EXCHANGE_LEN]>) {
    let rank = cluster_ctarank();
    let peer = rank ^ 1;
    let t = thread_idx().x as usize;
    let me = block_idx().x as usize;
    // SAFETY: `peer < 2 == cluster size`; the peer runs until the epilogue barrier.
    let remote = unsafe { inbox.map_rank(peer) };
    remote.write(t, x.read(me * EXCHANGE_LEN + t) * 2.0 + rank as f32);
    cluster_sync();
    y.write(me * EXCHANGE_LEN + t, inbox.read(t));
}

/// Elements of [`semaphore_signal`]'s message.
pub const MESSAGE_LEN: usize = 128;

/// Block 0 publishes a message in global memory and signals a semaphore;
/// block 1 waits on it, then reads the message (persistent-style: both blocks
/// are resident at once).
///
/// This kernel works as follows:
/// 1. block 0: each thread writes `x[t] * 3` to `scratch[t]`; a CTA barrier;
///    thread 0 signals `sem` (release at GPU scope);
/// 2. block 1: thread 0 waits on `sem` (acquire at GPU scope, consumes the
///    signal); a CTA barrier; each thread copies `scratch[t]` to `y[t]`.
///
/// So `y = 3 x` and `sem` is back to 0 at the end.
///
/// Constraints: grid = (2, 1, 1); `x`, `scratch`, `y` hold 128 floats; `sem`
/// starts at 0.
#[kernel(block = threads(128))]
pub fn semaphore_signal(x: GmemRef<f32>, scratch: Gmem<f32>, y: Gmem<f32>, sem: Semaphore) {
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        scratch.write(t, x.read(t) * 3.0);
        // Every thread's write happens before thread 0's release.
        sync_threads();
        if t == 0 {
            sem.signal(1);
        }
    } else {
        if t == 0 {
            sem.wait(1);
        }
        // Thread 0's acquire happens before every thread's read.
        sync_threads();
        y.write(t, scratch.read(t));
    }
}

/// Threads per block of [`grid_sum`].
pub const GRID_SUM_BLOCK: u32 = 64;
/// The most blocks [`grid_sum`] takes (the size of its grid-wide partials).
pub const GRID_SUM_MAX_BLOCKS: usize = 64;

/// `out[0] = sum(x)` in one launch: each block reduces its share, and the
/// last block to finish adds the blocks' partial sums ("last block
/// finalizes"), through grid-wide scratch (Pallas's `pl.get_global`) that
/// the launcher allocates and zeroes, so the caller passes only `x` and
/// `out`.
///
/// This kernel works as follows:
/// 1. thread `t` of block `b` sums `x[64 b + t + 64 B k]` for `k = 0, 1, ..`
///    (`B` blocks); [`reduce::block_sum`](kernel_device::reduce::block_sum)
///    gives the block's sum;
/// 2. thread 0 writes it to `partials[b]` (global scratch), then adds 1 to
///    `arrived` with [`Semaphore::fetch_signal`] (acquire-release at GPU
///    scope), which returns the count before;
/// 3. the thread that sees `B - 1` is the last: every other block's
///    partial was published by its release and is visible after this
///    acquire, so it adds `partials[0..B]` in order and writes `out[0]`.
///
/// No block waits for another, so any grid size works, resident or not.
///
/// Constraints: `grid.x <= 64`; `out` holds at least 1 element.
#[kernel(block = threads(64))]
pub fn grid_sum(
    x: GmemRef<f32>,
    out: Gmem<f32>,
    #[scratch] warp_sums: Smem<[f32; 32]>,
    #[global_scratch] partials: GlobalBuf<f32, GRID_SUM_MAX_BLOCKS>,
    #[global_scratch] arrived: Semaphore,
) {
    let (t, b, blocks) = (thread_idx().x as usize, block_idx().x as usize, grid_dim().x as usize);
    let stride = blocks * GRID_SUM_BLOCK as usize;
    let mut s = 0.0f32;
    let mut i = b * GRID_SUM_BLOCK as usize + t;
    while i < x.len() {
        s += x.read(i);
        i += stride;
    }
    let block_total = kernel_device::reduce::block_sum(s, warp_sums);
    if t == 0 {
        partials.write(b, block_total);
        if arrived.fetch_signal(1) == blocks as u32 - 1 {
            let mut total = 0.0f32;
            for k in 0..blocks {
                total += partials.read(k);
            }
            out.write(0, total);
        }
    }
}

/// `y[i] = 2 * y[i]` through a bounds-checked [`Gmem`] view, over a grid
/// of blocks of 128 threads; threads past the end do nothing.
///
/// Constraints: grid.x * 128 >= y.len().
#[kernel(block = threads(128))]
pub fn double_checked(y: Gmem<f32>) {
    let i = (block_idx().x * 128 + thread_idx().x) as usize;
    if i < y.len() {
        y.write(i, 2.0 * y.read(i));
    }
}
