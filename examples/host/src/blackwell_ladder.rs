//! Host side of the Blackwell tutorial's steps 3 to 6 and the dynamically
//! scheduled variant (`kernels::blackwell::matmul3` ..): each instance by
//! name, on a [`Device`]: the CPU emulator, or a GPU of compute capability
//! 10.0. No sm_100 GPU is available to this project, so the GPU path has
//! never run: these kernels are verified by ptxas for sm_100a and by the
//! emulator.
//!
//! `C (M x N) = A (M x K) · B (K x N)`, all row-major, f16 in and out.
use crate::{invalid, poisoned, Result};
use kernel_device::f16;
use kernel_host::{Device, Launched, TileMap};
use kernels::blackwell::{ATile, BTile, ETile, TILE_K, TILE_M};

/// Every instance: `(name, pair tile N)`.
pub const INSTANCES: &[(&str, usize)] = &[
    ("matmul3 256x256 s4", 256),
    ("matmul4 256x256 s4", 256),
    ("matmul5 256x256 s4", 256),
    ("matmul6 256x256 s4", 256),
    ("matmul_dynamic 256x256 s4", 256),
];

/// The persistent grid (CTAs along x) for `tiles` pair tiles on `sms`
/// SMs: `sms / 2` clusters of 2, at most one per tile.
pub fn persistent_grid(tiles: u32, sms: u32) -> u32 {
    2 * (sms / 2).min(tiles).max(1)
}

/// `planar_snake` parameters of matmul6 (minor dimension M, bands of 2
/// tiles: small enough that the emulator's small grids have several bands).
pub const GRID_MINOR_DIM: u32 = 0;
/// See [`GRID_MINOR_DIM`].
pub const GRID_TILE_WIDTH: u32 = 2;

/// `(m pair tiles, n tiles, k steps)` of an `m x n x k` problem for a pair
/// tile of `256 x pn`, or the error naming the shape rule.
pub fn tiles(m: usize, n: usize, k: usize, pn: usize) -> Result<(u32, u32, u32)> {
    let pm = 2 * TILE_M;
    if m == 0 || n == 0 || k == 0 || m % pm != 0 || n % pn != 0 || k % TILE_K != 0 {
        return Err(invalid(
            "Blackwell ladder (steps 3-6)",
            format!("the pair tile is {pm} x {pn} x {TILE_K}: M % {pm} == 0, N % {pn} == 0, K % {TILE_K} == 0, all > 0; got {m} x {n} x {k}"),
        ));
    }
    Ok(((m / pm) as u32, (n / pn) as u32, (k / TILE_K) as u32))
}

/// Runs instance `name` on `dev` at `m x n x k` (`m % 256 == 0`,
/// `n % 256 == 0`, `k % 64 == 0`) and returns C. The persistent steps
/// launch `SMs / 2` clusters of 2: on the emulator its SM count
/// (`Emulator::sms`); on a GPU its SM count, or fewer if
/// `cuOccupancyMaxActiveClusters` says fewer fit (asked for `matmul5`, the
/// largest SMEM user of the ladder).
#[allow(clippy::too_many_arguments)]
pub fn run(dev: &Device, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize) -> Result<Vec<f16>> {
    run_report(dev, name, a, b, m, n, k).map(|(c, _)| c)
}

/// As [`run`], with the launch's report: on the emulator, the clusters that
/// cluster launch control canceled (`RunReport::canceled_clusters`; with
/// `sms` emulated SMs at most `sms / 2` clusters of 2 are resident, so
/// clusters past them start late and can be canceled).
#[allow(clippy::too_many_arguments)]
pub fn run_report(dev: &Device, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize) -> Result<(Vec<f16>, Launched)> {
    use kernels::blackwell::{matmul3, matmul4, matmul5, matmul6, matmul_dynamic};
    let (mt, nt, ks) = tiles(m, n, k, 256)?;
    if !INSTANCES.iter().any(|i| i.0 == name) {
        return Err(invalid(
            "Blackwell ladder (steps 3-6)",
            format!("unknown instance `{name}`; known: {:?}", INSTANCES.iter().map(|i| i.0).collect::<Vec<_>>()),
        ));
    }
    let prog = dev.load(&kernels::DEVICE_CODE)?;
    let (ad, bd) = (dev.upload(a)?, dev.upload(b)?);
    let mut cd = poisoned::<f16>(dev, m * n)?;
    let launched = {
        let am = TileMap::<ATile>::new_2d(&ad, m, k)?;
        let bm = TileMap::<BTile<128>>::new_2d(&bd, k, n)?;
        let cm = TileMap::<ETile>::new_2d_mut(&mut cd, m, n)?;
        // The persistent grid: as many clusters of 2 as the device runs at
        // once (on a GPU, the SM count capped by what the driver says fits).
        let sms = match dev.as_gpu() {
            Some(_) => {
                let fits = prog.kernel::<matmul5<128, 256, 512, 4>>()?.gpu_kernel()?.max_active_clusters()?;
                dev.sm_count().min(2 * fits.max(1))
            }
            None => dev.sm_count(),
        };
        let persistent = persistent_grid(mt * nt, sms);
        // The instance table: each step's kernel, grid and arguments.
        match name {
            "matmul3 256x256 s4" => prog.kernel::<matmul3<128, 256, 4>>()?.launch_sync((2 * mt, nt), (&am, &bm, &cm, ks))?,
            "matmul4 256x256 s4" => prog.kernel::<matmul4<128, 256, 4>>()?.launch_sync(persistent, (&am, &bm, &cm, mt, nt, ks))?,
            "matmul5 256x256 s4" => prog.kernel::<matmul5<128, 256, 512, 4>>()?.launch_sync(persistent, (&am, &bm, &cm, mt, nt, ks))?,
            "matmul6 256x256 s4" => prog
                .kernel::<matmul6<128, 256, 512, 4>>()?
                .launch_sync(persistent, (&am, &bm, &cm, mt, nt, ks, GRID_MINOR_DIM, GRID_TILE_WIDTH))?,
            // One cluster per tile: cluster launch control balances them.
            "matmul_dynamic 256x256 s4" => prog.kernel::<matmul_dynamic<128, 256, 4>>()?.launch_sync((2 * mt, nt), (&am, &bm, &cm, ks))?,
            other => unreachable!("`{other}` is in INSTANCES but has no arm: add it to the table"),
        }
    };
    Ok((dev.download(&cd)?, launched))
}
