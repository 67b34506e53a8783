//! One host program, two targets: the same function runs the first
//! examples, a Hopper ladder step, `kernel_ops::Matmul`, a user's gated
//! MLP on `gemm_multi` and `kernel_ops::swiglu`, and the `kernel_ops::norms` against their CPU references through
//! `kernel_host::Device`, once on the CPU emulator (in CI) and once on a GPU
//! (`#[ignore]`d: run with `--ignored` on a GPU machine). Nothing in
//! [`one_program`] knows which backend it runs on.
use examples::hopper::Problem;
use examples::{ladder, FIRST_EXAMPLES};
use kernel_device::f16;
use kernel_host::emulate::Emulator;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, uniform_f32, Device};
use kernel_ops::norms;
use kernel_ops::Matmul;

/// The Hopper ladder step run here (persistent: `min(SMs, tiles)` CTAs).
const LADDER_STEP: &str = "step3 128x256 s3 w8";
/// 256 x 512 x 192: 4 output tiles of 128 x 256 and 3 K steps, so on 2
/// emulated SMs each persistent CTA runs 2 tiles and reuses every slot.
const LADDER_SHAPE: (usize, usize, usize) = (256, 512, 192);
/// `kernel_ops::Matmul` at a ragged shape (partial tiles and K step).
const MATMUL_SHAPE: (usize, usize, usize) = (200, 136, 72);
/// The gated MLPs (a user's ReGLU, the library's SwiGLU) at a ragged shape.
const GATED_SHAPE: (usize, usize, usize) = (200, 136, 200);
/// The norms: 2 rows of 1024 f16, normwise relative error below 4e-3 (as
/// kernel-ops' own tests).
const NORM_ROWS: usize = 2;
const NORM_COLS: usize = 1024;
const NORM_TOLERANCE: f64 = 4e-3;

