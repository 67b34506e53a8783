//! The Blackwell matmul tutorial's steps 0-6 and the cluster-launch-control
//! variant (`kernels::blackwell`).
//!
//! On a GPU of compute capability 10.0 (sm_100a) it runs them at 1024 x
//! 1024 x 1024 against a CPU reference; no such GPU is available to this
//! project, so that path has never run. On any other machine it says why
//! (no GPU; or a GPU the kernels are not built for: `Device::supports` is
//! false and the launcher refuses them with `KernelNotForArch`) and runs the
//! same host code on the CPU emulator (correctness only, no timings): steps
//! 0-2 at 512 x 256 x 512, steps 3-6 and `matmul_dynamic` at 1024 x 512 x
//! 256 on an emulated device of 4 SMs (so the persistent grids wrap and
//! cluster launch control has clusters to cancel).
//!
//! ```text
//! blackwell
//! ```
//! Exit status 0 only if every instance is correct.
use clap::Parser;
use examples::blackwell::{matmul, MATMULS, TOLERANCE};
use examples::blackwell_ladder::{self as ladder, INSTANCES};
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernels::blackwell::matmul0;
use std::process::ExitCode;

/// Runs the Blackwell matmul tutorial's steps 0-6 and the
/// cluster-launch-control variant against a CPU reference: on an sm_100
/// GPU at 1024 x 1024 x 1024; on any other machine it says why and runs the
/// same host code on the CPU emulator (an emulated device of 4 SMs, small
/// shapes, correctness only). There are no options.
#[derive(Parser)]
#[command(name = "blackwell")]
struct Args {}

fn main() -> ExitCode {
    Args::parse();
    let dev = match Device::gpu_or_emulator() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("device: {}", dev.describe());
    let (dev, matmul_shape, ladder_shape) = if dev.is_gpu() && dev.supports::<matmul0<128, 4>>() {
        (dev, (1024, 1024, 1024), (1024, 1024, 1024))
    } else {
        if dev.is_gpu() {
            println!("the Blackwell kernels are sm_100a-only: this GPU does not run them");
            if let Err(e) = dev.load(&kernels::DEVICE_CODE).and_then(|prog| prog.kernel::<matmul0<128, 4>>().map(drop)) {
                println!("as expected, the launcher refuses them here: {e}");
            }
        }
        let emu = Device::emulator_with(Emulator::new(1).sms(4));
        println!("running the Blackwell matmuls on {} (correctness only: no timings)", emu.describe());
        (emu, (512, 256, 512), (1024, 512, 256))
    };
    let on = if dev.is_gpu() { "GPU" } else { "emulator" };
    let mut ok = true;
    let (m, n, k) = matmul_shape;
    for name in MATMULS {
        match matmul(&dev, name, m, n, k, 42) {
            Ok(e) if e < TOLERANCE => println!("ok    {name}: {m}x{n}x{k}, rel. Frobenius error {e:.2e} ({on})"),
            Ok(e) => {
                ok = false;
                println!("FAIL  {name}: rel. Frobenius error {e:.2e} over {TOLERANCE:e} ({on})");
            }
            Err(e) => {
                ok = false;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    // Steps 3-6 and matmul_dynamic against the CPU reference.
    let (m, n, k) = ladder_shape;
    let a = kernel_host::randn_f16(m * k, 42);
    let b = kernel_host::randn_f16(k * n, 43);
    let reference = kernel_host::reference_gemm_nn(m, n, k, &a, &b);
    for (name, _) in INSTANCES {
        match ladder::run(&dev, name, &a, &b, m, n, k) {
            Ok(c) => {
                let e = kernel_host::rel_frobenius_error(&c, &reference);
                if e < TOLERANCE {
                    println!("ok    {name}: {m}x{n}x{k}, rel. Frobenius error {e:.2e} ({on})");
                } else {
                    ok = false;
                    println!("FAIL  {name}: rel. Frobenius error {e:.2e} over {TOLERANCE:e} ({on})");
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
