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
use crate::matmul::{matmul_persistent_ws_rows, ATileOf, BTileOf, EpiTileOf, RowSource};
use kernel_device::fence::fence_proxy_async_global;
use kernel_device::prelude::*;
use kernel_device::semaphore::raw::{ld_acquire_sys, nanosleep};
use kernel_device::wgmma::{Cols, WgmmaShape};
use kernel_device::Barriers;
use kernel_device::f16;

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

impl RowSource for ShardRows {
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
        assert!((j as usize) < self.arrived.len(), "allgather_matmul_ws: arrived holds fewer flags than shards");
        let flag = self.arrived.ptr().wrapping_add(j as usize);
        // SAFETY: `flag` lies inside `arrived` (asserted), a 4-byte-aligned
        // global u32 written only by the host's queued copies; read by an
        // acquire load (an atomic, which the race detector orders by, not
        // a checked access: the bare address).
        while unsafe { ld_acquire_sys(flag.as_raw_unchecked()) } != self.epoch {
            nanosleep(64);
        }
        // The shard's bytes are read by TMA (the async proxy) after the
        // acquire above (generic proxy).
        fence_proxy_async_global();
        self.seen |= 1 << j;
    }
}

/// `C = A · Bᵀ` over an `A` gathered while the kernel runs (module docs):
/// `A` and `C` have `shards x m` rows (`m_tiles = shards x m / BM`, shards
/// aligned to tiles), `B` is `N x K`; `arrived` holds one flag per shard;
/// this device's shard is `rank` and is there at launch. The matmul is
/// [`crate::matmul::matmul_persistent_ws`]'s (same roles, pipeline and
/// epilogue, same constraints); only the tile-row order and the gate
/// differ.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((128, 256, 4, 8), (128, 256, 4, 16), (256, 128, 3, 8)))]
#[allow(clippy::too_many_arguments)]
pub fn allgather_matmul_ws<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATileOf<BM>>,
    b: Tma<BTileOf<BN>>,
    c: Tma<EpiTileOf<BM>>,
    arrived: GmemRef<u32>,
    epoch: u32,
    rank: u32,
    shards: u32,
    m_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATileOf<BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileOf<BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTileOf<BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    let rows = ShardRows::new(arrived, epoch, rank, shards, m_tiles / shards);
    matmul_persistent_ws_rows::<f16, ShardRows, BM, BN, STAGES, GRID_W>(rows, a, b, c, m_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}
