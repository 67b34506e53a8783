//! Register arrays and the fused bias+ReLU matmul on an H100/H200: the
//! `arrays` example kernels checked exactly against CPU references, then
//! `relu(A·Bᵀ + bias)` (`fused::matmul_bias_relu<4, 8>`) checked against the
//! CPU and timed against the same matmul without epilogue
//! (`hopper::matmul_warp_specialized<4, 8>`) in this process on the same
//! inputs, alternating the two for several rounds.
//!
//! ```text
//! fused [--quick]
//! ```
//! Exit status 0 only if every check passes.
use examples::arrays::{bench_bias_relu, emu_bias_relu, emu_strided_ops, emu_wgmma_ops, run_strided_ops, run_wgmma_ops};
use kernel_host::Gpu;
use std::process::ExitCode;

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) if e.is_no_gpu() => {
            println!("{e}\nrunning on the CPU emulator instead (small sizes, correctness only)");
            let emu = kernel_host::emulate::Emulator::new(1);
            let mut ok = true;
            match emu_wgmma_ops(&emu) {
                Ok(o) => println!("ok    array_wgmma_ops: {} elements equal the reference (emulator)", o.checked),
                Err(e) => (ok, _) = (false, println!("FAIL  array_wgmma_ops: {e}")),
            }
            match emu_strided_ops(&emu, 2) {
                Ok(o) => println!("ok    array_strided_ops: {} elements equal the reference (emulator)", o.checked),
                Err(e) => (ok, _) = (false, println!("FAIL  array_strided_ops: {e}")),
            }
            match emu_bias_relu(&emu, 128, 256, 128) {
                Ok(e) if e < 1e-2 => println!("ok    matmul_bias_relu 128 x 256 x 128: rel. Frobenius error {e:.2e} (emulator)"),
                Ok(e) => (ok, _) = (false, println!("FAIL  matmul_bias_relu: rel. Frobenius error {e:.2e}")),
                Err(e) => (ok, _) = (false, println!("FAIL  matmul_bias_relu: {e}")),
            }
            return if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE };
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("device: {} ({} SMs)", gpu.name(), gpu.sm_count());
    let run = || -> Result<bool, Box<dyn std::error::Error>> {
        let module = gpu.load(&kernels::DEVICE_CODE)?;
        let mut ok = true;
        for (name, r) in [("array_wgmma_ops", run_wgmma_ops(&gpu, &module)), ("array_strided_ops", run_strided_ops(&gpu, &module))] {
            match r {
                Ok(o) => println!("ok    {name}: {} elements equal the reference", o.checked),
                Err(e) => {
                    ok = false;
                    println!("FAIL  {name}: {e}");
                }
            }
        }
        println!("\n| M x N x K | plain TFLOP/s | bias+ReLU TFLOP/s | fused / plain | rel. Frobenius error |\n|---|---:|---:|---:|---:|");
        let shapes: &[(usize, usize, usize, usize)] = if quick { &[(4096, 4096, 4096, 32)] } else { &[(4096, 4096, 4096, 64), (8192, 8192, 8192, 16), (132 * 128, 4 * 128, 10 * 64, 256)] };
        for &(m, n, k, rows) in shapes {
            let r = bench_bias_relu(&gpu, &module, m, n, k, rows, if quick { 2 } else { 5 }, 30)?;
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
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
