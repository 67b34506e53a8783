//! FP8 GEMM with per-tensor scales: `c = (scale_a · scale_b) · a · bᵀ`
//! (a `M x K`, b `N x K`, both e4m3 (or one of them e5m2) row-major, i.e. K-major as FP8 wgmma
//! requires and as cuBLASLt's FP8 "TN" layout stores them; c `M x N` f16;
//! f32 accumulation): [`matmul_fp8`] on a GPU or the CPU emulator,
//! [`quantize`] (per-tensor amax scaling to e4m3) and the CPU
//! [`reference()`]. The kernel is `kernel_ops_kernels::matmul_fp8`. With
//! row-wise scales (one per row of a and of b): [`matmul_fp8_rowwise`],
//! [`quantize_rowwise`], [`reference_rowwise`]; with block scales (1 x 128
//! and 128 x 128, promoted every 128 of K): [`matmul_fp8_blockscaled`].
//!
//! ```
//! # fn main() -> Result<(), kernel_ops::Error> {
//! use kernel_host::Device;
//! let dev = Device::emulator();
//! let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
//! let (m, n, k) = (8, 8, 32);
//! let (a, sa) = kernel_ops::fp8::quantize(&vec![0.5f32; m * k]);
//! let (b, sb) = kernel_ops::fp8::quantize(&vec![0.25f32; n * k]);
//! let (a, b, scales) = (dev.upload(&a)?, dev.upload(&b)?, dev.upload(&[sa, sb])?);
//! let mut c = dev.zeros::<kernel_device::f16>(m * n)?;
//! kernel_ops::fp8::matmul_fp8(&dev, &ops, &a, &b, &scales, &mut c, (m, n, k))?;
//! assert!(dev.download(&c)?.iter().all(|v| (v.to_f32() - 4.0).abs() < 1e-2)); // 32 x 0.5 x 0.25
//! # Ok(()) }
//! ```
use crate::{at, Ctas, Error};
use kernel_device::launch::HostEntry;
use kernel_device::tma::TensorMapParam;
use kernel_device::{f16, GmemRef, E4M3, E5M2};
use kernel_host::{Buffer, Device, Program, TileMap};
use kernel_ops_kernels::gemm_multi::EpiTileOf;
use kernel_ops_kernels::matmul_fp8::{matmul_fp8 as kernel, Fp8TileOf, TK8};

/// The instance [`matmul_fp8`] runs on e4m3 operands: `128 x 256` tiles,
/// 4 stages, planar-snake width 8.
pub type Instance = kernel<E4M3, E4M3, 128, 256, 4, 8>;
const BM: usize = 128;
const BN: usize = 256;

/// The largest finite e4m3 value (`S.1111.110`).
pub const E4M3_MAX: f32 = 448.0;
/// The largest finite e5m2 value (`S.11110.11`).
pub const E5M2_MAX: f32 = 57344.0;

/// An FP8 element type (e4m3 or e5m2), as the quantizers and references
/// use it: its largest finite value and its conversions.
pub trait Fp8: Copy + 'static {
    /// The largest finite value.
    const MAX: f32;
    /// `x` rounded to the nearest value (ties to even), saturating (the
    /// quantizers scale `x` into range first).
    fn from_f32(x: f32) -> Self;
    /// The value.
    fn to_f32(self) -> f32;
}
impl Fp8 for E4M3 {
    const MAX: f32 = E4M3_MAX;
    fn from_f32(x: f32) -> Self {
        E4M3::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        E4M3::to_f32(&self)
    }
}
impl Fp8 for E5M2 {
    const MAX: f32 = E5M2_MAX;
    fn from_f32(x: f32) -> Self {
        E5M2::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        E5M2::to_f32(&self)
    }
}

/// The operand types `(A, B)` [`matmul_fp8`] is built for, with its two
/// instances (planar-snake widths 8 and 16): e4m3 times e4m3 (forward
/// GEMMs), and e5m2 with e4m3 in either order (the FP8 training recipes'
/// backward GEMMs: e5m2 gradients times e4m3 weights or activations). Two
/// e5m2 operands are not built (no recipe multiplies two gradients).
#[diagnostic::on_unimplemented(
    message = "matmul_fp8 is not built for A of `{A}` with B of this type",
    note = "built: (E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)"
)]
pub trait Fp8Operands<A: Fp8>: Fp8 + kernel_host::TmaElement {
    /// Planar-snake width 8.
    type W8: HostEntry<Params = Fp8Params<A, Self>>;
    /// Planar-snake width 16.
    type W16: HostEntry<Params = Fp8Params<A, Self>>;
}

