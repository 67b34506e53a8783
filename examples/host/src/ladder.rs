//! Host side of the Hopper GEMM ladder (`kernels::hopper_ladder`, steps 2
//! to 7; steps 0 and 1 are in [`crate::hopper`]): each instance by name, on
//! a GPU or the CPU emulator through one [`Device`] (tensor maps made once,
//! a closure that only launches, so a GPU can time it).
//!
//! Instance names: `step<S> <BM>x<BN> s<STAGES> w<GROUP_M or GRID_W>`.
use crate::hopper::{PreparedLaunch, Problem};
use crate::{invalid, ExampleError, Result};
use kernel_host::{Device, TileMap};
use kernels::hopper_ladder::{
    step2_big_tiles::matmul_big_tiles, step3_persistent::matmul_persistent, step4_epilogue_overlap::matmul_epilogue_overlap,
    step5_cluster_multicast::matmul_cluster_multicast, step6_fewer_arrivals::matmul_fewer_arrivals, step7_pingpong::matmul_pingpong, ATileOf, BTileOf, EpiTileOf, OTileOf, TK,
};

/// How an instance's grid is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridKind {
    /// One CTA per output tile.
    PerTile,
    /// Persistent: `min(SMs, tiles)` CTAs.
    Persistent,
    /// Persistent clusters of 2 along M: `2 min(SMs / 2, ceil(m_tiles / 2) n_tiles)`.
    ClusterPairs,
}

/// `(grid, m_tiles, n_tiles, k_steps)` for an `m x n x k` problem with
/// `bm x bn` tiles on `sms` SMs.
pub fn grid_for(kind: GridKind, bm: usize, bn: usize, m: usize, n: usize, k: usize, sms: u32) -> (u32, u32, u32, u32) {
    let (mt, nt, ks) = (m.div_ceil(bm) as u32, n.div_ceil(bn) as u32, k.div_ceil(TK) as u32);
    let grid = match kind {
        GridKind::PerTile => mt * nt,
        GridKind::Persistent => sms.min(mt * nt),
        GridKind::ClusterPairs => 2 * (sms / 2).min(mt.div_ceil(2) * nt),
    };
    (grid, mt, nt, ks)
}

/// Every ladder instance: `$m!(name, kernel type, step, BM, BN, C tile type, grid kind)`.
macro_rules! for_each_instance {
    ($m:ident) => {
        $m!("step2 128x256 s4 w8", matmul_big_tiles<128, 256, 4, 8>, 2, 128, 256, OTileOf<128, 256>, BTileOf<256>, GridKind::PerTile);
        $m!("step2 256x128 s4 w8", matmul_big_tiles<256, 128, 4, 8>, 2, 256, 128, OTileOf<256, 128>, BTileOf<128>, GridKind::PerTile);
        $m!("step2 128x256 s3 w8", matmul_big_tiles<128, 256, 3, 8>, 2, 128, 256, OTileOf<128, 256>, BTileOf<256>, GridKind::PerTile);
        $m!("step3 128x256 s3 w8", matmul_persistent<128, 256, 3, 8>, 3, 128, 256, OTileOf<128, 256>, BTileOf<256>, GridKind::Persistent);
        $m!("step3 256x128 s3 w8", matmul_persistent<256, 128, 3, 8>, 3, 256, 128, OTileOf<256, 128>, BTileOf<128>, GridKind::Persistent);
        $m!("step3 128x256 s3 w16", matmul_persistent<128, 256, 3, 16>, 3, 128, 256, OTileOf<128, 256>, BTileOf<256>, GridKind::Persistent);
        $m!("step4 128x256 s4 w8", matmul_epilogue_overlap<128, 256, 4, 8>, 4, 128, 256, EpiTileOf<128>, BTileOf<256>, GridKind::Persistent);
        $m!("step4 256x128 s3 w8", matmul_epilogue_overlap<256, 128, 3, 8>, 4, 256, 128, EpiTileOf<256>, BTileOf<128>, GridKind::Persistent);
        $m!("step4 128x256 s4 w16", matmul_epilogue_overlap<128, 256, 4, 16>, 4, 128, 256, EpiTileOf<128>, BTileOf<256>, GridKind::Persistent);
        $m!("step4 128x128 s4 w8", matmul_epilogue_overlap<128, 128, 4, 8>, 4, 128, 128, EpiTileOf<128>, BTileOf<128>, GridKind::Persistent);
        $m!("step5 128x256 s4 w8", matmul_cluster_multicast<128, 256, 128, 4, 8>, 5, 128, 256, EpiTileOf<128>, BTileOf<128>, GridKind::ClusterPairs);
        $m!("step5 256x128 s3 w8", matmul_cluster_multicast<256, 128, 64, 3, 8>, 5, 256, 128, EpiTileOf<256>, BTileOf<64>, GridKind::ClusterPairs);
        $m!("step5 128x256 s4 w16", matmul_cluster_multicast<128, 256, 128, 4, 16>, 5, 128, 256, EpiTileOf<128>, BTileOf<128>, GridKind::ClusterPairs);
        $m!("step6 128x256 s4 w8", matmul_fewer_arrivals<128, 256, 128, 4, 8>, 6, 128, 256, EpiTileOf<128>, BTileOf<128>, GridKind::ClusterPairs);
        $m!("step6 128x256 s4 w16", matmul_fewer_arrivals<128, 256, 128, 4, 16>, 6, 128, 256, EpiTileOf<128>, BTileOf<128>, GridKind::ClusterPairs);
        $m!("step6 256x128 s3 w8", matmul_fewer_arrivals<256, 128, 64, 3, 8>, 6, 256, 128, EpiTileOf<256>, BTileOf<64>, GridKind::ClusterPairs);
        $m!("step7 pingpong 128x128 s6 w8", matmul_pingpong<128, 128, 6, 8>, 7, 128, 128, EpiTileOf<128>, BTileOf<128>, GridKind::Persistent);
        $m!("step7 pingpong 128x128 s6 w16", matmul_pingpong<128, 128, 6, 16>, 7, 128, 128, EpiTileOf<128>, BTileOf<128>, GridKind::Persistent);
        $m!("step7 pingpong 64x256 s5 w8", matmul_pingpong<64, 256, 5, 8>, 7, 64, 256, EpiTileOf<64>, BTileOf<256>, GridKind::Persistent);
        $m!("step7 pingpong 64x256 s5 w16", matmul_pingpong<64, 256, 5, 16>, 7, 64, 256, EpiTileOf<64>, BTileOf<256>, GridKind::Persistent);
    };
}

