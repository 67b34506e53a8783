//! The bug-class suite: classic synchronization bugs, each written as a
//! kernel a user would write, with its race-free twin.
//!
//! Every kernel here is generic over `const RACY: bool`: the instance
//! `<true>` has the bug, `<false>` is the fixed kernel (the same code with
//! the missing wait, barrier or fence put back). `tests/tests/races.rs` runs
//! both on the CPU emulator under 4 seeds: the racy one must be reported
//! (with the rule the bug breaks), the twin must run clean and match its CPU
//! reference. Both instances are also built for the GPU and assembled by
//! ptxas (never launch a racy one there: it gives wrong numbers or hangs).
//!
//! Classes (the test's table names them): TMA loads read before their wait
//! (by the issuing thread or by others), TMA loads into SMEM still in use,
//! TMA stores whose source SMEM or destination GMEM is touched before their
//! bulk group retires, bulk groups outstanding at exit, the async proxy
//! (SMEM written by ordinary stores and read by TMA or wgmma without
//! `commit_smem`), wgmma operands overwritten in flight, multicast and
//! cluster barriers (`ClusterBarrier` and hand-rolled ones), semaphores,
//! mbarrier and named-barrier producer/consumer queues, and plain SMEM/GMEM
//! races.
//!
//! Sizes are tiny (one warp or two, tiles of 8 x 32 f32) so that the whole
//! suite runs in seconds on the emulator.
use kernel_device::f16;
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::warp::sync_warp;
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Acc};

/// The tile the TMA kernels move: `8 x 32` f32 (1 KB, 128-byte rows).
pub type RTile = Tile<f32, 8, 32, Swizzled<128>>;
/// Elements of an [`RTile`].
pub const RT: usize = 8 * 32;
/// Bytes one [`RTile`] copy completes on its mbarrier.
const RT_BYTES: u32 = Tma::<RTile>::BYTES;

/// Element `k` (0..8) of the 256 elements of an [`RTile`] that thread `t`
/// of a warp owns: `(row, col)` of row-major index `t + 32 k`.
#[inline(always)]
fn owned(t: usize, k: usize) -> (usize, usize) {
    let i = t + 32 * k;
    (i / 32, i % 32)
}

/// Thread `t` (of 32) copies its elements of `tile` to `y[base ..]`
/// (row-major), scaled by `scale`.
#[inline(always)]
#[track_caller]
fn copy_out(t: usize, tile: Smem<RTile>, y: Gmem<f32>, base: usize, scale: f32) {
    for k in 0..RT / 32 {
        let (r, c) = owned(t, k);
        y.write(base + r * 32 + c, scale * tile.get(r, c));
    }
}

/// Thread `t` (of 32) fills its elements of `tile` with `scale * x[base ..]`.
#[inline(always)]
#[track_caller]
fn fill(t: usize, tile: Smem<RTile>, x: Gmem<f32>, base: usize, scale: f32) {
    for k in 0..RT / 32 {
        let (r, c) = owned(t, k);
        tile.set(r, c, scale * x.read(base + r * 32 + c));
    }
}

// ----- TMA loads ---------------------------------------------------------------

/// One thread loads a tile and copies it out, but waits for the load only
/// after reading it (the wait sits after the loop that uses the data).
/// `y = x` (one `8 x 32` tile).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_read_before_wait<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
) {
    if thread_idx().x == 0 {
        full.arrive_expect_tx(RT_BYTES);
        x.load(tile, 0, 0, full.as_ref());
        if !RACY {
            full.wait();
        }
        for t in 0..32 {
            copy_out(t, tile, y, 0, 1.0);
        }
        if RACY {
            full.wait();
        }
    }
}

/// Thread 0 issues the load and waits; the other threads read the tile
/// without waiting on the barrier (only the issuer waits). `y = x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_only_issuer_waits<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
) {
    let t = thread_idx().x as usize;
    if t == 0 {
        full.arrive_expect_tx(RT_BYTES);
        x.load(tile, 0, 0, full.as_ref());
    }
    if !RACY || t == 0 {
        full.wait();
    }
    copy_out(t, tile, y, 0, 1.0);
}

/// Thread 0 issues the load, then the CTA synchronizes with
/// `sync_threads()` and reads: but a CTA barrier does not wait for the
/// copy, and nobody waits on the mbarrier. `y = x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_sync_instead_of_wait<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
) {
    let t = thread_idx().x as usize;
    if t == 0 {
        full.arrive_expect_tx(RT_BYTES);
        x.load(tile, 0, 0, full.as_ref());
        if !RACY {
            full.wait();
        }
    }
    sync_threads();
    copy_out(t, tile, y, 0, 1.0);
}

/// Two tiles into two slots, each on its own barrier; the consumer waits on
/// the other slot's barrier (`full.at(1 - s)` for `full.at(s)`). `y = x`
/// (two tiles, `16 x 32`).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_wait_wrong_slot<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tiles: Smem<[RTile; 2]>,
    #[scratch] full: Barriers<2>,
) {
    let t = thread_idx().x as usize;
    if t == 0 {
        for s in 0..2 {
            full.at(s).arrive_expect_tx(RT_BYTES);
            x.load(tiles.at(s), 8 * s as u32, 0, full.at(s));
        }
    }
    for s in 0..2 {
        full.at(if RACY { 1 - s } else { s }).wait();
        copy_out(t, tiles.at(s), y, s * RT, 1.0);
    }
}

