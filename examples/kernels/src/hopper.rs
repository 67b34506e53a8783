//! Hopper (sm_90a) kernels: TMA, wgmma, pipelines — the pipelining guide's
//! matmuls and the reference's TMA multicast example.
use kernel_device::pipeline::{emit_pipeline, emit_pipeline_warp_specialized, BlockSpec};
use kernel_device::prelude::*;
use kernel_device::tma::{commit_group, wait_group, wait_group_read};
use kernel_device::array::{AccTile, Epilogue, TileAt};
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait, Acc};
use kernel_device::{f16, Barriers};

/// The swizzle of every matmul tile: 128 bytes, tiling (8, 64) for f16.
pub type Sw = Swizzled<128>;
/// Output tile rows/cols per CTA and the K step.
pub const TILE_M: usize = 128;
pub const TILE_N: usize = 128;
pub const TILE_K: usize = 64;
/// A tile: `TILE_M x TILE_K` of `A (M x K, row-major)`.
pub type ATile = Tile<f16, TILE_M, TILE_K, Sw>;
/// B tile: `TILE_N x TILE_K` of `B (N x K, row-major)`: K-major, so `C = A · Bᵀ`.
pub type BTile = Tile<f16, TILE_N, TILE_K, Sw>;
/// Output tile `TILE_M x TILE_N` (two 64-column blocks of 128 B rows).
pub type OTile = Tile<f16, TILE_M, TILE_N, Sw>;

/// `C = A · Bᵀ` (f16 in, f32 accumulate, f16 out) with wgmma and
/// `emit_pipeline` — the pipelining guide's first Hopper matmul.
///
/// This kernel works as follows:
/// 1. CTA `(i, j)` owns the `128 x 128` output tile `(i, j)`; one warpgroup
///    holds it as two `64 x 128` f32 accumulators (128 registers/thread);
/// 2. `emit_pipeline` walks K in steps of 64 with `STAGES` SMEM slots: one
///    thread issues the TMA loads of A's and B's tiles for a step (128B
///    swizzle, completing on the slot's mbarrier); the warpgroup waits, issues
///    8 wgmmas (2 row blocks x 4 k16 steps), commits, and waits for the
///    previous step's group (`wgmma_wait::<1>`), which is why the pipeline
///    runs with `delay_release = 1`;
/// 3. the accumulators are converted to f16 into a swizzled SMEM tile,
///    fenced for the async proxy (`commit_smem`), and one thread TMA-stores it.
///
/// Constraints: `M % 128 == 0`, `N % 128 == 0`, `K % 64 == 0`; grid
/// `(M / 128, N / 128)`; `k_steps = K / 64 >= 1`; `STAGES` >= 2.
#[kernel(block = warpgroups(1), arch = sm_90a, instances((2), (4)))]
pub fn matmul_pipelined<const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTile>,
    c: Tma<OTile>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; STAGES]>,
    #[scratch] b_bufs: Smem<[BTile; STAGES]>,
    #[scratch] c_smem: Smem<OTile>,
    #[scratch] loaded: Barriers<STAGES>,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
    // Overwritten by the first step's MMAs (`accumulate = step > 0`).
    let mut acc = [Acc::<TILE_N>::undefined(), Acc::<TILE_N>::undefined()];
    emit_pipeline(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (pm, k)), BlockSpec::new(b, b_bufs, |k| (pn, k))),
        &loaded,
        1,
        |step, (a_tile, b_tile)| {
            acc[0].mma(a_tile, 0, b_tile, 0, step > 0);
            acc[1].mma(a_tile, 64, b_tile, 0, step > 0);
            wgmma_commit_group();
            wgmma_wait::<1>();
        },
    );
    store_c_tile(&mut acc, c_smem, c, pm, pn);
}

