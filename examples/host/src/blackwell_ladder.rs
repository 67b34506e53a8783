//! Host side of the Blackwell tutorial's steps 3 to 6 and the dynamically
//! scheduled variant (`kernels::blackwell::matmul3` ..): each instance by
//! name, on the CPU emulator or on a GPU of compute capability 10.0. No
//! sm_100 GPU is available to this project, so the GPU path has never run:
//! these kernels are verified by ptxas for sm_100a and by the emulator.
//!
//! `C (M x N) = A (M x K) · B (K x N)`, all row-major, f16 in and out.
use crate::{ExampleError, Result};
use kernel_device::f16;
use kernel_host::emulate::{EmuTensorMap, Emulator};
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
        return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
            function: "Blackwell ladder (steps 3-6)",
            problem: format!("the pair tile is {pm} x {pn} x {TILE_K}: M % {pm} == 0, N % {pn} == 0, K % {TILE_K} == 0, all > 0; got {m} x {n} x {k}"),
        }));
    }
    Ok(((m / pm) as u32, (n / pn) as u32, (k / TILE_K) as u32))
}

/// Calls `$launch!(kernel type, grid, args)` for instance `$name` with the
/// tensor maps `$am`, `$bm`, `$cm` (the grid and arguments of each step in
/// one place, for the emulator and the GPU).
macro_rules! dispatch {
    ($name:expr, ($m:expr, $n:expr, $k:expr), $sms:expr, ($am:expr, $bm:expr, $cm:expr), $launch:ident) => {{
        let (mt, nt, ks) = tiles($m, $n, $k, 256)?;
        let persistent = persistent_grid(mt * nt, $sms);
        match $name {
            "matmul3 256x256 s4" => $launch!(kernels::blackwell::matmul3<128, 256, 4>, (2 * mt, nt), ($am, $bm, $cm, ks)),
            "matmul4 256x256 s4" => $launch!(kernels::blackwell::matmul4<128, 256, 4>, persistent, ($am, $bm, $cm, mt, nt, ks)),
            "matmul5 256x256 s4" => $launch!(kernels::blackwell::matmul5<128, 256, 512, 4>, persistent, ($am, $bm, $cm, mt, nt, ks)),
            "matmul6 256x256 s4" => $launch!(
                kernels::blackwell::matmul6<128, 256, 512, 4>,
                persistent,
                ($am, $bm, $cm, mt, nt, ks, GRID_MINOR_DIM, GRID_TILE_WIDTH)
            ),
            // One cluster per tile: cluster launch control balances them.
            "matmul_dynamic 256x256 s4" => $launch!(kernels::blackwell::matmul_dynamic<128, 256, 4>, (2 * mt, nt), ($am, $bm, $cm, ks)),
            other => Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
                function: "Blackwell ladder (steps 3-6)",
                problem: format!("unknown instance `{other}`; known: {:?}", INSTANCES.iter().map(|i| i.0).collect::<Vec<_>>()),
            })),
        }
    }};
}

/// Runs instance `name` on the emulator at `m x n x k` (`m % 256 == 0`,
/// `n % 256 == 0`, `k % 64 == 0`) with `sms` emulated SMs (the persistent
/// kernels launch `sms / 2` clusters of 2) and returns C.
#[allow(clippy::too_many_arguments)]
pub fn emulate(emu: &Emulator, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize, sms: u32) -> Result<Vec<f16>> {
    emulate_report(emu, name, a, b, m, n, k, sms).map(|(c, _)| c)
}

/// As [`emulate`], with the number of clusters that cluster launch control
/// canceled (the emulated device has `sms` SMs, so at most `sms / 2`
/// clusters of 2 are resident: clusters past them start late and can be
/// canceled).
#[allow(clippy::too_many_arguments)]
pub fn emulate_report(emu: &Emulator, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize, sms: u32) -> Result<(Vec<f16>, u32)> {
    let mut c = vec![f16::NAN; m * n];
    let canceled = {
        let am = EmuTensorMap::<ATile>::new_2d(a, m, k)?;
        let bm = EmuTensorMap::<BTile<128>>::new_2d(b, k, n)?;
        let cm = EmuTensorMap::<ETile>::new_2d_mut(&mut c, m, n)?;
        let emu = emu.clone().sms(sms);
        macro_rules! on_emulator {
            ($kernel:ty, $grid:expr, $args:expr) => {
                emu.launch::<$kernel, _>($grid, $args).map(|r| r.canceled_clusters).map_err(ExampleError::from)
            };
        }
        dispatch!(name, (m, n, k), sms, (&am, &bm, &cm), on_emulator)?
    };
    Ok((c, canceled))
}

/// Runs instance `name` on a GPU of compute capability 10.0 (its module
/// loaded the sm_100a image) at `m x n x k` and returns C. The persistent
/// steps launch `SMs / 2` clusters of 2 (the SM count read from the
/// device), or fewer if `cuOccupancyMaxActiveClusters` says fewer fit (asked
/// for `matmul5`, the largest SMEM user of the ladder). Never run by this project (no such GPU); elsewhere
/// `Module::kernel` refuses these kernels with `Error::KernelNotForArch`.
#[allow(clippy::too_many_arguments)]
pub fn gpu_run(gpu: &kernel_host::Gpu, module: &kernel_host::Module, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize) -> Result<Vec<f16>> {
    use kernel_host::TensorMap;
    let (ad, bd) = (gpu.upload(a)?, gpu.upload(b)?);
    let cd = gpu.upload(&vec![f16::NAN; m * n])?;
    {
        let am = TensorMap::<ATile>::new_2d(&ad, m, k)?;
        let bm = TensorMap::<BTile<128>>::new_2d(&bd, k, n)?;
        let cm = TensorMap::<ETile>::new_2d(&cd, m, n)?;
        // The persistent grid: as many clusters of 2 as the device runs at
        // once (the SM count, capped by what the driver says fits).
        let fits = module.kernel::<kernels::blackwell::matmul5<128, 256, 512, 4>>()?.max_active_clusters()?;
        let sms = gpu.sm_count().min(2 * fits.max(1));
        macro_rules! on_gpu {
            ($kernel:ty, $grid:expr, $args:expr) => {
                module.kernel::<$kernel>().and_then(|kern| kern.launch_sync($grid, $args)).map_err(ExampleError::from)
            };
        }
        dispatch!(name, (m, n, k), sms, (&am, &bm, &cm), on_gpu)?;
    }
    Ok(gpu.download(&cd)?)
}