/// The parameters of `matmul_fp8<A, B, 128, 256, ..>`: the maps of A, B and
/// C, the scales, `m_tiles`, `n_tiles`, `k_steps`.
pub type Fp8Params<A, B> = (TensorMapParam<Fp8TileOf<A, BM>>, TensorMapParam<Fp8TileOf<B, BN>>, TensorMapParam<EpiTileOf<BM>>, GmemRef<f32>, u32, u32, u32);
impl Fp8Operands<E4M3> for E4M3 {
    type W8 = Instance;
    type W16 = kernel<E4M3, E4M3, 128, 256, 4, 16>;
}
impl Fp8Operands<E5M2> for E4M3 {
    type W8 = kernel<E5M2, E4M3, 128, 256, 4, 8>;
    type W16 = kernel<E5M2, E4M3, 128, 256, 4, 16>;
}
impl Fp8Operands<E4M3> for E5M2 {
    type W8 = kernel<E4M3, E5M2, 128, 256, 4, 8>;
    type W16 = kernel<E4M3, E5M2, 128, 256, 4, 16>;
}

/// Per-tensor quantization: `x / scale` rounded to e4m3 (round to nearest
/// even), with `scale = amax(|x|) / 448` so the largest magnitude maps to
/// e4m3's largest finite value (1 for an all-zero `x`). Returns the values
/// and `scale` (what [`matmul_fp8`] multiplies back).
pub fn quantize(x: &[f32]) -> (Vec<E4M3>, f32) {
    quantize_to::<E4M3>(x)
}

/// [`quantize`] to either FP8 type: `scale = amax(|x|) / T::MAX` (e5m2:
/// 57344).
pub fn quantize_to<T: Fp8>(x: &[f32]) -> (Vec<T>, f32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = if amax > 0.0 && amax.is_finite() { amax / T::MAX } else { 1.0 };
    (x.iter().map(|&v| T::from_f32(v / scale)).collect(), scale)
}

/// Checks an FP8 GEMM problem before anything is launched: `a` holds
/// `M x K`, `b` `N x K`, `c` `M x N` elements, `scales` 2; no dimension is
/// 0 or above `2^31 - 1`; `K % 16 == 0` (TMA: rows of 16-byte multiples)
/// and `N % 8 == 0` (f16 rows of c).
pub fn check_fp8(m: usize, n: usize, k: usize, lens: [(&str, usize); 4]) -> Result<(), Error> {
    let shape = |problem: String| Error::Shape { op: "matmul_fp8", problem };
    if m == 0 || n == 0 || k == 0 {
        return Err(shape(format!("M x N x K = {m} x {n} x {k}: every dimension must be at least 1")));
    }
    for (dim, v) in [("M", m), ("N", n), ("K", k)] {
        if v > i32::MAX as usize {
            return Err(shape(format!("{dim} = {v}: at most 2^31 - 1 (a TMA coordinate)")));
        }
    }
    for ((name, got), (what, want)) in lens.into_iter().zip([("M x K", m * k), ("N x K", n * k), ("M x N", m * n), ("2 (scale_a, scale_b)", 2)]) {
        if got != want {
            return Err(shape(format!("`{name}` holds {got} elements; {what} = {want} expected for M x N x K = {m} x {n} x {k}")));
        }
    }
    if k % 16 != 0 {
        return Err(shape(format!("K = {k}: must be a multiple of 16 (TMA needs the e4m3 rows of a and b to be multiples of 16 bytes); pad K with zeros to {}", k.next_multiple_of(16))));
    }
    if n % 8 != 0 {
        return Err(shape(format!("N = {n}: must be a multiple of 8 (TMA needs the f16 rows of c to be multiples of 16 bytes); pad N to {}", n.next_multiple_of(8))));
    }
    Ok(())
}