/// The program: every first example, then one ladder step checked on
/// every row of C. Panics naming the example and the device on a failure.
fn one_program(dev: &Device) {
    let on = dev.describe();
    for (name, run) in FIRST_EXAMPLES {
        match run(dev) {
            Ok(o) => eprintln!("ok {name}: {} elements equal the CPU reference on {on}", o.checked),
            Err(e) => panic!("{name} on {on}: {e}"),
        }
    }
    let (m, n, k) = LADDER_SHAPE;
    let mut p = Problem::new(dev, m, n, k, usize::MAX, 60).unwrap_or_else(|e| panic!("{LADDER_STEP}: inputs on {on}: {e}"));
    let err = ladder::run(dev, LADDER_STEP, &mut p).unwrap_or_else(|e| panic!("{LADDER_STEP} on {on}: {e}"));
    eprintln!("ok {LADDER_STEP} {m}x{n}x{k}: relative Frobenius error {err:.2e} on {on}");
    assert!(err < 1e-2, "{LADDER_STEP} on {on}: relative Frobenius error {err}");

    // The library: `c = a · bᵀ` through the entry point an application calls.
    let (m, n, k) = MATMUL_SHAPE;
    let mm = Matmul::new(dev).unwrap_or_else(|e| panic!("Matmul::new on {on}: {e}"));
    let (ah, bh) = (randn_f16(m * k, 61), randn_f16(n * k, 62));
    let (a, b) = (dev.upload(&ah).unwrap(), dev.upload(&bh).unwrap());
    let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    mm.matmul(&a, (m, k), &b, (n, k), &mut c).unwrap_or_else(|e| panic!("kernel_ops::Matmul on {on}: {e}"));
    let err = rel_frobenius_error(&dev.download(&c).unwrap(), &reference_gemm_nt(m, n, k, &ah, &bh));
    eprintln!("ok kernel_ops::Matmul {m}x{n}x{k} ({}): relative Frobenius error {err:.2e} on {on}", mm.instance_for(m, n, k).name);
    assert!(err < 2e-3, "kernel_ops::Matmul at {m}x{n}x{k} on {on}: relative Frobenius error {err}");

    // A user's gated MLP on the library's multi-operand GEMM, and the
    // library's SwiGLU, at a ragged shape.
    let (m, n, k) = GATED_SHAPE;
    let err = examples::gated::reglu_error(dev, m, n, k).unwrap_or_else(|e| panic!("reglu on {on}: {e}"));
    eprintln!("ok reglu {m}x{n}x{k}: relative Frobenius error {err:.2e} on {on}");
    assert!(err < 2e-3, "reglu at {m}x{n}x{k} on {on}: relative Frobenius error {err}");
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap_or_else(|e| panic!("kernel_ops_kernels on {on}: {e}"));
    let (xh, w1h, w3h) = (randn_f16(m * k, 66), randn_f16(n * k, 67), randn_f16(n * k, 68));
    let (x, w1, w3) = (dev.upload(&xh).unwrap(), dev.upload(&w1h).unwrap(), dev.upload(&w3h).unwrap());
    let mut out = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    kernel_ops::swiglu::swiglu(dev, &ops, &x, &w1, &w3, &mut out, (m, n, k)).unwrap_or_else(|e| panic!("swiglu on {on}: {e}"));
    let err = rel_frobenius_error(&dev.download(&out).unwrap(), &kernel_ops::swiglu::swiglu_reference(&xh, &w1h, &w3h, m, n, k));
    eprintln!("ok kernel_ops::swiglu {m}x{n}x{k}: relative Frobenius error {err:.2e} on {on}");
    assert!(err < 2e-3, "swiglu at {m}x{n}x{k} on {on}: relative Frobenius error {err}");

    // The norms, f16.
    let (rows, cols) = (NORM_ROWS, NORM_COLS);
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap_or_else(|e| panic!("kernel_ops_kernels on {on}: {e}"));
    let to16 = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<f16>>();
    let xh = to16(uniform_f32(rows * cols, 63));
    let gh = to16(uniform_f32(cols, 64).iter().map(|v| 1.0 + v / 8.0).collect());
    let bh = to16(uniform_f32(cols, 65));
    let f32s = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let (xf, gf, bf) = (f32s(&xh), f32s(&gh), f32s(&bh));
    let (x, g, b) = (dev.upload(&xh).unwrap(), dev.upload(&gh).unwrap(), dev.upload(&bh).unwrap());
    let mut y = dev.upload(&vec![f16::NAN; rows * cols]).unwrap();
    let eps = 1e-5;
    let check = |name: &str, r: Result<(), kernel_ops::Error>, want: Vec<f32>, y: &kernel_host::Buffer<f16>| {
        r.unwrap_or_else(|e| panic!("{name} on {on}: {e}"));
        let e = norms::max_rel_error(&dev.download(y).unwrap(), &want);
        eprintln!("ok {name} {rows}x{cols} f16: max relative error {e:.2e} on {on}");
        assert!(e < NORM_TOLERANCE, "{name} on {on}: max relative error {e}");
    };
    let r = norms::softmax(&ops, &x, &mut y, rows, cols);
    check("softmax", r, norms::softmax_reference(&xf, cols), &y);
    dev.write(&mut y, &vec![f16::NAN; rows * cols]).unwrap();
    let r = norms::layer_norm(&ops, &x, &g, &b, &mut y, eps, rows, cols);
    check("layer_norm", r, norms::layer_norm_reference(&xf, &gf, &bf, eps, cols), &y);
    dev.write(&mut y, &vec![f16::NAN; rows * cols]).unwrap();
    let r = norms::rms_norm(&ops, &x, &g, &mut y, eps, rows, cols);
    check("rms_norm", r, norms::rms_norm_reference(&xf, &gf, eps, cols), &y);
}

#[test]
fn one_program_on_the_emulator() {
    one_program(&Device::emulator_with(Emulator::new(11).sms(2)));
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn one_program_on_the_gpu() {
    let dev = Device::gpu_or_emulator().expect("the device opens");
    if !dev.is_gpu() {
        eprintln!("SKIPPED: this test needs a CUDA GPU; the device is {}", dev.describe());
        return;
    }
    one_program(&dev);
}
