//! Blackwell (sm_100a) kernels: the Blackwell matmul tutorial's steps 0-2
//! with tensor memory and `tcgen05.mma` ([`matmul0`], [`matmul1`],
//! [`matmul2`]).
//!
//! All three compute `C = A · B` with `A` (`M x K`), `B` (`K x N`, row-major,
//! read MN-major by the tensor core as in the tutorial) and `C` (`M x N`), f16
//! in, f32 accumulated in TMEM, f16 out. Configuration is compile-time:
//! `TN` (tile N: 128 or 256) and `STAGES` (pipeline depth) are instance
//! parameters; tile M is [`TILE_M`] (128: one TMEM lane per row), tile K is
//! [`TILE_K`] (64: one 128-byte swizzled row of f16), the epilogue tile of
//! `matmul2` is [`EPI_N`] columns.
//!
//! None of these kernels has run on a Blackwell GPU (none is available to
//! this project): they are verified by ptxas 13.0 for sm_100a and by the CPU
//! emulator's TMEM and tensor-core model.
use kernel_device::pipeline::{emit_pipeline, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, tcgen05_mma_kn, TcBarrier, TcBarriers};
use kernel_device::tma::{commit_group, wait_group_read};
use kernel_device::tmem::{store_row_f16, wait_load_tmem, Tmem};
use kernel_device::{f16, Barriers};

/// 128-byte swizzle, tiling (8, 64) for f16: `plgpu.find_swizzle(64 * 16)`.
pub type Sw = Swizzled<128>;
/// Tile M: 128 (the accumulator spans all 128 TMEM lanes).
pub const TILE_M: usize = 128;
/// Tile K: 64 f16 = one 128-byte swizzled row.
pub const TILE_K: usize = 64;
/// Columns of `matmul2`'s epilogue tile (one 128-byte column block).
pub const EPI_N: usize = 64;
/// A tile: `TILE_M x TILE_K`, K-major.
pub type ATile = Tile<f16, TILE_M, TILE_K, Sw>;
/// B tile: `TILE_K x TN` of the row-major `K x N` B (MN-major for the MMA).
pub type BTile<const TN: usize> = Tile<f16, TILE_K, TN, Sw>;
/// Output tile of `matmul0`/`matmul1`: `TILE_M x TN`.
pub type OTile<const TN: usize> = Tile<f16, TILE_M, TN, Sw>;
/// Output tile of `matmul2`'s epilogue: `TILE_M x EPI_N`.
pub type ETile = Tile<f16, TILE_M, EPI_N, Sw>;

/// This thread's accumulator row in a 128-thread warpgroup: TMEM lane
/// quarter of its warp plus its lane.
#[inline(always)]
fn my_row() -> usize {
    (32 * (warp_idx() % 4) + lane_id()) as usize
}

/// Every thread of the warpgroup copies its accumulator row, columns
/// `col0 .. col0 + W`, from TMEM (32 columns per `tcgen05.ld`) into the
/// swizzled SMEM tile `dst` at column `dst_col0`, as f16.
#[inline(always)]
#[track_caller]
fn acc_to_smem<const TN: usize, const W: usize, const R: usize, const C: usize>(
    acc: &Tmem<f32, TILE_M, TN>,
    col0: usize,
    dst: Smem<Tile<f16, R, C, Sw>>,
    dst_col0: usize,
) {
    let row = my_row();
    let mut c = 0;
    while c < W {
        let v = acc.load_f32::<32>(col0 + c);
        store_row_f16(&v, dst, row, dst_col0 + c);
        c += 32;
    }
}