/// `c = (scales[0] · scales[1]) · a · bᵀ` on `dev` (a GPU or the emulator),
/// with `ops` this crate's kernels loaded there; `(m, n, k)` as the module
/// says; `scales` on the device (as cuBLASLt's scale pointers, so scales
/// computed on the GPU need no round trip). Asynchronous on a GPU's stream.
/// Checks everything first ([`check_fp8`]). The grid is persistent:
/// [`Ctas::EvenWaves`] over the `ceil(M / 128) x ceil(N / 256)` tiles.
///
/// `a` and `b` are e4m3, or one of them e5m2 ([`Fp8Operands`]: the
/// backward GEMMs of FP8 training); the instance is picked by their types.
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8<A: Fp8 + kernel_host::TmaElement, B: Fp8Operands<A>>(dev: &Device, ops: &Program, a: &Buffer<A>, b: &Buffer<B>, scales: &Buffer<f32>, c: &mut Buffer<f16>, (m, n, k): (usize, usize, usize)) -> Result<(), Error> {
    launch::<A, B, B::W8>(dev, ops, a, b, scales, c, (m, n, k), Ctas::default())
}

/// The planar-snake widths the kernel is built for ([`matmul_fp8_with`]).
pub const GRID_WIDTHS: [u32; 2] = [8, 16];

/// [`matmul_fp8`] with the tile order's planar-snake width `grid_w` (8 or
/// 16) and the grid sized by `ctas` (default [`Ctas::EvenWaves`]): for
/// benchmarks and tuning.
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8_with<A: Fp8 + kernel_host::TmaElement, B: Fp8Operands<A>>(dev: &Device, ops: &Program, a: &Buffer<A>, b: &Buffer<B>, scales: &Buffer<f32>, c: &mut Buffer<f16>, shape: (usize, usize, usize), grid_w: u32, ctas: Ctas) -> Result<(), Error> {
    match grid_w {
        8 => launch::<A, B, B::W8>(dev, ops, a, b, scales, c, shape, ctas),
        16 => launch::<A, B, B::W16>(dev, ops, a, b, scales, c, shape, ctas),
        w => Err(Error::Shape { op: "matmul_fp8", problem: format!("grid_w = {w}: the kernel is built for planar-snake widths {GRID_WIDTHS:?}") }),
    }
}

/// What every FP8 GEMM launch builds for `BM x BN` tiles (K steps of
/// [`TK8`]): the tensor maps of `a` (`M x K`), `b` (`N x K`) and `c` (`M x
/// N`, stored to), the tile counts `(m_tiles, n_tiles, k_steps)` and the
/// persistent grid (`ctas` over the `m_tiles x n_tiles` tiles).
struct Fp8Launch<'a, A: Copy, B: Copy, const BM: usize, const BN: usize> {
    a: TileMap<'a, Fp8TileOf<A, BM>>,
    b: TileMap<'a, Fp8TileOf<B, BN>>,
    c: TileMap<'a, EpiTileOf<BM>>,
    tiles: (u32, u32, u32),
    grid: u32,
}

impl<'a, A: Fp8 + kernel_host::TmaElement, B: Fp8 + kernel_host::TmaElement, const BM: usize, const BN: usize> Fp8Launch<'a, A, B, BM, BN> {
    fn new(dev: &Device, a: &'a Buffer<A>, b: &'a Buffer<B>, c: &'a mut Buffer<f16>, (m, n, k): (usize, usize, usize), ctas: Ctas) -> Result<Self, Error> {
        let tiles = (m.div_ceil(BM) as u32, n.div_ceil(BN) as u32, k.div_ceil(TK8) as u32);
        let grid = ctas.grid(tiles.0 * tiles.1, dev.sm_count());
        Ok(Fp8Launch { a: TileMap::new_2d(a, m, k)?, b: TileMap::new_2d(b, n, k)?, c: TileMap::new_2d_mut(c, m, n)?, tiles, grid })
    }
}

#[allow(clippy::too_many_arguments)]
fn launch<A: Fp8 + kernel_host::TmaElement, B: Fp8 + kernel_host::TmaElement, K>(dev: &Device, ops: &Program, a: &Buffer<A>, b: &Buffer<B>, scales: &Buffer<f32>, c: &mut Buffer<f16>, (m, n, k): (usize, usize, usize), ctas: Ctas) -> Result<(), Error>
where
    K: HostEntry<Params = Fp8Params<A, B>>,
    K::Params: kernel_host::runtime::ParamList,
{
    check_fp8(m, n, k, [("a", a.len()), ("b", b.len()), ("c", c.len()), ("scales", scales.len())])?;
    crate::check_aligned("matmul_fp8", &[at("a", a), at("b", b), at("scales", scales), at("c", c)])?;
    let l = Fp8Launch::<A, B, BM, BN>::new(dev, a, b, c, (m, n, k), ctas)?;
    let (mt, nt, ks) = l.tiles;
    ops.kernel::<K>()?.launch(l.grid, (&l.a, &l.b, &l.c, scales, mt, nt, ks))?;
    Ok(())
}

