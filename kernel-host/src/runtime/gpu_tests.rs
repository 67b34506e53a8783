//! Tests that need a CUDA GPU (sm_90a or sm_100a). They are `#[ignore]`d so
//! that `cargo test` passes on machines without one, and fail (rather than
//! skip) when run without a GPU:
//!
//! ```text
//! cargo test -p kernel-host --lib runtime::gpu_tests -- --ignored
//! ```
//!
//! The kernels are hand-written PTX, so these tests exercise the runtime
//! alone: parameter passing, `cuLaunchKernelEx` with and without a cluster
//! attribute, the >48 KiB dynamic shared memory opt-in, and error reporting.

use super::*;
use kernel_device::Semaphore;

/// The PTX module body (after `.version`/`.target`/`.address_size`).
macro_rules! ptx_body {
    () => {
        r#"
.extern .shared .align 16 .b8 dyn_smem[];

// out[0..7] = every parameter widened to 64 bits (floats as their bits).
.visible .entry params_echo(
	.param .u64 p_out,
	.param .u8 p_a,
	.param .b16 p_b,
	.param .u32 p_c,
	.param .u64 p_d,
	.param .b32 p_e,
	.param .b64 p_f,
	.param .u8 p_g
)
{
	.reg .b16 %rs<4>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<10>;

	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u8 %rs1, [p_a];
	cvt.u64.u16 %rd2, %rs1;
	st.global.u64 [%rd1], %rd2;
	ld.param.b16 %rs2, [p_b];
	cvt.s64.s16 %rd3, %rs2;
	st.global.u64 [%rd1+8], %rd3;
	ld.param.u32 %r1, [p_c];
	cvt.u64.u32 %rd4, %r1;
	st.global.u64 [%rd1+16], %rd4;
	ld.param.u64 %rd5, [p_d];
	st.global.u64 [%rd1+24], %rd5;
	ld.param.b32 %r2, [p_e];
	cvt.u64.u32 %rd6, %r2;
	st.global.u64 [%rd1+32], %rd6;
	ld.param.b64 %rd7, [p_f];
	st.global.u64 [%rd1+40], %rd7;
	ld.param.u8 %rs3, [p_g];
	cvt.u64.u16 %rd8, %rs3;
	st.global.u64 [%rd1+48], %rd8;
	ret;
}

// y[i] = a * x[i] + y[i] for i < n.
.visible .entry axpy(
	.param .u64 p_x,
	.param .u64 p_y,
	.param .f32 p_a,
	.param .u32 p_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<5>;
	.reg .b64 %rd<6>;

	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r4, %r1, %r2, %r3;
	ld.param.u32 %r5, [p_n];
	setp.ge.u32 %p1, %r4, %r5;
	@%p1 bra AXPY_DONE;
	ld.param.u64 %rd1, [p_x];
	ld.param.u64 %rd2, [p_y];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mul.wide.u32 %rd3, %r4, 4;
	add.u64 %rd4, %rd1, %rd3;
	add.u64 %rd5, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	ld.global.f32 %f2, [%rd5];
	ld.param.f32 %f3, [p_a];
	fma.rn.f32 %f4, %f3, %f1, %f2;
	st.global.f32 [%rd5], %f4;
AXPY_DONE:
	ret;
}

// out[3 * ctaid.x ..] = (cluster_ctarank, cluster_nctarank, nclusterid.x).
.visible .entry cluster_info(
	.param .u64 p_out
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<7>;
	.reg .b64 %rd<4>;

	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra CI_DONE;
	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r2, %ctaid.x;
	mul.lo.u32 %r3, %r2, 3;
	mul.wide.u32 %rd2, %r3, 4;
	add.u64 %rd3, %rd1, %rd2;
	mov.u32 %r4, %cluster_ctarank;
	mov.u32 %r5, %cluster_nctarank;
	mov.u32 %r6, %nclusterid.x;
	st.global.u32 [%rd3], %r4;
	st.global.u32 [%rd3+4], %r5;
	st.global.u32 [%rd3+8], %r6;
CI_DONE:
	ret;
}

// out[0] = dynamic shared memory size; out[1] = a value written to and
// read back from its last word.
.visible .entry smem_probe(
	.param .u64 p_out
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<2>;

	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra SP_DONE;
	mov.u32 %r2, %dynamic_smem_size;
	mov.u32 %r3, dyn_smem;
	add.u32 %r4, %r3, %r2;
	sub.u32 %r4, %r4, 4;
	mov.u32 %r6, 12345;
	st.shared.u32 [%r4], %r6;
	ld.shared.u32 %r5, [%r4];
	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	st.global.u32 [%rd1], %r2;
	st.global.u32 [%rd1+4], %r5;
SP_DONE:
	ret;
}

// Thread 0 of every CTA adds 1 to the semaphore.
.visible .entry semaphore_bump(
	.param .u64 p_sem
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	.reg .b64 %rd<2>;

	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra SB_DONE;
	ld.param.u64 %rd1, [p_sem];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r2, 1;
	red.release.gpu.global.add.u32 [%rd1], %r2;
SB_DONE:
	ret;
}

// A device panic.
.visible .entry trap_kernel()
{
	trap;
	ret;
}
"#
    };
}

