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
use examples::simt::{math_ops_errors, Target, MATH_NAMES, SIMT_EXAMPLES};
use kernel_host::emulate::Emulator;
use kernel_host::Gpu;
use std::process::ExitCode;

fn main() -> ExitCode {
    let emu = Emulator::new(1);
    let gpu = match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e) if e.is_no_gpu() => {
            println!("{e}; running on the CPU emulator instead (seed 1)");
            None
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let module = match &gpu {
        Some(g) => match g.load(&kernels::DEVICE_CODE) {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let target = match (&gpu, &module) {
        (Some(g), Some(m)) => {
            let (major, minor) = g.compute_capability();
            println!("device: {} (sm_{major}{minor}), module {}", g.name(), m.arch());
            Target::Gpu(g, m)
        }
        _ => Target::Emu(&emu),
    };
    let mut failed = 0;
    for (name, run) in SIMT_EXAMPLES {
        match run(target) {
            Ok(o) => println!("ok    {name:<18} {} elements match the CPU reference; first outputs {:?}", o.checked, o.sample),
            Err(e) => {
                failed += 1;
                println!("FAIL  {name:<18} {e}");
            }
        }
    }
    // The approximate math: largest error / documented bound, on this target
    // and on the emulator (below 1 passes).
    let here = math_ops_errors(target);
    let on_emu = math_ops_errors(Target::Emu(&emu));
    if let (Ok((_, here)), Ok((_, emu))) = (&here, &on_emu) {
        println!("math: largest |result - exact| / bound (bound = PTX ISA max error + 1 ulp), this target vs the emulator");
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
