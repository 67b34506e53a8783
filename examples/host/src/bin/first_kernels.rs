//! Runs the seed reference's first examples on the GPU and checks each
//! against a CPU reference.
//!
//! ```text
//! cargo run --release -p examples --bin first_kernels [-- NAME...]
//! ```
//! NAME is one of increment, producer_consumer, cluster_exchange,
//! semaphore_signal, double_checked, cluster_allreduce16 (a cluster of 16
//! CTAs, a non-portable size) (default: all). Exit status 0 only if every example ran
//! and matched the reference.
use examples::FIRST_EXAMPLES;
use kernel_host::Gpu;
use std::process::ExitCode;

fn main() -> ExitCode {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    for w in &wanted {
        if !FIRST_EXAMPLES.iter().any(|(n, _)| n == w) {
            let names: Vec<&str> = FIRST_EXAMPLES.iter().map(|(n, _)| *n).collect();
            eprintln!("unknown example `{w}`; known: {}", names.join(", "));
            return ExitCode::from(2);
        }
    }
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) if e.is_no_gpu() => {
            println!("{e}");
            println!("running the examples on the CPU emulator instead (deterministic scheduler, seed 1; checks deadlocks and barrier misuse)");
            return run_emulated(&wanted);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (major, minor) = gpu.compute_capability();
    println!("device: {} (sm_{major}{minor}, {} SMs)", gpu.name(), gpu.sm_count());
    let module = match gpu.load(&kernels::DEVICE_CODE) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("module: {} {} ({})", module.crate_name(), module.arch(), if module.image().cubin.is_empty() { "PTX, JIT-compiled by the driver" } else { "cubin from ptxas" });
    let mut failed = 0;
    for (name, run) in FIRST_EXAMPLES {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        match run(&gpu, &module) {
            Ok(o) => println!("ok    {name:<19} {} elements equal the CPU reference; first outputs {:?}", o.checked, o.sample),
            Err(e) => {
                failed += 1;
                println!("FAIL  {name:<19} {e}");
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The same examples on the CPU emulator.
fn run_emulated(wanted: &[String]) -> ExitCode {
    let emu = kernel_host::emulate::Emulator::new(1);
    let mut failed = 0;
    for (name, run) in examples::emulated::FIRST_EXAMPLES {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        match run(&emu) {
            Ok(o) => println!("ok    {name:<19} {} elements equal the CPU reference (emulator); first outputs {:?}", o.checked, o.sample),
            Err(e) => {
                failed += 1;
                println!("FAIL  {name:<19} {e}");
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
