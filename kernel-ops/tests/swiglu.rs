//! The SwiGLU kernel (`kernel_ops_kernels::swiglu`, the two-operand
//! `gemm_multi`) on the CPU emulator, race checks on, against
//! `kernel_ops::swiglu::swiglu_reference`: a ragged shape (partial last
//! tiles in M and N and a partial last K step) and an aligned one, under 2
//! schedules each. Both shapes give each of the 2 persistent CTAs 2 output
//! tiles of 4 K steps, so every one of the 4 stage slots is reused. The
//! entry point `kernel_ops::swiglu::swiglu` on the emulator. And
//! the sm_90a build: the SwiGLU mainloop is the plain GEMM's, instruction
//! for instruction, with no spills and no local memory.
use kernel_device::f16;
use kernel_host::emulate::{EmuTensorMap, Emulator};
use kernel_host::Device;
use kernel_ops::swiglu::swiglu_reference;
use kernel_ops_kernels::gemm_multi::{check_multi_tile, ATileOf, BTileOf, EpiTileOf, TK};
use kernel_ops_kernels::swiglu::swiglu;

const BM: usize = 128;
const BN: usize = 128;
/// Emulated SMs: the persistent grid is `min(SMS, tiles)` CTAs.
const SMS: usize = 2;

/// Runs `swiglu<128, 128, 256, 4, 8>` at `m x n x k` and returns `out`.
fn emulate(emu: &Emulator, x: &[f16], w1: &[f16], w3: &[f16], (m, n, k): (usize, usize, usize)) -> Vec<f16> {
    let (mt, nt, ks) = (m.div_ceil(BM), n.div_ceil(BN), k.div_ceil(TK));
    let grid = SMS.min(mt * nt) as u32;
    let mut out = vec![f16::NAN; m * n];
    let xm = EmuTensorMap::<ATileOf<BM>>::new_2d(x, m, k).unwrap();
    let w1m = EmuTensorMap::<BTileOf<BN>>::new_2d(w1, n, k).unwrap();
    let w3m = EmuTensorMap::<BTileOf<BN>>::new_2d(w3, n, k).unwrap();
    {
        let om = EmuTensorMap::<EpiTileOf<BM>>::new_2d_mut(&mut out, m, n).unwrap();
        emu.launch::<swiglu<BM, BN, 256, 4, 8>, _>(grid, (&xm, &w1m, &w3m, &om, mt as u32, nt as u32, ks as u32))
            .unwrap_or_else(|e| panic!("seed {}: swiglu at {m}x{n}x{k}: {e}", emu.seed()));
    }
    out
}

/// Every element within f16 rounding (2^-11 relative, doubled) of the
/// reference, plus an absolute 1e-3 for the f32 accumulation near zero;
/// and the relative Frobenius error below 1e-3. A NaN (an element the
/// kernel never wrote) fails.
fn check(name: &str, (m, n, k): (usize, usize, usize), seed: u64) {
    check_with(name, (m, n, k), seed, |x, w1, w3| emulate(&Emulator::new(seed), x, w1, w3, (m, n, k)));
}

/// As [`check`], with `run` computing `out` from `x`, `w1`, `w3`.
fn check_with(name: &str, (m, n, k): (usize, usize, usize), seed: u64, run: impl FnOnce(&[f16], &[f16], &[f16]) -> Vec<f16>) {
    let t = std::time::Instant::now();
    let x = kernel_host::randn_f16(m * k, 100 + seed);
    let w1 = kernel_host::randn_f16(n * k, 200 + seed);
    let w3 = kernel_host::randn_f16(n * k, 300 + seed);
    let got = run(&x, &w1, &w3);
    let want = swiglu_reference(&x, &w1, &w3, m, n, k);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (g.to_f64(), f64::from(*w));
        assert!(
            (g - w).abs() <= 2f64.powi(-10) * w.abs() + 1e-3,
            "seed {seed}: {name} {m}x{n}x{k}: out[{}, {}] = {g}, reference {w}",
            i / n,
            i % n
        );
    }
    let err = kernel_host::rel_frobenius_error(&got, &want);
    eprintln!("swiglu {name} {m}x{n}x{k}, seed {seed}: rel err {err:.2e}, {:.2?}", t.elapsed());
    assert!(err < 1e-3, "seed {seed}: {name} {m}x{n}x{k}: relative Frobenius error {err}");
}

#[test]
fn swiglu_matches_the_cpu_reference_at_a_ragged_shape() {
    for seed in [1, 2] {
        check("ragged", (200, 136, 200), seed);
    }
}

#[test]
fn swiglu_matches_the_cpu_reference_at_an_aligned_shape() {
    for seed in [3, 4] {
        check("aligned", (256, 256, 256), seed);
    }
}

/// The entry point `kernel_ops::swiglu::swiglu` (the calls a GPU program
/// makes) on the emulator with 2 SMs, at the ragged shape.
#[test]
fn the_entry_point_matches_the_cpu_reference_on_the_emulator() {
    let dev = Device::emulator_with(Emulator::new(5).sms(2));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let (m, n, k) = (200, 136, 200);
    check_with("entry point", (m, n, k), 5, |x, w1, w3| {
        let (x, w1, w3) = (dev.upload(x).unwrap(), dev.upload(w1).unwrap(), dev.upload(w3).unwrap());
        let mut out = dev.upload(&vec![f16::NAN; m * n]).unwrap();
        kernel_ops::swiglu::swiglu(&dev, &ops, &x, &w1, &w3, &mut out, (m, n, k)).unwrap();
        dev.download(&out).unwrap()
    });
}