/// A one-slot pipeline over 3 tiles: thread 0 refills the slot with the
/// next tile as soon as it has read its own part, without waiting on the
/// `consumed` barrier the other threads arrive on. `y = x` (`24 x 32`).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_refill_before_consumed<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
    #[scratch(arrivals = 32)] consumed: Barrier,
) {
    let t = thread_idx().x as usize;
    let steps = 3;
    if t == 0 {
        full.arrive_expect_tx(RT_BYTES);
        x.load(tile, 0, 0, full.as_ref());
    }
    for k in 0..steps {
        full.wait();
        copy_out(t, tile, y, k * RT, 1.0);
        consumed.arrive();
        if t == 0 && k + 1 < steps {
            if !RACY {
                consumed.wait();
            }
            full.arrive_expect_tx(RT_BYTES);
            x.load(tile, 8 * (k + 1) as u32, 0, full.as_ref());
        }
    }
}

/// Two tiles loaded on one barrier, but the slot index is wrong: both
/// copies land in slot 0 (two loads in flight into one slot). `y = x`
/// (two tiles).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_two_loads_one_slot<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tiles: Smem<[RTile; 2]>,
    #[scratch] full: Barrier,
) {
    let t = thread_idx().x as usize;
    if t == 0 {
        full.arrive_expect_tx(2 * RT_BYTES);
        for s in 0..2 {
            x.load(tiles.at(if RACY { 0 } else { s }), 8 * s as u32, 0, full.as_ref());
        }
    }
    full.wait();
    for s in 0..2 {
        copy_out(t, tiles.at(s), y, s * RT, 1.0);
    }
}

/// The tile buffer is first cleared by every thread (ordinary stores), then
/// thread 0 loads a tile into it with no barrier (and no `commit_smem`) in
/// between: the clears race with the copy. `y = x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_load_over_unsynced_writes<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
) {
    let t = thread_idx().x as usize;
    for k in 0..RT / 32 {
        let (r, c) = owned(t, k);
        tile.set(r, c, 0.0);
    }
    if !RACY {
        commit_smem();
        sync_threads();
    }
    if t == 0 {
        full.arrive_expect_tx(RT_BYTES);
        x.load(tile, 0, 0, full.as_ref());
    }
    full.wait();
    copy_out(t, tile, y, 0, 1.0);
}

/// A two-slot prefetching loop over 2 tiles that also prefetches "the next
/// tile" in its last iteration (the loop bound check is missing): that
/// copy's phase carries TMA bytes nobody waits on, and it is still in
/// flight at exit. `y = x` (two tiles).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_overfetch_never_waited<const RACY: bool>(
    x: Tma<RTile>,
    y: Gmem<f32>,
    #[scratch] tiles: Smem<[RTile; 2]>,
    #[scratch] full: Barriers<2>,
) {
    let t = thread_idx().x as usize;
    let n = 2;
    if t == 0 {
        full.at(0).arrive_expect_tx(RT_BYTES);
        x.load(tiles.at(0), 0, 0, full.at(0));
    }
    for k in 0..n {
        if t == 0 && (RACY || k + 1 < n) {
            let s = (k + 1) % 2;
            full.at(s).arrive_expect_tx(RT_BYTES);
            x.load(tiles.at(s), 8 * ((k + 1) % n) as u32, 0, full.at(s));
        }
        full.at(k % 2).wait();
        copy_out(t, tiles.at(k % 2), y, k * RT, 1.0);
        // The slot read here is refilled in the next iteration.
        sync_threads();
    }
}

// ----- multicast ------------------------------------------------------------

/// The multicast tile: `16 x 32` f32, issued whole by CTA 0.
pub type McWhole = crate::hopper::McTile;
/// Half of [`McWhole`]: what each CTA of a collective copy issues.
pub type McPart = crate::hopper::McHalf;
const MC: usize = 16 * 32;

/// Thread `t` (of 32) copies its 16 elements of a `16 x 32` tile to `y[base ..]`.
#[inline(always)]
#[track_caller]
fn copy_out_mc(t: usize, tile: Smem<McWhole>, y: Gmem<f32>, base: usize) {
    for k in 0..MC / 32 {
        let i = t + 32 * k;
        y.write(base + i, tile.get(i / 32, i % 32));
    }
}

/// CTA 0 of a cluster of 2 multicasts one tile to both CTAs; each CTA
/// expects the bytes on its own barrier, but only the issuing CTA waits
/// (CTA 1 "did not issue anything"). `y = [x; x]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn multicast_peer_skips_wait<const RACY: bool>(
    x: Tma<McWhole>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<McWhole>,
    #[scratch] full: Barrier,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank());
    if t == 0 {
        full.arrive_expect_tx(Tma::<McWhole>::BYTES);
        if r == 0 {
            x.load_multicast(tile, 0, 0, full.as_ref(), 0b11);
        }
    }
    if !RACY || r == 0 {
        full.wait();
    }
    copy_out_mc(t, tile, y, r as usize * MC);
}