/// The CPU reference: `scale_a · scale_b · Σ_k a[i, k] b[j, k]` over the
/// FP8 values (e4m3 or e5m2; exact products, summed in f64), rounded once
/// to f32.
/// Returns `M x N` row-major.
///
/// # Panics
/// When an operand does not hold exactly its shape's elements.
pub fn reference<A: Fp8, B: Fp8>(a: &[A], b: &[B], (scale_a, scale_b): (f32, f32), m: usize, n: usize, k: usize) -> Vec<f32> {
    assert!(a.len() == m * k && b.len() == n * k, "fp8::reference: a holds {}, b {} elements; M x K = {}, N x K = {} needed", a.len(), b.len(), m * k, n * k);
    let (af, bf): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| f64::from(Fp8::to_f32(*v))).collect(), b.iter().map(|v| f64::from(Fp8::to_f32(*v))).collect());
    let s = f64::from(scale_a) * f64::from(scale_b);
    (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            (s * af[r * k..(r + 1) * k].iter().zip(&bf[c * k..(c + 1) * k]).map(|(x, y)| x * y).sum::<f64>()) as f32
        })
        .collect()
}

/// Block-scaled quantization of activations (A, `m x k` row-major): one
/// scale per row and 128 of K (`amax / 448` of the block, 1 for an
/// all-zero block). Returns the e4m3 values and the scales, `ceil(k / 128)
/// x m`, K-block-major (the layout [`matmul_fp8_blockscaled`] reads).
pub fn quantize_1x128(x: &[f32], m: usize, k: usize) -> (Vec<E4M3>, Vec<f32>) {
    assert_eq!(x.len(), m * k, "quantize_1x128: x holds {} elements; m x k = {} needed", x.len(), m * k);
    let kb = k.div_ceil(BLOCK);
    let mut scales = vec![1f32; kb * m];
    let mut q = vec![E4M3::from_f32(0.0); m * k];
    for r in 0..m {
        for b in 0..kb {
            let cols = b * BLOCK..((b + 1) * BLOCK).min(k);
            let amax = x[r * k..][cols.clone()].iter().fold(0f32, |a, v| a.max(v.abs()));
            let s = if amax > 0.0 && amax.is_finite() { amax / E4M3_MAX } else { 1.0 };
            scales[b * m + r] = s;
            for c in cols {
                q[r * k + c] = E4M3::from_f32(x[r * k + c] / s);
            }
        }
    }
    (q, scales)
}

/// Block-scaled quantization of weights (B, `n x k` row-major): one scale
/// per 128 x 128 block. Returns the e4m3 values and the scales,
/// `ceil(n / 128) x ceil(k / 128)` row-major.
pub fn quantize_128x128(w: &[f32], n: usize, k: usize) -> (Vec<E4M3>, Vec<f32>) {
    assert_eq!(w.len(), n * k, "quantize_128x128: w holds {} elements; n x k = {} needed", w.len(), n * k);
    let (nb, kb) = (n.div_ceil(BLOCK), k.div_ceil(BLOCK));
    let mut scales = vec![1f32; nb * kb];
    let mut q = vec![E4M3::from_f32(0.0); n * k];
    for bn in 0..nb {
        for bk in 0..kb {
            let (rows, cols) = (bn * BLOCK..((bn + 1) * BLOCK).min(n), bk * BLOCK..((bk + 1) * BLOCK).min(k));
            let amax = rows.clone().flat_map(|r| w[r * k..][cols.clone()].iter()).fold(0f32, |a, v| a.max(v.abs()));
            let s = if amax > 0.0 && amax.is_finite() { amax / E4M3_MAX } else { 1.0 };
            scales[bn * kb + bk] = s;
            for r in rows {
                for c in cols.clone() {
                    q[r * k + c] = E4M3::from_f32(w[r * k + c] / s);
                }
            }
        }
    }
    (q, scales)
}

