//! Cluster collectives with [`ClusterBarrier`] (Pallas's
//! `plgpu.ClusterBarrier`): barriers that every CTA along chosen cluster
//! axes arrives on, with arrival counts derived from the cluster shape.
use kernel_device::prelude::*;

/// Elements each thread block contributes per step of [`cluster_allreduce`].
pub const ALLREDUCE_LEN: usize = 64;

/// An all-reduce over a 2 x 2 cluster through distributed shared memory,
/// first along x, then along y, repeated for `steps` steps with the same
/// SMEM and barriers.
///
/// This kernel works as follows, per step `s` (CTA at cluster coordinates
/// `(cx, cy)`, thread `t`):
/// 1. every thread writes its input `v = x[(cta * steps + s) * 64 + t]`
///    into slot `cx` of `row_in` in both CTAs along x (its own included);
///    a CTA barrier orders the CTA's writes before thread 0's arrival on
///    `row` (a `ClusterBarrier<X>`: 2 arrivals, one per CTA along x), and
///    every thread waits on its own CTA's copy of `row`;
/// 2. the row sum `r = row_in[0][t] + row_in[1][t]` goes the same way into
///    slot `cy` of `col_in` along y (`col`, a `ClusterBarrier<Y>`);
/// 3. `y[..] = col_in[0][t] + col_in[1][t]`, the sum over the cluster;
/// 4. before the next step overwrites any CTA's `row_in`/`col_in`, every CTA
///    of the cluster says it is done reading (`done`, a
///    `ClusterBarrier<WholeCluster>`: 4 arrivals).
///
/// Constraints: grid = (2, 2, 1) (one cluster); `x` and `y` hold
/// `4 * steps * 64` floats.
#[kernel(block = threads(64), cluster = (2, 2))]
pub fn cluster_allreduce(
    x: Gmem<f32>,
    y: Gmem<f32>,
    steps: u32,
    #[scratch] row_in: Smem<[[f32; ALLREDUCE_LEN]; 2]>,
    #[scratch] col_in: Smem<[[f32; ALLREDUCE_LEN]; 2]>,
    #[scratch] row: ClusterBarrier<X>,
    #[scratch] col: ClusterBarrier<Y>,
    #[scratch] done: ClusterBarrier<WholeCluster>,
) {
    let t = thread_idx().x as usize;
    let me = cluster_cta_idx();
    let cta = block_linear() as usize;
    for s in 0..steps as usize {
        let i = (cta * steps as usize + s) * ALLREDUCE_LEN + t;
        let v = x.read(i);
        for px in 0..2 {
            // SAFETY: rank `px + 2 * cy` is in the 2 x 2 cluster, which runs
            // until the epilogue's cluster barrier.
            let peer = unsafe { row_in.map_rank(px + 2 * me.y) };
            peer.at(me.x as usize).write(t, v);
        }
        sync_threads();
        if t == 0 {
            row.arrive();
        }
        row.wait();
        let r = row_in.at(0).read(t) + row_in.at(1).read(t);
        for py in 0..2 {
            // SAFETY: as above, rank `cx + 2 * py`.
            let peer = unsafe { col_in.map_rank(me.x + 2 * py) };
            peer.at(me.y as usize).write(t, r);
        }
        sync_threads();
        if t == 0 {
            col.arrive();
        }
        col.wait();
        y.write(i, col_in.at(0).read(t) + col_in.at(1).read(t));
        // Everyone is done reading this step's inboxes before anyone writes
        // the next step's.
        sync_threads();
        if t == 0 {
            done.arrive();
        }
        done.wait();
    }
}

/// CTAs of [`cluster_axis_sums`]'s cluster.
pub const AXIS_SUMS_CTAS: usize = 8;

/// A 2 x 2 x 2 cluster checks `ClusterBarrier`'s peers along several axes:
/// every CTA (rank `r`) writes `r + 1` into slot `r` of `plane` in each CTA
/// of its y-z plane (the CTAs with its x) and into slot `r` of `row` in each
/// CTA along its x row, then arrives on a `ClusterBarrier<YZ>` (4 arrivals)
/// and a `ClusterBarrier<X>` (2 arrivals) and waits on both; thread 0
/// writes `y[2 r] = sum of plane slots of its plane`, `y[2 r + 1] = sum of
/// row slots of its row`.
///
/// Constraints: grid = (2, 2, 2) (one cluster); `y` holds 16 `u32`.
#[kernel(block = threads(32), cluster = (2, 2, 2))]
pub fn cluster_axis_sums(
    y: Gmem<u32>,
    #[scratch] plane: Smem<[u32; AXIS_SUMS_CTAS]>,
    #[scratch] row: Smem<[u32; AXIS_SUMS_CTAS]>,
    #[scratch] plane_done: ClusterBarrier<YZ>,
    #[scratch] row_done: ClusterBarrier<X>,
) {
    let me = cluster_ctarank();
    let coords = |r: u32| (r % 2, (r / 2) % 2, r / 4);
    let (mx, my, mz) = coords(me);
    if thread_idx().x == 0 {
        for r in 0..AXIS_SUMS_CTAS as u32 {
            let (x, yy, z) = coords(r);
            if x == mx {
                // SAFETY: `r` is a rank of the 8-CTA cluster, running until the epilogue.
                unsafe { plane.map_rank(r) }.write(me as usize, me + 1);
            }
            if yy == my && z == mz {
                // SAFETY: as above.
                unsafe { row.map_rank(r) }.write(me as usize, me + 1);
            }
        }
        plane_done.arrive();
        row_done.arrive();
    }
    plane_done.wait();
    row_done.wait();
    if thread_idx().x == 0 {
        let (mut p, mut q) = (0, 0);
        for r in 0..AXIS_SUMS_CTAS as u32 {
            let (x, yy, z) = coords(r);
            if x == mx {
                p += plane.read(r as usize);
            }
            if yy == my && z == mz {
                q += row.read(r as usize);
            }
        }
        y.write(2 * me as usize, p);
        y.write(2 * me as usize + 1, q);
    }
}

