//! Several GPUs of one host (NVLink): the seed reference's shard exchange
//! with bulk copies, and a ring all-gather. Each device runs the same
//! kernel with its own view of the peer buffers (`PeerGmem`: every
//! device's address, its rank, the device count); data crosses devices as
//! bulk copies SMEM -> remote GMEM, and a system-scope semaphore signal on
//! the receiver tells it the data arrived.
use kernel_device::fence::fence_proxy_async_global;
use kernel_device::peer::{PeerGmem, PeerSemaphores};
use kernel_device::layout::Swizzled;
use kernel_device::prelude::*;
use kernel_device::tma::{bulk, commit_group, wait_group, wait_group_read};

/// Elements of one bulk copy: 4096 f32 (16 KiB).
pub const CHUNK: usize = 4096;
/// Threads per CTA: one issues the copies, the warp waits with it.
pub const THREADS: u32 = 32; // the `#[kernel]` blocks below

/// Copies chunks `first, first + stride, ..` (below `chunks`) of `src`
/// (elements `src_at + c * CHUNK ..`) to `dst` (`dst_at + c * CHUNK ..`)
/// through two SMEM slots: the load of one chunk runs while the store of
/// the previous one drains. One thread. Returns with every store complete
/// (`wait_group::<0>`) and ordered before this thread's later generic
/// accesses (`fence.proxy.async.global`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
#[track_caller]
fn copy_chunks(
    src: GmemRef<f32>,
    src_at: usize,
    dst: Gmem<f32>,
    dst_at: usize,
    first: usize,
    stride: usize,
    chunks: usize,
    bufs: Smem<[[f32; CHUNK]; 2]>,
    loaded: &Barriers<2>,
) {
    let mut c = first;
    let mut i = 0usize;
    while c < chunks {
        let s = i % 2;
        // SAFETY: slot `s` of the two-slot allocation.
        let buf: Smem<[f32; CHUNK]> = unsafe { bufs.cast_at(s * CHUNK * 4) };
        // At most one store group (the previous chunk's) may still read
        // SMEM: the store of chunk i - 2 from this slot has finished reading.
        wait_group_read::<1>();
        let bar = loaded.at(s);
        bar.arrive_expect_tx(bulk::bytes::<f32, CHUNK>());
        bulk::load(buf, src, src_at + c * CHUNK, bar);
        bar.wait();
        bulk::store(buf, dst, dst_at + c * CHUNK);
        commit_group();
        c += stride;
        i += 1;
    }
    wait_group::<0>();
    fence_proxy_async_global();
}

/// The seed's `exchange_shards`, for any number of devices: device `r`'s
/// `x` lands in device `next(r)`'s `y` (two devices swap shards). CTA `b`
/// copies chunks `b, b + grid, ..` with bulk copies over NVLink, then
/// signals slot `b` of the receiver's semaphores and waits until its own
/// slot `b` was signalled (the sender's CTA `b` delivered the same chunks
/// here). Needs `x.len() == y.len()`, a multiple of [`CHUNK`], and at
/// least `grid` semaphore slots per device, zeroed.
#[kernel(block = threads(32))]
pub fn exchange_shards(
    x: GmemRef<f32>,
    y: PeerGmem<f32>,
    sems: PeerSemaphores,
    #[scratch] bufs: Smem<[[f32; CHUNK]; 2]>,
    #[scratch] loaded: Barriers<2>,
) {
    let (b, grid) = (block_idx().x as usize, grid_dim().x as usize);
    if thread_idx().x == 0 {
        copy_chunks(x, 0, y.remote(y.next()), 0, b, grid, x.len() / CHUNK, bufs, &loaded);
        sems.signal(y.next(), b, 1);
        sems.wait(b, 1);
    }
    sync_threads();
}

/// A ring all-gather: every device's `x` (one shard of `S` elements) ends
/// up in every device's `out` (`count * S` elements, shard `d` at `d * S`).
/// Step 0 copies `x` into this device's own slot and the next device's;
/// step `s` (1 to `count - 2`) forwards the shard received at step `s - 1`
/// (from `rank - s`) to the next device, after waiting for it. CTA `b`
/// moves chunks `b, b + grid, ..` of each shard and uses semaphore slot `b`
/// (one signal per step). Needs `S` a multiple of [`CHUNK`] and at least
/// `grid` zeroed semaphore slots per device.
#[kernel(block = threads(32))]
pub fn ring_all_gather(
    x: GmemRef<f32>,
    out: PeerGmem<f32>,
    sems: PeerSemaphores,
    #[scratch] bufs: Smem<[[f32; CHUNK]; 2]>,
    #[scratch] loaded: Barriers<2>,
) {
    let (b, grid) = (block_idx().x as usize, grid_dim().x as usize);
    let (me, n, next) = (out.rank() as usize, out.count() as usize, out.next());
    let shard = x.len();
    let chunks = shard / CHUNK;
    if thread_idx().x == 0 {
        // Our own shard into our slot (no other device reads it before the
        // kernel ends) and into the next device's.
        copy_chunks(x, 0, out.local(), me * shard, b, grid, chunks, bufs, &loaded);
        if n > 1 {
            copy_chunks(x, 0, out.remote(next), me * shard, b, grid, chunks, bufs, &loaded);
            sems.signal(next, b, 1);
        }
        let local = out.local();
        for s in 1..n.saturating_sub(1) {
            // The shard of device `me - s` arrived from the previous device.
            sems.wait(b, 1);
            let from = (me + n - s) % n;
            // This device's part, read-only here until the kernel ends.
            let recv = GmemRef::from(local);
            copy_chunks(recv, from * shard, out.remote(next), from * shard, b, grid, chunks, bufs, &loaded);
            sems.signal(next, b, 1);
        }
        if n > 1 {
            // The last shard (of device `me + 1`) arrives; nothing to forward.
            sems.wait(b, 1);
        }
    }
    sync_threads();
}

/// A 64 x 64 f16 tile, 128-byte swizzle: the unit of [`exchange_tiles`].
pub type ShardTile = kernel_device::layout::Tile<kernel_device::f16, 64, 64, Swizzled<128>>;

/// The exchange with TMA tensor copies: CTA `b` loads row block `b` of its
/// device's `x` (`rows x 64` f16) through `x`'s map, and stores it with a
/// TMA store through `y_next`, a map over the *next* device's `y` (the
/// host passes each device the map of its neighbour's buffer); then it
/// signals slot `b` there and waits for its own. Grid `rows / 64`.
#[kernel(block = threads(32))]
pub fn exchange_tiles(
    x: Tma<ShardTile>,
    y_next: Tma<ShardTile>,
    sems: PeerSemaphores,
    #[scratch] buf: Smem<ShardTile>,
    #[scratch] loaded: Barrier,
) {
    let b = block_idx().x;
    if thread_idx().x == 0 {
        loaded.arrive_expect_tx(Tma::<ShardTile>::BYTES);
        x.load(buf, b * 64, 0, loaded.as_ref());
        loaded.wait();
        y_next.store(buf, b * 64, 0);
        commit_group();
        wait_group::<0>();
        fence_proxy_async_global();
        let next = if sems.rank() + 1 == sems.count() { 0 } else { sems.rank() + 1 };
        sems.signal(next, b as usize, 1);
        sems.wait(b as usize, 1);
    }
    sync_threads();
}