/// Pallas's collective SMEM reuse: two rounds of a collective copy (each
/// CTA issues half, multicast to both) into the same SMEM. Without a
/// cluster barrier between the rounds, the CTA that finishes reading first
/// issues round 2 into its peer's SMEM while the peer still reads round 1.
/// The twin waits on a `ClusterBarrier`. `y[round][cta] = x[round]`
/// (`x` is `32 x 32`: two `16 x 32` tiles).
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn multicast_reuse_without_cluster_barrier<const RACY: bool>(
    x: Tma<McPart>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<McWhole>,
    #[scratch] full: Barrier,
    #[scratch] freed: ClusterBarrier,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank());
    for round in 0..2u32 {
        if t == 0 {
            full.arrive_expect_tx(Tma::<McWhole>::BYTES);
            // SAFETY: half r of the tile (8 rows x 128 B, pattern-aligned).
            let half: Smem<McPart> = unsafe { tile.cast_at(r as usize * <McPart as TileLayout>::BYTES) };
            x.load_multicast(half, 16 * round + 8 * r, 0, full.as_ref(), 0b11);
        }
        full.wait();
        copy_out_mc(t, tile, y, (2 * round as usize + r as usize) * MC);
        sync_threads();
        if !RACY {
            if t == 0 {
                freed.arrive();
            }
            freed.wait();
        }
    }
}

/// As [`multicast_reuse_without_cluster_barrier`], with the cluster barrier
/// hand-rolled (an mbarrier of 2 arrivals, one `arrive_cluster` per CTA on
/// each copy) and its wait dropped.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn multicast_reuse_hand_rolled_no_wait<const RACY: bool>(
    x: Tma<McPart>,
    y: Gmem<f32>,
    #[scratch] tile: Smem<McWhole>,
    #[scratch] full: Barrier,
    #[scratch(arrivals = 2)] freed: Barrier,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank());
    for round in 0..2u32 {
        if t == 0 {
            full.arrive_expect_tx(Tma::<McWhole>::BYTES);
            // SAFETY: as above.
            let half: Smem<McPart> = unsafe { tile.cast_at(r as usize * <McPart as TileLayout>::BYTES) };
            x.load_multicast(half, 16 * round + 8 * r, 0, full.as_ref(), 0b11);
        }
        full.wait();
        copy_out_mc(t, tile, y, (2 * round as usize + r as usize) * MC);
        sync_threads();
        if round == 0 {
            if t == 0 {
                freed.arrive_cluster(0);
                freed.arrive_cluster(1);
            }
            if !RACY {
                freed.wait();
            }
        }
    }
}

// ----- cluster barriers and distributed shared memory ------------------------

/// This CTA's `inbox` as seen from the peer CTA of a cluster of 2.
#[inline(always)]
fn peer_inbox(inbox: Smem<[f32; 32]>) -> Smem<[f32; 32]> {
    // SAFETY: rank `r ^ 1` is in the cluster of 2, which runs until the
    // kernel's epilogue cluster barrier.
    unsafe { Smem::from_ptr(inbox.map_rank(cluster_ctarank() ^ 1)) }
}

/// Each CTA of a cluster of 2 writes into its peer's SMEM and arrives on a
/// `ClusterBarrier`, then reads its own inbox: the wait is missing.
/// `y[r][t] = 2 x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn cluster_barrier_wait_dropped<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
    #[scratch] ready: ClusterBarrier<X>,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank() as usize);
    peer_inbox(inbox).write(t, 2.0 * x.read(32 * r + t));
    sync_threads();
    if t == 0 {
        ready.arrive();
    }
    if !RACY {
        ready.wait();
    }
    y.write(32 * r + t, inbox.read(t));
}

/// The same exchange on a hand-rolled cluster barrier (2 arrivals, thread 0
/// arrives on both CTAs' copies): thread 0 waits, the other threads do not
/// (no CTA barrier after thread 0's wait). `y[r][t] = 2 x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn hand_rolled_cluster_wait_dropped<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
    #[scratch(arrivals = 2)] ready: Barrier,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank() as usize);
    peer_inbox(inbox).write(t, 2.0 * x.read(32 * r + t));
    sync_threads();
    if t == 0 {
        ready.arrive_cluster(0);
        ready.arrive_cluster(1);
    }
    if !RACY || t == 0 {
        ready.wait();
    }
    y.write(32 * r + t, inbox.read(t));
}

/// The hand-rolled exchange arrives on the wrong CTA's barrier: thread 0
/// arrives twice on its own CTA's copy (`arrive_cluster(rank)` where the
/// peer's rank was meant), so each CTA's phase completes without the peer.
/// `y[r][t] = 2 x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn cluster_arrive_on_wrong_cta<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
    #[scratch(arrivals = 2)] ready: Barrier,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank());
    peer_inbox(inbox).write(t, 2.0 * x.read(32 * r as usize + t));
    sync_threads();
    if t == 0 {
        ready.arrive_cluster(r);
        ready.arrive_cluster(if RACY { r } else { r ^ 1 });
    }
    ready.wait();
    y.write(32 * r as usize + t, inbox.read(t));
}

/// The split cluster barrier with the remote write moved after the arrive
/// (`cluster_arrive(); write; cluster_wait()`): the arrive releases nothing
/// of it. `y[r][t] = 2 x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn cluster_arrive_before_remote_write<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank() as usize);
    let v = 2.0 * x.read(32 * r + t);
    if RACY {
        cluster_arrive();
        peer_inbox(inbox).write(t, v);
    } else {
        peer_inbox(inbox).write(t, v);
        cluster_arrive();
    }
    cluster_wait();
    y.write(32 * r + t, inbox.read(t));
}

