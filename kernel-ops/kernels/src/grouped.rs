//! Grouped GEMM for mixture-of-experts layers ([`grouped_matmul`]): `G`
//! problems `C_g = A_g · B_gᵀ` that share `N` and `K`, with ragged `M`.
//! The rows of `A` (and of `C`) are grouped by expert, back to back (the
//! "contiguous" layout: `M = Σ M_g`), `B` is `G x N x K` (one `N x K` weight
//! per expert), and the group sizes `M_g` live in device memory: no host
//! round trip schedules the tiles.
use crate::gemm::{check_tile, ATile, BTile, EpiTile, GemmElem, Stores, WgAcc, COMPUTE_REGS, EPI_N, MEMORY_REGS, TK};
use kernel_device::{bf16, f16};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::wgmma::{setmaxnreg_dec, setmaxnreg_inc, Cols, WgmmaShape};
use kernel_device::pipeline::{Ring, Step};
use kernel_device::Barriers;

/// Status word values the kernel writes (`status[0]`).
pub const STATUS_OK: u32 = 0;
/// The group sizes do not add up to the rows of `A`: nothing was computed.
pub const STATUS_SIZES_MISMATCH: u32 = 1;

/// Where one output tile of the grouped problem lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupTile {
    /// The group (expert).
    pub group: u32,
    /// First row of the tile in `A` and `C`.
    pub row0: u32,
    /// Rows of the tile inside its group (`BM` but for a group's last tile).
    pub rows: u32,
    /// First column in `C` (row of `B_g`).
    pub col0: u32,
}

/// The tiles of the groups in order: group 0's `ceil(M_0 / BM) x n_tiles`
/// tiles (row blocks outer, column blocks inner), then group 1's, ...
/// [`GroupCursor::locate`] moves forward only, reading each group size
/// once, so a persistent CTA walking its tiles `p, p + P, ..` reads `G`
/// sizes in all.
pub struct GroupCursor {
    sizes: GmemRef<u32>,
    bm: u32,
    bn: u32,
    n_tiles: u32,
    group: u32,
    first_tile: u32,
    first_row: u32,
    rows: u32,
}

impl GroupCursor {
    /// A cursor over groups of sizes `sizes` (at least one group), tiles
    /// `bm x bn`, `n_tiles` column blocks.
    #[inline(always)]
    #[track_caller]
    pub fn new(sizes: GmemRef<u32>, bm: u32, bn: u32, n_tiles: u32) -> Self {
        let rows = sizes.read(0);
        GroupCursor { sizes, bm, bn, n_tiles, group: 0, first_tile: 0, first_row: 0, rows }
    }

    /// The tile with index `t` (at least the last one located; below
    /// [`group_totals`]'s tile count).
    #[inline(always)]
    #[track_caller]
    pub fn locate(&mut self, t: u32) -> GroupTile {
        loop {
            let tiles = self.rows.div_ceil(self.bm) * self.n_tiles;
            if t < self.first_tile + tiles {
                break;
            }
            self.first_tile += tiles;
            self.first_row += self.rows;
            self.group += 1;
            self.rows = self.sizes.read(self.group as usize);
        }
        let local = t - self.first_tile;
        let (mb, nb) = (local / self.n_tiles, local % self.n_tiles);
        let rows = (self.rows - mb * self.bm).min(self.bm);
        GroupTile { group: self.group, row0: self.first_row + mb * self.bm, rows, col0: nb * self.bn }
    }
}

/// Whether the group sizes are the rows of `A`: each at most `m_total` and
/// their sum `m_total` (no sum wraps around then); and the output tiles of
/// all groups.
#[inline(always)]
#[track_caller]
pub fn group_totals(sizes: GmemRef<u32>, bm: u32, n_tiles: u32, m_total: u32) -> (bool, u32) {
    let (mut tiles, mut rows, mut ok) = (0u32, 0u32, true);
    for g in 0..sizes.len() {
        let m = sizes.read(g);
        ok &= m <= m_total && rows <= m_total - m.min(m_total);
        if ok {
            tiles += m.div_ceil(bm) * n_tiles;
            rows += m;
        }
    }
    (ok && rows == m_total, tiles)
}

