//! The reduce-scatter matmul's kernel: [`reduce_scatter_matmul_ws`], the
//! ready matmul ([`crate::matmul::matmul_persistent_ws`]'s producer,
//! ring and wgmma loop) over a K sharded across the `p` devices of a
//! group, whose `M x N` result is summed over the devices and scattered
//! by rows while it is computed.
//!
//! Device `d` holds `A_d` (`M x K/p`) and `B_d` (`N x K/p`) and computes
//! every tile of its partial `A_d · B_dᵀ`; the sum over the devices of
//! row block `o` (rows `o M/p ..`) belongs to device `o`. Each device
//! visits the row blocks of the other devices first (`d + 1`, `d + 2`, ..
//! mod `p`) and its own last. A tile of another device's block leaves in
//! the element type, f16 or bf16 (its f32 accumulators rounded once, as
//! the partial `C` of a matmul followed by a reduce-scatter is), written straight from the
//! registers into the owner's receive buffer (a [`PeerGmem`], coalesced
//! 16-byte stores over NVLink), and the owner's counter of that tile is
//! signalled (system-scope release) once the next tile's MMAs are done,
//! so that the compute warps do not wait for NVLink's acknowledgements.
//! A tile of its own block, once its own partial is in the registers,
//! waits for its `p - 1` counts (system-scope acquire), adds the other
//! devices' partials in f32 and goes out through the matmul's
//! TMA-store epilogue.
//!
//! Since every CTA runs all of its foreign tiles before any of its own
//! (foreign tiles have the lower tile indices, and [`nd_loop`] runs a
//! CTA's tiles in index order), and signals its last foreign tile before
//! its first wait, no CTA waits before every foreign tile it owes has
//! been sent: with every CTA of every device resident (a persistent grid
//! of at most one CTA per SM, the group's kernels launched together) the
//! waits always end.
use crate::gemm::{check_tile, ATile, BTile, EpiTile, GemmElem, Stores, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};
use kernel_device::array::regs::unroll;
use kernel_device::grid::{nd_loop, planar_snake, Collective};
use kernel_device::peer::{PeerGmem, PeerSemaphores};
use kernel_device::pipeline::Ring;
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, Cols, WgmmaShape};
use kernel_device::Barriers;
use kernel_device::{bf16, f16};

/// The compute threads of a CTA (two warpgroups): a partial tile in the
/// receive buffer is laid out by thread (element `r` of compute thread
/// `t` at `(r / 8) * 2048 + 8 t + r % 8`, two 16-bit elements to a 32-bit
/// word), so each warp's 16-byte stores cover 512 contiguous bytes, and the owner, whose threads hold the same
/// fragments, reads it back the same way.
pub const RS_THREADS: usize = 256;

/// 32-bit words of the receive buffer of each device: `p - 1` slots (one
/// per other device) of `block_tiles x n_tiles` tiles of `bm x bn` 16-bit
/// elements, two to a word.
pub const fn recv_words(p: usize, block_tiles: usize, n_tiles: usize, bm: usize, bn: usize) -> usize {
    p.saturating_sub(1) * block_tiles * n_tiles * bm * bn / 2
}

/// The receive slot on device `owner` of the tiles that device `sender`
/// sends it: `(sender - owner - 1) mod p`, in `0..p - 1`.
#[inline(always)]
pub fn recv_slot(sender: u32, owner: u32, p: u32) -> u32 {
    (sender + 2 * p - owner - 1) % p
}

/// Tile `i` of device `rank`'s `(p x block_tiles) x n_tiles` tiles in the
/// order it visits them: `(m_tile, n_tile)`. The first `(p - 1) x
/// block_tiles x n_tiles` indices are the other devices' row blocks
/// (`rank + 1`, `rank + 2`, .. mod `p`), then its own block; within each
/// part in planar-snake order, bands of `grid_w` tile rows.
#[inline(always)]
pub fn rs_tile(i: u32, rank: u32, p: u32, block_tiles: u32, n_tiles: u32, grid_w: u32) -> (u32, u32) {
    let foreign = (p - 1) * block_tiles * n_tiles;
    if i < foreign {
        let (fm, pn) = planar_snake(i, ((p - 1) * block_tiles, n_tiles), 0, grid_w);
        let owner = (rank + 1 + fm / block_tiles) % p;
        (owner * block_tiles + fm % block_tiles, pn)
    } else {
        let (om, pn) = planar_snake(i - foreign, (block_tiles, n_tiles), 0, grid_w);
        (rank * block_tiles + om, pn)
    }
}