/// The split cluster barrier with the read of the inbox moved between the
/// arrive and the wait (the overlap window). `y[r][t] = 2 x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn cluster_read_before_wait<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank() as usize);
    peer_inbox(inbox).write(t, 2.0 * x.read(32 * r + t));
    cluster_arrive();
    let early = if RACY { inbox.read(t) } else { 0.0 };
    cluster_wait();
    y.write(32 * r + t, if RACY { early } else { inbox.read(t) });
}

/// Two rounds of the exchange through one inbox with a `ClusterBarrier`,
/// but no "done reading" phase between the rounds: round 2's remote write
/// can land while the peer still reads round 1. `y[round][r][t] =
/// (round + 1) x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn cluster_inbox_reused_too_early<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
    #[scratch] ready: ClusterBarrier,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank() as usize);
    for round in 0..2 {
        peer_inbox(inbox).write(t, (round + 1) as f32 * x.read(32 * r + t));
        sync_threads();
        if t == 0 {
            ready.arrive();
        }
        ready.wait();
        y.write(64 * round + 32 * r + t, inbox.read(t));
        if !RACY {
            sync_threads();
            if t == 0 {
                ready.arrive();
            }
            ready.wait();
        }
    }
}

// ----- TMA stores and bulk groups --------------------------------------------

/// Two tiles through one staging tile: thread 0 stores the first, and the
/// CTA refills the staging tile for the second without waiting for the
/// store to finish reading it (`wait_group_read` missing). `y = 2 x`
/// (two tiles, `16 x 32`).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_store_source_reused<const RACY: bool>(
    x: Gmem<f32>,
    y: Tma<RTile>,
    #[scratch] stage: Smem<RTile>,
) {
    let t = thread_idx().x as usize;
    for k in 0..2 {
        fill(t, stage, x, k * RT, 2.0);
        commit_smem();
        sync_threads();
        if t == 0 {
            y.store(stage, 8 * k as u32, 0);
            commit_group();
            if !RACY {
                wait_group_read::<0>();
            }
        }
        sync_threads();
    }
    if t == 0 {
        wait_group::<0>();
    }
}

/// As [`tma_store_source_reused`], with the wait copied from a two-buffer
/// version: `wait_group_read::<1>()` lets the one group that reads the
/// single staging tile stay in flight. `y = 2 x` (two tiles).
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_store_wait_read_one_too_many<const RACY: bool>(
    x: Gmem<f32>,
    y: Tma<RTile>,
    #[scratch] stage: Smem<RTile>,
) {
    let t = thread_idx().x as usize;
    for k in 0..2 {
        fill(t, stage, x, k * RT, 2.0);
        commit_smem();
        sync_threads();
        if t == 0 {
            y.store(stage, 8 * k as u32, 0);
            commit_group();
            if RACY {
                wait_group_read::<1>();
            } else {
                wait_group_read::<0>();
            }
        }
        sync_threads();
    }
    if t == 0 {
        wait_group::<0>();
    }
}

/// A stream-K style fix-up between two CTAs: CTA 0 TMA-stores a partial
/// tile to a workspace and signals a semaphore; CTA 1 waits on it and
/// TMA-loads the partial. CTA 0 waits only for its store to *read* SMEM
/// (`wait_group_read`), not to finish writing GMEM (`wait_group`), before
/// signalling. `y = 2 x + 1`.
#[kernel(block = threads(32), instances(true, false))]
pub fn stream_k_fixup_read_only_wait<const RACY: bool>(
    x: Gmem<f32>,
    ws: Tma<RTile>,
    y: Gmem<f32>,
    sem: Semaphore,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
) {
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        fill(t, tile, x, 0, 2.0);
        commit_smem();
        sync_threads();
        if t == 0 {
            ws.store(tile, 0, 0);
            commit_group();
            if RACY {
                wait_group_read::<0>();
            } else {
                wait_group::<0>();
            }
            sem.signal(1);
        }
    } else {
        if t == 0 {
            sem.wait(1);
            full.arrive_expect_tx(RT_BYTES);
            ws.load(tile, 0, 0, full.as_ref());
        }
        full.wait();
        for k in 0..RT / 32 {
            let (r, c) = owned(t, k);
            y.write(r * 32 + c, tile.get(r, c) + 1.0);
        }
    }
    if RACY && t == 0 {
        wait_group::<0>();
    }
}

/// Two CTAs each store their tile, but the row offset is computed from
/// `cluster_ctarank()` (always 0 without a cluster) instead of
/// `block_idx()`: both store to the same GMEM tile. `y = 2 x` (two tiles).
#[kernel(block = threads(32), instances(true, false))]
pub fn two_ctas_store_one_tile<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<RTile>) {
    let (t, b) = (thread_idx().x as usize, block_idx().x);
    fill(t, stage, x, b as usize * RT, 2.0);
    commit_smem();
    sync_threads();
    if t == 0 {
        let which = if RACY { cluster_ctarank() } else { b };
        y.store(stage, 8 * which, 0);
        commit_group();
        wait_group::<0>();
    }
}