/// Epilogue of the one-warpgroup matmuls: waits for the last MMAs, writes
/// the two `64 x 128` accumulators to the swizzled SMEM tile as f16, fences
/// it for the async proxy, and one thread TMA-stores it to output tile
/// `(pm, pn)`.
#[inline(always)]
fn store_c_tile(acc: &mut [Acc<TILE_N>; 2], c_smem: Smem<OTile>, c: Tma<OTile>, pm: u32, pn: u32) {
    wgmma_wait::<0>();
    acc[0].store_f16(c_smem, 0, 0);
    acc[1].store_f16(c_smem, 64, 0);
    commit_smem();
    sync_threads();
    if thread_linear() == 0 {
        c.store(c_smem, pm * TILE_M as u32, pn * TILE_N as u32);
        commit_group();
        wait_group::<0>();
    }
}

/// Rows of [`multicast_copy`]'s tile; each CTA of the cluster loads half.
pub const MC_ROWS: usize = 16;
/// Columns of [`multicast_copy`]'s tile.
pub const MC_COLS: usize = 32;
/// The whole tile each CTA receives.
pub type McTile = Tile<f32, MC_ROWS, MC_COLS, Sw>;
/// The half each CTA issues (multicast to both).
pub type McHalf = Tile<f32, { MC_ROWS / 2 }, MC_COLS, Sw>;

/// A cluster of 2 CTAs loads the same `16 x 32` f32 tile collectively with
/// TMA multicast, and each writes it out (the reference's cluster example).
///
/// This kernel works as follows:
/// 1. thread 0 of CTA `r` announces the whole tile's bytes on its barrier,
///    then issues a multicast copy of rows `8r .. 8r + 8` to both CTAs (mask
///    `0b11`): each CTA's tile is filled half by its own copy, half by its
///    peer's;
/// 2. every thread waits on the barrier;
/// 3. thread 0 TMA-stores the tile to rows `16r .. 16r + 16` of `y` and
///    waits only until the store has read the SMEM.
///
/// So `y = [x; x]`. Constraints: grid = (2, 1, 1); `x` is `16 x 32`, `y`
/// `32 x 32`, f32 row-major.
#[kernel(block = warpgroups(1), cluster = 2)]
pub fn multicast_copy(x: Tma<McHalf>, y: Tma<McTile>, #[scratch] tile: Smem<McTile>, #[scratch] full: Barrier) {
    let r = cluster_ctarank();
    if thread_linear() == 0 {
        full.arrive_expect_tx(Tma::<McTile>::BYTES);
        // SAFETY: half r of the tile: 8 rows x 128 B = 1024 B, pattern-aligned.
        let half: Smem<McHalf> = unsafe { tile.cast_at(r as usize * <McHalf as TileLayout>::BYTES) };
        x.load_multicast(half, r * (MC_ROWS / 2) as u32, 0, full.as_ref(), 0b11);
    }
    full.wait();
    if thread_linear() == 0 {
        y.store(tile, r * MC_ROWS as u32, 0);
        commit_group();
        // Only the SMEM reads must finish before the CTA exits (Pallas's
        // `wait_smem_to_gmem(0, wait_read_only=True)`); the global writes
        // complete on their own before the kernel is done.
        wait_group_read::<0>();
    }
}

/// B tile of the warp-specialized matmul: `2 * TILE_N` rows (one half per
/// compute warpgroup) x `TILE_K`.
pub type BTileWs = Tile<f16, { 2 * TILE_N }, TILE_K, Sw>;
/// Output tile of the warp-specialized matmul: `TILE_M x 2 * TILE_N`.
pub type OTileWs = Tile<f16, TILE_M, { 2 * TILE_N }, Sw>;
/// Compute warpgroups of [`matmul_warp_specialized`].
pub const WS_COMPUTE_WGS: u32 = 2;
/// The memory warpgroup's index in [`matmul_warp_specialized`]: the last
/// one, after the compute warpgroups `0..WS_COMPUTE_WGS`.
pub const WS_MEMORY_WG: u32 = WS_COMPUTE_WGS;

/// The output tile `(pm, pn)` CTA `pid` computes, with grouped ("swizzled")
/// rasterization: CTAs run `group_m` tile rows at a time down each tile
/// column, so concurrently running CTAs share A and B tiles in L2.
/// `group_m = 0` walks M fastest over the whole M extent.
#[inline(always)]
pub fn tile_of(pid: u32, m_tiles: u32, n_tiles: u32, group_m: u32) -> (u32, u32) {
    if group_m == 0 {
        return (pid % m_tiles, pid / m_tiles);
    }
    let per_group = group_m * n_tiles;
    let first_m = (pid / per_group) * group_m;
    let rows = if m_tiles - first_m < group_m { m_tiles - first_m } else { group_m };
    (first_m + pid % rows, (pid % per_group) / rows)
}