/// Copies the rows of a group's partial last tile (`tile.rows` of them)
/// from the epilogue sub-tile `buf` to `C` at column `col` (at most 64
/// columns, fewer at `n`): the rows past `tile.rows` belong to the next
/// group and are never written. The two compute warpgroups (256 threads),
/// after the barrier that follows the sub-tile's writes; two f16 per store.
#[inline(always)]
#[track_caller]
fn store_partial<E: Copy, const BM: usize>(buf: Smem<EpiTile<E, BM>>, c: Gmem<E>, tile: GroupTile, col: u32, n: u32) {
    let cols = (n - col).min(EPI_N as u32) as usize;
    // The tile's last element is in `C` (checked once, not per store).
    let last = (tile.row0 + tile.rows - 1) as usize * n as usize + col as usize + cols - 1;
    if last >= c.len() {
        kernel_device::gmem::out_of_range(last, c.len());
    }
    // SAFETY: `C`'s memory as `u32`s (its base is 4-byte aligned); element
    // pairs start at even indices (N and `col` are even).
    let c2 = unsafe { Gmem::<u32>::from_ptr(c.ptr().cast(), c.len() / 2) };
    let base = buf.ptr().cast::<u8>();
    let mut i = thread_linear() as usize;
    while i < tile.rows as usize * (EPI_N / 2) {
        let (r, cc) = (i / (EPI_N / 2), 2 * (i % (EPI_N / 2)));
        if cc < cols {
            let off = EpiTile::<E, BM>::offset_of(r, cc);
            // SAFETY: inside the sub-tile (r < BM, cc < 64), 4-byte aligned.
            let v = unsafe { base.add(off).cast::<u32>().read() };
            let at = (tile.row0 as usize + r) * n as usize + col as usize + cc;
            // SAFETY: `at + 1 <= last`, checked above.
            unsafe { c2.write_unchecked(at / 2, v) };
        }
        i += 256;
    }
}

/// The memory warpgroup of the grouped GEMMs (after its `setmaxnreg`):
/// one thread walks the CTA's tiles `block, block + grid, ..`
/// (below `total`) with a [`GroupCursor`] and, for each tile and K step,
/// acquires the ring's next slot ([`Producer::acquire`](kernel_device::pipeline::Producer::acquire): waits until it is
/// empty), writes the tile's location (`[group, row0, rows, col0]`) to
/// its [`TileSlots`] entry before the tile's first load, announces the
/// bytes of A's and B's tiles on the slot's barrier and issues their TMA
/// loads: A's rows of the tile (a group's last tile also reads the next
/// group's first rows: computed, never stored) and `B_g`'s tile from the
/// rank-3 map of `B` (`[k, n, g]`).
///
/// `b_slot` maps a slot to its B tile (the kernels' B buffers differ in
/// shape).
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
fn produce_grouped<At: TileLayout, Bt: TileLayout, const TKE: usize, const BM: usize, const BN: usize, const STAGES: usize>(
    a: &Tma<At>,
    b: &Tma<Bt, 3>,
    sizes: GmemRef<u32>,
    n_tiles: u32,
    total: u32,
    k_steps: u32,
    a_bufs: Smem<[At; STAGES]>,
    b_slot: impl Fn(usize) -> Smem<Bt>,
    ring: Ring<'_, STAGES>,
    tiles_at: Smem<[[u32; 4]; TILE_SLOTS]>,
) {
    if thread_in_warpgroup() == 0 {
        let mut cursor = GroupCursor::new(sizes, BM as u32, BN as u32, n_tiles);
        let mut producer = ring.producer();
        let mut entries = TileSlots::new();
        let mut t = block_idx().x;
        while t < total {
            let tile = cursor.locate(t);
            t += grid_dim().x;
            let entry = entries.next();
            for k in 0..k_steps {
                let slot = producer.acquire();
                if k == 0 {
                    tiles_at.write(entry, [tile.group, tile.row0, tile.rows, tile.col0]);
                }
                let bar = slot.barrier();
                bar.arrive_expect_tx(Tma::<At>::BYTES + Tma::<Bt, 3>::BYTES);
                a.load(a_bufs.at(slot.index()), tile.row0, k * TKE as u32, bar);
                b.load_at(b_slot(slot.index()), [k * TKE as u32, tile.col0, tile.group], bar);
            }
        }
    }
}

/// The entries of `tiles_at` (the tiles' locations the memory warpgroup
/// hands the compute warpgroups through SMEM), one per tile in the CTA's
/// tile order, reused every [`TILE_SLOTS`] tiles: each role walks them
/// with its own `TileSlots`.
///
/// Why an entry is free when it is written again: entry `e` was last read
/// by the compute warpgroups for the tile [`TILE_SLOTS`] tiles before this
/// one, before they released that tile's last slot; the slot the producer
/// acquires for this tile's first step is released only after that, as
/// long as `STAGES < TILE_SLOTS` (each tile has at least one K step):
/// [`TileSlots::check_stages`].
pub struct TileSlots {
    step: Step<TILE_SLOTS>,
}