/// Thread 0 stores a tile of defaults (`x`), then the result (`2 x`) to the
/// same GMEM tile, without waiting for the first store in between: two
/// stores to one GMEM range in flight at once. `y = 2 x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_store_twice_same_tile<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<[RTile; 2]>) {
    let t = thread_idx().x as usize;
    fill(t, stage.at(0), x, 0, 1.0);
    fill(t, stage.at(1), x, 0, 2.0);
    commit_smem();
    sync_threads();
    if t == 0 {
        y.store(stage.at(0), 0, 0);
        commit_group();
        if !RACY {
            wait_group::<0>();
        }
        y.store(stage.at(1), 0, 0);
        commit_group();
        wait_group::<0>();
    }
}

/// Thread 0 stores the tile and commits the group but exits without
/// `wait_group`: the store is still reading SMEM and writing GMEM when the
/// CTA ends. `y = 2 x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn bulk_group_pending_at_exit<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<RTile>) {
    let t = thread_idx().x as usize;
    fill(t, stage, x, 0, 2.0);
    commit_smem();
    sync_threads();
    if t == 0 {
        y.store(stage, 0, 0);
        commit_group();
        if !RACY {
            wait_group::<0>();
        }
    }
}

/// Thread 0 stores the tile and waits with `wait_group::<0>()`, but never
/// committed the store into a bulk group: the wait does not cover it.
/// `y = 2 x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_store_never_committed<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<RTile>) {
    let t = thread_idx().x as usize;
    fill(t, stage, x, 0, 2.0);
    commit_smem();
    sync_threads();
    if t == 0 {
        y.store(stage, 0, 0);
        if !RACY {
            commit_group();
        }
        wait_group::<0>();
    }
}

// ----- the async proxy -------------------------------------------------------

/// The CTA fills a tile with ordinary stores and synchronizes, and thread 0
/// TMA-stores it: nobody called `commit_smem` (`fence.proxy.async`).
/// `y = 2 x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_store_without_commit_smem<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<RTile>) {
    let t = thread_idx().x as usize;
    fill(t, stage, x, 0, 2.0);
    if !RACY {
        commit_smem();
    }
    sync_threads();
    if t == 0 {
        y.store(stage, 0, 0);
        commit_group();
        wait_group::<0>();
    }
}

/// `commit_smem` is called, but before the writes it was meant to publish.
/// `y = 2 x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn commit_smem_before_writes<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<RTile>) {
    let t = thread_idx().x as usize;
    if RACY {
        commit_smem();
    }
    fill(t, stage, x, 0, 2.0);
    if !RACY {
        commit_smem();
    }
    sync_threads();
    if t == 0 {
        y.store(stage, 0, 0);
        commit_group();
        wait_group::<0>();
    }
}

/// A tile is TMA-loaded, every thread applies ReLU in place (the inputs are
/// non-negative, so every write rewrites the value already there), and
/// thread 0 TMA-stores it without `commit_smem`: rewriting the same value
/// is still an ordinary store the async proxy may not see ordered.
/// `y = max(x, 0)`.
#[kernel(block = threads(32), instances(true, false))]
pub fn relu_in_place_without_commit_smem<const RACY: bool>(
    x: Tma<RTile>,
    y: Tma<RTile>,
    #[scratch] tile: Smem<RTile>,
    #[scratch] full: Barrier,
) {
    let t = thread_idx().x as usize;
    if t == 0 {
        full.arrive_expect_tx(RT_BYTES);
        x.load(tile, 0, 0, full.as_ref());
    }
    full.wait();
    for k in 0..RT / 32 {
        let (r, c) = owned(t, k);
        tile.set(r, c, tile.get(r, c).max(0.0));
    }
    if !RACY {
        commit_smem();
    }
    sync_threads();
    if t == 0 {
        y.store(tile, 0, 0);
        commit_group();
        wait_group::<0>();
    }
}

// ----- wgmma -----------------------------------------------------------------

/// A wgmma operand: `64 x 16` f16 (32-byte rows, 32B swizzle).
pub type WgTile = Tile<f16, 64, 16, Swizzled<32>>;
const WG: usize = 64 * 16;

/// Thread `t` (of 128) fills its 8 elements of `tile` from `x[base ..]`
/// (row-major `64 x 16`).
#[inline(always)]
#[track_caller]
fn fill_wg(t: usize, tile: Smem<WgTile>, x: Gmem<f16>, base: usize) {
    for k in 0..WG / 128 {
        let i = t + 128 * k;
        tile.set(i / 16, i % 16, x.read(base + i));
    }
}

