//! The collective matmul's kernel: [`allgather_matmul_ws`], the ready
//! matmul ([`crate::matmul::matmul_persistent_ws`]'s body) over an `A` that
//! is being all-gathered while it runs.
//!
//! `A` on device `rank` is `shards x m` rows (`m x K` per shard, shard `j`
//! at rows `j m`); on entry only this device's own shard is there, the
//! others arrive by copies that the host queues on copy engines (no SM is
//! taken), each followed by a flag write `arrived[j] = epoch` in this
//! device's memory (a 4-byte copy-engine copy queued after the shard's
//! copy has completed). The kernel visits the shards in ring
//! arrival order — its own, then `rank - 1`, `rank - 2`, .. (mod
//! `shards`) — and its producing thread, before the first TMA load from a
//! shard, spins on that shard's flag (`ld.acquire.sys`), then orders the
//! async proxy after it (`fence.proxy.async.global`): TMA reads only what
//! has arrived. So one persistent kernel per device computes all of `C`
//! while the gather runs under it: no launch per shard, no tail per
//! shard.
//!
//! [`allgather_matmul_fwd`] takes the copy engines out as well (Pallas's
//! collective matmul): the kernels forward the shards themselves. The
//! CTAs that compute the tiles of a row of `A` that the next device lacks
//! store the A tiles they loaded, a share of the row's K steps each, to
//! the same place in the next device's `A` (TMA stores from their
//! pipeline slots), then signal the row's arrival there ([`ForwardRows`]).
use crate::gemm::{ATile, BTile, EpiTile, GemmElem};
use crate::matmul::{matmul_persistent_ws_rows, RowSource, TK};
use kernel_device::fence::fence_proxy_async_global;
use kernel_device::grid::planar_snake;
use kernel_device::peer::PeerCounters;
use kernel_device::pipeline::{Producer, Step};
use kernel_device::prelude::*;
use kernel_device::semaphore::wait_flag_sys;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{Cols, WgmmaShape};
use kernel_device::Barriers;
use kernel_device::{bf16, f16};

/// The shards of a gathered `A` in ring arrival order, each gated on its
/// arrival flag ([`RowSource`] of [`allgather_matmul_ws`]).
#[derive(Clone, Copy)]
pub struct ShardRows {
    arrived: GmemRef<u32>,
    epoch: u32,
    rank: u32,
    shards: u32,
    shard_tiles: u32,
    /// Bit `j`: shard `j`'s flag was seen (this thread).
    seen: u32,
}

impl ShardRows {
    /// `shards` shards of `shard_tiles` tile rows each; this device is
    /// `rank`; shard `j` has arrived when `arrived[j] == epoch`.
    #[inline(always)]
    pub fn new(arrived: GmemRef<u32>, epoch: u32, rank: u32, shards: u32, shard_tiles: u32) -> Self {
        ShardRows { arrived, epoch, rank, shards, shard_tiles, seen: 1 << rank }
    }
}

impl<E: GemmElem, const BM: usize> RowSource<E, BM> for ShardRows {
    #[inline(always)]
    fn m_tile(&self, pm: u32) -> u32 {
        let s = pm / self.shard_tiles;
        let j = (self.rank + self.shards - s) % self.shards;
        j * self.shard_tiles + pm % self.shard_tiles
    }

    #[inline(always)]
    fn ready(&mut self, m_tile: u32) {
        let j = m_tile / self.shard_tiles;
        if self.seen & (1 << j) != 0 {
            return;
        }
        wait_flag_sys(self.arrived, j as usize, self.epoch);
        // The shard's bytes are read by TMA (the async proxy) after the
        // acquire above (generic proxy).
        fence_proxy_async_global();
        self.seen |= 1 << j;
    }
}