/// Entries of `tiles_at`: more than the stages of any grouped kernel.
pub const TILE_SLOTS: usize = 8;

impl TileSlots {
    /// At the first tile.
    #[inline(always)]
    pub fn new() -> Self {
        TileSlots { step: Step::new(0) }
    }
    /// The next tile's entry.
    #[inline(always)]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> usize {
        let i = self.step.index();
        self.step = self.step.plus(1);
        i
    }
    /// Compile-time: a ring of `stages` slots leaves the entries free when
    /// they are rewritten (see the type's docs).
    pub const fn check_stages(stages: usize) {
        assert!(stages < TILE_SLOTS, "grouped GEMM: STAGES must be below TILE_SLOTS (the entries of `tiles_at`)");
    }
}

/// Writes one complete `BM x 64` output sub-tile of `tile` from `buf`
/// (first column `col`): a full tile by thread 0's TMA store (committed,
/// not waited for), a group's partial last tile by [`store_partial`] (all
/// 256 compute threads; nothing past `n`). Run by every compute thread
/// after the sub-tile's second barrier.
///
/// A partial sub-tile commits no bulk group, so the next sub-tile's
/// `wait_group_read::<1>()` (which counts on one group per sub-tile: "the
/// store two sub-tiles ago") would let the previous full sub-tile's store
/// still read the buffer the next one rewrites. Thread 0 therefore waits
/// here until every store so far has read its source. (Found by the
/// emulator's race detector once the epilogue's SMEM writes went through
/// `stmatrix`, which it sees: full tile, then a group's partial tile.)
#[inline(always)]
#[track_caller]
fn write_sub_tile<E: Copy, const BM: usize>(buf: Smem<EpiTile<E, BM>>, c: &Tma<EpiTile<E, BM>>, c_rows: Gmem<E>, tile: GroupTile, col: u32, n: u32) {
    if tile.rows == BM as u32 {
        if thread_linear() == 0 {
            c.store(buf, tile.row0, col);
            commit_group();
        }
    } else {
        if thread_linear() == 0 {
            wait_group_read::<0>();
        }
        if col < n {
            store_partial(buf, c_rows, tile, col, n);
        }
    }
}