/// The warpgroup fills A and B with ordinary stores, synchronizes, and
/// issues a wgmma: nobody called `commit_smem`, so the tensor cores (async
/// proxy) may read stale SMEM. `y = a · bᵀ` (`64 x 64` f32).
#[kernel(block = warpgroups(1), arch = sm_90a, instances(true, false))]
pub fn wgmma_operands_without_commit_smem<const RACY: bool>(
    a: Gmem<f16>,
    b: Gmem<f16>,
    y: Gmem<f32>,
    #[scratch] a_s: Smem<WgTile>,
    #[scratch] b_s: Smem<WgTile>,
) {
    let t = thread_idx().x as usize;
    fill_wg(t, a_s, a, 0);
    fill_wg(t, b_s, b, 0);
    if !RACY {
        commit_smem();
    }
    sync_threads();
    let mut acc = Acc::<64>::undefined();
    acc.mma(a_s, 0, b_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    acc.for_each_pair(|r, c, v0, v1| {
        y.write(r * 64 + c, v0);
        y.write(r * 64 + c + 1, v1);
    });
}

/// Two products through one A buffer: the warpgroup overwrites A with the
/// second matrix while the first wgmma may still read it (the
/// `wgmma_wait::<0>()` comes after the refill). `y[p] = a[p] · bᵀ` for
/// `p = 0, 1`.
#[kernel(block = warpgroups(1), arch = sm_90a, instances(true, false))]
pub fn wgmma_operand_overwritten_in_flight<const RACY: bool>(
    a: Gmem<f16>,
    b: Gmem<f16>,
    y: Gmem<f32>,
    #[scratch] a_s: Smem<WgTile>,
    #[scratch] b_s: Smem<WgTile>,
) {
    let t = thread_idx().x as usize;
    fill_wg(t, a_s, a, 0);
    fill_wg(t, b_s, b, 0);
    commit_smem();
    sync_threads();
    let mut acc0 = Acc::<64>::undefined();
    acc0.mma(a_s, 0, b_s, 0, false);
    wgmma_commit_group();
    if !RACY {
        wgmma_wait::<0>();
        sync_threads();
    }
    fill_wg(t, a_s, a, WG);
    commit_smem();
    if RACY {
        wgmma_wait::<0>();
    }
    sync_threads();
    let mut acc1 = Acc::<64>::undefined();
    acc1.mma(a_s, 0, b_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    acc0.for_each_pair(|r, c, v0, v1| {
        y.write(r * 64 + c, v0);
        y.write(r * 64 + c + 1, v1);
    });
    acc1.for_each_pair(|r, c, v0, v1| {
        y.write(4096 + r * 64 + c, v0);
        y.write(4096 + r * 64 + c + 1, v1);
    });
}

// ----- plain shared and global memory ----------------------------------------

/// A tree reduction in SMEM whose result every thread reads (to normalize):
/// the `sync_threads()` after the last step is missing. `y = x / sum(x)`
/// (64 elements).
#[kernel(block = threads(64), instances(true, false))]
pub fn reduction_missing_last_sync<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 64]>) {
    let t = thread_idx().x as usize;
    buf.write(t, x.read(t));
    sync_threads();
    let mut s = 32;
    while s > 0 {
        if t < s {
            buf.write(t, buf.read(t) + buf.read(t + s));
        }
        if !(RACY && s == 1) {
            sync_threads();
        }
        s /= 2;
    }
    y.write(t, x.read(t) / buf.read(0));
}

/// The warp-synchronous tail of a reduction (one warp, no `sync_warp`
/// between steps, relying on lockstep execution that independent thread
/// scheduling does not give). `y[0] = sum(x)` (32 elements).
#[kernel(block = threads(32), instances(true, false))]
pub fn warp_reduction_without_sync_warp<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 32]>) {
    let t = thread_idx().x as usize;
    buf.write(t, x.read(t));
    sync_warp();
    let mut s = 16;
    while s > 0 {
        if t < s {
            buf.write(t, buf.read(t) + buf.read(t + s));
        }
        if !RACY {
            sync_warp();
        }
        s /= 2;
    }
    if t == 0 {
        y.write(0, buf.read(0));
    }
}

/// An `8 x 8` transpose through SMEM without the barrier between the writes
/// and the transposed reads. `y = xᵀ`.
#[kernel(block = threads(64), instances(true, false))]
pub fn smem_transpose_without_sync<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 64]>) {
    let t = thread_idx().x as usize;
    buf.write(t, x.read(t));
    if !RACY {
        sync_threads();
    }
    y.write(t, buf.read((t % 8) * 8 + t / 8));
}

/// A loop that stages 3 chunks through one SMEM buffer (write, barrier,
/// read reversed) without the barrier at the end of the iteration: the next
/// chunk's writes race with the previous chunk's reads. `y[k] = reverse(x[k])`.
#[kernel(block = threads(64), instances(true, false))]
pub fn staging_loop_missing_trailing_sync<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 64]>) {
    let t = thread_idx().x as usize;
    for k in 0..3 {
        buf.write(t, x.read(64 * k + t));
        sync_threads();
        y.write(64 * k + t, buf.read(63 - t));
        if !RACY {
            sync_threads();
        }
    }
}

/// Counting positive inputs with a shared counter that every thread
/// increments with a plain read-modify-write (the twin writes one flag per
/// thread and lets thread 0 add them). `y[0] = #{x > 0}`.
#[kernel(block = threads(64), instances(true, false))]
pub fn smem_counter_without_atomics<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] count: Smem<[f32; 1]>,
    #[scratch] flags: Smem<[f32; 64]>,
) {
    let t = thread_idx().x as usize;
    if t == 0 {
        count.write(0, 0.0);
    }
    sync_threads();
    let positive = x.read(t) > 0.0;
    if RACY {
        if positive {
            count.write(0, count.read(0) + 1.0);
        }
    } else {
        flags.write(t, if positive { 1.0 } else { 0.0 });
    }
    sync_threads();
    if t == 0 {
        if !RACY {
            let mut n = 0.0;
            for i in 0..64 {
                n += flags.read(i);
            }
            count.write(0, n);
        }
        y.write(0, count.read(0));
    }
}