/// Device `rank`'s part of `C = Σ_d A_d · B_dᵀ` reduce-scattered by rows
/// (module docs): `a` maps this device's `A_d` (`M x K/p`, `M = p x
/// block_tiles x BM`), `b` its `B_d` (`N x K/p`), `c` its output row block
/// (`M/p x N`); `recv` is every device's receive buffer (at least
/// [`recv_words`] words each) and `ready` every device's tile counters
/// ([`PeerSemaphores`], at
/// least `block_tiles x n_tiles` each, zero at the launch and zero again
/// when every device's kernel has returned: each wait consumes its
/// counts, so repeated launches need no reset). The rank and the device
/// count are `recv`'s.
///
/// This kernel works as follows:
/// 1. CTA `q` of `Q` (at most one per SM, every one resident) runs tiles
///    `q, q + Q, ..` of the `p x block_tiles x n_tiles` tiles in the order
///    of [`rs_tile`]: the other devices' row blocks, then its own;
/// 2. one thread of warpgroup 2 (memory) issues the TMA loads of A
///    (`BM x 64`) and B (`BN x 64`) of every tile and K step into a ring of
///    `STAGES` slots; the compute warpgroups accumulate their `BM / 2 x BN`
///    halves with wgmma, as in [`crate::matmul::matmul_persistent_ws`];
/// 3. a tile of device `o`'s block (`o != rank`): every compute thread
///    writes its accumulators as `E` to slot [`recv_slot`]`(rank, o, p)`
///    of `o`'s receive buffer and the compute warpgroups meet; thread 0
///    signals `o`'s counter of the tile (`red.release.sys`: the CTA's
///    writes, ordered before it by the barrier, are visible to whoever
///    acquires the count) after the MMAs of the CTA's next tile, or before
///    the CTA's first wait, or at its end, whichever comes first: by then
///    the writes have crossed NVLink, and the release does not hold the
///    warpgroup while they do;
/// 4. a tile of its own block: thread 0 signals the tile it still owes,
///    then waits until the tile's counter
///    holds `p - 1` counts and consumes them (`ld.acquire.sys`, then a
///    compare-and-swap), the compute warpgroups meet, every thread adds
///    the `p - 1` partials from its receive buffer (in slot order) to its
///    accumulators, and the tile is stored as `E` through SMEM sub-tiles
///    and TMA stores ([`WgAcc::store_tile_with`], the matmul's epilogue;
///    pair stores into SMEM at `BN = 256`, `stmatrix` otherwise).
///
/// Constraints: `BM = 128` (one 64-row accumulator block per compute
/// warpgroup), `BN` 64, 128 or 256; `STAGES >= 2`; `n_tiles = ceil(N /
/// BN)`, `k_steps = ceil(K/p / 64) >= 1`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 256, 4, 8), (128, 128, 4, 8)))]
#[allow(clippy::too_many_arguments)]
pub fn reduce_scatter_matmul_ws<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    recv: PeerGmem<u32>,
    ready: PeerSemaphores,
    block_tiles: u32,
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
    let own = RowBlock { c, first: recv.rank() * block_tiles };
    sum_own_tiles::<E, RowBlock<E, BM>, BM, BN, STAGES, GRID_W>(own, a, b, recv, ready, block_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}

/// What the kernels do with a summed tile of their own row block
/// (the last step of [`reduce_scatter_matmul_ws`] and [`allreduce_matmul_ws`]).
pub trait OwnTiles<E: GemmElem, const BM: usize>: Copy {
    /// Writes out sub-tile `j` (`buf`: `BM x 64`, the tile's columns `64 j
    /// ..`) of the summed tile `(pm, pn)` (`pm` a tile row of the whole
    /// `M`). Run by every compute thread, under the contract of the
    /// epilogue's sub-tiles (`WgAcc::store_tile_with`): thread 0 commits
    /// exactly one bulk group (the TMA store that reads `buf`), and every
    /// thread is done reading `buf` when it returns.
    fn emit(&self, buf: Smem<EpiTile<E, BM>>, tile: (u32, u32), col0: u32, leader: bool);
}

/// The reduce-scatter: the tile goes to this device's row block of `C`
/// (`c`, `M/p x N`; `first` is the block's first tile row).
#[derive(Clone, Copy)]
pub struct RowBlock<E: GemmElem, const BM: usize> {
    c: Tma<EpiTile<E, BM>>,
    first: u32,
}

impl<E: GemmElem, const BM: usize> OwnTiles<E, BM> for RowBlock<E, BM> {
    #[inline(always)]
    fn emit(&self, buf: Smem<EpiTile<E, BM>>, (pm, _): (u32, u32), col0: u32, leader: bool) {
        if leader {
            self.c.store(buf, (pm - self.first) * BM as u32, col0);
            commit_group();
        }
    }
}

