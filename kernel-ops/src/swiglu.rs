//! SwiGLU, `out = silu(X · W1ᵀ) * (X · W3ᵀ)` (X `M x K`, W1 and W3 `N x K`,
//! out `M x N`, row-major f16; `silu(g) = g / (1 + e^-g)`): the kernel is
//! `kernel_ops_kernels::swiglu::swiglu` (the multi-operand GEMM
//! `kernel_ops_kernels::gemm_multi` with a one-line epilogue); this module
//! holds its CPU reference. (The launch entry point comes with the unified
//! GPU/emulator launch API; `kernel-ops/tests/swiglu.rs` launches the
//! kernel on the emulator directly.)
use kernel_device::f16;

/// The CPU reference: both products in f32 over the f16 inputs
/// ([`kernel_host::reference_gemm_nt`]), the epilogue
/// `silu(g) * u` in f64, rounded once to f32. Returns `M x N` row-major.
///
/// # Panics
/// When an operand does not hold exactly its shape's elements (`x`:
/// `m x k`, `w1` and `w3`: `n x k`).
pub fn swiglu_reference(x: &[f16], w1: &[f16], w3: &[f16], m: usize, n: usize, k: usize) -> Vec<f32> {
    assert_eq!(w3.len(), n * k, "swiglu_reference: `w3` holds {} elements; n x k = {n} x {k} = {} needed", w3.len(), n * k);
    let gate = kernel_host::reference_gemm_nt(m, n, k, x, w1);
    let up = kernel_host::reference_gemm_nt(m, n, k, x, w3);
    gate.iter()
        .zip(&up)
        .map(|(&g, &u)| {
            let g = f64::from(g);
            (g / (1.0 + (-g).exp()) * f64::from(u)) as f32
        })
        .collect()
}
