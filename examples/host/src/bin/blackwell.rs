//! The Blackwell matmul tutorial's steps 0-6 and the cluster-launch-control
//! variant (`kernels::blackwell`).
//!
//! On a GPU of compute capability 10.0 (sm_100a) it runs them at 1024 x
//! 1024 x 1024 against a CPU reference; no such GPU is
//! available to this project, so that path has never run. On any other
//! machine it says why (no GPU; or a GPU without an sm_100a image, for which
//! the kernels are refused with `KernelNotForArch`) and runs every instance
//! on the CPU emulator (correctness only, no timings): steps 0-2 at 512 x
//! 256 x 512, steps 3-6 and `matmul_dynamic` at 1024 x 512 x 256 on an
//! emulated device of 4 SMs (so the persistent grids wrap and cluster
//! launch control has clusters to cancel).
//!
//! ```text
//! blackwell
//! ```
//! Exit status 0 only if every instance is correct.
use examples::blackwell::{emulated_matmul, gpu_matmul, MATMULS, TOLERANCE};
use examples::blackwell_ladder::{self as ladder, INSTANCES};
use kernel_device::f16;
use kernel_host::emulate::Emulator;
use kernel_host::Gpu;
use std::process::ExitCode;

fn main() -> ExitCode {
    match Gpu::new(0) {
        Ok(gpu) if gpu.arch() == Some("sm_100a") => return run_gpu(&gpu),
        Ok(gpu) => {
            let (major, minor) = gpu.compute_capability();
            println!("device: {} (compute capability {major}.{minor}): the Blackwell kernels are sm_100a-only", gpu.name());
            if let Ok(module) = gpu.load(&kernels::DEVICE_CODE) {
                if let Err(e) = module.kernel::<kernels::blackwell::matmul0<128, 4>>() {
                    println!("as expected, the launcher refuses them here: {e}");
                }
            }
        }
        Err(e) => println!("{e}"),
    }
    println!("running the Blackwell matmuls on the CPU emulator (512 x 256 x 512, correctness only: no timings)");
    let emu = Emulator::new(1);
    let mut ok = true;
    for name in MATMULS {
        match emulated_matmul(&emu, name, 512, 256, 512, 42) {
            Ok(e) if e < TOLERANCE => println!("ok    {name}: rel. Frobenius error {e:.2e} (emulator)"),
            Ok(e) => {
                ok = false;
                println!("FAIL  {name}: rel. Frobenius error {e:.2e} over {TOLERANCE:e} (emulator)");
            }
            Err(e) => {
                ok = false;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    println!("running the tutorial's steps 3-6 and matmul_dynamic on the CPU emulator (1024 x 512 x 256, 4 emulated SMs, correctness only)");
    ok &= check_ladder((1024, 512, 256), "emulator", |name, a, b, (m, n, k)| ladder::emulate(&emu, name, a, b, m, n, k, 4));
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs every instance of steps 3-6 through `run` at `m x n x k` against
/// the CPU reference; whether all are correct.
fn check_ladder(
    (m, n, k): (usize, usize, usize),
    where_: &str,
    run: impl Fn(&str, &[f16], &[f16], (usize, usize, usize)) -> examples::Result<Vec<f16>>,
) -> bool {
    let a = kernel_host::randn_f16(m * k, 42);
    let b = kernel_host::randn_f16(k * n, 43);
    let reference = kernel_host::reference_gemm_nn(m, n, k, &a, &b);
    let mut ok = true;
    for (name, _) in INSTANCES {
        match run(name, &a, &b, (m, n, k)) {
            Ok(c) => {
                let e = kernel_host::rel_frobenius_error(&c, &reference);
                if e < TOLERANCE {
                    println!("ok    {name}: {m}x{n}x{k}, rel. Frobenius error {e:.2e} ({where_})");
                } else {
                    ok = false;
                    println!("FAIL  {name}: rel. Frobenius error {e:.2e} over {TOLERANCE:e} ({where_})");
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    ok
}

fn run_gpu(gpu: &Gpu) -> ExitCode {
    let module = match gpu.load(&kernels::DEVICE_CODE) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for name in MATMULS {
        match gpu_matmul(gpu, &module, name, 1024, 1024, 1024, 42) {
            Ok(e) if e < TOLERANCE => println!("ok    {name}: 1024^3, rel. Frobenius error {e:.2e}"),
            Ok(e) => {
                ok = false;
                println!("FAIL  {name}: rel. Frobenius error {e:.2e}");
            }
            Err(e) => {
                ok = false;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    ok &= check_ladder((1024, 1024, 1024), "GPU", |name, a, b, (m, n, k)| ladder::gpu_run(gpu, &module, name, a, b, m, n, k));
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
