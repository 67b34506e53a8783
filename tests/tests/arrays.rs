//! Register arrays in Pallas's layouts and the fused bias+ReLU matmul: on
//! the emulator against CPU references, in the PTX (vector accesses, no
//! local memory, the mainloop unchanged), and on a GPU (`#[ignore]`d).
use examples::arrays as ex;
use kernel_device::launch::DeviceImage;
use kernel_host::emulate::Emulator;
use kernel_host::Device;

#[test]
fn wgmma_layout_ops_match_the_cpu_reference_on_the_emulator() {
    for emu in Emulator::schedules(1, 2) {
        let o = ex::wgmma_ops(&Device::emulator_with(emu.clone())).unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert_eq!(o.checked, 64 * 64);
    }
}

#[test]
fn strided_layout_ops_match_the_cpu_reference_on_the_emulator() {
    for emu in Emulator::schedules(1, 2) {
        ex::strided_ops(&Device::emulator_with(emu.clone()), 2).unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
    }
}

#[test]
fn bias_relu_matmul_matches_the_cpu_reference_on_the_emulator() {
    let err = ex::bias_relu(&Device::emulator_with(Emulator::new(5)), 128, 256, 128).unwrap_or_else(|e| panic!("{e}"));
    assert!(err < 1e-2, "relative Frobenius error {err}");
}

fn sm90a() -> &'static DeviceImage {
    kernels::DEVICE_CODE.image("sm_90a").expect("built for sm_90a")
}

fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let head = format!(".visible .entry {name}(");
    let start = ptx.find(&head).unwrap_or_else(|| panic!("no entry `{name}` in the PTX"));
    let end = ptx[start..].find("\n}").map(|e| start + e).unwrap_or(ptx.len());
    &ptx[start..end]
}

/// Instruction counts of an entry, by opcode (first word of each line).
fn count(body: &str, opcode: &str) -> usize {
    body.lines().filter(|l| l.trim_start().starts_with(opcode)).count()
}

#[test]
fn strided_arrays_use_16_byte_vector_accesses_and_no_local_memory() {
    for arch in ["sm_90a", "sm_100a"] {
        let ptx = kernels::DEVICE_CODE.image(arch).expect("built").ptx;
        let body = entry(ptx, "array_strided_ops");
        // 2 vectors per thread: 2 loads of x, 2 stores of y, 2 SMEM stores and loads, 2 stores of z.
        assert_eq!(count(body, "ld.v4.b32") + count(body, "ld.global.v4"), 2, "{arch}:\n{body}");
        assert_eq!(count(body, "ld.shared.v4.b32"), 2, "{arch}");
        assert_eq!(count(body, "st.shared.v4.b32"), 2, "{arch}");
        for name in ["array_strided_ops", "array_wgmma_ops"] {
            assert!(!entry(ptx, name).contains(".local"), "{arch} {name}: local memory");
        }
    }
}

/// The fused epilogue adds only the bias loads and the math: the same
/// wgmmas, the same SMEM stores; the bias is read once per thread as 16
/// 32-bit pair loads (128 columns / 8).
#[test]
fn bias_relu_matmul_keeps_the_mainloop_and_loads_the_bias_once() {
    let ptx = sm90a().ptx;
    let plain = entry(ptx, "matmul_warp_specialized__4_8");
    let fused = entry(ptx, "matmul_bias_relu__4_8");
    for op in ["wgmma.mma_async", "st.shared.b32", "cvt.rn.f16x2.f32", "cp.async.bulk.tensor"] {
        assert_eq!(count(plain, op), count(fused, op), "`{op}` count differs");
    }
    assert_eq!(count(fused, "max.f32"), 128, "one relu per accumulator element");
    let bias_loads = fused.lines().filter(|l| { let l = l.trim_start(); l.starts_with("ld.b32") || l.starts_with("ld.global.b32") || l.starts_with("ld.global.nc.b32") }).count();
    assert_eq!(bias_loads, 16, "bias pair loads:\n{fused}");
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn array_examples_and_bias_relu_match_on_the_gpu() {
    let dev = Device::gpu_or_emulator().expect("the device opens");
    if !dev.is_gpu() {
        eprintln!("SKIPPED: this test needs a CUDA GPU; the device is {}", dev.describe());
        return;
    }
    ex::wgmma_ops(&dev).expect("array_wgmma_ops");
    ex::strided_ops(&dev, 264).expect("array_strided_ops");
    let err = ex::bias_relu(&dev, 256, 512, 256).expect("bias relu");
    assert!(err < 1e-2, "relative Frobenius error {err}");
    let r = ex::bench_bias_relu(&dev, 1024, 1024, 1024, 64, 1, 3).expect("bias relu timed");
    assert!(r.rel_err < 1e-2, "{r:?}");
}