const PTX_SM90A: &str = concat!(
    ".version 8.0\n.target sm_90a\n.address_size 64\n",
    ptx_body!()
);
const PTX_SM100A: &str = concat!(
    ".version 8.6\n.target sm_100a\n.address_size 64\n",
    ptx_body!()
);

static CODE: DeviceCode = DeviceCode {
    crate_name: "runtime_test_kernels",
    images: &[
        DeviceImage {
            arch: "sm_90a",
            ptx: PTX_SM90A,
            cubin: &[],
            ptxas_report: "",
        },
        DeviceImage {
            arch: "sm_100a",
            ptx: PTX_SM100A,
            cubin: &[],
            ptxas_report: "",
        },
    ],
};

/// Declares a `KernelSpec` the way `#[kernel]` would.
macro_rules! spec {
    ($ty:ident, $name:literal, block: $block:expr, cluster: $cluster:expr, smem: $smem:expr, params: $params:ty) => {
        struct $ty;
        impl KernelSpec for $ty {
            const NAME: &'static str = $name;
            const BLOCK: Dim3 = $block;
            const CLUSTER: Dim3 = $cluster;
            const SMEM_BYTES: u32 = $smem;
            type Params = $params;
        }
    };
}

const ONE: Dim3 = Dim3::new(1, 1, 1);

spec!(ParamsEcho, "params_echo", block: ONE, cluster: ONE, smem: 0,
      params: (*mut u64, u8, i16, u32, i64, f32, f64, bool));
spec!(Axpy, "axpy", block: Dim3::new(128, 1, 1), cluster: ONE, smem: 0,
      params: (*const f32, *mut f32, f32, u32));
spec!(ClusterInfo2, "cluster_info", block: Dim3::new(32, 1, 1), cluster: Dim3::new(2, 1, 1),
      smem: 0, params: (*mut u32,));
spec!(ClusterInfoNone, "cluster_info", block: Dim3::new(32, 1, 1), cluster: ONE, smem: 0,
      params: (*mut u32,));
/// `cluster_info` in clusters of 16 CTAs, opting in to the non-portable size
/// as `#[kernel(.., non_portable_cluster)]` does.
struct ClusterInfo16;
impl KernelSpec for ClusterInfo16 {
    const NAME: &'static str = "cluster_info";
    const BLOCK: Dim3 = Dim3::new(32, 1, 1);
    const CLUSTER: Dim3 = Dim3::new(16, 1, 1);
    const NON_PORTABLE_CLUSTER: bool = true;
    const SMEM_BYTES: u32 = 0;
    type Params = (*mut u32,);
}
// The same shape without the opt-in (`#[kernel]` refuses it at compile
// time; a hand-written spec reaches the launch checks).
spec!(ClusterInfo16Portable, "cluster_info", block: Dim3::new(32, 1, 1), cluster: Dim3::new(16, 1, 1),
      smem: 0, params: (*mut u32,));