/// Step 0 of the tutorial: a basic kernel, `emit_pipeline` + tcgen05.
///
/// This kernel works as follows:
/// 1. CTA `(i, j)` owns output tile `(i, j)` (`128 x TN`), accumulated in
///    `acc`, a `128 x TN` f32 TMEM tile (`#[kernel]` allocates it);
/// 2. `emit_pipeline` walks K in steps of 64 with `STAGES` SMEM slots
///    (thread 0 issues the TMA loads); at step `ki` thread 0 issues the
///    step's MMAs (4 x `tcgen05.mma` K = 16, B MN-major) and commits them to
///    `consumed[ki % 2]`; then every thread waits on `consumed[1 - ki % 2]`,
///    i.e. for the *previous* step's MMAs, which is why the pipeline runs
///    with `delay_release = 1` (a slot is refilled only once the MMAs that
///    read it completed); `consumed[1]` is primed with one arrival so the
///    first wait succeeds;
/// 3. after the last step every thread waits for the final MMAs, loads its
///    row of the accumulator from TMEM (`tcgen05.ld` 32x32b, its warp's lane
///    quarter), converts it to f16 into the swizzled SMEM tile, and thread 0
///    TMA-stores the tile.
///
/// Constraints: `M % 128 == 0`, `N % TN == 0`, `K % 64 == 0`, `K >= 64`;
/// grid `(M / 128, N / TN)`; `k_steps = K / 64`; `STAGES >= 2`.
#[kernel(block = warpgroups(1), arch = sm_100a, instances((128, 4), (256, 2)))]
pub fn matmul0<const TN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<OTile<TN>>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile<TN>; STAGES]>,
    #[scratch] c_smem: Smem<OTile<TN>>,
    #[scratch] acc: Tmem<f32, TILE_M, TN>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch] consumed: TcBarriers<2>,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
    let leader = thread_linear() == 0;
    // Make sure the wait of step 0 succeeds.
    if leader {
        consumed.at(1).arrive();
    }
    emit_pipeline(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (pm, k)), BlockSpec::new(b, b_bufs, |k| (k, pn))),
        &loaded,
        1,
        |ki, (a_tile, b_tile)| {
            let arrive_slot = (ki % 2) as usize;
            if leader {
                tcgen05_mma_kn(&acc, a_tile, b_tile, ki > 0);
                tcgen05_commit_arrive(consumed.at(arrive_slot));
            }
            consumed.at(1 - arrive_slot).wait();
        },
    );
    consumed.at(((k_steps - 1) % 2) as usize).wait();
    acc_to_smem::<TN, TN, TILE_M, TN>(&acc, 0, c_smem, 0);
    wait_load_tmem();
    commit_smem();
    sync_threads();
    if leader {
        c.store(c_smem, pm * TILE_M as u32, pn * TN as u32);
        commit_group();
        wait_group_read::<0>();
    }
}

/// Step 1 of the tutorial: warp specialization inside one warpgroup.
///
/// This kernel works as follows:
/// 1. warp 0 (the TMA warp; one lane, `elect_one`) loads A's and B's tiles
///    of step `ki` into slot `ki % STAGES`, completing on `loaded[slot]`;
///    from step `STAGES` on it first waits on `consumed[slot]` (the MMAs
///    that read the slot completed);
/// 2. warp 1 (the MMA warp; one lane) waits on `loaded[slot]`, issues the
///    step's MMAs and commits them to `consumed[slot]`; after the last step
///    it commits to `mma_done`;
/// 3. warps 2 and 3 have no role; all four warps then wait on `mma_done`
///    and run the epilogue of [`matmul0`].
///
/// Constraints: as [`matmul0`].
#[kernel(block = warpgroups(1), arch = sm_100a, instances((128, 4), (256, 3)))]
pub fn matmul1<const TN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<OTile<TN>>,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] c_smem: Smem<OTile<TN>>,
    #[scratch] acc: Tmem<f32, TILE_M, TN>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch] consumed: TcBarriers<STAGES>,
    #[scratch] mma_done: TcBarrier,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    if ki >= STAGES as u32 {
                        consumed.at(slot).wait();
                    }
                    let bar = loaded.at(slot);
                    bar.arrive_expect_tx(Tma::<ATile>::BYTES + Tma::<BTile<TN>>::BYTES);
                    a.load(a_smem.at(slot), pm * TILE_M as u32, ki * TILE_K as u32, bar);
                    b.load(b_smem.at(slot), ki * TILE_K as u32, pn * TN as u32, bar);
                }
            }
        }
        1 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    loaded.at(slot).wait();
                    tcgen05_mma_kn(&acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                    tcgen05_commit_arrive(consumed.at(slot));
                }
                tcgen05_commit_arrive(mma_done.as_ref());
            }
        }
        _ => {}
    }
    mma_done.wait();
    acc_to_smem::<TN, TN, TILE_M, TN>(&acc, 0, c_smem, 0);
    wait_load_tmem();
    commit_smem();
    sync_threads();
    if thread_linear() == 0 {
        c.store(c_smem, pm * TILE_M as u32, pn * TN as u32);
        commit_group();
        wait_group_read::<0>();
    }
}

