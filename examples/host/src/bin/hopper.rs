//! The Hopper examples on an H100/H200: the TMA multicast copy, the TMA warp
//! roles, then the pipelining guide's matmuls (`C = A · Bᵀ`, f16 in, f32
//! accumulate, f16 out) checked against a CPU reference and timed against
//! cuBLAS on the same iid N(0, 1) inputs (CUDA events, median of `ITERS`
//! runs after warm-up), and the wgmma variants. Without a GPU the same
//! functions run on the CPU emulator: every matmul at `EMULATED` (128 x
//! 256 x 512: 8 K steps, so every stage of the 4-stage rings is refilled
//! after its release, the reuse the pipelines exist for), correctness only
//! (the timing and cuBLAS are GPU-only; it says so).
//!
//! ```text
//! hopper [--quick]
//! ```
//! Exit status 0 only if everything is correct (relative Frobenius error
//! below 1e-2 for every contender).
use clap::Parser;
use examples::hopper::{bench_shape, matmul, multicast_copy, warp_roles, wgmma_fp8, wgmma_transposed, wgmma_variants, MATMULS};
use kernel_host::{Blas, Device};
use std::process::ExitCode;

/// (M, N, K, rows checked on the CPU).
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (132 * 128, 4 * 128, 10 * 64, usize::MAX), // the pipelining guide's shape, fully checked
    (4096, 4096, 4096, 256),
    (8192, 8192, 8192, 128),
    (2048, 2048, 2048, 512),
];
const TOLERANCE: f64 = 1e-2;
/// (M, N, K) of the matmuls on the emulator: K = 8 x `TILE_K`, more steps
/// than the deepest ring (4) has stages, so every slot is reused (the
/// emulator warns about a pipeline that never reuses one); M x N is one
/// warp-specialized tile, two one-warpgroup ones.
const EMULATED: (usize, usize, usize) = (128, 256, 512);

/// Runs the Hopper examples: the TMA multicast copy, the TMA warp roles,
/// the pipelining guide's matmuls (f16 in, f32 accumulate, f16 out) checked
/// against a CPU reference and, on a GPU, timed against cuBLAS on the same
/// inputs, and the wgmma variants. Without a GPU the same functions run on
/// the CPU emulator at 128 x 256 x 512 (8 K steps, more than any ring has
/// stages; correctness only, no timing).
#[derive(Parser)]
#[command(name = "hopper")]
struct Args {
    /// Time the pipelining guide's shape only, with 10 runs instead of 50.
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
    let run = || -> Result<bool, Box<dyn std::error::Error>> {
        let mut ok = true;
        match multicast_copy(&dev) {
            Ok(o) => println!("ok    multicast_copy: {} elements equal the reference{on}", o.checked),
            Err(e) => {
                ok = false;
                println!("FAIL  multicast_copy: {e}");
            }
        }
        match warp_roles(&dev) {
            Ok(o) => println!("ok    warp_roles (TMA warp + consumer warp): {} elements equal the reference{on}", o.checked),
            Err(e) => {
                ok = false;
                println!("FAIL  warp_roles: {e}");
            }
        }
        if dev.is_gpu() {
            let blas = Blas::new(dev.require_gpu("cuBLAS")?)?;
            println!("\n| M x N x K | kernel | median ms | TFLOP/s | vs cuBLAS | rel. Frobenius error |");
            println!("|---|---|---:|---:|---:|---:|");
            let shapes = if quick { &SHAPES[..1] } else { &SHAPES[..] };
            for &(m, n, k, rows) in shapes {
                let results = bench_shape(&dev, &blas, m, n, k, rows, if quick { 10 } else { 50 })?;
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
        } else {
            let (m, n, k) = EMULATED;
            println!("skipped: timing against cuBLAS (GPU-only: CUDA events and cuBLAS); the matmuls run at {m} x {n} x {k} for correctness");
            for name in MATMULS {
                match matmul(&dev, name, m, n, k, 42) {
                    Ok(e) if e < TOLERANCE => println!("ok    {name}: {m} x {n} x {k}, rel. Frobenius error {e:.2e}{on}"),
                    Ok(e) => {
                        ok = false;
                        println!("FAIL  {name}: rel. Frobenius error {e:.2e}{on}");
                    }
                    Err(e) => {
                        ok = false;
                        println!("FAIL  {name}: {e}");
                    }
                }
            }
        }
        // Last: a kernel that hangs here cannot hide the numbers above.
        match wgmma_variants(&dev) {
            Ok(errs) => {
                let names = ["f32 acc, A+B in SMEM", "f16 acc, A+B in SMEM", "f32 acc, A in registers"];
                for (name, e) in names.iter().zip(errs) {
                    let bad = !(e < TOLERANCE);
                    ok &= !bad;
                    println!("{}  wgmma_variants ({name}, B from a 3-D map): rel. Frobenius error {e:.2e}{on}", if bad { "FAIL" } else { "ok  " });
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  wgmma_variants: {e}");
            }
        }
        // FP8 products are exact; the bound covers the MMA's accumulation
        // (the hardware's is narrower than f32 for FP8 inputs).
        match wgmma_fp8(&dev) {
            Ok(errs) => {
                for (name, e) in ["e4m3", "e5m2"].iter().zip(errs) {
                    let bad = !(e < 1e-3);
                    ok &= !bad;
                    println!("{}  wgmma_fp8 (m64n256k32.f32.{name}.{name}): rel. Frobenius error {e:.2e} (bound 1e-3){on}", if bad { "FAIL" } else { "ok  " });
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  wgmma_fp8: {e}");
            }
        }
        // Transposed SMEM views (MN-major operands through the
        // descriptor's transpose bits): the same product three ways.
        match wgmma_transposed(&dev) {
            Ok(errs) => {
                for (name, e) in ["B transposed", "A transposed", "A and B transposed"].iter().zip(errs) {
                    let bad = !(e < TOLERANCE);
                    ok &= !bad;
                    println!("{}  wgmma_transposed ({name}): rel. Frobenius error {e:.2e}{on}", if bad { "FAIL" } else { "ok  " });
                }
            }
            Err(e) => {
                ok = false;
                println!("FAIL  wgmma_transposed: {e}");
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
