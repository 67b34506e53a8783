//! The checks the emulator tests and the GPU tests share: the same host
//! code runs on either `Device`.
#![allow(dead_code)] // each test binary uses some of them
use kernel_device::{bf16, f16};
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error_f32, Device};
use kernel_ops::matmul::INSTANCES;
use kernel_ops::norms::{self, NormElem};
use kernel_ops::{Matmul, MatmulElem};

use kernel_host::uniform_f32 as inputs;

fn to<T: NormElem>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}
fn back<T: NormElem>(v: &[T]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// Runs the three norms on `dev` at `rows x cols` and checks them against
/// the CPU references (normwise relative error below `tol`). `x`, `gamma`
/// and `beta` hold exactly their elements (a read past them is an error of
/// the emulator's bounds check) and `y` is followed by 8 sentinels that
/// must stay NaN (no write past the last row).
pub fn check_all<T: NormElem>(tol: f64, rows: usize, cols: usize, dev: &Device) {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let n = rows * cols;
    let xh: Vec<T> = to(&inputs(n, cols as u64));
    let gh: Vec<T> = to(&inputs(cols, 7).iter().map(|v| 1.0 + v / 8.0).collect::<Vec<_>>());
    let bh: Vec<T> = to(&inputs(cols, 8));
    let (xf, gf, bf) = (back(&xh), back(&gh), back(&bh));
    let (x, g, b) = (dev.upload(&xh).unwrap(), dev.upload(&gh).unwrap(), dev.upload(&bh).unwrap());
    let eps = 1e-5;
    let mut y = dev.upload(&vec![T::from_f32(f32::NAN); n + 8]).unwrap();
    let what = format!("{} {rows} x {cols} ({:?})", T::NAME, norms::RowKernel::of::<T>(cols));
    let check = |op: &str, y: &kernel_host::Buffer<T>, want: Vec<f32>| {
        let got = dev.download(y).unwrap();
        let e = norms::max_rel_error(&got[..n], &want);
        assert!(e < tol, "{op} {what}: max rel error {e}");
        assert!(got[n..].iter().all(|v| v.to_f32().is_nan()), "{op} {what}: wrote past the last row");
    };

    norms::softmax(&ops, &x, &mut y, rows, cols).unwrap();
    check("softmax", &y, norms::softmax_reference(&xf, cols));
    norms::layer_norm(&ops, &x, &g, &b, &mut y, eps, rows, cols).unwrap();
    check("layer_norm", &y, norms::layer_norm_reference(&xf, &gf, &bf, eps, cols));
    norms::rms_norm(&ops, &x, &g, &mut y, eps, rows, cols).unwrap();
    check("rms_norm", &y, norms::rms_norm_reference(&xf, &gf, eps, cols));
}

/// Inputs of a backward test: `x`, `gamma` (near 1), `dy`, in `T` and as f32.
struct BwdInputs<T> {
    x: (Vec<T>, Vec<f32>),
    g: (Vec<T>, Vec<f32>),
    dy: (Vec<T>, Vec<f32>),
}

fn bwd_inputs<T: NormElem>(rows: usize, cols: usize) -> BwdInputs<T> {
    let round = |v: Vec<f32>| {
        let t: Vec<T> = v.into_iter().map(T::from_f32).collect();
        let f = t.iter().map(|v| v.to_f32()).collect();
        (t, f)
    };
    // x with an offset (a mean the layer norm must remove), dy of both signs.
    let x = round(inputs(rows * cols, 31 + cols as u64).into_iter().map(|v| 2.0 * v + 0.5).collect());
    let g = round(inputs(cols, 32).into_iter().map(|v| 1.0 + v / 4.0).collect());
    let dy = round(inputs(rows * cols, 33 + rows as u64));
    BwdInputs { x, g, dy }
}

/// `max |got - want| / max |want|` of an f32 result.
fn rel32(got: &[f32], want: &[f32]) -> f64 {
    let scale = want.iter().fold(0f64, |m, &w| m.max(w.abs() as f64));
    got.iter().zip(want).fold(0f64, |m, (&g, &w)| m.max(if g.is_nan() { f64::INFINITY } else { ((g - w) as f64).abs() })) / scale
}

/// Both backwards (`kernel_ops::norms::rms_norm_backward`,
/// `layer_norm_backward`) on `dev` at `rows x cols` against the f64 references:
/// `dx` (normwise relative error below `T::TOLERANCE` times 2: `dx` is a
/// difference of terms of the size of `dy`) and `dgamma` / `dbeta` (f32
/// sums: `5e-5` normwise); `dx` is followed by sentinels that must stay NaN.
pub fn check_bwd<T: NormElem>(rows: usize, cols: usize, dev: &Device) {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let n = rows * cols;
    let inp = bwd_inputs::<T>(rows, cols);
    let (x, g, dy) = (dev.upload(&inp.x.0).unwrap(), dev.upload(&inp.g.0).unwrap(), dev.upload(&inp.dy.0).unwrap());
    let eps = 1e-5;
    let what = format!("{} {rows} x {cols} ({:?}, {} groups)", T::NAME, norms::backward_kernel::<T>(cols), norms::backward_groups(rows));
    let tol = 2.0 * T::TOLERANCE;
    let mut dx = dev.upload(&vec![T::from_f32(f32::NAN); n + 8]).unwrap();
    let mut dg = dev.upload(&vec![f32::NAN; cols]).unwrap();
    let mut db = dev.upload(&vec![f32::NAN; cols]).unwrap();
    let check_dx = |op: &str, dx: &kernel_host::Buffer<T>, want: &[f32]| {
        let got = dev.download(dx).unwrap();
        let e = norms::max_rel_error(&got[..n], want);
        assert!(e < tol, "{op} {what}: dx's max rel error {e}");
        assert!(got[n..].iter().all(|v| v.to_f32().is_nan()), "{op} {what}: wrote past the last row");
    };
    let check_w = |op: &str, name: &str, b: &kernel_host::Buffer<f32>, want: &[f32]| {
        let e = rel32(&dev.download(b).unwrap(), want);
        assert!(e < 5e-5, "{op} {what}: {name}'s max rel error {e}");
    };

    norms::rms_norm_backward(dev, &ops, &x, &g, &dy, &mut dx, &mut dg, eps, rows, cols).unwrap();
    let (want_dx, want_dg) = norms::rms_norm_backward_reference(&inp.x.1, &inp.g.1, &inp.dy.1, eps, cols);
    check_dx("rms_norm_backward", &dx, &want_dx);
    check_w("rms_norm_backward", "dgamma", &dg, &want_dg);

    dev.write(&mut dg, &vec![f32::NAN; cols]).unwrap();
    norms::layer_norm_backward(dev, &ops, &x, &g, &dy, &mut dx, &mut dg, &mut db, eps, rows, cols).unwrap();
    let (want_dx, want_dg, want_db) = norms::layer_norm_backward_reference(&inp.x.1, &inp.g.1, &inp.dy.1, eps, cols);
    check_dx("layer_norm_backward", &dx, &want_dx);
    check_w("layer_norm_backward", "dgamma", &dg, &want_dg);
    check_w("layer_norm_backward", "dbeta", &db, &want_db);
}

/// An element type of the matmul checks: the tolerance of the relative
/// Frobenius error (the output's rounding: 2^-11 for f16, 2^-8 for bf16).
pub trait MatmulTestElem: MatmulElem {
    const TOL: f64;
}
impl MatmulTestElem for f16 {
    const TOL: f64 = 2e-3;
}
impl MatmulTestElem for bf16 {
    const TOL: f64 = 8e-3;
}

/// `c = a · bᵀ` in f16 through [`Matmul::matmul`] (or every instance with
/// `all_instances`) on `dev`, checked against the CPU.
pub fn check_matmul(dev: &Device, shape: (usize, usize, usize), all_instances: bool) {
    check_matmul_of::<f16>(dev, shape, all_instances)
}

/// [`check_matmul`] on element type `E` (f16 or bf16): the same N(0, 1)
/// inputs, rounded to `E`.
pub fn check_matmul_of<E: MatmulTestElem>(dev: &Device, (m, n, k): (usize, usize, usize), all_instances: bool) {
    let cache = std::env::temp_dir().join(format!("kernel-ops-emu-test-{}.tsv", std::process::id()));
    let mm = Matmul::with_cache(dev, cache).unwrap();
    let input = |len, seed| randn_f16(len, seed).iter().map(|x| E::from_f32(x.to_f32())).collect::<Vec<E>>();
    let (ah, bh) = (input(m * k, 11), input(n * k, 12));
    let (a, b) = (dev.upload(&ah).unwrap(), dev.upload(&bh).unwrap());
    let reference = reference_gemm_nt(m, n, k, &ah, &bh);
    let error = |c: &kernel_host::Buffer<E>| {
        let got: Vec<f32> = dev.download(c).unwrap().into_iter().map(Into::into).collect();
        rel_frobenius_error_f32(&got, &reference)
    };
    let ty = E::NAME;
    let mut c = dev.upload(&vec![E::NAN; m * n]).unwrap();
    mm.matmul(&a, (m, k), &b, (n, k), &mut c).unwrap();
    let err = error(&c);
    assert!(err < E::TOL, "{ty} matmul at {m}x{n}x{k} on {}: relative Frobenius error {err}", dev.describe());
    if all_instances {
        for inst in INSTANCES {
            dev.write(&mut c, &vec![E::NAN; m * n]).unwrap();
            mm.matmul_with(inst, &a, &b, &mut c, m, n, k).unwrap();
            let err = error(&c);
            assert!(err < E::TOL, "{ty} {} at {m}x{n}x{k}: relative Frobenius error {err}", inst.name);
        }
    }
}