/// Step 2 of the tutorial: the tiled epilogue.
///
/// This kernel works as follows: the TMA and MMA warps run as in
/// [`matmul1`]; the epilogue walks the output tile in `128 x EPI_N`
/// column chunks through two SMEM buffers: for chunk `ni`, thread 0 waits
/// until at most one TMA store still reads SMEM (so buffer `ni % 2` is
/// free), the warpgroup syncs, copies the chunk's accumulator columns from
/// TMEM into buffer `ni % 2` as f16, fences it (`commit_smem`) and syncs,
/// and thread 0 TMA-stores it, overlapping the next chunk's TMEM load with
/// this chunk's store.
///
/// Constraints: as [`matmul0`], and `TN % EPI_N == 0`.
#[kernel(block = warpgroups(1), arch = sm_100a, instances((128, 4), (256, 4)))]
pub fn matmul2<const TN: usize, const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile<TN>>,
    c: Tma<ETile>,
    k_steps: u32,
    #[scratch] a_smem: Smem<[ATile; STAGES]>,
    #[scratch] b_smem: Smem<[BTile<TN>; STAGES]>,
    #[scratch] acc_smem: Smem<[ETile; 2]>,
    #[scratch] acc: Tmem<f32, TILE_M, TN>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch] consumed: TcBarriers<STAGES>,
    #[scratch] mma_done: TcBarrier,
) {
    const { assert!(TN % EPI_N == 0, "matmul2: TN must be a multiple of the epilogue tile EPI_N") };
    let (pm, pn) = (block_idx().x, block_idx().y);
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    if ki >= STAGES as u32 {
                        consumed.at(slot).wait();
                    }
                    let bar = loaded.at(slot);
                    bar.arrive_expect_tx(Tma::<ATile>::BYTES + Tma::<BTile<TN>>::BYTES);
                    a.load(a_smem.at(slot), pm * TILE_M as u32, ki * TILE_K as u32, bar);
                    b.load(b_smem.at(slot), ki * TILE_K as u32, pn * TN as u32, bar);
                }
            }
        }
        1 => {
            if elect_one() {
                for ki in 0..k_steps {
                    let slot = (ki % STAGES as u32) as usize;
                    loaded.at(slot).wait();
                    tcgen05_mma_kn(&acc, a_smem.at(slot), b_smem.at(slot), ki > 0);
                    tcgen05_commit_arrive(consumed.at(slot));
                }
                tcgen05_commit_arrive(mma_done.as_ref());
            }
        }
        _ => {}
    }
    mma_done.wait();
    let leader = thread_linear() == 0;
    for ni in 0..TN / EPI_N {
        let buf = acc_smem.at(ni % 2);
        if leader {
            // The store that read this buffer two chunks ago is done reading.
            wait_group_read::<1>();
        }
        sync_threads();
        acc_to_smem::<TN, EPI_N, TILE_M, EPI_N>(&acc, ni * EPI_N, buf, 0);
        commit_smem();
        sync_threads();
        if leader {
            c.store(buf, pm * TILE_M as u32, pn * TN as u32 + (ni * EPI_N) as u32);
            commit_group();
        }
    }
    wait_load_tmem();
    if leader {
        wait_group_read::<0>();
    }
}

// The tutorial's steps 3-6 and the dynamically scheduled variant, one file
// each (collective 2-CTA MMA, persistent, dedicated epilogue, grid tiling,
// cluster launch control).
pub mod matmul3;
pub mod matmul4;
pub mod matmul5;
pub mod matmul6;
pub mod matmul_dynamic;
pub mod planted_collective;