spec!(SmemProbe, "smem_probe", block: Dim3::new(32, 1, 1), cluster: ONE, smem: 100 * 1024,
      params: (*mut u32,));
spec!(SmemHuge, "smem_probe", block: Dim3::new(32, 1, 1), cluster: ONE, smem: 300 * 1024,
      params: (*mut u32,));
spec!(SemaphoreBump, "semaphore_bump", block: Dim3::new(32, 1, 1), cluster: ONE, smem: 0,
      params: (Semaphore,));
spec!(TrapKernel, "trap_kernel", block: ONE, cluster: ONE, smem: 0, params: ());
spec!(Missing, "not_a_kernel", block: ONE, cluster: ONE, smem: 0, params: ());

fn gpu() -> Gpu {
    match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => panic!("this test needs a CUDA GPU: {e}"),
    }
}

fn module(gpu: &Gpu) -> Module {
    match gpu.load(&CODE) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    }
}

fn ok<T>(r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_describes_itself() {
    let gpu = gpu();
    eprintln!(
        "{}: sm {:?}, {} SMs, {} bytes smem/CTA",
        gpu.name(),
        gpu.arch(),
        gpu.sm_count(),
        gpu.max_smem_per_block()
    );
    assert!(
        gpu.arch().is_some(),
        "{} is not sm_90a or sm_100a",
        gpu.describe()
    );
    assert!(gpu.sm_count() > 0);
    assert!(gpu.max_smem_per_block() > DEFAULT_MAX_DYNAMIC_SMEM);
    ok(gpu.synchronize());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_buffers_round_trip() {
    let gpu = gpu();
    let data: Vec<u32> = (0..1000).map(|i| i * 7 + 3).collect();
    let buf = ok(gpu.upload(&data));
    assert_eq!(buf.len(), 1000);
    assert_eq!(ok(gpu.download(&buf)), data);
    let zeros = ok(gpu.zeros::<f64>(33));
    assert_eq!(ok(gpu.download(&zeros)), vec![0.0; 33]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_params_reach_the_kernel_bit_identically() {
    let gpu = gpu();
    let kernel = ok(module(&gpu).kernel::<ParamsEcho>());
    let mut out = ok(gpu.zeros::<u64>(7));
    ok(kernel.launch_sync(
        1,
        (
            &mut out,
            0xabu8,
            -1234i16,
            0xdead_beefu32,
            -5_000_000_000i64,
            1.5f32,
            -2.25f64,
            true,
        ),
    ));
    let got = ok(gpu.download(&out));
    assert_eq!(
        got,
        vec![
            0xab,
            (-1234i64) as u64,
            0xdead_beef,
            (-5_000_000_000i64) as u64,
            u64::from(1.5f32.to_bits()),
            (-2.25f64).to_bits(),
            1,
        ]
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_axpy_reads_const_and_writes_mut_buffers() {
    let gpu = gpu();
    let kernel = ok(module(&gpu).kernel::<Axpy>());
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let dx = ok(gpu.upload(&x));
    let mut dy = ok(gpu.upload(&y));
    // 8 CTAs of 128 threads cover 1024 >= n elements; literals take the
    // parameter types.
    ok(kernel.launch(8, (&dx, &mut dy, 2.0, n)));
    let got = ok(gpu.download(&dy));
    for i in 0..n as usize {
        assert_eq!(got[i], 2.0 * x[i] + y[i], "element {i}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_cluster_launch_sets_the_cluster_shape() {
    let gpu = gpu();
    let m = module(&gpu);
    let clustered = ok(m.kernel::<ClusterInfo2>());
    let mut out = ok(gpu.zeros::<u32>(3 * 8));
    ok(clustered.launch_sync(8, (&mut out,)));
    let got = ok(gpu.download(&out));
    for cta in 0..8 {
        assert_eq!(
            &got[3 * cta..3 * cta + 3],
            &[cta as u32 % 2, 2, 4],
            "CTA {cta}: (cluster_ctarank, cluster_nctarank, nclusterid.x)"
        );
    }

    // Without a cluster attribute every CTA is its own cluster.
    let plain = ok(m.kernel::<ClusterInfoNone>());
    let mut out = ok(gpu.zeros::<u32>(3 * 8));
    ok(plain.launch_sync(8, (&mut out,)));
    let got = ok(gpu.download(&out));
    for cta in 0..8 {
        assert_eq!(&got[3 * cta..3 * cta + 3], &[0, 1, 8], "CTA {cta}");
    }

    // A grid that is not a multiple of the cluster never reaches CUDA.
    match clustered.launch(7, (&mut out,)) {
        Err(Error::InvalidLaunch {
            kernel: "cluster_info",
            problem: LaunchProblem::GridNotClusterMultiple { axis: 'x', .. },
        }) => {}
        other => panic!("expected InvalidLaunch, got {other:?}"),
    }
}

/// Clusters of 16 CTAs (non-portable): `Module::kernel` sets the opt-in, the
/// occupancy query says at least one cluster fits, and every CTA sees a
/// cluster of 16; without the opt-in in the spec the launch never reaches
/// CUDA; with the opt-in cleared on the function, the driver's refusal is
/// `Error::ClusterNotSchedulable`, and the context stays usable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_non_portable_cluster_of_16() {
    let gpu = gpu();
    let m = module(&gpu);
    let k = ok(m.kernel::<ClusterInfo16>());
    let attr = cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED;
    // SAFETY: a live function of a loaded module.
    let allowed = unsafe { cudarc::driver::result::function::get_function_attribute(k.cu_function(), attr) };
    assert_eq!(allowed, Ok(1), "Module::kernel sets the opt-in");
    let clusters = ok(k.max_active_clusters());
    assert!(clusters >= 1, "cuOccupancyMaxActiveClusters: {clusters} clusters of 16");
    let mut out = ok(gpu.zeros::<u32>(3 * 32));
    ok(k.launch_sync(32, (&mut out,)));
    let got = ok(gpu.download(&out));
    for cta in 0..32 {
        assert_eq!(
            &got[3 * cta..3 * cta + 3],
            &[cta as u32 % 16, 16, 2],
            "CTA {cta}: (cluster_ctarank, cluster_nctarank, nclusterid.x)"
        );
    }

    // Without the opt-in in the spec: refused before CUDA, naming the option.
    let portable = ok(m.kernel::<ClusterInfo16Portable>());
    match portable.launch(32, (&mut out,)) {
        Err(e @ Error::InvalidLaunch {
            problem: LaunchProblem::TooManyClusterCtas { ctas: 16, non_portable: false, .. },
            ..
        }) => assert!(e.to_string().contains("non_portable_cluster"), "{e}"),
        other => panic!("expected InvalidLaunch(TooManyClusterCtas), got {other:?}"),
    }

    // The opt-in cleared on a function that never launched (a second load
    // of the module): the occupancy query or the launch refuses it.
    let m2 = module(&gpu);
    let k2 = ok(m2.kernel::<ClusterInfo16>());
    // SAFETY: as above.
    ok(unsafe { cudarc::driver::result::function::set_function_attribute(k2.cu_function(), attr, 0) }
        .map_err(Error::cuda_call("cuFuncSetAttribute")));
    match k2.max_active_clusters() {
        Ok(n) => eprintln!("occupancy query without the opt-in: {n} clusters"),
        Err(e) => eprintln!("occupancy query without the opt-in: {e}"),
    }
    match k2.launch_sync(32, (&mut out,)) {
        Err(e @ Error::ClusterNotSchedulable { .. }) => {
            let msg = e.to_string();
            eprintln!("refused as expected: {msg}");
            assert!(msg.contains("in clusters of (16, 1, 1) = 16 CTAs") && msg.contains("fix:"), "{msg}");
            assert!(!e.cuda().is_some_and(|c| c.is_sticky()), "{msg}");
        }
        other => panic!("expected ClusterNotSchedulable, got {other:?}"),
    }
    // The context is fine: the kernel with the opt-in runs again.
    ok(k.launch_sync(16, (&mut out,)));
    assert_eq!(&ok(gpu.download(&out))[3 * 15..3 * 16], &[15, 16, 1]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_large_dynamic_smem_is_opted_in() {
    let gpu = gpu();
    let kernel = ok(module(&gpu).kernel::<SmemProbe>());
    let mut out = ok(gpu.zeros::<u32>(2));
    ok(kernel.launch_sync(2, (&mut out,)));
    assert_eq!(ok(gpu.download(&out)), vec![100 * 1024, 12345]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_smem_over_the_device_maximum_is_an_error() {
    let gpu = gpu();
    match module(&gpu).kernel::<SmemHuge>() {
        Err(e @ Error::SmemTooLarge { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("307200 bytes of dynamic shared memory"),
                "{msg}"
            );
            assert!(
                msg.contains(&format!("at most {} bytes", gpu.max_smem_per_block())),
                "{msg}"
            );
        }
        other => panic!("expected SmemTooLarge, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_semaphore_parameter_points_at_the_buffer() {
    let gpu = gpu();
    let kernel = ok(module(&gpu).kernel::<SemaphoreBump>());
    let mut sem = ok(gpu.zeros::<u32>(1));
    ok(kernel.launch(5, (&mut sem,)));
    ok(kernel.launch_sync(3, (&sem,)));
    assert_eq!(ok(gpu.download(&sem)), vec![8]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_invalid_launches_and_lookups_are_reported() {
    let gpu = gpu();
    let m = module(&gpu);

    let kernel = ok(m.kernel::<Axpy>());
    let x = ok(gpu.zeros::<f32>(4));
    let mut y = ok(gpu.zeros::<f32>(4));
    match kernel.launch((0, 1, 1), (&x, &mut y, 1.0, 4)) {
        Err(Error::InvalidLaunch {
            problem: LaunchProblem::ZeroGrid { .. },
            ..
        }) => {}
        other => panic!("expected InvalidLaunch(ZeroGrid), got {other:?}"),
    }

    match m.kernel::<Missing>() {
        Err(e @ Error::KernelNotFound { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("kernel `not_a_kernel` is not in the"), "{msg}");
            assert!(msg.contains("runtime_test_kernels"), "{msg}");
        }
        other => panic!("expected KernelNotFound, got {other:?}"),
    }

    static OLD: DeviceCode = DeviceCode {
        crate_name: "old_kernels",
        images: &[DeviceImage {
            arch: "sm_80",
            ptx: "",
            cubin: &[],
            ptxas_report: "",
        }],
    };
    match gpu.load(&OLD) {
        Err(e @ Error::NoImageForArch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(gpu.name()), "{msg}");
            assert!(msg.contains("[\"sm_80\"]"), "{msg}");
        }
        other => panic!("expected NoImageForArch, got {other:?}"),
    }

    static BROKEN: DeviceCode = DeviceCode {
        crate_name: "broken_kernels",
        images: &[
            DeviceImage {
                arch: "sm_90a",
                ptx: ".version 8.0\n.target sm_90a\n.address_size 64\n\
                      .visible .entry broken() { not_an_instruction; ret; }\n",
                cubin: &[],
                ptxas_report: "",
            },
            DeviceImage {
                arch: "sm_100a",
                ptx: ".version 8.6\n.target sm_100a\n.address_size 64\n\
                      .visible .entry broken() { not_an_instruction; ret; }\n",
                cubin: &[],
                ptxas_report: "",
            },
        ],
    };
    match gpu.load(&BROKEN) {
        Err(e @ Error::ModuleLoad { .. }) => {
            let msg = e.to_string();
            eprintln!("{msg}");
            assert!(
                msg.contains("PTX of kernels crate `broken_kernels` failed"),
                "{msg}"
            );
            assert!(msg.contains("CUDA_ERROR_INVALID_PTX"), "{msg}");
            assert!(msg.contains("loader log:"), "{msg}");
        }
        other => panic!("expected ModuleLoad, got {other:?}"),
    }
}

/// Set in the child process that runs the trap.
const TRAP_CHILD: &str = "KERNEL_HOST_RUNTIME_TRAP_CHILD";

/// A `trap` poisons the process's CUDA context, so the kernel runs in a child
/// process (this test binary, running only this test) and the parent checks
/// what the child reported.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_trap_is_a_kernel_fault() {
    if std::env::var_os(TRAP_CHILD).is_some_and(|v| v == "async") {
        // Launched without waiting: the fault surfaces at the next
        // synchronization, which names the launches it may come from.
        let gpu = gpu();
        let kernel = ok(module(&gpu).kernel::<TrapKernel>());
        ok(gpu.synchronize());
        ok(kernel.launch((2, 1, 1), ()));
        match gpu.synchronize() {
            Err(e @ Error::AsyncFault { .. }) => println!("ASYNC_RESULT: {e}"),
            other => panic!("expected AsyncFault, got {other:?}"),
        }
        return;
    }
    if std::env::var_os(TRAP_CHILD).is_some() {
        let gpu = gpu();
        let kernel = ok(module(&gpu).kernel::<TrapKernel>());
        match kernel.launch_sync(1, ()) {
            Err(e @ Error::KernelFault { .. }) => {
                use cudarc::driver::sys::CUresult::*;
                assert!(
                    matches!(
                        e.cuda().map(|c| c.result),
                        Some(CUDA_ERROR_ILLEGAL_INSTRUCTION | CUDA_ERROR_LAUNCH_FAILED)
                    ),
                    "{e}"
                );
                println!("TRAP_RESULT: {e}");
            }
            other => panic!("expected KernelFault, got {other:?}"),
        }
        // The context is poisoned: later calls fail with the sticky error.
        match gpu.synchronize() {
            Err(e) => {
                assert!(e.to_string().contains("this error is sticky"), "{e}");
                println!("AFTER: {e}");
            }
            Ok(()) => panic!("synchronize succeeded after a trap"),
        }
        return;
    }
    let name = module_path!()
        .split_once("::")
        .map_or("", |(_, rest)| rest)
        .to_string()
        + "::gpu_trap_is_a_kernel_fault";
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let child = |mode: &str| {
        std::process::Command::new(&exe)
            .args([
                &name,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(TRAP_CHILD, mode)
            .output()
            .unwrap_or_else(|e| panic!("running the child test: {e}"))
    };
    let out = child("async");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("async child stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "async child failed");
    assert!(
        stdout.contains("ASYNC_RESULT: cuStreamSynchronize (Gpu::synchronize) failed")
            && stdout.contains("one of the launches since the last completed synchronization (oldest first): `trap_kernel` (grid (2, 1, 1))")
            && stdout.contains("this error is sticky"),
        "the asynchronous fault does not name its launch"
    );
    let out = child("1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("child stdout:\n{stdout}\nchild stderr:\n{stderr}");
    assert!(out.status.success(), "child failed");
    assert!(
        stdout.contains("TRAP_RESULT: kernel `trap_kernel` (grid (1, 1, 1)"),
        "child did not report the fault"
    );
}
