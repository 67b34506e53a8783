//! SwiGLU, `out = silu(X · W1ᵀ) * (X · W3ᵀ)` (X `M x K`, W1 and W3 `N x K`,
//! out `M x N`, row-major f16, f32 accumulation; `silu(g) = g / (1 +
//! e^-g)`): the entry point [`swiglu`] (a GPU or the CPU emulator, through
//! [`kernel_host::Device`]) and the CPU reference [`swiglu_reference`]. The
//! kernel is `kernel_ops_kernels::swiglu::swiglu`, the multi-operand GEMM
//! `kernel_ops_kernels::gemm_multi` with a one-line epilogue.
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_device::f16;
//! use kernel_host::Device;
//! let dev = Device::emulator();
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! let (m, n, k) = (8, 8, 16);
//! let x = dev.upload(&vec![f16::from_f32(0.25); m * k])?;
//! let w = dev.upload(&vec![f16::from_f32(0.25); n * k])?; // g = u = 16 x 0.25 x 0.25 = 1
//! let mut out = dev.zeros::<f16>(m * n)?;
//! kernel_ops::swiglu::swiglu(&dev, &ops, &x, &w, &w, &mut out, (m, n, k))?;
//! let want = 1.0 / (1.0 + (-1.0f32).exp()); // silu(1) * 1
//! assert!(dev.download(&out)?.iter().all(|v| (v.to_f32() - want).abs() < 1e-3));
//! # Ok(()) }
//! ```
use crate::{at, Ctas, Error};
use kernel_device::f16;
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::gemm_multi::{ATileOf, BTileOf, EpiTileOf, TK};
use kernel_ops_kernels::swiglu::swiglu as kernel;

/// The instance [`swiglu`] runs: `BM x BN = 128 x 128` per operand, one
/// `m64n256` wgmma over both weights' tiles, 4 stages, planar-snake
/// width 8.
pub type Instance = kernel<128, 128, 256, 4, 8>;
const BM: usize = 128;
const BN: usize = 128;

/// Checks a SwiGLU problem before anything is launched: `x` holds
/// `M x K`, `w1` and `w3` `N x K`, `out` `M x N` elements; no dimension is
/// 0 or above `2^31 - 1`; `K % 8 == 0` and `N % 8 == 0` (TMA: rows of
/// 16-byte multiples).
pub fn check_swiglu(m: usize, n: usize, k: usize, lens: [(&str, usize); 4]) -> Result<(), Error> {
    let shape = |problem: String| Error::Shape { op: "swiglu", problem };
    if m == 0 || n == 0 || k == 0 {
        return Err(shape(format!("M x N x K = {m} x {n} x {k}: every dimension must be at least 1")));
    }
    for (dim, v) in [("M", m), ("N", n), ("K", k)] {
        if v > i32::MAX as usize {
            return Err(shape(format!("{dim} = {v}: at most 2^31 - 1 (a TMA coordinate)")));
        }
    }
    for ((name, got), (what, want)) in lens.into_iter().zip([("M x K", m * k), ("N x K", n * k), ("N x K", n * k), ("M x N", m * n)]) {
        if got != want {
            return Err(shape(format!("`{name}` holds {got} elements; {what} = {want} expected for M x N x K = {m} x {n} x {k}")));
        }
    }
    for (dim, v) in [("K", k), ("N", n)] {
        if v % 8 != 0 {
            return Err(shape(format!("{dim} = {v}: must be a multiple of 8 (TMA needs the rows of X, W1, W3 and out to be multiples of 16 bytes); pad {dim} with zeros to {}", v.next_multiple_of(8))));
        }
    }
    Ok(())
}

/// `out = silu(x · w1ᵀ) * (x · w3ᵀ)` on `dev` (a GPU or the emulator),
/// with `ops` this crate's kernels loaded there
/// (`dev.load(&kernel_ops_kernels::DEVICE_CODE)`); `(m, n, k)` as the
/// module says. Asynchronous on a GPU's stream, like a kernel launch.
/// Checks everything first ([`check_swiglu`]). The grid is persistent:
/// [`Ctas::EvenWaves`] over the `ceil(M / 128) x ceil(N / 128)` tiles.
#[allow(clippy::too_many_arguments)]
pub fn swiglu(dev: &Device, ops: &Program, x: &Buffer<f16>, w1: &Buffer<f16>, w3: &Buffer<f16>, out: &mut Buffer<f16>, (m, n, k): (usize, usize, usize)) -> Result<(), Error> {
    launch::<Instance>(dev, ops, x, w1, w3, out, (m, n, k), Ctas::default())
}

/// The planar-snake widths the kernel is built for ([`swiglu_with`]).
pub const GRID_WIDTHS: [u32; 2] = [8, 16];

/// [`swiglu`] with the tile order's planar-snake width `grid_w` (8, as
/// [`swiglu`], or 16) and the grid sized by `ctas`: for benchmarks and
/// tuning.
#[allow(clippy::too_many_arguments)]
pub fn swiglu_with(dev: &Device, ops: &Program, x: &Buffer<f16>, w1: &Buffer<f16>, w3: &Buffer<f16>, out: &mut Buffer<f16>, shape: (usize, usize, usize), grid_w: u32, ctas: Ctas) -> Result<(), Error> {
    match grid_w {
        8 => launch::<Instance>(dev, ops, x, w1, w3, out, shape, ctas),
        16 => launch::<kernel<128, 128, 256, 4, 16>>(dev, ops, x, w1, w3, out, shape, ctas),
        w => Err(Error::Shape { op: "swiglu", problem: format!("grid_w = {w}: the kernel is built for planar-snake widths {GRID_WIDTHS:?}") }),
    }
}

#[allow(clippy::too_many_arguments)]
fn launch<K>(dev: &Device, ops: &Program, x: &Buffer<f16>, w1: &Buffer<f16>, w3: &Buffer<f16>, out: &mut Buffer<f16>, (m, n, k): (usize, usize, usize), ctas: Ctas) -> Result<(), Error>
where
    K: kernel_device::launch::HostEntry<Params = <Instance as kernel_device::KernelSpec>::Params>,
    K::Params: kernel_host::runtime::ParamList,
{
    check_swiglu(m, n, k, [("x", x.len()), ("w1", w1.len()), ("w3", w3.len()), ("out", out.len())])?;
    crate::check_aligned("swiglu", &[at("x", x), at("w1", w1), at("w3", w3), at("out", out)])?;
    let (mt, nt, ks) = (m.div_ceil(BM) as u32, n.div_ceil(BN) as u32, k.div_ceil(TK) as u32);
    let grid = ctas.grid(mt * nt, dev.sm_count());
    let xm = TileMap::<ATileOf<BM>>::new_2d(x, m, k)?;
    let w1m = TileMap::<BTileOf<BN>>::new_2d(w1, n, k)?;
    let w3m = TileMap::<BTileOf<BN>>::new_2d(w3, n, k)?;
    let om = TileMap::<EpiTileOf<BM>>::new_2d_mut(out, m, n)?;
    ops.kernel::<K>()?.launch(grid, (&xm, &w1m, &w3m, &om, mt, nt, ks))?;
    Ok(())
}

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
