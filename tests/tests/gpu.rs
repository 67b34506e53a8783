//! The example kernels on a real GPU.
//!
//! They need an NVIDIA H100/H200 and are `#[ignore]`d, so `cargo test` lists
//! them as ignored on machines without one (CI). On a GPU machine, run the
//! test binary with `--ignored` (see README, "Running on a GPU"); run with
//! `--ignored` without a GPU, each says it skipped.
use kernel_host::{Device, Gpu};

/// GPU 0, or `None` after saying why the test is skipped (no CUDA GPU).
fn gpu_device() -> Option<Device> {
    let dev = Device::gpu_or_emulator().expect("the device opens");
    if dev.is_gpu() {
        Some(dev)
    } else {
        eprintln!("SKIPPED: this test needs a CUDA GPU; the device is {}", dev.describe());
        None
    }
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn first_examples_match_cpu_reference_on_gpu() {
    let Some(dev) = gpu_device() else { return };
    eprintln!("device: {}", dev.describe());
    for (name, run) in examples::FIRST_EXAMPLES {
        match run(&dev) {
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

/// A cluster of 16 CTAs, a non-portable size: `Module::kernel` sets
/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` for a
/// `#[kernel(.., non_portable_cluster)]` kernel, the driver can co-schedule
/// one cluster (the H100 supports 16 with the opt-in), and two clusters of
/// `cluster_allreduce16` match the CPU reference.
#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn cluster_of_16_runs_with_the_non_portable_opt_in_on_gpu() {
    use kernel_host::cudarc::driver::{result::function, sys::CUfunction_attribute};
    use kernels::cluster::cluster_allreduce16;
    let Some(dev) = gpu_device() else { return };
    let gpu = dev.as_gpu().expect("a GPU device");
    let module = gpu.load(&kernels::DEVICE_CODE).expect("module loads");
    let kernel = module.kernel::<cluster_allreduce16>().expect("the kernel loads");
    // SAFETY: a live function of a loaded module.
    let allowed = unsafe {
        function::get_function_attribute(kernel.cu_function(), CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)
    };
    assert_eq!(allowed, Ok(1), "Module::kernel sets the non-portable opt-in");
    let clusters = kernel.max_active_clusters().unwrap_or_else(|e| panic!("occupancy query: {e}"));
    eprintln!("{}: {clusters} clusters of 16 CTAs can run at once", gpu.name());
    assert!(clusters >= 1, "the GPU cannot co-schedule a cluster of 16 CTAs of 32 threads");
    match examples::cluster_allreduce16(&dev) {
        Ok(o) => eprintln!("ok cluster_allreduce16: {} elements", o.checked),
        Err(e) => panic!("cluster_allreduce16: {e}"),
    }
}

/// The same 16-CTA kernel with the opt-in cleared on its function (as if
/// the host had not set it): the launch is refused with
/// `Error::ClusterNotSchedulable`, naming the cluster and the fix, not a
/// crash or a sticky error; the context stays usable, and the kernel loaded
/// again (opt-in set again) runs.
#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn cluster_of_16_without_the_opt_in_is_a_clear_error_on_gpu() {
    use kernel_host::cudarc::driver::{result::function, sys::CUfunction_attribute};
    use kernels::cluster::{cluster_allreduce16, ALLREDUCE16_CTAS, ALLREDUCE16_LEN};
    let Some(dev) = gpu_device() else { return };
    let gpu = dev.as_gpu().expect("a GPU device");
    let module = gpu.load(&kernels::DEVICE_CODE).expect("module loads");
    let kernel = module.kernel::<cluster_allreduce16>().expect("the kernel loads");
    // SAFETY: a live function of a loaded module.
    unsafe {
        function::set_function_attribute(kernel.cu_function(), CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0)
    }
    .expect("clear the opt-in");
    match kernel.max_active_clusters() {
        Ok(n) => eprintln!("without the opt-in, cuOccupancyMaxActiveClusters says {n}"),
        Err(e) => eprintln!("without the opt-in, the occupancy query is refused: {e}"),
    }
    let n = ALLREDUCE16_CTAS * ALLREDUCE16_LEN;
    let dx = gpu.upload(&vec![1f32; n]).expect("upload");
    let mut dy = gpu.upload(&vec![0f32; n]).expect("upload");
    let err = kernel
        .launch_sync(ALLREDUCE16_CTAS as u32, (&dx, &mut dy, 1u32))
        .expect_err("a cluster of 16 without the opt-in must not launch");
    let msg = err.to_string();
    eprintln!("refused as expected: {msg}");
    assert!(matches!(err, kernel_host::Error::ClusterNotSchedulable { .. }), "not ClusterNotSchedulable: {msg}");
    assert!(msg.contains("in clusters of (16, 1, 1) = 16 CTAs"), "{msg}");
    assert!(msg.contains("NON_PORTABLE_CLUSTER_SIZE_ALLOWED") && msg.contains("fix:"), "{msg}");
    assert!(!err.cuda().is_some_and(|c| c.is_sticky()), "{msg}");
    // The context is fine: the kernel loaded again (Program::kernel sets the
    // opt-in) runs.
    match examples::cluster_allreduce16(&dev) {
        Ok(o) => eprintln!("after the refusal, ok cluster_allreduce16: {} elements", o.checked),
        Err(e) => panic!("after the refusal: {e}"),
    }
}

/// `ClusterBarrier` on the GPU: `cluster::cluster_allreduce` (a 2 x 2
/// cluster reducing through DSMEM with `ClusterBarrier<X>`, `<Y>`,
/// `<WholeCluster>`, 3 steps) and `cluster::cluster_axis_sums` (a 2 x 2 x 2
/// cluster, `ClusterBarrier<YZ>` and `<X>`) match their CPU references,
/// as on the emulator (`tests/tests/emulator.rs`).
#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn cluster_barriers_match_the_cpu_reference_on_gpu() {
    use kernels::cluster::{cluster_allreduce, cluster_axis_sums, ALLREDUCE_LEN as L};
    let Some(dev) = gpu_device() else { return };
    let prog = dev.load(&kernels::DEVICE_CODE).expect("module loads");
    let steps = 3usize;
    let x: Vec<f32> = (0..4 * steps * L).map(|i| (i % 29) as f32 - 7.0).collect();
    let want = examples::allreduce2x2_reference(&x, steps);
    let mut dx = dev.upload(&x).expect("upload");
    let mut dy = dev.upload(&vec![f32::NAN; x.len()]).expect("upload");
    prog.kernel::<cluster_allreduce>().expect("loads").launch_sync((2u32, 2u32), (&mut dx, &mut dy, steps as u32)).expect("cluster_allreduce runs");
    assert_eq!(dev.download(&dy).expect("download"), want, "cluster_allreduce");

    let want = examples::axis_sums_reference();
    let mut dy = dev.upload(&vec![0u32; 16]).expect("upload");
    prog.kernel::<cluster_axis_sums>().expect("loads").launch_sync((2u32, 2u32, 2u32), (&mut dy,)).expect("cluster_axis_sums runs");
    assert_eq!(dev.download(&dy).expect("download"), want, "cluster_axis_sums");
    eprintln!("ok cluster_allreduce (2 x 2, 3 steps) and cluster_axis_sums (2 x 2 x 2)");
}

/// The host's occupancy query: on the GPU the driver's answer
/// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`) equals what
/// `kernel_spec::occupancy`'s rules give from the loaded function's
/// registers, and what the emulator gives from the ptxas report (small
/// SIMT kernels limited by threads, a barrier kernel, the warp-specialized
/// matmul limited by registers and shared memory).
#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn occupancy_of_the_driver_the_rules_and_the_emulator_agree_on_gpu() {
    use kernel_device::launch::HostEntry;
    fn check<K: HostEntry>(dev: &Device, emu: &Device) {
        let gpu = dev.load(&kernels::DEVICE_CODE).unwrap().kernel::<K>().unwrap().occupancy().unwrap();
        let rules = emu.load(&kernels::DEVICE_CODE).unwrap().kernel::<K>().unwrap().occupancy().unwrap();
        eprintln!("GPU: {gpu}\nemulator: {rules}");
        assert!(gpu.from_driver && !rules.from_driver);
        assert_eq!(gpu.blocks_per_sm, gpu.rules.blocks, "{}: the driver and the rules on its registers", K::NAME);
        assert_eq!(gpu.blocks_per_sm, rules.blocks_per_sm, "{}: the driver and the rules on the ptxas report", K::NAME);
    }
    let Some(dev) = gpu_device() else { return };
    let emu = Device::emulator();
    check::<kernels::first::increment>(&dev, &emu);
    check::<kernels::first::producer_consumer>(&dev, &emu);
    check::<kernels::hopper::matmul_warp_specialized<4, 8>>(&dev, &emu);
}