/// `C_g = A_g · B_gᵀ` for every group `g` (elements `E`: f16 or bf16, f32
/// accumulation; the kernel is [`grouped_matmul`]), persistent and warp-specialized:
/// [`matmul_persistent_ws`](crate::matmul::matmul_persistent_ws)'s roles,
/// ring and overlapped epilogue over the tiles of all groups
/// ([`GroupCursor`]).
///
/// - Every thread first adds the group sizes: if they do not add up to
///   `m_total` (the rows of `A` and `C`), block 0 writes
///   [`STATUS_SIZES_MISMATCH`] to `status[0]` and the kernel does nothing;
///   else block 0 writes [`STATUS_OK`].
/// - The memory warpgroup loads `A`'s rows of the tile (a group's last
///   tile also reads the next group's first rows: computed, never stored)
///   and `B_g`'s tile from the rank-3 map of `B` (`[k, n, g]`).
/// - The memory warpgroup hands each tile's location to the compute
///   warpgroups through SMEM (`tiles_at`, one entry per ring slot, written
///   before the slot's first `arrive_expect_tx` and read after its wait):
///   the compute warpgroups keep no cursor in their registers.
/// - A full tile leaves through TMA stores of its `BM x 64` sub-tiles; a
///   group's partial last tile through stores of its own rows from the
///   same sub-tiles (`store_partial`): the next group's rows are never
///   written.
///
/// One instance, `128 x 128` tiles with 4 stages: at `128 x 256` the
/// compute warpgroups' 128 accumulator registers plus the grouped
/// epilogue's (the partial-tile path, the tile's location) exceed the 168
/// registers ptxas allocates for 384 threads, and it spills (measured:
/// 164 bytes at `128 x 256`, 80 at `256 x 128`).
///
/// Constraints: as the persistent matmul's (`BM`, `BN`, SMEM); `A` is
/// `m_total x K`, `B` `groups x N x K`, `C` `m_total x N` (`c` and
/// `c_rows` are the same memory), `sizes` holds `groups >= 1` sizes;
/// `K`, `N` multiples of 8 (TMA strides); `k_steps = ceil(K / 64)`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn grouped_matmul_of<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>, 3>,
    c: Tma<EpiTile<E, BM>>,
    c_rows: Gmem<E>,
    sizes: GmemRef<u32>,
    status: Gmem<u32>,
    m_total: u32,
    n: u32,
    k_steps: u32,
    a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    epi: Smem<[EpiTile<E, BM>; 2]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
    tiles_at: Smem<[[u32; 4]; TILE_SLOTS]>,
) where
    Cols<BN>: WgmmaShape,
{
    const { check_tile(BM, BN) };
    let n_tiles = n.div_ceil(BN as u32);
    let (sizes_ok, total) = group_totals(sizes, BM as u32, n_tiles, m_total);
    let first = block_idx().x == 0 && thread_linear() == 0;
    if !sizes_ok {
        if first {
            status.write(0, STATUS_SIZES_MISMATCH);
        }
        return;
    }
    if first {
        status.write(0, STATUS_OK);
    }
    const { TileSlots::check_stages(STAGES) };
    let ring = Ring::new(&loaded, &consumed, 256);
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<MEMORY_REGS>();
        produce_grouped::<ATile<E, BM>, BTile<E, BN>, TK, BM, BN, STAGES>(&a, &b, sizes, n_tiles, total, k_steps, a_bufs, |s| b_bufs.at(s), ring, tiles_at);
    } else {
        setmaxnreg_inc::<COMPUTE_REGS>();
        let row0 = warpgroup_idx_sync() as usize * BM / 2;
        let leader = thread_linear() == 0;
        let mut consumer = ring.consumer();
        let mut entries = TileSlots::new();
        let mut sub_tiles = 0u32;
        let mut t = block_idx().x;
        while t < total {
            t += grid_dim().x;
            let mut acc = WgAcc::<BM, BN>::undefined();
            consumer.mma_steps::<1>(k_steps, |k, slot| {
                acc.mma(a_bufs.at(slot.index()), row0, b_bufs.at(slot.index()), k > 0);
            });
            kernel_device::wgmma::wgmma_wait::<0>();
            // The tile's location, written before its first slot's phase
            // (waited on above); read here, so that no register holds it
            // through the main loop.
            let [_, t_row0, t_rows, t_col0] = tiles_at.read(entries.next());
            let tile = GroupTile { group: 0, row0: t_row0, rows: t_rows, col0: t_col0 };
            consumer.release();
            // Pairs: with `stmatrix` this kernel spilled 96 bytes.
            sub_tiles = acc.store_tile_with(epi, row0, sub_tiles, Stores::Pairs, |buf, j| write_sub_tile(buf, &c, c_rows, tile, tile.col0 + (j * EPI_N) as u32, n));
        }
        if leader {
            wait_group::<0>();
        }
    }
}

/// [`grouped_matmul_of`] on element type `E` (`A`, `B` and `C`: f16 or bf16).
#[kernel(block = warpgroups(3), arch = sm_90a, instances(E = [f16, bf16], (128, 128, 4), (128, 256, 4)))]
#[allow(clippy::too_many_arguments)]
pub fn grouped_matmul<E: GemmElem, const BM: usize, const BN: usize, const STAGES: usize>(
    a: Tma<ATile<E, BM>>,
    b: Tma<BTile<E, BN>, 3>,
    c: Tma<EpiTile<E, BM>>,
    c_rows: Gmem<E>,
    sizes: GmemRef<u32>,
    status: Gmem<u32>,
    m_total: u32,
    n: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile<E, BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<E, BN>; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<E, BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
    #[scratch] tiles_at: Smem<[[u32; 4]; TILE_SLOTS]>,
) where
    Cols<BN>: WgmmaShape,
{
    grouped_matmul_of::<E, BM, BN, STAGES>(a, b, c, c_rows, sizes, status, m_total, n, k_steps, a_bufs, b_bufs, epi, loaded, consumed, tiles_at)
}