/// `C = A · Bᵀ` with warp specialization — the pipelining guide's second
/// matmul: 2 compute warpgroups and 1 memory warpgroup.
///
/// This kernel works as follows:
/// 1. CTA `pid` (a 1-D grid) owns the `128 x 256` output tile
///    [`tile_of`]`(pid, ..)`; compute warpgroup `w` (0 or 1) computes its
///    columns `128 w .. 128 w + 128` with two `64 x 128` accumulators,
///    sharing A's tile;
/// 2. warpgroup 2 (memory, 40 registers) issues the TMA loads of A
///    (`128 x 64`) and B (`256 x 64`) for each K step into `STAGES` slots,
///    waiting on `consumed` before reusing a slot;
/// 3. the compute warpgroups (232 registers) wait on `loaded`, issue 8
///    wgmmas, keep one group in flight (`wgmma_wait::<1>`), and release the
///    previous step's slot (`delay_release = 1`);
/// 4. once both compute warpgroups are done (a named barrier), each writes
///    its half of the output tile into SMEM that aliases the stage buffers
///    (free by then: every load landed, every MMA completed), they meet again,
///    and one thread TMA-stores the tile.
///
/// Constraints: `M % 128 == 0`, `N % 256 == 0`, `K % 64 == 0`, `K >= 64`;
/// grid `(M / 128) * (N / 256)`; `m_tiles = M / 128`; `k_steps = K / 64`.
#[kernel(block = warpgroups(3), arch = sm_90a, instances((2, 0), (3, 0), (4, 0), (4, 8), (4, 16)))]
pub fn matmul_warp_specialized<const STAGES: usize, const GROUP_M: u32>(
    a: Tma<ATile>,
    b: Tma<BTileWs>,
    c: Tma<OTileWs>,
    m_tiles: u32,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileWs; STAGES]>,
    #[scratch] loaded: Barriers<STAGES>,
    #[scratch(arrivals = 256)] consumed: Barriers<STAGES>,
) {
    let epilogue = |_: &mut WsTile| {};
    matmul_warp_specialized_with::<STAGES, GROUP_M>(a, b, c, m_tiles, k_steps, a_bufs, b_bufs, loaded, consumed, epilogue);
}

/// The output tile a compute warpgroup of [`matmul_warp_specialized`]
/// hands to its epilogue: two `64 x 128` f32 row blocks in the WGMMA
/// layout, with their global coordinates.
pub type WsTile = AccTile<TILE_N, 2>;

