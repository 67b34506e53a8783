//! Runs the SIMT examples (warp collectives, block reductions, math and
//! conversions, vector/read-only/atomic global memory, warp-per-row
//! softmax) on the GPU, or on the CPU emulator when there is none, checks
//! each against its CPU reference, and prints the math operations' largest
//! error as a fraction of the documented bound.
//!
//! ```text
//! cargo run --release -p examples --bin simt
//! ```
//! Exit status 0 only if every example matched its reference.
use clap::Parser;
use examples::simt::{math_ops_errors, MATH_NAMES, SIMT_EXAMPLES};
use kernel_host::Device;
use std::process::ExitCode;

/// Runs the SIMT examples (warp collectives, block reductions, math and
/// conversions, global memory, warp-per-row softmax) on the GPU, or on the
/// CPU emulator when there is none, checks each against its CPU reference,
/// and prints the math operations' largest error as a fraction of the
/// documented bound. There are no options.
#[derive(Parser)]
#[command(name = "simt")]
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
    let mut failed = 0;
    for (name, run) in SIMT_EXAMPLES {
        match run(&dev) {
            Ok(o) => println!("ok    {name:<18} {} elements match the CPU reference; first outputs {:?}", o.checked, o.sample),
            Err(e) => {
                failed += 1;
                println!("FAIL  {name:<18} {e}");
            }
        }
    }
    // The approximate math: largest error / documented bound, on this device
    // and on the emulator (below 1 passes).
    let here = math_ops_errors(&dev);
    let on_emu = math_ops_errors(&Device::emulator());
    if let (Ok((_, here)), Ok((_, emu))) = (&here, &on_emu) {
        println!("math: largest |result - exact| / bound (bound = PTX ISA max error + 1 ulp), this device vs the emulator");
        for (k, name) in MATH_NAMES.iter().enumerate() {
            if here[k] > 0.0 || emu[k] > 0.0 {
                println!("  {name:<16} {:>8.4} {:>8.4}", here[k], emu[k]);
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