/// [`grouped_matmul_fp8_blockscaled`]'s tile: the block-scaled GEMM's
/// `128 x 256` ([`crate::matmul_fp8::BS_BM`] x [`crate::matmul_fp8::BS_BN`]).
const GBS_BM: usize = crate::matmul_fp8::BS_BM;
const GBS_BN: usize = crate::matmul_fp8::BS_BN;
/// [`grouped_matmul_fp8_blockscaled`]'s registers per thread, each compute
/// warpgroup's and the memory warpgroup's (`setmaxnreg`; see
/// [`crate::matmul_fp8::BS_COMPUTE_REGS`] for the pool rule). Not the
/// block-scaled GEMM's 232/40: with the grouped scheduler and epilogue,
/// 240/24 ran 1-9 % faster on 14 of 16 benchmark problems on an H100
/// (RESULTS.md, 2026-11-27 fourth session).
pub const GBS_COMPUTE_REGS: u32 = 240;
/// See [`GBS_COMPUTE_REGS`].
pub const GBS_MEMORY_REGS: u32 = 24;
const _: () = assert!(
    kernel_device::wgmma::counts_fit(&[GBS_COMPUTE_REGS, GBS_COMPUTE_REGS, GBS_MEMORY_REGS]),
    "setmaxnreg: the roles' counts must sum to at most the CTA's register pool (3 x 168 at 384 threads)"
);

