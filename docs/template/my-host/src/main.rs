//! Runs the template's kernels on the GPU if one is usable, else on the CPU
//! emulator (it says which), checks each against its CPU reference, and
//! exits with status 1 on a mismatch or an error.
use kernel_host::Device;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dev = match Device::gpu_or_emulator() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("error: no device: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("running on {}", dev.describe());
    // Ragged sizes (the last block is partly idle), small enough for the
    // emulator (at most 4096 emulated threads per launch).
    let results = [my_host::axpy(&dev, 3001), my_host::row_sums(&dev, 37, 1000)];
    let mut failed = false;
    for result in results {
        match result {
            Ok(c) if c.passed() => println!("{}: {} elements match the CPU reference", c.name, c.elements),
            Ok(c) => {
                let (i, got, want) = c.first_wrong.expect("a failed check has a first wrong element");
                println!("{}: MISMATCH: {} of {} elements wrong; first at {i}: got {got}, want {want}", c.name, c.wrong, c.elements);
                failed = true;
            }
            Err(e) => {
                println!("error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