/// Shapes the kernel cannot take are refused before a launch, naming the
/// rule, the values and the fix.
#[test]
fn the_entry_point_refuses_shapes_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let buf = |len| dev.zeros::<f16>(len).unwrap();
    let run = |(m, n, k): (usize, usize, usize), lens: [usize; 4]| {
        let mut out = buf(lens[3]);
        kernel_ops::swiglu::swiglu(&dev, &ops, &buf(lens[0]), &buf(lens[1]), &buf(lens[2]), &mut out, (m, n, k)).unwrap_err().to_string()
    };
    let e = run((64, 64, 60), [64 * 60, 64 * 60, 64 * 60, 64 * 64]);
    assert!(e.contains("K = 60: must be a multiple of 8") && e.contains("to 64"), "{e}");
    let e = run((64, 64, 64), [64 * 64, 64 * 64, 64 * 32, 64 * 64]);
    assert!(e.contains("`w3` holds 2048 elements; N x K = 4096 expected"), "{e}");
    let e = run((0, 64, 64), [0, 64 * 64, 64 * 64, 0]);
    assert!(e.contains("every dimension must be at least 1"), "{e}");
}

/// The rules of `gemm_multi` (a const fn, so also checkable here): two
/// operands fit at 128 x 128 (one m64n256 wgmma), not at the plain GEMM's
/// 128 x 256; three operands fit no implemented wgmma N.
#[test]
fn the_tile_rules_admit_two_operands_at_128x128_and_name_the_rule_otherwise() {
    check_multi_tile(2, 128, 128, 256);
    check_multi_tile(2, 256, 64, 128);
    check_multi_tile(4, 128, 64, 256);
    let msg = |f: fn()| {
        let e = std::panic::catch_unwind(f).unwrap_err();
        e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned()).unwrap_or_default()
    };
    let m = msg(|| check_multi_tile(2, 256, 128, 256));
    assert!(m.contains("BM x OPS x BN must be at most 128 x 256"), "{m}");
    let m = msg(|| check_multi_tile(3, 128, 64, 192));
    assert!(m.contains("NW = OPS x BN must be 64, 128 or 256"), "{m}");
    let m = msg(|| check_multi_tile(2, 128, 128, 128));
    assert!(m.contains("NW (the N of the one wgmma over all operands) must be OPS x BN"), "{m}");
}

fn sm90a() -> &'static kernel_device::launch::DeviceImage {
    kernel_ops_kernels::DEVICE_CODE.image("sm_90a").expect("kernel-ops kernels were not built for sm_90a")
}

fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let head = format!(".visible .entry {name}(");
    let start = ptx.find(&head).unwrap_or_else(|| panic!("no entry `{name}` in the PTX"));
    let end = ptx[start..].find("\n}").map(|e| start + e).unwrap_or(ptx.len());
    &ptx[start..end]
}

/// Instruction counts of an entry: the lines that are not comments and
/// hold `opcode` (a wgmma line opens with its predicate's `{ .reg .pred`).
fn count(body: &str, opcode: &str) -> usize {
    body.lines().filter(|l| !l.trim_start().starts_with("//") && l.contains(opcode)).count()
}

/// The two-operand mainloop issues what the plain 128 x 256 GEMM issues:
/// the same 4 `m64n256k16` wgmmas and one fence per K step and warpgroup;
/// the epilogue stores half the plain kernel's f16 pairs (128 output
/// columns instead of 256) and adds one `ex2` and one `rcp` per output
/// element (64 per thread); nothing goes to local memory.
#[test]
fn swiglu_keeps_the_plain_gemm_mainloop_and_adds_only_the_epilogue_math() {
    let ptx = sm90a().ptx;
    let plain = entry(ptx, "matmul_persistent_ws__f16_128_256_4_8");
    for name in ["swiglu__128_128_256_4_8", "swiglu__128_128_256_4_16"] {
        let fused = entry(ptx, name);
        for op in ["wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", "wgmma.fence", "wgmma.commit_group", "setmaxnreg"] {
            assert_eq!(count(fused, op), count(plain, op), "{name}: `{op}` count differs from the plain GEMM's");
        }
        assert_eq!(count(fused, "wgmma.mma_async"), 4, "{name}: 4 wgmmas (one per k16) per K step");
        for op in ["st.shared.b32", "cvt.rn.f16x2.f32"] {
            assert_eq!(2 * count(fused, op), count(plain, op), "{name}: `{op}`: half the plain GEMM's");
        }
        assert_eq!(count(fused, "ex2.approx"), 64, "{name}: one ex2 per output element");
        assert_eq!(count(fused, "rcp.approx"), 64, "{name}: one rcp per output element");
        assert!(!fused.contains(".local"), "{name}: local memory");
    }
}

/// ptxas (sm_90a) assembles every SwiGLU instance with no stack and no
/// spills (a serialized wgmma fails the build itself).
#[test]
fn swiglu_assembles_without_spills() {
    let img = sm90a();
    assert!(!img.cubin.is_empty(), "no sm_90a cubin: ptxas was not found at build time (tools/install-ptxas.sh)");
    let mut entries = 0;
    for block in img.ptxas_report.split("Compiling entry function '").skip(1) {
        let name = block.split('\'').next().unwrap();
        if !name.starts_with("swiglu__") {
            continue;
        }
        let line = block.lines().find(|l| l.contains("bytes stack frame")).unwrap_or_else(|| panic!("{name}: no stack line"));
        assert!(line.contains("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"), "{name}: {line}");
        entries += 1;
    }
    assert_eq!(entries, 2, "the two swiglu instances:\n{}", img.ptxas_report);
}