/// The body of [`matmul_warp_specialized`] with a fused epilogue: `epilogue`
/// runs in each compute warpgroup on its `128 x 128` f32 output tile (in
/// registers, after the last MMA) before the tile is converted to f16 and
/// stored; a [`Prefetch`](kernel_device::array::Prefetch) epilogue also
/// runs a first part before the mainloop (to load a bias early). A kernel with an epilogue is `matmul_warp_specialized`'s
/// signature plus its own parameters, calling this (see
/// `crate::fused::matmul_bias_relu`); the mainloop is not copied.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_warp_specialized_with<const STAGES: usize, const GROUP_M: u32>(
    a: Tma<ATile>,
    b: Tma<BTileWs>,
    c: Tma<OTileWs>,
    m_tiles: u32,
    k_steps: u32,
    a_bufs: Smem<[ATile; STAGES]>,
    b_bufs: Smem<[BTileWs; STAGES]>,
    loaded: Barriers<STAGES>,
    consumed: Barriers<STAGES>,
    epilogue: impl Epilogue<TILE_N, 2>,
) {
    let n_tiles = grid_dim().x / m_tiles;
    let (pm, pn) = tile_of(block_idx().x, m_tiles, n_tiles, GROUP_M);
    let wg = warpgroup_idx();
    emit_pipeline_warp_specialized::<STAGES, 40, 232, _>(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (pm, k)), BlockSpec::new(b, b_bufs, |k| (pn, k))),
        &loaded,
        &consumed,
        WS_MEMORY_WG,
        1,
        |pipeline| {
            let b_row = wg as usize * TILE_N;
            let at = TileAt { row: pm as usize * TILE_M, col: (pn as usize * 2 + wg as usize) * TILE_N };
            let epilogue = epilogue.prepare(at);
            let acc = [Acc::<TILE_N>::undefined(), Acc::<TILE_N>::undefined()];
            let acc = pipeline.run(acc, |step, (a_tile, b_tile), mut acc| {
                acc[0].mma(a_tile, 0, b_tile, b_row, step > 0);
                acc[1].mma(a_tile, 64, b_tile, b_row, step > 0);
                wgmma_commit_group();
                wgmma_wait::<1>();
                acc
            });
            wgmma_wait::<0>();
            let [acc0, acc1] = acc;
            let mut tile = WsTile { blocks: [acc0.into_array(), acc1.into_array()], row: at.row, col: at.col };
            epilogue(&mut tile);
            // The two compute warpgroups (256 threads; not the memory one).
            let compute = NamedBarrier::new(1, 256);
            // Both warpgroups' MMAs are done before the stage SMEM is reused.
            compute.sync();
            // SAFETY: the A and B stage buffers are consecutive in the scratch
            // layout (checked), at least 64 KB together, 1024-byte aligned,
            // and no longer read or written (see step 4).
            assert!(b_bufs.smem_addr() as usize == a_bufs.smem_addr() as usize + STAGES * <ATile as TileLayout>::BYTES);
            let c_smem: Smem<OTileWs> = unsafe { a_bufs.cast_at(0) };
            tile.blocks[0].store_tile(c_smem, 0, b_row);
            tile.blocks[1].store_tile(c_smem, 64, b_row);
            commit_smem();
            compute.sync();
            if thread_linear() == 0 {
                c.store(c_smem, pm * TILE_M as u32, pn * 2 * TILE_N as u32);
                commit_group();
                wait_group::<0>();
            }
        },
    );
}

/// A operand of [`wgmma_variants`]: `64 x 64`.
pub type VarA = Tile<f16, 64, 64, Sw>;
/// B operand of [`wgmma_variants`]: `128 x 64` (N = 128), one matrix of a batch.
pub type VarB = Tile<f16, 128, 64, Sw>;
/// Outputs of [`wgmma_variants`], each `64 x 128` f16 row-major.
pub const VARIANTS: usize = 4;

