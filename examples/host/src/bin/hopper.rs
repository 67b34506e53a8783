//! The Hopper examples on an H100/H200: the TMA multicast copy, then the
//! pipelining guide's matmuls (`C = A · Bᵀ`, f16 in, f32 accumulate, f16
//! out) checked against a CPU reference and timed against cuBLAS on the same
//! iid N(0, 1) inputs (CUDA events, median of `ITERS` runs after warm-up).
//!
//! ```text
//! hopper [--quick]
//! ```
//! Exit status 0 only if everything is correct (relative Frobenius error
//! below 1e-2 for every contender).
use examples::hopper::{bench_shape, run_multicast, run_warp_roles, run_wgmma_variants};
use kernel_host::{Blas, Gpu};
use std::process::ExitCode;

/// (M, N, K, rows checked on the CPU).
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (132 * 128, 4 * 128, 10 * 64, usize::MAX), // the pipelining guide's shape, fully checked
    (4096, 4096, 4096, 256),
    (8192, 8192, 8192, 128),
    (2048, 2048, 2048, 512),
];
const TOLERANCE: f64 = 1e-2;

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) if e.is_no_gpu() => {
            println!("{e}");
            println!("running the Hopper examples on the CPU emulator instead (small shapes, correctness only: no timings)");
            return run_emulated();
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (major, minor) = gpu.compute_capability();
    println!("device: {} (sm_{major}{minor}, {} SMs)", gpu.name(), gpu.sm_count());
    let run = || -> Result<bool, Box<dyn std::error::Error>> {
        let module = gpu.load(&kernels::DEVICE_CODE)?;
        let blas = Blas::new(&gpu)?;
        let mut ok = true;
        match run_multicast(&gpu, &module) {
            Ok(o) => println!("ok    multicast_copy: {} elements equal the reference", o.checked),
            Err(e) => {
                ok = false;
                println!("FAIL  multicast_copy: {e}");
            }
        }
        match run_warp_roles(&gpu, &module) {
            Ok(o) => println!("ok    warp_roles (TMA warp + consumer warp): {} elements equal the reference", o.checked),
            Err(e) => {
                ok = false;
                println!("FAIL  warp_roles: {e}");
            }
        }
        println!("\n| M x N x K | kernel | median ms | TFLOP/s | vs cuBLAS | rel. Frobenius error |");
        println!("|---|---|---:|---:|---:|---:|");
        let shapes = if quick { &SHAPES[..1] } else { &SHAPES[..] };
        for &(m, n, k, rows) in shapes {
            let results = bench_shape(&gpu, &module, &blas, m, n, k, rows, if quick { 10 } else { 50 })?;
            // Ratios against cuBLAS on the same B layout: NT for ours with B
            // N x K, NN (the second row) for the `_kn` kernels.
            let (nt, nn) = (results[0].tflops, results[1].tflops);
            for r in &results {
                let cublas = if r.name.contains("_kn") || r.name.contains("K x N") { nn } else { nt };
                let bad = !(r.rel_err < TOLERANCE);
                ok &= !bad;
                println!(
                    "| {m} x {n} x {k} | {} | {:.4} | {:.1} | {:.2} | {:.2e}{} |",
                    r.name,
                    r.timing.median_ms,
                    r.tflops,
                    r.tflops / cublas,
                    r.rel_err,
                    if bad { " FAIL" } else { "" }
                );
            }
        }
        // Last: a kernel that hangs here cannot hide the numbers above.
        match run_wgmma_variants(&gpu, &module) {
            Ok(errs) => {
                let names = ["f32 acc, A+B in SMEM", "f16 acc, A+B in SMEM", "f32 acc, A in registers"];
                for (name, e) in names.iter().zip(errs) {
                    let bad = !(e < TOLERANCE);
                    ok &= !bad;
                    println!("{}  wgmma_variants ({name}, B from a 3-D map): rel. Frobenius error {e:.2e}", if bad { "FAIL" } else { "ok  " });
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  wgmma_variants: {e}");
            }
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

/// The Hopper examples on the CPU emulator: correctness at small sizes.
fn run_emulated() -> ExitCode {
    use examples::emulated;
    let emu = kernel_host::emulate::Emulator::new(1);
    let mut ok = true;
    let mut report = |name: &str, r: Result<String, examples::ExampleError>| match r {
        Ok(detail) => println!("ok    {name}: {detail} (emulator)"),
        Err(e) => {
            ok = false;
            println!("FAIL  {name}: {e}");
        }
    };
    report("multicast_copy", emulated::multicast_copy(&emu).map(|o| format!("{} elements equal the reference", o.checked)));
    report("warp_roles", emulated::warp_roles(&emu).map(|o| format!("{} elements equal the reference", o.checked)));
    report(
        "wgmma_variants",
        emulated::wgmma_variants(&emu).and_then(|errs| {
            if errs.iter().all(|e| *e < TOLERANCE) {
                Ok(format!("rel. Frobenius errors {:.2e} / {:.2e} / {:.2e}", errs[0], errs[1], errs[2]))
            } else {
                Err(examples::ExampleError::Mismatch { example: "wgmma_variants", index: 0, got: errs.iter().cloned().fold(0.0, f64::max) as f32, want: 0.0, wrong: 1 })
            }
        }),
    );
    for name in emulated::EMULATED_MATMULS {
        let r = emulated::matmul(&emu, name, 256, 256, 256, 42).and_then(|e| {
            if e < TOLERANCE {
                Ok(format!("256 x 256 x 256, rel. Frobenius error {e:.2e}"))
            } else {
                Err(examples::ExampleError::Mismatch { example: "matmul", index: 0, got: e as f32, want: 0.0, wrong: 1 })
            }
        });
        report(name, r);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
