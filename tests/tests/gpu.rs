//! The example kernels on a real GPU.
//!
//! They need an NVIDIA H100/H200 and are `#[ignore]`d, so `cargo test` lists
//! them as ignored on machines without one (CI). On a GPU machine, run the
//! test binary with `--ignored` (see README, "Running on a GPU").
use kernel_host::Gpu;

#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn first_examples_match_cpu_reference_on_gpu() {
    let gpu = Gpu::new(0).expect("a CUDA GPU");
    let module = gpu.load(&kernels::DEVICE_CODE).expect("module loads");
    eprintln!("device: {} {:?}, module {}", gpu.name(), gpu.compute_capability(), module.arch());
    for (name, run) in examples::FIRST_EXAMPLES {
        match run(&gpu, &module) {
            Ok(o) => eprintln!("ok {name}: {} elements", o.checked),
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Without a GPU, every entry point says so with an error value, not a panic.
#[test]
fn no_gpu_is_an_error_value() {
    match Gpu::new(0) {
        Ok(gpu) => eprintln!("a GPU is present ({}): nothing to check here", gpu.name()),
        Err(e) => {
            assert!(e.is_no_gpu(), "{e}");
            assert!(e.to_string().contains("no CUDA GPU found"), "{e}");
        }
    }
}