/// One `64 x 128 x 64` product four ways, to check the wgmma forms against
/// each other and a CPU reference:
/// 0. f32 accumulator, A and B from SMEM;
/// 1. f16 accumulator (`.f16.f16.f16`), A and B from SMEM;
/// 2. f32 accumulator, A from registers (fragments loaded from SMEM);
/// 3. four `m64n32k16` column blocks (N = 32, B from its rows `32 q ..`).
///
/// This kernel works as follows: thread 0 loads A (a 2-D map) and matrix
/// `batch` of a batch of B matrices (a 3-D map, `load_at`) on one barrier;
/// the warpgroup runs each variant (issue, commit, wait 0) and writes it to
/// `out[v]` (`64 x 128` f16, row-major).
///
/// Constraints: grid 1; `a` is `64 x 64`; `b` is `batches x 128 x 64`;
/// `out` holds `4 x 64 x 128` f16.
#[kernel(block = warpgroups(1), arch = sm_90a)]
pub fn wgmma_variants(
    a: Tma<VarA>,
    b: Tma<VarB, 3>,
    batch: u32,
    out: Gmem<f16>,
    #[scratch] a_s: Smem<VarA>,
    #[scratch] b_s: Smem<VarB>,
    #[scratch] full: Barrier,
) {
    use kernel_device::wgmma::{load_a_fragment, AccF16};
    if thread_linear() == 0 {
        full.arrive_expect_tx(Tma::<VarA>::BYTES + Tma::<VarB, 3>::BYTES);
        a.load(a_s, 0, 0, full.as_ref());
        b.load_at(b_s, [0, 0, batch], full.as_ref());
    }
    full.wait();
    // Elements (row, col) and (row, col + 1) of variant v, from one f16x2
    // word (low half first).
    let put = |v: usize, row: usize, col: usize, word: u32| {
        let i = v * 64 * 128 + row * 128 + col;
        out.write(i, f16::from_bits(word as u16));
        out.write(i + 1, f16::from_bits((word >> 16) as u16));
    };

    let mut acc = Acc::<128>::undefined();
    acc.mma(a_s, 0, b_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    acc.for_each_pair(|r, c, v0, v1| put(0, r, c, kernel_device::wgmma::pack_f16x2(v0, v1)));

    let mut acc16 = AccF16::<128>::undefined();
    acc16.mma(a_s, 0, b_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    acc16.for_each_pair(|r, c, packed| put(1, r, c, packed));

    let mut acc_rs = Acc::<128>::undefined();
    let mut k = 0;
    while k < 64 {
        let frag = load_a_fragment(a_s, 0, k);
        acc_rs.mma_rs(frag, b_s, 0, k, k > 0);
        k += 16;
    }
    wgmma_commit_group();
    wgmma_wait::<0>();
    acc_rs.for_each_pair(|r, c, v0, v1| put(2, r, c, kernel_device::wgmma::pack_f16x2(v0, v1)));

    let mut narrow = [Acc::<32>::undefined(), Acc::<32>::undefined(), Acc::<32>::undefined(), Acc::<32>::undefined()];
    kernel_device::array::regs::unroll(4, |q| narrow[q].mma(a_s, 0, b_s, 32 * q, false));
    wgmma_commit_group();
    wgmma_wait::<0>();
    kernel_device::array::regs::unroll(4, |q| narrow[q].for_each_pair(|r, c, v0, v1| put(3, r, 32 * q + c, kernel_device::wgmma::pack_f16x2(v0, v1))));
}

/// A stored `K x M` (`64 x 64` f16): the A operand of
/// [`wgmma_transposed`] read through `.transposed()`.
pub type TrKm = Tile<f16, 64, 64, Sw>;
/// B stored `K x N` (`64 x 128` f16, two 64-column swizzle blocks).
pub type TrKn = Tile<f16, 64, 128, Sw>;
/// Outputs of [`wgmma_transposed`], each `64 x 128` f32 row-major.
pub const TRANSPOSED_VARIANTS: usize = 3;

/// One `64 x 128 x 64` product `A · Bᵀ` with transposed SMEM views
/// (Pallas's `plgpu.TransposeTransform`): the tiles are loaded by TMA as
/// stored (untransposed), and `Smem::transposed()` makes the wgmma read
/// them MN-major (`imm-trans-a` / `imm-trans-b` = 1):
/// 0. A K-major (`M x K`), B from a `K x N` tile through `.transposed()`;
/// 1. A from a `K x M` tile through `.transposed()`, B K-major (`N x K`);
/// 2. both through `.transposed()`.
///
/// This kernel works as follows: thread 0 loads the four tiles on one
/// barrier; the warpgroup runs each variant with `Acc::mma_view` (issue,
/// commit, wait 0) and writes its fragment to `out[v]` (`64 x 128` f32,
/// row-major).
///
/// Constraints: grid 1; `a_mk` is `64 x 64` (`M x K`), `a_km` its
/// transpose; `b_nk` is `128 x 64` (`N x K`), `b_kn` its transpose; `out`
/// holds `3 x 64 x 128` f32.
#[kernel(block = warpgroups(1), arch = sm_90a)]
pub fn wgmma_transposed(
    a_mk: Tma<VarA>,
    a_km: Tma<TrKm>,
    b_nk: Tma<Tile<f16, 128, 64, Sw>>,
    b_kn: Tma<TrKn>,
    out: Gmem<f32>,
    #[scratch] a_mk_s: Smem<VarA>,
    #[scratch] a_km_s: Smem<TrKm>,
    #[scratch] b_nk_s: Smem<Tile<f16, 128, 64, Sw>>,
    #[scratch] b_kn_s: Smem<TrKn>,
    #[scratch] full: Barrier,
) {
    if thread_linear() == 0 {
        full.arrive_expect_tx(2 * Tma::<VarA>::BYTES + 2 * Tma::<TrKn>::BYTES);
        a_mk.load(a_mk_s, 0, 0, full.as_ref());
        a_km.load(a_km_s, 0, 0, full.as_ref());
        b_nk.load(b_nk_s, 0, 0, full.as_ref());
        b_kn.load(b_kn_s, 0, 0, full.as_ref());
    }
    full.wait();
    let put = |v: usize, acc: &mut Acc<128>| {
        acc.for_each_pair(|r, c, v0, v1| {
            let i = v * 64 * 128 + r * 128 + c;
            out.write(i, v0);
            out.write(i + 1, v1);
        })
    };
    let mut acc = Acc::<128>::undefined();
    acc.mma_view(a_mk_s, 0, b_kn_s.transposed(), 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    put(0, &mut acc);

    let mut acc = Acc::<128>::undefined();
    acc.mma_view(a_km_s.transposed(), 0, b_nk_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    put(1, &mut acc);

    let mut acc = Acc::<128>::undefined();
    acc.mma_view(a_km_s.transposed(), 0, b_kn_s.transposed(), 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    put(2, &mut acc);
}

/// A operand of [`wgmma_fp8`]: `64 x 128` FP8 (one 128-byte swizzle row
/// per matrix row: K = 128 is four `k32` MMAs).
pub type Fp8A<E> = Tile<E, 64, 128, Sw>;
/// B operand of [`wgmma_fp8`]: `256 x 128` FP8 (`N x K`, K-major).
pub type Fp8B<E> = Tile<E, 256, 128, Sw>;

/// `D = A · Bᵀ` (`64 x 256 x 128`) with FP8 operands, once in e4m3 and
/// once in e5m2, f32 accumulators written out as f32: the `m64n256k32`
/// wgmma forms (`.f32.e4m3.e4m3`, `.f32.e5m2.e5m2`) against a CPU
/// reference.
///
/// This kernel works as follows: thread 0 loads the four tiles (A and B in
/// each format) on one barrier; the warpgroup runs `Acc::<256>::mma` on
/// the e4m3 pair (4 MMAs of K 32), commits, waits, and writes its
/// fragment to `out[0 .. 64 x 256]` (row-major f32, bounds-checked
/// `Gmem`); then the same on the e5m2 pair into `out[64 x 256 ..]`.
///
/// Constraints: grid 1; `a4`, `a5` are `64 x 128`, `b4`, `b5` `256 x 128`;
/// `out` holds `2 x 64 x 256` f32.
#[kernel(block = warpgroups(1), arch = sm_90a)]
pub fn wgmma_fp8(
    a4: Tma<Fp8A<kernel_device::E4M3>>,
    b4: Tma<Fp8B<kernel_device::E4M3>>,
    a5: Tma<Fp8A<kernel_device::E5M2>>,
    b5: Tma<Fp8B<kernel_device::E5M2>>,
    out: Gmem<f32>,
    #[scratch] a4_s: Smem<Fp8A<kernel_device::E4M3>>,
    #[scratch] b4_s: Smem<Fp8B<kernel_device::E4M3>>,
    #[scratch] a5_s: Smem<Fp8A<kernel_device::E5M2>>,
    #[scratch] b5_s: Smem<Fp8B<kernel_device::E5M2>>,
    #[scratch] full: Barrier,
) {
    if thread_linear() == 0 {
        full.arrive_expect_tx(2 * (Tma::<Fp8A<kernel_device::E4M3>>::BYTES + Tma::<Fp8B<kernel_device::E4M3>>::BYTES));
        a4.load(a4_s, 0, 0, full.as_ref());
        b4.load(b4_s, 0, 0, full.as_ref());
        a5.load(a5_s, 0, 0, full.as_ref());
        b5.load(b5_s, 0, 0, full.as_ref());
    }
    full.wait();
    let write = |v: usize, acc: &mut Acc<256>| {
        acc.for_each_pair(|r, c, v0, v1| {
            let i = v * 64 * 256 + r * 256 + c;
            out.write(i, v0);
            out.write(i + 1, v1);
        });
    };
    let mut acc = Acc::<256>::undefined();
    acc.mma(a4_s, 0, b4_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    write(0, &mut acc);
    let mut acc = Acc::<256>::undefined();
    acc.mma(a5_s, 0, b5_s, 0, false);
    wgmma_commit_group();
    wgmma_wait::<0>();
    write(1, &mut acc);
}

/// B tile of [`matmul_pipelined_kn`]: `TILE_K x TILE_N` of `B (K x N,
/// row-major)`, MN-major for wgmma (two 64-column blocks).
pub type BTileKn = Tile<f16, TILE_K, TILE_N, Sw>;

/// `C = A · B` with B stored `K x N` (row-major) — the pipelining guide's
/// matmul exactly as written there (its B BlockSpec is `(tile_k, tile_n)`
/// with the same tiling and swizzle transforms): wgmma reads B MN-major
/// (`imm-trans-b = 1`). Otherwise as [`matmul_pipelined`].
///
/// Constraints: `M % 128 == 0`, `N % 128 == 0`, `K % 64 == 0`, `K >= 64`;
/// grid `(M / 128, N / 128)`; `k_steps = K / 64`.
#[kernel(block = warpgroups(1), arch = sm_90a, instances((2), (4)))]
pub fn matmul_pipelined_kn<const STAGES: usize>(
    a: Tma<ATile>,
    b: Tma<BTileKn>,
    c: Tma<OTile>,
    k_steps: u32,
    #[scratch] a_bufs: Smem<[ATile; STAGES]>,
    #[scratch] b_bufs: Smem<[BTileKn; STAGES]>,
    #[scratch] c_smem: Smem<OTile>,
    #[scratch] loaded: Barriers<STAGES>,
) {
    let (pm, pn) = (block_idx().x, block_idx().y);
    let mut acc = [Acc::<TILE_N>::undefined(), Acc::<TILE_N>::undefined()];
    emit_pipeline(
        k_steps,
        (BlockSpec::new(a, a_bufs, |k| (pm, k)), BlockSpec::new(b, b_bufs, |k| (k, pn))),
        &loaded,
        1,
        |step, (a_tile, b_tile)| {
            acc[0].mma_kn(a_tile, 0, b_tile, 0, step > 0);
            acc[1].mma_kn(a_tile, 64, b_tile, 0, step > 0);
            wgmma_commit_group();
            wgmma_wait::<1>();
        },
    );
    store_c_tile(&mut acc, c_smem, c, pm, pn);
}

/// The tile [`warp_roles`] moves: `64 x 64` f32.
pub type RoleTile = Tile<f32, 64, 64, Unswizzled>;

/// Roles by warp inside one warpgroup, as in the Blackwell tutorial's
/// step 1 (a TMA warp and a consumer warp), declared with
/// `#[warp_specialize(warps)]`.
///
/// This kernel works as follows:
/// 1. warp 0 (the TMA warp): one lane, chosen with `elect_one`, announces
///    the tile's bytes and issues the TMA load of tile `block_idx().x` of
///    `x` (`64 x 64` f32 tiles stacked by rows);
/// 2. warp 1 (the consumer): waits on the barrier, then its 32 lanes write
///    `2 * tile` to the same rows of `y`, 2 columns per lane;
/// 3. warps 2 and 3 have no role.
///
/// Constraints: grid = tiles; `x`, `y` are `(64 * tiles) x 64` f32.
#[kernel(block = warpgroups(1))]
pub fn warp_roles(x: Tma<RoleTile>, y: Gmem<f32>, #[scratch] tile: Smem<RoleTile>, #[scratch] full: Barrier) {
    let row0 = block_idx().x * 64;
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                full.arrive_expect_tx(Tma::<RoleTile>::BYTES);
                x.load(tile, row0, 0, full.as_ref());
            }
        }
        1 => {
            full.wait();
            let lane = lane_id() as usize;
            for r in 0..64 {
                for c in 2 * lane..2 * lane + 2 {
                    y.write((row0 as usize + r) * 64 + c, 2.0 * tile.get(r, c));
                }
            }
        }
        _ => {}
    }
}