/// `C = A · Bᵀ` (f16 or bf16) over an `A` gathered while the kernel runs (module docs):
/// `A` and `C` have `shards x m` rows (`m_tiles = shards x m / BM`, shards
/// aligned to tiles), `B` is `N x K`; `arrived` holds one flag per shard;
/// this device's shard is `rank` and is there at launch. The matmul is
/// [`crate::matmul::matmul_persistent_ws`]'s (same roles, pipeline and
/// epilogue, same constraints); only the tile-row order and the gate
/// differ.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 256, 4, 8), (256, 128, 3, 8)))]
#[allow(clippy::too_many_arguments)]
pub fn allgather_matmul_ws<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    arrived: GmemRef<u32>,
    epoch: u32,
    rank: u32,
    shards: u32,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<E, BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    let rows = ShardRows::new(arrived, epoch, rank, shards, m_tiles / shards);
    matmul_persistent_ws_rows::<E, ShardRows, BM, BN, STAGES, GRID_W>(rows, a, b, c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}

/// K steps a forwarding producer stays behind its loads before it stores a
/// slot's A tile to the next device: by then the tile has almost surely
/// landed (no wait in the steady state), and the store has `STAGES - LAG`
/// steps to read the slot before the ring refills it.
const LAG: u32 = 2;

/// The shards of a gathered `A` in ring arrival order (as [`ShardRows`]),
/// forwarded by the kernels themselves ([`RowSource`] of
/// [`allgather_matmul_fwd`]).
///
/// - **Sending.** A row of `A` that the next device lacks (every shard but
///   the next device's own) is sent by the `F = min(n_tiles, k_steps)`
///   CTAs that compute its tiles `(row, 0..F)`: the one at column `pn`
///   stores the row's K steps `k` with `k % F == pn`, each `LAG` steps
///   after loading it (once [`Producer::wait_full`] says it landed), to the
///   same place in the next device's `A` (a TMA store through `a_next`, a
///   map over that device's buffer). Spread so, each tile stores
///   `k_steps / F` tiles of A, and no CTA falls behind the others. Before
///   the ring refills a slot that a store may still read, the producer
///   waits for the stores' reads (`cp.async.bulk.wait_group.read 0`).
///   After the row's last step it waits for its stores to complete
///   (`wait_group 0`), orders them before its generic-proxy release
///   (`fence.proxy.async.global`) and adds 1 to the row's counter on the
///   next device (`red.release.sys`).
/// - **Receiving.** A row of another device's shard may be read once this
///   device's counter for it has reached the call's `target`
///   (`ld.acquire.sys`, then `fence.proxy.async.global`: TMA reads only
///   what has arrived). Counters only grow, by `F` per call: the host
///   passes `target` = the previous call's plus `F`, and makes fresh
///   counters when the tile rows or `F` change (compared with wrapping
///   arithmetic).
#[derive(Clone, Copy)]
pub struct ForwardRows<E: GemmElem, const BM: usize> {
    a_next: Tma<ATile<E, BM>>,
    /// One counter per tile row of the gathered `A` on every device.
    counters: PeerCounters,
    rank: u32,
    next: u32,
    shards: u32,
    /// The value this call's rows' counters reach.
    target: u32,
    shard_tiles: u32,
    /// `F`: the CTAs that send each row, one signal each.
    senders: u32,
    /// Bit `i`: a store from slot `i` may still be reading it.
    pending: u64,
}

impl<E: GemmElem, const BM: usize> ForwardRows<E, BM> {
    #[inline(always)]
    fn shard(&self, m_tile: u32) -> u32 {
        m_tile / self.shard_tiles
    }

    /// Stores the A tile of ring step `step` (K step `k` of tile row
    /// `m_tile`) to the next device once it has landed.
    #[inline(always)]
    fn forward<const S: usize>(&mut self, producer: &Producer<'_, S>, step: Step<S>, m_tile: u32, k: u32, a_bufs: Smem<[ATile<E, BM>; S]>) {
        let i = producer.wait_full(step);
        self.a_next.store(a_bufs.at(i), m_tile * BM as u32, k * TK as u32);
        commit_group();
        self.pending |= 1 << i;
    }
}

impl<E: GemmElem, const BM: usize> RowSource<E, BM> for ForwardRows<E, BM> {
    #[inline(always)]
    fn m_tile(&self, pm: u32) -> u32 {
        let s = pm / self.shard_tiles;
        let j = (self.rank + self.shards - s) % self.shards;
        j * self.shard_tiles + pm % self.shard_tiles
    }

