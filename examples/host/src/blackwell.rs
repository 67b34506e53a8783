//! The Blackwell matmuls (tutorial steps 0-2, `kernels::blackwell`): tensor
//! maps built from the kernels' own tile types, launched on the CPU
//! emulator (no sm_100 GPU is available to this project) or on a GPU of
//! compute capability 10.x when one is present, and checked against a CPU
//! reference.
use crate::{ExampleError, Result};
use kernel_device::f16;
use kernel_host::emulate::{EmuTensorMap, Emulator};
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error};
use kernels::blackwell::{self, ATile, BTile, ETile, OTile, TILE_K, TILE_M};

/// Every instance of the Blackwell matmuls, as `name<TN,STAGES>`.
pub const MATMULS: [&str; 6] = [
    "matmul0<128,4>",
    "matmul0<256,2>",
    "matmul1<128,4>",
    "matmul1<256,3>",
    "matmul2<128,4>",
    "matmul2<256,4>",
];

/// Relative Frobenius error a correct f16-output matmul stays under.
pub const TOLERANCE: f64 = 2e-3;

/// Tile N of an instance name.
fn tile_n(name: &str) -> usize {
    if name.contains("<256") {
        256
    } else {
        128
    }
}

/// The inputs of an `m x n x k` problem for instance `name`, after checking
/// that its tiles divide the shape: `A` (`M x K`), `B` as `N x K` (for the
/// reference) and its transpose `K x N` (what the kernels read), f16 from
/// `randn_f16` with seeds `input_seed`, `input_seed + 1`.
fn problem(function: &'static str, name: &str, (m, n, k): (usize, usize, usize), input_seed: u64) -> Result<(Vec<f16>, Vec<f16>, Vec<f16>)> {
    let tn = tile_n(name);
    if m % TILE_M != 0 || n % tn != 0 || k % TILE_K != 0 || k == 0 {
        return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
            function,
            problem: format!("{name} needs M % {TILE_M} == 0, N % {tn} == 0, K % {TILE_K} == 0, K > 0; got {m} x {n} x {k}"),
        }));
    }
    let a = randn_f16(m * k, input_seed);
    let b_nk = randn_f16(n * k, input_seed + 1);
    let b_kn: Vec<f16> = (0..k * n).map(|i| b_nk[(i % n) * k + i / n]).collect();
    Ok((a, b_nk, b_kn))
}

/// Calls `$run!(kernel type, tile N, output tile type)` for instance
/// `$name` (the instance table in one place, for the emulator and the GPU).
macro_rules! dispatch {
    ($name:expr, $function:expr, $run:ident) => {
        match $name {
            "matmul0<128,4>" => $run!(blackwell::matmul0<128, 4>, 128, OTile<128>),
            "matmul0<256,2>" => $run!(blackwell::matmul0<256, 2>, 256, OTile<256>),
            "matmul1<128,4>" => $run!(blackwell::matmul1<128, 4>, 128, OTile<128>),
            "matmul1<256,3>" => $run!(blackwell::matmul1<256, 3>, 256, OTile<256>),
            "matmul2<128,4>" => $run!(blackwell::matmul2<128, 4>, 128, ETile),
            "matmul2<256,4>" => $run!(blackwell::matmul2<256, 4>, 256, ETile),
            other => {
                return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
                    function: $function,
                    problem: format!("`{other}` is not a Blackwell matmul; they are: {}", MATMULS.join(", ")),
                }))
            }
        }
    };
}

/// Runs Blackwell matmul `name` (one of [`MATMULS`]) on the emulator at
/// `m x n x k` (`C = A · B`, `A` `M x K`, `B` `K x N`, both row-major f16
/// from `randn_f16` with seeds `input_seed`, `input_seed + 1`) and returns
/// the relative Frobenius error of C against the CPU reference.
pub fn emulated_matmul(emu: &Emulator, name: &str, m: usize, n: usize, k: usize, input_seed: u64) -> Result<f64> {
    let (a, b_nk, b_kn) = problem("emulated Blackwell matmul", name, (m, n, k), input_seed)?;
    let mut c = vec![f16::NAN; m * n];
    let k_steps = (k / TILE_K) as u32;
    let grid = ((m / TILE_M) as u32, (n / tile_n(name)) as u32);
    let am = EmuTensorMap::<ATile>::new_2d(&a, m, k)?;
    macro_rules! run {
        ($kernel:ty, $tn:literal, $otile:ty) => {{
            let bm = EmuTensorMap::<BTile<$tn>>::new_2d(&b_kn, k, n)?;
            let cm = EmuTensorMap::<$otile>::new_2d_mut(&mut c, m, n)?;
            emu.launch::<$kernel, _>(grid, (&am, &bm, &cm, k_steps))?;
        }};
    }
    dispatch!(name, "emulated Blackwell matmul", run);
    let reference = reference_gemm_nt(m, n, k, &a, &b_nk);
    Ok(rel_frobenius_error(&c, &reference))
}

/// Runs Blackwell matmul `name` on a GPU (a B200-class device, compute
/// capability 10.0, whose module loaded the sm_100a image) at `m x n x k`
/// and returns the relative Frobenius error of C against the CPU reference.
/// The tensor maps are built from the kernels' tile types. Never run by
/// this project (it has no such GPU); on an H100 `Module::kernel` refuses
/// these kernels with `Error::KernelNotForArch`.
pub fn gpu_matmul(gpu: &kernel_host::Gpu, module: &kernel_host::Module, name: &str, m: usize, n: usize, k: usize, input_seed: u64) -> Result<f64> {
    use kernel_host::TensorMap;
    let (a_host, b_nk, b_kn) = problem("Blackwell matmul", name, (m, n, k), input_seed)?;
    let a = gpu.upload(&a_host)?;
    let b = gpu.upload(&b_kn)?;
    let c = gpu.upload(&vec![f16::NAN; m * n])?;
    let k_steps = (k / TILE_K) as u32;
    let grid = ((m / TILE_M) as u32, (n / tile_n(name)) as u32);
    let am = TensorMap::<ATile>::new_2d(&a, m, k)?;
    macro_rules! run {
        ($kernel:ty, $tn:literal, $otile:ty) => {{
            let bm = TensorMap::<BTile<$tn>>::new_2d(&b, k, n)?;
            let cm = TensorMap::<$otile>::new_2d(&c, m, n)?;
            module.kernel::<$kernel>()?.launch_sync(grid, (&am, &bm, &cm, k_steps))?;
        }};
    }
    dispatch!(name, "Blackwell matmul", run);
    let out = gpu.download(&c)?;
    Ok(rel_frobenius_error(&out, &reference_gemm_nt(m, n, k, &a_host, &b_nk)))
}