/// CTAs in [`cluster_allreduce16`]'s cluster: a non-portable size (more
/// than 8), which the kernel opts in to with `non_portable_cluster`.
pub const ALLREDUCE16_CTAS: usize = 16;
/// Elements each CTA of [`cluster_allreduce16`] contributes per step (one
/// per thread).
pub const ALLREDUCE16_LEN: usize = 32;
/// Elements of each step's sum that one CTA owns: reduces and broadcasts.
pub const ALLREDUCE16_OWN: usize = ALLREDUCE16_LEN / ALLREDUCE16_CTAS;

/// An all-reduce over a cluster of 16 CTAs (a non-portable cluster size)
/// through distributed shared memory: a reduce-scatter then an all-gather,
/// repeated for `steps` steps with the same SMEM.
///
/// This kernel works as follows, per step `s` (CTA of cluster rank `me`,
/// thread `t`, 32 threads; element `t` is owned by rank `t / 2`):
/// 1. reduce-scatter: every thread writes its input
///    `x[(cta * steps + s) * 32 + t]` into `parts[me][t % 2]` of the owning
///    CTA (a `mapa` store); a cluster barrier (`barrier.cluster.arrive.release`
///    + `wait.acquire`, all 512 threads) hands the stores to their owners;
/// 2. all-gather: threads `t < 2` sum their column over the 16 parts, in
///    rank order, and write the sum into `sums[2 me + t]` of every CTA of
///    the cluster; a second cluster barrier;
/// 3. `y[(cta * steps + s) * 32 + t] = sums[t]`: every CTA gets the whole
///    sum of its cluster.
///
/// No third barrier guards the next step's reuse: a CTA writes another's
/// `parts` in step `s + 1` only after the second barrier of step `s`, which
/// the owner reached after reading its `parts`; and it writes another's
/// `sums` only after the first barrier of step `s + 1`, which that CTA
/// reached after reading its `sums` (the race detector checks both on the
/// emulator).
///
/// Why `cluster_sync` and not a `ClusterBarrier<WholeCluster>` (mbarrier
/// arrivals on all 16 CTAs): both are correct, and the emulator is clean
/// with either, but compute-sanitizer's racecheck does not follow the
/// mbarrier hand-over across CTAs and reports the DSMEM stores as hazards
/// (RESULTS.md, non-portable clusters); with the hardware cluster barrier it
/// reports none.
///
/// Constraints: grid.x a multiple of 16, grid.y = grid.z = 1; `x` and `y`
/// hold `grid.x * steps * 32` floats. The host sets
/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` when it loads the
/// kernel; a GPU that cannot co-schedule 16 CTAs on one GPC refuses the
/// launch with `Error::ClusterNotSchedulable` (the H100 and the B200 can).
#[kernel(block = threads(32), cluster = (16, 1, 1), non_portable_cluster)]
pub fn cluster_allreduce16(
    x: GmemRef<f32>,
    y: Gmem<f32>,
    steps: u32,
    #[scratch] parts: Smem<[[f32; ALLREDUCE16_OWN]; ALLREDUCE16_CTAS]>,
    #[scratch] sums: Smem<[f32; ALLREDUCE16_LEN]>,
) {
    let t = thread_idx().x as usize;
    let me = cluster_ctarank();
    let cta = block_linear() as usize;
    let (owner, slot) = ((t / ALLREDUCE16_OWN) as u32, t % ALLREDUCE16_OWN);
    for s in 0..steps as usize {
        let i = (cta * steps as usize + s) * ALLREDUCE16_LEN + t;
        // 1. Reduce-scatter: element t to its owner.
        // SAFETY: `owner < 16` is a rank of the cluster, which runs until
        // the epilogue's cluster barrier.
        let theirs = unsafe { parts.map_rank(owner) };
        theirs.at(me as usize).write(slot, x.read(i));
        cluster_sync();
        // 2. All-gather: the owner's columns, summed in rank order, to every CTA.
        if t < ALLREDUCE16_OWN {
            let mut acc = 0.0f32;
            for r in 0..ALLREDUCE16_CTAS {
                acc += parts.at(r).read(t);
            }
            let col = me as usize * ALLREDUCE16_OWN + t;
            for r in 0..ALLREDUCE16_CTAS as u32 {
                // SAFETY: as above, rank `r < 16`.
                unsafe { sums.map_rank(r) }.write(col, acc);
            }
        }
        cluster_sync();
        // 3. Every CTA has the cluster's sum.
        y.write(i, sums.read(t));
    }
}