/// Row-wise quantization of a `rows x cols` row-major matrix: each row
/// `r` scaled by its own `scale[r] = amax(|x[r, ..]|) / 448` (1 for an
/// all-zero row) and rounded to e4m3. Returns the values and the `rows`
/// scales: for `a` (`M x K`) the per-row scales of [`matmul_fp8_rowwise`],
/// for `b` (`N x K`) its per-column ones.
pub fn quantize_rowwise(x: &[f32], rows: usize, cols: usize) -> (Vec<E4M3>, Vec<f32>) {
    assert_eq!(x.len(), rows * cols, "fp8::quantize_rowwise: x holds {} elements, rows x cols = {rows} x {cols} expected", x.len());
    let mut q = Vec::with_capacity(x.len());
    let scales = x
        .chunks(cols.max(1))
        .map(|row| {
            let (r, s) = quantize(row);
            q.extend(r);
            s
        })
        .collect();
    (q, scales)
}

/// The checks of the FP8 GEMMs with scale vectors: [`check_fp8`]'s rules
/// for `a`, `b` and `c` (`lens`), then each scale buffer's length, `(name,
/// got, what, want)`; `unit` says what one scale covers.
fn check_scaled(op: &'static str, (m, n, k): (usize, usize, usize), [a, b, c]: [usize; 3], scales: [(&str, usize, &str, usize); 2], unit: &str) -> Result<(), Error> {
    check_fp8(m, n, k, [("a", a), ("b", b), ("c", c), ("scales", 2)])?;
    for (name, got, what, want) in scales {
        if got != want {
            return Err(Error::Shape { op, problem: format!("`{name}` holds {got} elements; {what} = {want} expected for M x N x K = {m} x {n} x {k} ({unit})") });
        }
    }
    Ok(())
}

/// `c[i, j] = a_scales[i] · b_scales[j] · Σ_k a[i, k] b[j, k]` on `dev`:
/// FP8 with row-wise scales (one per row of `a`, one per row of `b`, i.e.
/// per column of `c`, as [`quantize_rowwise`] makes them), f16 out, no
/// promotion (the scales factor out of the K sum). Checks everything first
/// (the rules of [`check_fp8`], and `a_scales` holding M, `b_scales` N).
/// The kernel is `kernel_ops_kernels::matmul_fp8::matmul_fp8_rowwise`:
/// [`matmul_fp8`]'s mainloop and `128 x 256` tiles; its grid is persistent.
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8_rowwise(
    dev: &Device,
    ops: &Program,
    a: &Buffer<E4M3>,
    a_scales: &Buffer<f32>,
    b: &Buffer<E4M3>,
    b_scales: &Buffer<f32>,
    c: &mut Buffer<f16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    check_scaled("matmul_fp8_rowwise", (m, n, k), [a.len(), b.len(), c.len()], [("a_scales", a_scales.len(), "M", m), ("b_scales", b_scales.len(), "N", n)], "one f32 per row of a, per row of b")?;
    crate::check_aligned("matmul_fp8_rowwise", &[at("a", a), at("a_scales", a_scales), at("b", b), at("b_scales", b_scales), at("c", c)])?;
    use kernel_ops_kernels::matmul_fp8::{RW_BM, RW_BN};
    let l = Fp8Launch::<E4M3, E4M3, RW_BM, RW_BN>::new(dev, a, b, c, (m, n, k), Ctas::default())?;
    let (mt, nt, ks) = l.tiles;
    ops.kernel::<RowwiseInstance>()?.launch(l.grid, (&l.a, &l.b, &l.c, a_scales, b_scales, m as u32, n as u32, mt, nt, ks))?;
    Ok(())
}

/// [`matmul_fp8_rowwise`]'s instance: 4 stages, planar-snake width 8 (the
/// per-tensor kernel's).
pub type RowwiseInstance = kernel_ops_kernels::matmul_fp8::matmul_fp8_rowwise<4, 8>;

/// The CPU reference of [`matmul_fp8_rowwise`]: `a_scales[i] · b_scales[j]
/// · Σ_k a[i, k] b[j, k]` (exact products summed in f64), rounded once to
/// f32. Returns `M x N` row-major.
///
/// # Panics
/// When an operand does not hold exactly its shape's elements.
pub fn reference_rowwise(a: &[E4M3], a_scales: &[f32], b: &[E4M3], b_scales: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    assert!(a.len() == m * k && b.len() == n * k && a_scales.len() == m && b_scales.len() == n, "fp8::reference_rowwise: operand lengths do not match M x N x K = {m} x {n} x {k}");
    let (af, bf): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| f64::from(v.to_f32())).collect(), b.iter().map(|v| f64::from(v.to_f32())).collect());
    (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            let dot: f64 = af[r * k..(r + 1) * k].iter().zip(&bf[c * k..(c + 1) * k]).map(|(x, y)| x * y).sum();
            (f64::from(a_scales[r]) * f64::from(b_scales[c]) * dot) as f32
        })
        .collect()
}

