//! Register arrays and the fused bias+ReLU matmul on an H100/H200: the
//! `arrays` example kernels checked exactly against CPU references, the
//! gated MLP of `kernels::gated` (ReGLU on the library's multi-operand
//! GEMM) against the CPU, then
//! `relu(A·Bᵀ + bias)` (`fused::matmul_bias_relu<4, 8>`) checked against the
//! CPU and timed against the same matmul without epilogue
//! (`hopper::matmul_warp_specialized<4, 8>`) in this process on the same
//! inputs, alternating the two for several rounds. Without a GPU it runs
//! the same checks on the CPU emulator at small sizes and says that the
//! timing is skipped.
//!
//! ```text
//! fused [--quick]
//! ```
//! Exit status 0 only if every check passes.
use clap::Parser;
use examples::arrays::{bench_bias_relu, bias_relu, strided_ops, wgmma_ops};
use kernel_host::Device;
use std::process::ExitCode;

/// Runs the register-array examples and the gated MLP against CPU
/// references, then checks the fused bias+ReLU matmul
/// (`relu(A·Bᵀ + bias)`) and, on a GPU, times it against the same matmul
/// without epilogue on the same inputs; without a GPU the same checks run
/// on the CPU emulator at small sizes (no timing).
#[derive(Parser)]
#[command(name = "fused")]
struct Args {
    /// Time one shape (4096³) for two rounds instead of three shapes for five.
    #[arg(long)]
    quick: bool,
}

fn main() -> ExitCode {
    let Args { quick } = Args::parse();
    let dev = match Device::gpu_or_emulator() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // A GPU's line names its SM count here; the emulator's says it itself.
    let sms = if dev.is_gpu() { format!(" ({} SMs)", dev.sm_count()) } else { String::new() };
    println!("device: {}{sms}", dev.describe());
    let on = if dev.is_gpu() { "" } else { " (emulator)" };
    let mut ok = true;
    let blocks = if dev.is_gpu() { 264 } else { 2 };
    for (name, r) in [("array_wgmma_ops", wgmma_ops(&dev)), ("array_strided_ops", strided_ops(&dev, blocks))] {
        match r {
            Ok(o) => println!("ok    {name}: {} elements equal the reference{on}", o.checked),
            Err(e) => {
                ok = false;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    // A gated MLP (relu(X·W1ᵀ) * (X·W3ᵀ)) written on the library's
    // multi-operand GEMM, at a ragged shape.
    let (gm, gn, gk) = if dev.is_gpu() { (1000, 1032, 1000) } else { (200, 136, 200) };
    match examples::gated::reglu_error(&dev, gm, gn, gk) {
        Ok(e) if e < 2e-3 => println!("ok    reglu {gm} x {gn} x {gk}: rel. Frobenius error {e:.2e}{on}"),
        Ok(e) => (ok, _) = (false, println!("FAIL  reglu: rel. Frobenius error {e:.2e}")),
        Err(e) => (ok, _) = (false, println!("FAIL  reglu: {e}")),
    }
    if !dev.is_gpu() {
        // K = 5 x 64: one step more than the ring's 4 stages, so a slot is
        // refilled after its release (the emulator warns when none is).
        match bias_relu(&dev, 128, 256, 320) {
            Ok(e) if e < 1e-2 => println!("ok    matmul_bias_relu 128 x 256 x 320: rel. Frobenius error {e:.2e}{on}"),
            Ok(e) => (ok, _) = (false, println!("FAIL  matmul_bias_relu: rel. Frobenius error {e:.2e}")),
            Err(e) => (ok, _) = (false, println!("FAIL  matmul_bias_relu: {e}")),
        }
        println!("skipped: timing the bias+ReLU matmul against the plain one (GPU-only: CUDA events)");
        return if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let run = || -> Result<bool, Box<dyn std::error::Error>> {
        let mut ok = true;
        println!("\n| M x N x K | plain TFLOP/s | bias+ReLU TFLOP/s | fused / plain | rel. Frobenius error |\n|---|---:|---:|---:|---:|");
        let shapes: &[(usize, usize, usize, usize)] = if quick { &[(4096, 4096, 4096, 32)] } else { &[(4096, 4096, 4096, 64), (8192, 8192, 8192, 16), (132 * 128, 4 * 128, 10 * 64, 256)] };
        for &(m, n, k, rows) in shapes {
            let r = bench_bias_relu(&dev, m, n, k, rows, if quick { 2 } else { 5 }, 30)?;
            let bad = !(r.rel_err < 1e-2);
            ok &= !bad;
            println!(
                "| {m} x {n} x {k} | {:.1} | {:.1} | {:.3} | {:.2e}{} |",
                r.plain_tflops,
                r.fused_tflops,
                r.fused_tflops / r.plain_tflops,
                r.rel_err,
                if bad { " FAIL" } else { "" }
            );
        }
        Ok(ok)
    };
    match run() {
        Ok(all) if ok && all => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
