//! The norm kernels on the CPU emulator against the CPU references: a few
//! rows of each row length and element type, under 2 schedules.
use kernel_device::{bf16, f16};
use kernel_host::emulate::Emulator;
use kernel_ops::norms::{self, NormElem};

use kernel_host::uniform_f32 as inputs;

fn to<T: NormElem>(v: &[f32]) -> Vec<T> {
    v.iter().map(|&x| T::from_f32(x)).collect()
}
fn back<T: NormElem>(v: &[T]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

fn check_all<T: NormElem>(tol: f64, rows: usize, cols: usize, emu: &Emulator) {
    let x: Vec<T> = to(&inputs(rows * cols, cols as u64));
    let g: Vec<T> = to(&inputs(cols, 7).iter().map(|v| 1.0 + v / 8.0).collect::<Vec<_>>());
    let b: Vec<T> = to(&inputs(cols, 8));
    let (xf, gf, bf) = (back(&x), back(&g), back(&b));
    let eps = 1e-5;
    let mut y = vec![T::default(); rows * cols];

    norms::softmax_emu(emu, &x, &mut y, rows, cols).unwrap();
    let e = norms::max_rel_error(&y, &norms::softmax_reference(&xf, cols));
    assert!(e < tol, "softmax {cols} cols: max rel error {e}");

    norms::layer_norm_emu(emu, &x, &g, &b, &mut y, eps, rows, cols).unwrap();
    let e = norms::max_rel_error(&y, &norms::layer_norm_reference(&xf, &gf, &bf, eps, cols));
    assert!(e < tol, "layer_norm {cols} cols: max rel error {e}");

    norms::rms_norm_emu(emu, &x, &g, &mut y, eps, rows, cols).unwrap();
    let e = norms::max_rel_error(&y, &norms::rms_norm_reference(&xf, &gf, eps, cols));
    assert!(e < tol, "rms_norm {cols} cols: max rel error {e}");
}

#[test]
fn f16_norms_match_the_cpu_reference_on_the_emulator() {
    for emu in Emulator::schedules(1, 2) {
        check_all::<f16>(4e-3, 2, 1024, &emu);
    }
    check_all::<f16>(4e-3, 1, 8192, &Emulator::new(3));
}

#[test]
fn bf16_norms_match_the_cpu_reference_on_the_emulator() {
    check_all::<bf16>(2e-2, 2, 2048, &Emulator::new(1));
}

#[test]
fn unsupported_row_lengths_and_short_buffers_are_errors_naming_the_rule() {
    let emu = Emulator::new(1);
    let x = vec![f16::ZERO; 1000];
    let mut y = vec![f16::ZERO; 1000];
    let e = norms::softmax_emu(&emu, &x, &mut y, 1, 1000).unwrap_err().to_string();
    assert!(e.contains("cols = 1000") && e.contains("1024"), "{e}");
    let e = norms::softmax_emu(&emu, &x, &mut y, 1, 1024).unwrap_err().to_string();
    assert!(e.contains("`x` holds 1000 elements; 1024 needed"), "{e}");
}