/// K of one scale block (`kernel_ops_kernels::matmul_fp8::SCALE_BLOCK`).
const BLOCK: usize = kernel_ops_kernels::matmul_fp8::SCALE_BLOCK;

/// [`matmul_fp8_blockscaled`]'s instance: 4 stages (the most that fit at 128 x 256 tiles: 4 x 48 KB + 32 KB of SMEM; at 128 x 128, 6 measured no faster on the H100), planar-snake width 8.
pub type BlockScaledInstance = kernel_ops_kernels::matmul_fp8::matmul_fp8_blockscaled<4, 8>;

/// `c[i, j] = Σ_kb a_scales[kb][i] b_scales[j / 128][kb] Σ_{k in kb}
/// a[i, k] b[j, k]` on `dev`: block-scaled FP8 (1 x 128 scales for `a`,
/// 128 x 128 for `b`, as [`quantize_1x128`] and [`quantize_128x128`] make
/// them), partial sums promoted to f32 every 128 of K, f16 out. Checks
/// everything first (the rules of [`check_fp8`], and the scale buffers'
/// lengths). The grid is persistent: [`Ctas::EvenWaves`] over the
/// `ceil(M / 128) x ceil(N / 256)` tiles.
#[allow(clippy::too_many_arguments)]
pub fn matmul_fp8_blockscaled(
    dev: &Device,
    ops: &Program,
    a: &Buffer<E4M3>,
    a_scales: &Buffer<f32>,
    b: &Buffer<E4M3>,
    b_scales: &Buffer<f32>,
    c: &mut Buffer<f16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), Error> {
    let (kb, nb) = (k.div_ceil(BLOCK), n.div_ceil(BLOCK));
    check_scaled("matmul_fp8_blockscaled", (m, n, k), [a.len(), b.len(), c.len()], [("a_scales", a_scales.len(), "ceil(K / 128) x M", kb * m), ("b_scales", b_scales.len(), "ceil(N / 128) x ceil(K / 128)", nb * kb)], "one f32 per block of 128")?;
    crate::check_aligned("matmul_fp8_blockscaled", &[at("a", a), at("a_scales", a_scales), at("b", b), at("b_scales", b_scales), at("c", c)])?;
    use kernel_ops_kernels::matmul_fp8::{BS_BM, BS_BN};
    let l = Fp8Launch::<E4M3, E4M3, BS_BM, BS_BN>::new(dev, a, b, c, (m, n, k), Ctas::default())?;
    let (mt, nt, ks) = l.tiles;
    ops.kernel::<BlockScaledInstance>()?.launch(l.grid, (&l.a, &l.b, &l.c, a_scales, b_scales, m as u32, mt, nt, ks))?;
    Ok(())
}

/// The CPU reference of [`matmul_fp8_blockscaled`]: per block of 128 of K,
/// the exact FP8 products summed in f64 and scaled by the block's
/// `a_scales` and `b_scales`, summed over blocks in f64, rounded once to
/// f32. Returns `M x N` row-major.
pub fn reference_blockscaled(a: &[E4M3], a_scales: &[f32], b: &[E4M3], b_scales: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let kb = k.div_ceil(BLOCK);
    assert!(a.len() == m * k && b.len() == n * k && a_scales.len() == kb * m && b_scales.len() == n.div_ceil(BLOCK) * kb, "fp8::reference_blockscaled: operand lengths do not match M x N x K = {m} x {n} x {k}");
    let (af, bf): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| f64::from(v.to_f32())).collect(), b.iter().map(|v| f64::from(v.to_f32())).collect());
    (0..m * n)
        .map(|i| {
            let (r, c) = (i / n, i % n);
            (0..kb)
                .map(|bk| {
                    let cols = bk * BLOCK..((bk + 1) * BLOCK).min(k);
                    let dot: f64 = cols.map(|kk| af[r * k + kk] * bf[c * k + kk]).sum();
                    dot * f64::from(a_scales[bk * m + r]) * f64::from(b_scales[c / BLOCK * kb + bk])
                })
                .sum::<f64>() as f32
        })
        .collect()
}