/// Two CTAs write their results to `y[t]`: the block offset is missing from
/// the index, so both write the same elements. `y[b][t] = 2 x[b][t]`.
#[kernel(block = threads(64), instances(true, false))]
pub fn gmem_same_index_in_two_ctas<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>) {
    let (t, b) = (thread_idx().x as usize, block_idx().x as usize);
    let i = if RACY { t } else { 64 * b + t };
    y.write(i, 2.0 * x.read(64 * b + t));
}

// ----- semaphores --------------------------------------------------------------

/// Block 0 signals the semaphore before it writes the message block 1
/// waits for. `y = 3 x` (64 elements; `ws` is a 64-element workspace).
#[kernel(block = threads(64), instances(true, false))]
pub fn semaphore_signal_before_write<const RACY: bool>(x: Gmem<f32>, ws: Gmem<f32>, y: Gmem<f32>, sem: Semaphore) {
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        if RACY {
            sync_threads();
            if t == 0 {
                sem.signal(1);
            }
            ws.write(t, 3.0 * x.read(t));
        } else {
            ws.write(t, 3.0 * x.read(t));
            sync_threads();
            if t == 0 {
                sem.signal(1);
            }
        }
    } else {
        if t == 0 {
            sem.wait(1);
        }
        sync_threads();
        y.write(t, ws.read(t));
    }
}

/// Block 0's thread 0 signals right after its own write, without the CTA
/// barrier that orders the other threads' writes before the signal.
/// `y = 3 x`.
#[kernel(block = threads(64), instances(true, false))]
pub fn semaphore_signal_without_cta_barrier<const RACY: bool>(x: Gmem<f32>, ws: Gmem<f32>, y: Gmem<f32>, sem: Semaphore) {
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        ws.write(t, 3.0 * x.read(t));
        if !RACY {
            sync_threads();
        }
        if t == 0 {
            sem.signal(1);
        }
    } else {
        if t == 0 {
            sem.wait(1);
        }
        sync_threads();
        y.write(t, ws.read(t));
    }
}

/// Block 1's thread 0 waits on the semaphore, but the other threads read
/// the message without a CTA barrier after that wait. `y = 3 x`.
#[kernel(block = threads(64), instances(true, false))]
pub fn semaphore_wait_without_cta_barrier<const RACY: bool>(x: Gmem<f32>, ws: Gmem<f32>, y: Gmem<f32>, sem: Semaphore) {
    let t = thread_idx().x as usize;
    if block_idx().x == 0 {
        ws.write(t, 3.0 * x.read(t));
        sync_threads();
        if t == 0 {
            sem.signal(1);
        }
    } else {
        if t == 0 {
            sem.wait(1);
        }
        if !RACY {
            sync_threads();
        }
        y.write(t, ws.read(t));
    }
}

// ----- mbarrier and named-barrier queues -----------------------------------------

/// Warp 0 produces 32 values into SMEM and arrives; warp 1 consumes them
/// without waiting on the barrier. `y = 2 x` (32 elements).
#[kernel(block = threads(64), instances(true, false))]
pub fn mbarrier_consumer_skips_wait<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] buf: Smem<[f32; 32]>,
    #[scratch(arrivals = 32)] full: Barrier,
) {
    let l = lane_id() as usize;
    if warp_idx() == 0 {
        buf.write(l, 2.0 * x.read(l));
        full.arrive();
    } else {
        if !RACY {
            full.wait();
        }
        y.write(l, buf.read(l));
    }
}

/// The producer warp arrives on the barrier before it writes (the arrive
/// releases nothing of the write). `y = 2 x`.
#[kernel(block = threads(64), instances(true, false))]
pub fn mbarrier_arrive_before_write<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] buf: Smem<[f32; 32]>,
    #[scratch(arrivals = 32)] full: Barrier,
) {
    let l = lane_id() as usize;
    if warp_idx() == 0 {
        if RACY {
            full.arrive();
            buf.write(l, 2.0 * x.read(l));
        } else {
            buf.write(l, 2.0 * x.read(l));
            full.arrive();
        }
    } else {
        full.wait();
        y.write(l, buf.read(l));
    }
}

/// A one-slot queue over 3 steps: the producer warp refills the slot without
/// waiting for the consumer warp's `consumed` arrival. `y = 2 x` (96
/// elements).
#[kernel(block = threads(64), instances(true, false))]
pub fn mbarrier_refill_without_consumed<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] buf: Smem<[f32; 32]>,
    #[scratch(arrivals = 32)] full: Barrier,
    #[scratch(arrivals = 32)] consumed: Barrier,
) {
    let l = lane_id() as usize;
    for k in 0..3 {
        if warp_idx() == 0 {
            if !RACY && k > 0 {
                consumed.wait();
            }
            buf.write(l, 2.0 * x.read(32 * k + l));
            full.arrive();
        } else {
            full.wait();
            y.write(32 * k + l, buf.read(l));
            consumed.arrive();
        }
    }
}

/// Named barrier 1 (64 threads) as a producer/consumer signal: the producer
/// warp arrives (`bar.arrive`) before writing. `y = 2 x` (32 elements).
#[kernel(block = threads(64), instances(true, false))]
pub fn named_barrier_arrive_before_write<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 32]>) {
    const READY: NamedBarrier = NamedBarrier::new(1, 64);
    let l = lane_id() as usize;
    if warp_idx() == 0 {
        if RACY {
            READY.arrive();
            buf.write(l, 2.0 * x.read(l));
        } else {
            buf.write(l, 2.0 * x.read(l));
            READY.arrive();
        }
    } else {
        READY.sync();
        y.write(l, buf.read(l));
    }
}