    /// Shard by shard in arrival order, the planar snake within each: a
    /// CTA's tiles never go back to an earlier shard. The kernels wait for
    /// one another's rows, so this is what keeps them free of deadlock: a
    /// tile of the shard `s` steps up the ring waits only for a row that
    /// the previous device forwards from a tile of step `s - 1`, which no
    /// later tile of any CTA can hold up.
    #[inline(always)]
    fn order(&self, i: u32, (_m_tiles, n_tiles): (u32, u32), grid_w: u32) -> (u32, u32) {
        let per_shard = self.shard_tiles * n_tiles;
        let (pm, pn) = planar_snake(i % per_shard, (self.shard_tiles, n_tiles), 0, grid_w);
        ((i / per_shard) * self.shard_tiles + pm, pn)
    }

    #[inline(always)]
    fn ready(&mut self, m_tile: u32) {
        if self.shard(m_tile) == self.rank {
            return;
        }
        self.counters.wait_for(m_tile as usize, self.target);
        // The row's bytes are read by TMA (the async proxy) after the
        // acquire above (generic proxy).
        fence_proxy_async_global();
    }

    #[inline(always)]
    fn loaded<const S: usize>(&mut self, producer: &Producer<'_, S>, step: Step<S>, (m_tile, pn): (u32, u32), (k, k_steps): (u32, u32), a_bufs: Smem<[ATile<E, BM>; S]>) {
        let f = self.senders;
        if pn >= f || self.shard(m_tile) == self.next {
            return;
        }
        if k >= LAG && (k - LAG) % f == pn {
            self.forward(producer, Step::new(step.count() - LAG), m_tile, k - LAG, a_bufs);
        }
        if k + 1 == k_steps {
            // This tile's share of the row's last LAG steps (of all of
            // them when it has fewer).
            let mut j = k_steps.saturating_sub(LAG);
            while j < k_steps {
                if j % f == pn {
                    self.forward(producer, Step::new(step.count() - (k - j)), m_tile, j, a_bufs);
                }
                j += 1;
            }
            // The row is written on the next device; then its counter.
            wait_group::<0>();
            self.pending = 0;
            fence_proxy_async_global();
            self.counters.add(self.next, m_tile as usize, 1);
        }
    }

    #[inline(always)]
    fn refill(&mut self, slot: usize) {
        if self.pending & (1 << slot) != 0 {
            // The stores from this slot have read it before TMA refills it.
            wait_group_read::<0>();
            self.pending = 0;
        }
    }
}

/// `C = A · Bᵀ` (f16 or bf16) over an `A` that the kernels of the group gather
/// themselves while they run ([`ForwardRows`]): as
/// [`allgather_matmul_ws`] (same layout: `A` and `C` of `shards x m` rows,
/// this device's shard `rank` there at launch, shards aligned to tiles),
/// but the shards reach the next device by TMA stores from this kernel's
/// producing thread, and `arrived` (one counter per tile row on every
/// device: [`PeerCounters`]) is added to by the previous device's kernel,
/// not by the host, `min(n_tiles, k_steps)` per row and call; a call waits
/// for its rows' counters to reach `target`. `a_next` is a map over the next device's
/// `A`, the shape of `a`. Every device's kernel must run at once (a group
/// launch), each CTA resident (a grid of at most one CTA per SM).
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 256, 4, 8)))]
#[allow(clippy::too_many_arguments)]
pub fn allgather_matmul_fwd<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    a_next: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    arrived: PeerCounters,
    target: u32,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<E, BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const { assert!(STAGES as u32 > LAG, "allgather_matmul_fwd: STAGES must exceed LAG (a forwarded slot is read before its refill)") };
    let (rank, next, shards) = (arrived.rank(), arrived.next(), arrived.count());
    let rows = ForwardRows::<E, BM> { a_next, counters: arrived, rank, next, shards, target, shard_tiles: m_tiles / shards, senders: n_tiles.min(k_steps), pending: 0 };
    matmul_persistent_ws_rows::<E, ForwardRows<E, BM>, BM, BN, STAGES, GRID_W>(rows, a, b, c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}