/// One ladder instance's description.
#[derive(Clone, Copy, Debug)]
pub struct Instance {
    pub name: &'static str,
    pub step: u32,
    pub bm: usize,
    pub bn: usize,
    pub grid: GridKind,
}

/// Every ladder instance, in ladder order.
pub fn instances() -> Vec<Instance> {
    let mut v = Vec::new();
    macro_rules! describe {
        ($name:literal, $k:ty, $step:literal, $bm:literal, $bn:literal, $ct:ty, $bt:ty, $g:expr) => {
            v.push(Instance { name: $name, step: $step, bm: $bm, bn: $bn, grid: $g });
        };
    }
    for_each_instance!(describe);
    v
}

fn unknown(name: &str) -> ExampleError {
    invalid("ladder", format!("unknown ladder instance `{name}`; known: {}", instances().iter().map(|i| i.name).collect::<Vec<_>>().join(", ")))
}

/// The ladder steps whose kernels are `kernel-ops`' matmul kernels
/// (`kernel_ops_kernels::matmul`, re-exported by the ladder): they are in
/// `kernel_ops_kernels::DEVICE_CODE`, not in `kernels::DEVICE_CODE`.
pub const LIBRARY_STEPS: [u32; 2] = [4, 5];

/// Prepares ladder instance `name` on `p`: the kernel handle and tensor maps
/// are made once; the closure only launches. Persistent grids get
/// `min(dev.sm_count(), tiles)` CTAs (see [`grid_for`]). Steps
/// [`LIBRARY_STEPS`] launch from `kernel_ops_kernels::DEVICE_CODE`, the
/// others from `kernels::DEVICE_CODE`.
pub fn prepare<'p>(dev: &Device, name: &str, p: &'p mut Problem) -> Result<PreparedLaunch<'p>> {
    let sms = dev.sm_count();
    let (m, n, k) = (p.m, p.n, p.k);
    let Problem { a, b, c, .. } = p;
    let (a, b) = (&*a, &*b);
    // Each instance is an `if` that returns: `{ c }` moves C's borrow into
    // the one that matches (a reborrow would outlive the `if`).
    macro_rules! instance {
        ($name:literal, $k:ty, $step:literal, $bm:literal, $bn:literal, $ct:ty, $bt:ty, $g:expr) => {
            if name == $name {
                let code = if LIBRARY_STEPS.contains(&$step) { &kernel_ops_kernels::DEVICE_CODE } else { &kernels::DEVICE_CODE };
                let (grid, mt, nt, ks) = grid_for($g, $bm, $bn, m, n, k, sms);
                let a = TileMap::<ATileOf<$bm>>::new_2d(a, m, k)?;
                let b = TileMap::<$bt>::new_2d(b, n, k)?;
                let c = TileMap::<$ct>::new_2d_mut({ c }, m, n)?;
                let kernel = dev.load(code)?.kernel::<$k>()?;
                return Ok(Box::new(move || kernel.launch(grid, (&a, &b, &c, mt, nt, ks))));
            }
        };
    }
    for_each_instance!(instance);
    Err(unknown(name))
}

/// Runs ladder instance `name` once on `p` (C poisoned first) and returns
/// the relative Frobenius error of C's checked rows.
pub fn run(dev: &Device, name: &str, p: &mut Problem) -> Result<f64> {
    p.poison(dev)?;
    prepare(dev, name, p)?()?;
    p.error(dev)
}