/// The all-reduce: the tile goes to this device's `C` (`c`, the whole `M x
/// N`) by TMA and, from the same SMEM sub-tile, to every other device's
/// `C` (`c_all`, row-major `M x N` on every device) in 16-byte stores over
/// NVLink: 4 per compute thread and device, a warp's covering 4 rows of
/// 128 contiguous bytes. Nothing reads `C` while the kernels run, so the
/// stores need no signal: the group launch orders later work after every
/// device's kernel.
#[derive(Clone, Copy)]
pub struct EveryDevice<E: GemmElem, const BM: usize> {
    c: Tma<EpiTile<E, BM>>,
    c_all: PeerGmem<E>,
    n: u32,
}

impl<E: GemmElem, const BM: usize> OwnTiles<E, BM> for EveryDevice<E, BM> {
    #[inline(always)]
    fn emit(&self, buf: Smem<EpiTile<E, BM>>, (pm, _): (u32, u32), col0: u32, leader: bool) {
        if leader {
            self.c.store(buf, pm * BM as u32, col0);
            commit_group();
        }
        let (rank, p, n) = (self.c_all.rank(), self.c_all.count(), self.n as usize);
        let t = thread_linear() as usize;
        // Chunk `i` (16 bytes) of the sub-tile: row `i / 8`, columns
        // `8 (i % 8) ..`.
        const CHUNKS: usize = EPI_N / 8;
        unroll(BM * CHUNKS / RS_THREADS, |q| {
            let i = q * RS_THREADS + t;
            let (row, col) = (i / CHUNKS, col0 as usize + 8 * (i % CHUNKS));
            // Columns past N (a ragged last tile; N is a multiple of 8).
            if col < n {
                let v = buf.get_v4(row, 8 * (i % CHUNKS));
                let at = (pm as usize * BM + row) * n + col;
                let mut o = 0;
                while o < p {
                    if o != rank {
                        self.c_all.remote(o).write_v4(at, v);
                    }
                    o += 1;
                }
            }
        });
    }
}

/// `C = Σ_d A_d · B_dᵀ` summed over the devices and written out on every
/// device (module docs of `kernel_ops::reduce_scatter`): as
/// [`reduce_scatter_matmul_ws`], but `c` maps this device's whole `C` (`M x
/// N`) and `c_all` is every device's `C`, to which each device writes the
/// tiles of its row block once summed ([`EveryDevice`]). For small outputs,
/// where a matmul then an all-reduce pays two launches and a round trip.
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 128, 4, 8)))]
#[allow(clippy::too_many_arguments)]
pub fn allreduce_matmul_ws<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    c: Tma<EpiTile<E, BM>>,
    c_all: PeerGmem<E>,
    recv: PeerGmem<u32>,
    ready: PeerSemaphores,
    block_tiles: u32,
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
    let n = (c_all.len() / (c_all.count() * block_tiles) as usize / BM) as u32;
    let own = EveryDevice { c, c_all, n };
    sum_own_tiles::<E, EveryDevice<E, BM>, BM, BN, STAGES, GRID_W>(own, a, b, recv, ready, block_tiles, n_tiles, k_steps, a_bufs, b_bufs, epi, loaded, consumed)
}

