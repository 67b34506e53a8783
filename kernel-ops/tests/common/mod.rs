//! The checks the emulator tests and the GPU tests share: the same host
//! code runs on either `Device`.
#![allow(dead_code)] // each test binary uses some of them
use kernel_device::f16;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, Device};
use kernel_ops::matmul::INSTANCES;
use kernel_ops::norms::{self, NormElem};
use kernel_ops::Matmul;

use kernel_host::uniform_f32 as inputs;

fn to<T: NormElem>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}
fn back<T: NormElem>(v: &[T]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// Runs the three norms on `dev` at `rows x cols` and checks them against
/// the CPU references (normwise relative error below `tol`).
pub fn check_all<T: NormElem>(tol: f64, rows: usize, cols: usize, dev: &Device) {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let xh: Vec<T> = to(&inputs(rows * cols, cols as u64));
    let gh: Vec<T> = to(&inputs(cols, 7).iter().map(|v| 1.0 + v / 8.0).collect::<Vec<_>>());
    let bh: Vec<T> = to(&inputs(cols, 8));
    let (xf, gf, bf) = (back(&xh), back(&gh), back(&bh));
    let (x, g, b) = (dev.upload(&xh).unwrap(), dev.upload(&gh).unwrap(), dev.upload(&bh).unwrap());
    let eps = 1e-5;
    let mut y = dev.upload(&vec![T::from_f32(f32::NAN); rows * cols]).unwrap();

    norms::softmax(&ops, &x, &mut y, rows, cols).unwrap();
    let e = norms::max_rel_error(&dev.download(&y).unwrap(), &norms::softmax_reference(&xf, cols));
    assert!(e < tol, "softmax {cols} cols: max rel error {e}");

    norms::layer_norm(&ops, &x, &g, &b, &mut y, eps, rows, cols).unwrap();
    let e = norms::max_rel_error(&dev.download(&y).unwrap(), &norms::layer_norm_reference(&xf, &gf, &bf, eps, cols));
    assert!(e < tol, "layer_norm {cols} cols: max rel error {e}");

    norms::rms_norm(&ops, &x, &g, &mut y, eps, rows, cols).unwrap();
    let e = norms::max_rel_error(&dev.download(&y).unwrap(), &norms::rms_norm_reference(&xf, &gf, eps, cols));
    assert!(e < tol, "rms_norm {cols} cols: max rel error {e}");
}

/// `c = a · bᵀ` through [`Matmul::matmul`] (or every instance with
/// `all_instances`) on `dev`, checked against the CPU.
pub fn check_matmul(dev: &Device, (m, n, k): (usize, usize, usize), all_instances: bool) {
    let cache = std::env::temp_dir().join(format!("kernel-ops-emu-test-{}.tsv", std::process::id()));
    let mm = Matmul::with_cache(dev, cache).unwrap();
    let (ah, bh) = (randn_f16(m * k, 11), randn_f16(n * k, 12));
    let (a, b) = (dev.upload(&ah).unwrap(), dev.upload(&bh).unwrap());
    let reference = reference_gemm_nt(m, n, k, &ah, &bh);
    let mut c = dev.upload(&vec![f16::NAN; m * n]).unwrap();
    mm.matmul(&a, (m, k), &b, (n, k), &mut c).unwrap();
    let err = rel_frobenius_error(&dev.download(&c).unwrap(), &reference);
    assert!(err < 2e-3, "matmul at {m}x{n}x{k} on {}: relative Frobenius error {err}", dev.describe());
    if all_instances {
        for inst in INSTANCES {
            dev.write(&mut c, &vec![f16::NAN; m * n]).unwrap();
            mm.matmul_with(inst, &a, &b, &mut c, m, n, k).unwrap();
            let err = rel_frobenius_error(&dev.download(&c).unwrap(), &reference);
            assert!(err < 2e-3, "{} at {m}x{n}x{k}: relative Frobenius error {err}", inst.name);
        }
    }
}

