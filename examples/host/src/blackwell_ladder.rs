//! Host side of the Blackwell tutorial's steps 3 to 6 and the dynamically
//! scheduled variant (`kernels::blackwell::matmul3` ..): each instance by
//! name, on the CPU emulator (no sm_100 GPU is available to this project:
//! these kernels are verified by ptxas for sm_100a and by the emulator).
//!
//! `C (M x N) = A (M x K) · B (K x N)`, all row-major, f16 in and out.
use crate::Result;
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
pub const GRID_TILE_WIDTH: u32 = 2;

/// `(m pair tiles, n tiles, k steps)` of an `m x n x k` problem for a pair
/// tile of `256 x pn`.
pub fn tiles(m: usize, n: usize, k: usize, pn: usize) -> (u32, u32, u32) {
    ((m / (2 * TILE_M)) as u32, (n / pn) as u32, (k / TILE_K) as u32)
}

/// Runs instance `name` on the emulator at `m x n x k` (`m % 256 == 0`,
/// `n % 256 == 0`, `k % 64 == 0`) with `sms` emulated SMs (the persistent
/// kernels launch `sms / 2` clusters of 2) and returns C.
pub fn emulate(emu: &Emulator, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize, sms: u32) -> Result<Vec<f16>> {
    emulate_report(emu, name, a, b, m, n, k, sms).map(|(c, _)| c)
}

/// As [`emulate`], with the number of clusters that cluster launch control
/// canceled (matmul_dynamic runs on an emulated device of `sms` SMs, so
/// clusters past `sms / 2` start late and can be canceled).
#[allow(clippy::too_many_arguments)]
pub fn emulate_report(emu: &Emulator, name: &str, a: &[f16], b: &[f16], m: usize, n: usize, k: usize, sms: u32) -> Result<(Vec<f16>, u32)> {
    let mut c = vec![f16::NAN; m * n];
    let mut canceled = 0;
    {
        let am = EmuTensorMap::<ATile>::new_2d(a, m, k)?;
        let bm = EmuTensorMap::<BTile<128>>::new_2d(b, k, n)?;
        let cm = EmuTensorMap::<ETile>::new_2d_mut(&mut c, m, n)?;
        match name {
            "matmul3 256x256 s4" => {
                let (mt, nt, ks) = tiles(m, n, k, 256);
                emu.launch::<kernels::blackwell::matmul3<128, 256, 4>, _>((2 * mt, nt), (&am, &bm, &cm, ks))?;
            }
            "matmul4 256x256 s4" => {
                let (mt, nt, ks) = tiles(m, n, k, 256);
                emu.launch::<kernels::blackwell::matmul4<128, 256, 4>, _>(persistent_grid(mt * nt, sms), (&am, &bm, &cm, mt, nt, ks))?;
            }
            "matmul5 256x256 s4" => {
                let (mt, nt, ks) = tiles(m, n, k, 256);
                emu.launch::<kernels::blackwell::matmul5<128, 256, 512, 4>, _>(persistent_grid(mt * nt, sms), (&am, &bm, &cm, mt, nt, ks))?;
            }
            "matmul6 256x256 s4" => {
                let (mt, nt, ks) = tiles(m, n, k, 256);
                emu.launch::<kernels::blackwell::matmul6<128, 256, 512, 4>, _>(
                    persistent_grid(mt * nt, sms),
                    (&am, &bm, &cm, mt, nt, ks, GRID_MINOR_DIM, GRID_TILE_WIDTH),
                )?;
            }
            "matmul_dynamic 256x256 s4" => {
                let (mt, nt, ks) = tiles(m, n, k, 256);
                let r = emu.clone().sms(sms).launch::<kernels::blackwell::matmul_dynamic<128, 256, 4>, _>((2 * mt, nt), (&am, &bm, &cm, ks))?;
                canceled = r.canceled_clusters;
            }
            _ => {
                return Err(crate::ExampleError::Cuda(kernel_host::Error::InvalidArgument {
                    function: "blackwell_ladder::emulate",
                    problem: format!("unknown instance `{name}`; known: {:?}", INSTANCES.iter().map(|i| i.0).collect::<Vec<_>>()),
                }))
            }
        }
    }
    Ok((c, canceled))
}