// ----- more pairs --------------------------------------------------------------

/// Every thread fills its part of the staging tile and calls `commit_smem`,
/// but there is no CTA barrier before thread 0 issues the TMA store: the
/// store reads what the other threads may not have written yet. `y = 2 x`.
#[kernel(block = threads(32), instances(true, false))]
pub fn tma_store_without_cta_barrier<const RACY: bool>(x: Gmem<f32>, y: Tma<RTile>, #[scratch] stage: Smem<RTile>) {
    let t = thread_idx().x as usize;
    fill(t, stage, x, 0, 2.0);
    commit_smem();
    if !RACY {
        sync_threads();
    }
    if t == 0 {
        y.store(stage, 0, 0);
        commit_group();
        wait_group::<0>();
    }
}

/// A 2 x 2 cluster where each CTA hands 32 values to its peer along y, but
/// synchronizes on a `ClusterBarrier<X>` (the CTAs along x, which do not
/// write to it) instead of `ClusterBarrier<Y>`. `y[cta] = 2 x[y-peer]`.
#[kernel(block = threads(32), cluster = (2, 2), instances(true, false))]
pub fn cluster_barrier_wrong_axis<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
    #[scratch] along_x: ClusterBarrier<X>,
    #[scratch] along_y: ClusterBarrier<Y>,
) {
    let t = thread_idx().x as usize;
    let (me, cta) = (cluster_cta_idx(), block_linear() as usize);
    // SAFETY: the y-peer `(cx, 1 - cy)` has rank `cx + 2 (1 - cy)` in the 2 x 2 cluster.
    let peer = unsafe { Smem::from_ptr(inbox.map_rank(me.x + 2 * (1 - me.y))) };
    peer.write(t, 2.0 * x.read(32 * cta + t));
    sync_threads();
    if RACY {
        if t == 0 {
            along_x.arrive();
        }
        along_x.wait();
    } else {
        if t == 0 {
            along_y.arrive();
        }
        along_y.wait();
    }
    y.write(32 * cta + t, inbox.read(t));
}

/// Named barrier 1 shared by a producer warp (`arrive`) and a consumer warp
/// (`sync`), declared with 32 threads instead of 64: the consumer warp's
/// own 32 arrivals complete it. `y = 2 x` (32 elements).
#[kernel(block = threads(64), instances(true, false))]
pub fn named_barrier_count_too_small<const RACY: bool>(x: Gmem<f32>, y: Gmem<f32>, #[scratch] buf: Smem<[f32; 32]>) {
    let ready = NamedBarrier::new(1, if RACY { 32 } else { 64 });
    let l = lane_id() as usize;
    if warp_idx() == 0 {
        buf.write(l, 2.0 * x.read(l));
        ready.arrive();
    } else {
        ready.sync();
        y.write(l, buf.read(l));
    }
}

/// The DSMEM exchange on a split cluster barrier whose arrive is
/// `barrier.cluster.arrive.relaxed` (no release): the remote writes before
/// it are not ordered before the peer's reads after its wait (the twin
/// uses the releasing arrive). `y[r][t] = 2 x[1 - r][t]`.
#[kernel(block = threads(32), cluster = 2, instances(true, false))]
pub fn cluster_arrive_relaxed_publishes_nothing<const RACY: bool>(
    x: Gmem<f32>,
    y: Gmem<f32>,
    #[scratch] inbox: Smem<[f32; 32]>,
) {
    let (t, r) = (thread_idx().x as usize, cluster_ctarank() as usize);
    peer_inbox(inbox).write(t, 2.0 * x.read(32 * r + t));
    if RACY {
        // SAFETY: every thread of the cluster arrives once, then waits.
        unsafe { kernel_device::cluster::raw::barrier_cluster_arrive_relaxed() };
    } else {
        cluster_arrive();
    }
    cluster_wait();
    y.write(32 * r + t, inbox.read(t));
}

/// LayerNorm-style statistics: a block sum of `x`, then a block sum of
/// `x²`, both through one per-warp `partials` buffer (warp sums by shuffle,
/// one partial per warp, a barrier, every thread adds the partials). The
/// barrier between reading the first partials and writing the second is
/// missing. `x` is a read-only view (`GmemRef`). `y = [sum x, sum x²]`.
#[kernel(block = threads(64), instances(true, false))]
pub fn block_stats_partials_reused<const RACY: bool>(x: GmemRef<f32>, y: Gmem<f32>, #[scratch] partials: Smem<[f32; 2]>) {
    use kernel_device::reduce::warp_sum;
    let t = thread_idx().x as usize;
    let (w, l) = (warp_idx() as usize, lane_id());
    let v = x.read(t);
    let mut stats = [0.0f32; 2];
    for (i, term) in [v, v * v].into_iter().enumerate() {
        if i == 1 && !RACY {
            sync_threads(); // everyone has read the first partials
        }
        let s = warp_sum(term);
        if l == 0 {
            partials.write(w, s);
        }
        sync_threads();
        stats[i] = partials.read(0) + partials.read(1);
    }
    if t == 0 {
        y.write(0, stats[0]);
        y.write(1, stats[1]);
    }
}
