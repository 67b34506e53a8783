//! Runs the seed reference's first examples on the GPU, or on the CPU
//! emulator when there is none (small sizes; it checks deadlocks, races and
//! barrier misuse), and checks each against a CPU reference.
//!
//! ```text
//! cargo run --release -p examples --bin first_kernels [-- NAME...]
//! ```
//! NAME is one of increment, producer_consumer, cluster_exchange,
//! semaphore_signal, grid_sum, double_checked, cluster_allreduce16 (a cluster of 16
//! CTAs, a non-portable size) (default: all). `KERNEL_DEVICE=emulator`
//! picks the emulator on a GPU machine too. Exit status 0 only if every
//! example ran and matched the reference.
use clap::builder::PossibleValuesParser;
use clap::Parser;
use examples::FIRST_EXAMPLES;
use kernel_host::Device;
use std::process::ExitCode;

/// Runs the seed reference's first examples on the GPU, or on the CPU
/// emulator when there is none (small sizes; it checks deadlocks, races and
/// barrier misuse), and checks each against a CPU reference.
/// `KERNEL_DEVICE=emulator` picks the emulator on a GPU machine too.
#[derive(Parser)]
#[command(name = "first_kernels")]
struct Args {
    /// The examples to run (default: all).
    #[arg(value_name = "NAME", value_parser = PossibleValuesParser::new(FIRST_EXAMPLES.map(|(name, _)| name)))]
    wanted: Vec<String>,
}

fn main() -> ExitCode {
    let Args { wanted } = Args::parse();
    let dev = match Device::gpu_or_emulator() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("device: {}", dev.describe());
    match dev.load(&kernels::DEVICE_CODE) {
        Ok(prog) => match prog.as_module() {
            Some(module) => println!(
                "module: {} {} ({})",
                module.crate_name(),
                module.arch(),
                if module.image().cubin.is_empty() { "PTX, JIT-compiled by the driver" } else { "cubin from ptxas" }
            ),
            None => println!("module: {} (host builds of the kernels, run by the emulator)", prog.crate_name()),
        },
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let on = if dev.is_gpu() { "" } else { " (emulator)" };
    let mut failed = 0;
    for (name, run) in FIRST_EXAMPLES {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        match run(&dev) {
            Ok(o) => println!("ok    {name:<19} {} elements equal the CPU reference{on}; first outputs {:?}", o.checked, o.sample),
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