/// The body of [`reduce_scatter_matmul_ws`] and [`allreduce_matmul_ws`]:
/// every step but what becomes of a summed tile of this device's row
/// block (`own`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sum_own_tiles<E: GemmElem, O: OwnTiles<E, BM>, const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32>(
    own: O,
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>>,
    recv: PeerGmem<u32>,
    ready: PeerSemaphores,
    block_tiles: u32,
    n_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    epi: Smem<[EpiTile<E, BM>; 2]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
) where
    Cols<BN>: WgmmaShape,
{
    const {
        check_tile(BM, BN);
        assert!(BM == 128, "reduce_scatter_matmul_ws: BM must be 128 (the partial tiles travel as one 64-row accumulator block per compute warpgroup)");
        assert!(STAGES >= 2, "reduce_scatter_matmul_ws: at least 2 stages");
    };
    let (rank, p) = (recv.rank(), recv.count());
    let tiles = [p * block_tiles * n_tiles];
    let tile = |i: u32| rs_tile(i, rank, p, block_tiles, n_tiles, GRID_W);
    let ring = Ring::new(&loaded, &consumed, 256);
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        if thread_in_warpgroup() == 0 {
            let mut producer = ring.producer();
            nd_loop(tiles, Collective::Blocks, |info| {
                let (pm, pn) = tile(info.index[0]);
                for k in 0..k_steps {
                    let slot = producer.acquire_tx(Tma::<ATile<E, BM>>::BYTES + Tma::<BTile<E, BN>>::BYTES);
                    a.load(a_bufs.at(slot.index()), pm * BM as u32, k * TK as u32, slot.barrier());
                    b.load(b_bufs.at(slot.index()), pn * BN as u32, k * TK as u32, slot.barrier());
                }
            });
        }
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx_sync() as usize * BM / 2;
        let t = thread_linear() as usize;
        let leader = t == 0;
        let tile_words = BM * BN / 2;
        let mut consumer = ring.consumer();
        let mut sub_tiles = 0u32;
        let slots = (block_tiles * n_tiles) as usize;
        // The foreign tile whose signal thread 0 still owes: `(owner,
        // local)`, or `owner == rank` for none.
        let mut owed = (rank, 0u32);
        nd_loop(tiles, Collective::Blocks, |info| {
            let (pm, pn) = tile(info.index[0]);
            let owner = pm / block_tiles;
            // The tile's index inside its row block: its counter on the
            // owner, and its place in each of the owner's receive slots.
            let local = (pm - owner * block_tiles) * n_tiles + pn;
            let mut acc = WgAcc::<BM, BN>::undefined();
            consumer.mma_steps::<1>(k_steps, |k, slot| {
                acc.mma(a_bufs.at(slot.index()), row0, b_bufs.at(slot.index()), k > 0);
            });
            consumer.release_after_wgmma::<0>();
            acc.blocks[0].fence_operands();
            // The previous foreign tile's writes were ordered before this
            // thread by the barrier after them; a tile of MMAs later they
            // have reached the owner, and the release is short.
            if leader && owed.0 != rank {
                ready.signal(owed.0, owed.1 as usize, 1);
                owed = (rank, 0);
            }
            let regs: &mut [f32] = acc.blocks[0].regs.as_mut();
            let chunks = regs.len() / 8;
            if owner != rank {
                let dst = recv.remote(owner);
                let base = (recv_slot(rank, owner, p) as usize * slots + local as usize) * tile_words;
                assert!(base + tile_words <= dst.len(), "reduce_scatter_matmul_ws: the receive buffer is shorter than recv_words");
                unroll(chunks, |q| {
                    let r = &regs[8 * q..8 * q + 8];
                    let words = [E::pack(r[0], r[1]), E::pack(r[2], r[3]), E::pack(r[4], r[5]), E::pack(r[6], r[7])];
                    // SAFETY: `base + (q RS_THREADS + t) 4 + 4 <= base +
                    // tile_words <= len` (asserted: `4 chunks RS_THREADS =
                    // tile_words`), a multiple of 4.
                    unsafe { dst.write_v4_unchecked(base + (q * RS_THREADS + t) * 4, words) }
                });
                // Every compute thread's writes precede the signal (the
                // barrier orders them before thread 0's release).
                COMPUTE_BARRIER.sync();
                owed = (owner, local);
            } else {
                if leader {
                    ready.wait(local as usize, p - 1);
                }
                // Every compute thread reads after thread 0's acquire.
                COMPUTE_BARRIER.sync();
                let mine = recv.local();
                let mut s = 0;
                while s + 1 < p {
                    let base = (s as usize * slots + local as usize) * tile_words;
                    assert!(base + tile_words <= mine.len(), "reduce_scatter_matmul_ws: the receive buffer is shorter than recv_words");
                    unroll(chunks, |q| {
                        // SAFETY: `base + (q RS_THREADS + t) 4 + 4 <= base +
                        // tile_words <= len` (asserted), a multiple of 4.
                        let v = unsafe { mine.read_v4_unchecked(base + (q * RS_THREADS + t) * 4) };
                        unroll(4, |x| {
                            let (lo, hi) = E::unpack(v[x]);
                            regs[8 * q + 2 * x] += lo;
                            regs[8 * q + 2 * x + 1] += hi;
                        });
                    });
                    s += 1;
                }
                // Pair stores into SMEM at `BN = 256`: `stmatrix` (as
                // `WgAcc::store_tile` picks for 128-row tiles) spilled
                // there, with the sum's registers beside the accumulators.
                let stores = if BN == 256 { Stores::Pairs } else { Stores::Matrix };
                sub_tiles = acc.store_tile_with(epi, row0, sub_tiles, stores, |buf, j| own.emit(buf, (pm, pn), pn * BN as u32 + (j * EPI_N) as u32, leader));
            }
        });
        if leader {
            if owed.0 != rank {
                ready.signal(owed.0, owed.1 as usize, 1);
            }
            wait_group::<0>();
        }
    }
}