/// Grouped block-scaled FP8 GEMM for mixture-of-experts layers: for every
/// group `g`, `C_g = A_g · B_gᵀ` with DeepSeek-V3's block scales, the rows
/// of `A` and `C` grouped by expert as in [`grouped_matmul_of`] (`M = Σ
/// M_g`, sizes on the device). `A` is `M x K` e4m3 with `a_scales`
/// `ceil(K / 128) x M` f32 (one per row and 128 of K, K-block-major, as
/// [`crate::matmul_fp8::matmul_fp8_blockscaled`] reads them); `B` is `G x
/// N x K` e4m3 with `b_scales` `G x ceil(N / 128) x ceil(K / 128)` f32
/// (one per 128 x 128 block of each expert's weight); `C` is `M x N` f16.
///
/// This kernel works as follows:
/// 1. the group sizes, the status word and the tiles of all groups as
///    [`grouped_matmul_of`]'s (`128 x 256` tiles, K steps of 128: one scale
///    block of A and two of B per tile and step), but each role adds the
///    sizes after its own `setmaxnreg` and the memory warpgroup writes the
///    status;
/// 2. the memory warpgroup as [`grouped_matmul_of`]'s (`produce_grouped`),
///    on [`GBS_MEMORY_REGS`] registers;
/// 3. the compute warpgroups run the block-scaled GEMM's K loop
///    (`blockscaled_k_loop!`: two column halves per step, each promoted
///    into the f32 total with its scales while the other warpgroup's MMAs
///    run). They learn a tile's group and rows from `tiles_at` once its
///    first slot has landed (the producer wrote them before announcing
///    it), then load the first step's scales: one stall per tile on the
///    scales' latency, where the ungrouped kernel computes its tile's
///    coordinates itself;
/// 4. the output leaves through `gemm_multi::store_out_with`: a full tile
///    by TMA stores of its `128 x 64` sub-tiles, a group's partial last
///    tile by stores of its own rows (`store_partial`), never over the
///    next group's rows.
///
/// Rows past a group's end (the next group's, or past `M`) read their own
/// row's scales, clamped to `M - 1`: their results are never stored.
///
/// Constraints: `K % 16 == 0`, `N % 8 == 0` (TMA rows of 16-byte
/// multiples); `k_steps = ceil(K / 128)`; SMEM `STAGES x 48 KB + 32 KB`
/// (4 stages); registers [`GBS_COMPUTE_REGS`] / [`GBS_MEMORY_REGS`]
/// (240/240/24).
#[kernel(
    block = warpgroups(3),
    arch = sm_90a,
    instances((4)),
    allow_spills = "the memory warpgroup's counters on its 24 registers and the compute warpgroups' tile coordinates, reloaded per K step / per tile, none in the compute K loop (24 bytes; KNOWN_SPILLS in kernel-ops/tests/ptx.rs)"
)]
#[allow(clippy::too_many_arguments)]
pub fn grouped_matmul_fp8_blockscaled<const STAGES: usize>(
    a: Tma<crate::matmul_fp8::A8TileOf<GBS_BM>>,
    b: Tma<crate::matmul_fp8::B8TileOf<GBS_BN>, 3>,
    c: Tma<EpiTile<f16, GBS_BM>>,
    c_rows: Gmem<f16>,
    a_scales: GmemRef<f32>,
    b_scales: GmemRef<f32>,
    sizes: GmemRef<u32>,
    status: Gmem<u32>,
    m_total: u32,
    n: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[crate::matmul_fp8::A8TileOf<GBS_BM>; STAGES]>,
    #[scratch] b_bufs: Smem<[[crate::matmul_fp8::B8TileOf<GBS_BN>; 1]; STAGES]>,
    #[scratch] epi: Smem<[EpiTile<f16, GBS_BM>; 2]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
    #[scratch] tiles_at: Smem<[[u32; 4]; TILE_SLOTS]>,
) {
    use crate::matmul_fp8::{blockscaled_k_loop, A8TileOf, B8TileOf, SCALE_BLOCK, TK8};
    const BM: usize = GBS_BM;
    const BN: usize = GBS_BN;
    let n_tiles = n.div_ceil(BN as u32);
    const { TileSlots::check_stages(STAGES) };
    let ring = Ring::new(&loaded, &consumed, 256);
    // Nothing before the role split but the split itself: with the sizes'
    // loop and the status store here (as `grouped_matmul_of` has them),
    // ptxas allocated the compute warpgroups' code within the launch's 168
    // registers instead of the ones `setmaxnreg` gives them, and spilled
    // 800 bytes.
    if warpgroup_idx() == 2 {
        setmaxnreg_dec::<GBS_MEMORY_REGS>();
        let (sizes_ok, total) = group_totals(sizes, BM as u32, n_tiles, m_total);
        if block_idx().x == 0 && thread_in_warpgroup() == 0 {
            status.write(0, if sizes_ok { STATUS_OK } else { STATUS_SIZES_MISMATCH });
        }
        if sizes_ok {
            produce_grouped::<A8TileOf<BM>, B8TileOf<BN>, TK8, BM, BN, STAGES>(&a, &b, sizes, n_tiles, total, k_steps, a_bufs, |s| b_bufs.at(s).at(0), ring, tiles_at);
        }
        return;
    }
    setmaxnreg_inc::<GBS_COMPUTE_REGS>();
    kernel_device::wgmma::pin_entry_registers();
    let (sizes_ok, total) = group_totals(sizes, BM as u32, n_tiles, m_total);
    if !sizes_ok {
        return;
    }
    let row0 = warpgroup_idx_sync() as usize * 64;
    let t = thread_in_warpgroup() as usize;
    // This thread's rows in the tile: `r` and `r + 8` (the WGMMA fragment
    // layout).
    let r = (row0 + 16 * (t / 32) + (t % 32) / 4) as u32;
    let n_blocks = n.div_ceil(SCALE_BLOCK as u32);
    let mut consumer = ring.consumer();
    let mut entries = TileSlots::new();
    let mut sub_tiles = 0u32;
    let mut tile_idx = block_idx().x;
    while tile_idx < total {
        tile_idx += grid_dim().x;
        // The tile's location: written before its first slot was announced
        // (the K loop's first wait then returns at once).
        let _ = consumer.peek();
        let entry = entries.next();
        let [group, t_row0, _, t_col0] = tiles_at.read(entry);
        let rows = [(t_row0 + r).min(m_total - 1), (t_row0 + r + 8).min(m_total - 1)];
        // The tile's two B scale blocks along N, of group `group`; a second
        // block past N (zero-filled columns) reads the last one.
        let pn = t_col0 / BN as u32;
        let blk = group * n_blocks;
        let nblk = [blk + 2 * pn, blk + (2 * pn + 1).min(n_blocks - 1)];
        // SAFETY: the host checked `a_scales` holds `k_steps x M` and
        // `b_scales` `G x n_blocks x k_steps` (rows < M, `group < G`, `nblk <
        // (group + 1) n_blocks`; the K loop asks for `k < k_steps`).
        let scales = |k: u32| unsafe { crate::matmul_fp8::step_scales(a_scales, b_scales, m_total, rows, nblk, k_steps, k) };
        let acc = blockscaled_k_loop!(a_bufs, b_bufs, consumer, k_steps, row0, scales);
        // Read again rather than kept through the K loop (registers): the
        // entry is rewritten only after a slot of a later tile is released.
        let [_, t_row0, t_rows, t_col0] = tiles_at.read(entry);
        let tile = GroupTile { group: 0, row0: t_row0, rows: t_rows, col0: t_col0 };
        let out = [acc.into_array(), crate::gemm_multi::AccBlock::<BN>::splat(0.0)];
        sub_tiles = crate::gemm_multi::store_out_with::<BM, BN>(&out, epi, (t_row0 as usize, t_col0 as usize), row0, sub_tiles, |_, cols| cols, |buf, j| {
            write_sub_tile(buf, &c, c_rows, tile, tile.col0 + (j * EPI_N) as u32, n)
        });
    }
    if thread_linear() == 0 {
        wait_group::<0>();
    }
}
