//! Host side of the Hopper examples: the pipelining guide's matmuls checked
//! (and, on a GPU, timed against cuBLAS on the same inputs), the TMA
//! multicast copy, the TMA warp roles and the wgmma variants. Every function
//! takes a [`Device`] and runs on a GPU or on the CPU emulator.
use crate::{invalid, poisoned, Outcome, Result};
use kernel_device::f16;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, rel_frobenius_error_f32, time_kernel, Blas, Buffer, Device, Launched, TileMap, Timing};
use kernels::hopper::{self, ATile, BTile, BTileKn, BTileWs, McHalf, McTile, OTile, OTileWs, TILE_K, TILE_M, TILE_N};

/// The kernels that compute `C = A · Bᵀ`, by name.
pub const MATMULS: [&str; 9] = [
    "pipelined_kn<2>",
    "pipelined_kn<4>",
    "pipelined<2>",
    "pipelined<4>",
    "warp_specialized<2,0>",
    "warp_specialized<3,0>",
    "warp_specialized<4,0>",
    "warp_specialized<4,8>",
    "warp_specialized<4,16>",
];

/// One measured contender at one shape.
#[derive(Debug, Clone)]
pub struct MatmulResult {
    pub name: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub timing: Timing,
    pub tflops: f64,
    /// Relative Frobenius error against the CPU reference (f32 accumulation
    /// of the same f16 inputs), over the checked rows.
    pub rel_err: f64,
}

/// Buffers of one problem on a device: A (M x K), B (N x K), C (M x N),
/// all row-major, of element type `E` (f16 unless said: the ladder's
/// kernels are f16; `kernel_ops::matmul` and cuBLAS also take bf16).
pub struct Problem<E: kernel_ops::MatmulElem = f16> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_host: Vec<E>,
    pub b_host: Vec<E>,
    pub a: Buffer<E>,
    pub b: Buffer<E>,
    /// B transposed: `K x N` row-major (for the kernels that read B that way).
    pub b_kn: Buffer<E>,
    pub c: Buffer<E>,
    /// Rows of C checked against the CPU, and their reference values.
    pub check_rows: Vec<usize>,
    pub reference: Vec<f32>,
}

impl Problem {
    /// iid N(0, 1) f16 inputs (`randn_f16`, seeds `seed` for A and `seed + 1`
    /// for B) and C poisoned with NaN; the reference is computed on
    /// `rows_checked` rows spread over M (all rows when `rows_checked >= m`).
    pub fn new(dev: &Device, m: usize, n: usize, k: usize, rows_checked: usize, seed: u64) -> Result<Problem> {
        Problem::of(dev, m, n, k, rows_checked, seed)
    }
}

impl<E: kernel_ops::MatmulElem> Problem<E> {
    /// [`Problem::new`] on element type `E`: the same f16 samples, rounded
    /// to `E` (exact for f16).
    pub fn of(dev: &Device, m: usize, n: usize, k: usize, rows_checked: usize, seed: u64) -> Result<Problem<E>> {
        let input = |len, seed| randn_f16(len, seed).iter().map(|x| E::from_f32(x.to_f32())).collect::<Vec<E>>();
        let a_host = input(m * k, seed);
        let b_host = input(n * k, seed + 1);
        let check_rows: Vec<usize> = if rows_checked >= m { (0..m).collect() } else { (0..rows_checked).map(|i| i * m / rows_checked).collect() };
        let a_rows: Vec<E> = check_rows.iter().flat_map(|&r| a_host[r * k..(r + 1) * k].iter().copied()).collect();
        let reference = reference_gemm_nt(check_rows.len(), n, k, &a_rows, &b_host);
        Ok(Problem {
            m,
            n,
            k,
            a: dev.upload(&a_host)?,
            b: dev.upload(&b_host)?,
            b_kn: dev.upload(&(0..k * n).map(|i| b_host[(i % n) * k + i / n]).collect::<Vec<E>>())?,
            c: dev.upload(&vec![E::NAN; m * n])?,
            a_host,
            b_host,
            check_rows,
            reference,
        })
    }

    /// Fills C with NaN, so an unwritten element fails the check.
    pub fn poison(&mut self, dev: &Device) -> Result<()> {
        dev.write(&mut self.c, &vec![E::NAN; self.m * self.n])?;
        Ok(())
    }

    /// Relative Frobenius error of C's checked rows.
    pub fn error(&self, dev: &Device) -> Result<f64> {
        let c = dev.download(&self.c)?;
        let got: Vec<f32> = self.check_rows.iter().flat_map(|&r| c[r * self.n..(r + 1) * self.n].iter().map(|&x| x.into())).collect();
        Ok(rel_frobenius_error_f32(&got, &self.reference))
    }
}

/// Checks that matmul `name`'s tiles divide `m x n x k`.
fn check_shape(name: &str, (m, n, k): (usize, usize, usize)) -> Result<()> {
    if !MATMULS.contains(&name) {
        return Err(invalid("hopper matmul", format!("unknown matmul `{name}`; known: {}", MATMULS.join(", "))));
    }
    let tile_n = if name.starts_with("warp_specialized") { 2 * TILE_N } else { TILE_N };
    if m % TILE_M != 0 || n % tile_n != 0 || k % TILE_K != 0 || k == 0 {
        return Err(invalid(
            "hopper matmul",
            format!("{name} needs M % {TILE_M} == 0, N % {tile_n} == 0, K % {TILE_K} == 0, K > 0; got {m} x {n} x {k}"),
        ));
    }
    Ok(())
}

/// A prepared launch: tensor maps and kernel handle made once; each call
/// launches (asynchronously on a GPU, to completion on the emulator).
pub type PreparedLaunch<'p> = Box<dyn Fn() -> kernel_host::Result<Launched> + 'p>;

/// Prepares matmul `name` (one of [`MATMULS`]) on `p`: the kernel handle and
/// the tensor maps are made once, so the returned closure only launches.
/// The instance table of the Hopper matmuls, for both backends.
pub fn prepare_matmul<'p>(dev: &Device, name: &str, p: &'p mut Problem) -> Result<PreparedLaunch<'p>> {
    let (m, n, k) = (p.m, p.n, p.k);
    check_shape(name, (m, n, k))?;
    let prog = dev.load(&kernels::DEVICE_CODE)?;
    let k_steps = (k / TILE_K) as u32;
    let Problem { a, b, b_kn, c, .. } = p;
    let a = TileMap::<ATile>::new_2d(a, m, k)?;
    let m_tiles = (m / TILE_M) as u32;
    // One CTA per 128 x 128 tile, B `N x K` or `K x N`.
    macro_rules! one_wg {
        ($kernel:ty, $btile:ty, $b:expr, $brows:expr, $bcols:expr) => {{
            let b = TileMap::<$btile>::new_2d($b, $brows, $bcols)?;
            let c = TileMap::<OTile>::new_2d_mut(c, m, n)?;
            let grid = (m_tiles, (n / TILE_N) as u32);
            let kernel = prog.kernel::<$kernel>()?;
            Box::new(move || kernel.launch(grid, (&a, &b, &c, k_steps)))
        }};
    }
    // Warp-specialized: one CTA per 128 x 256 tile.
    macro_rules! ws {
        ($kernel:ty) => {{
            let b = TileMap::<BTileWs>::new_2d(b, n, k)?;
            let c = TileMap::<OTileWs>::new_2d_mut(c, m, n)?;
            let grid = m_tiles * (n / (2 * TILE_N)) as u32;
            let kernel = prog.kernel::<$kernel>()?;
            Box::new(move || kernel.launch(grid, (&a, &b, &c, m_tiles, k_steps)))
        }};
    }
    Ok(match name {
        "pipelined_kn<2>" => one_wg!(hopper::matmul_pipelined_kn<2>, BTileKn, b_kn, k, n),
        "pipelined_kn<4>" => one_wg!(hopper::matmul_pipelined_kn<4>, BTileKn, b_kn, k, n),
        "pipelined<2>" => one_wg!(hopper::matmul_pipelined<2>, BTile, b, n, k),
        "pipelined<4>" => one_wg!(hopper::matmul_pipelined<4>, BTile, b, n, k),
        "warp_specialized<2,0>" => ws!(hopper::matmul_warp_specialized<2, 0>),
        "warp_specialized<3,0>" => ws!(hopper::matmul_warp_specialized<3, 0>),
        "warp_specialized<4,0>" => ws!(hopper::matmul_warp_specialized<4, 0>),
        "warp_specialized<4,8>" => ws!(hopper::matmul_warp_specialized<4, 8>),
        "warp_specialized<4,16>" => ws!(hopper::matmul_warp_specialized<4, 16>),
        other => unreachable!("`{other}` passed check_shape but has no arm: add it to the table"),
    })
}

/// Runs matmul `name` (one of [`MATMULS`]) once on `dev` at `m x n x k`
/// with `randn_f16` inputs (seeds `input_seed`, `input_seed + 1`) and
/// returns the relative Frobenius error of C against `reference_gemm_nt`
/// over every row. Shapes: `M % 128`, `N % 128` (256 for the
/// warp-specialized ones), `K % 64`.
pub fn matmul(dev: &Device, name: &str, m: usize, n: usize, k: usize, input_seed: u64) -> Result<f64> {
    let mut p = Problem::new(dev, m, n, k, usize::MAX, input_seed)?;
    prepare_matmul(dev, name, &mut p)?()?;
    p.error(dev)
}

/// Checks and times every contender (cuBLAS first, then ours) at one shape,
/// on the same inputs. Each is run once on a NaN-poisoned C and checked,
/// then timed (5 warm-up runs, median of `iters`). GPU-only (timing and
/// cuBLAS): on the emulator, [`kernel_host::Error::GpuOnly`].
#[allow(clippy::too_many_arguments)]
pub fn bench_shape(dev: &Device, blas: &Blas, m: usize, n: usize, k: usize, rows_checked: usize, iters: usize) -> Result<Vec<MatmulResult>> {
    let gpu = dev.require_gpu("timing the Hopper matmuls against cuBLAS")?;
    let mut p = Problem::new(dev, m, n, k, rows_checked, 42)?;
    let mut out = Vec::new();
    // cuBLAS writes through `&mut C`, so it is run directly.
    p.poison(dev)?;
    blas.gemm_nt(m, n, k, p.a.cuda()?, p.b.cuda()?, p.c.cuda_mut()?)?;
    gpu.synchronize()?;
    let rel_err = p.error(dev)?;
    let timing = {
        let (a, b, c) = (p.a.cuda()?, p.b.cuda()?, p.c.cuda_mut()?);
        time_kernel(gpu, 5, iters, || blas.gemm_nt(m, n, k, a, b, c))?
    };
    out.push(MatmulResult { name: "cuBLAS".into(), m, n, k, tflops: timing.tflops(m, n, k), timing, rel_err });
    // cuBLAS with B stored K x N (what the `_kn` kernels read).
    p.poison(dev)?;
    blas.gemm_nn(m, n, k, p.a.cuda()?, p.b_kn.cuda()?, p.c.cuda_mut()?)?;
    gpu.synchronize()?;
    let rel_err = p.error(dev)?;
    let timing = {
        let (a, b_kn, c) = (p.a.cuda()?, p.b_kn.cuda()?, p.c.cuda_mut()?);
        time_kernel(gpu, 5, iters, || blas.gemm_nn(m, n, k, a, b_kn, c))?
    };
    out.push(MatmulResult { name: "cuBLAS (B K x N)".into(), m, n, k, tflops: timing.tflops(m, n, k), timing, rel_err });
    for name in MATMULS {
        p.poison(dev)?;
        prepare_matmul(dev, name, &mut p)?()?;
        gpu.synchronize()?;
        let rel_err = p.error(dev)?;
        let launch = prepare_matmul(dev, name, &mut p)?;
        let timing = time_kernel(gpu, 5, iters, || launch().map(drop))?;
        out.push(MatmulResult { name: name.into(), m, n, k, tflops: timing.tflops(m, n, k), timing, rel_err });
    }
    Ok(out)
}

/// The reference's TMA multicast example: a cluster of 2 loads one `16 x 32`
/// f32 tile collectively; each CTA writes it out: `y = [x; x]`.
pub fn multicast_copy(dev: &Device) -> Result<Outcome> {
    use kernels::hopper::{MC_COLS, MC_ROWS};
    let x: Vec<f32> = crate::inputs(MC_ROWS * MC_COLS, 5);
    let dx = dev.upload(&x)?;
    let mut dy = poisoned(dev, 2 * MC_ROWS * MC_COLS)?;
    {
        let xm = TileMap::<McHalf>::new_2d(&dx, MC_ROWS, MC_COLS)?;
        let ym = TileMap::<McTile>::new_2d_mut(&mut dy, 2 * MC_ROWS, MC_COLS)?;
        dev.load(&kernels::DEVICE_CODE)?.kernel::<hopper::multicast_copy>()?.launch_sync(2u32, (&xm, &ym))?;
    }
    let want: Vec<f32> = x.iter().chain(x.iter()).copied().collect();
    crate::check("multicast_copy", &dev.download(&dy)?, &want)
}

/// The three wgmma forms of [`hopper::wgmma_variants`] against the CPU:
/// returns each variant's relative Frobenius error (f32 SS, f16-accumulator
/// SS, f32 with A from registers).
pub fn wgmma_variants(dev: &Device) -> Result<[f64; hopper::VARIANTS]> {
    use kernels::hopper::{VarA, VarB};
    let (m, n, k, batches, batch) = (64, 128, 64, 3, 2);
    let a_host = randn_f16(m * k, 7);
    let b_host = randn_f16(batches * n * k, 8);
    let a = dev.upload(&a_host)?;
    let b = dev.upload(&b_host)?;
    let mut out = poisoned(dev, hopper::VARIANTS * m * n)?;
    let am = TileMap::<VarA>::new_2d(&a, m, k)?;
    let bm = TileMap::<VarB, 3>::new_batched(&b, batches, n, k)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<hopper::wgmma_variants>()?.launch_sync(1u32, (&am, &bm, batch as u32, &mut out))?;
    let reference = reference_gemm_nt(m, n, k, &a_host, &b_host[batch * n * k..(batch + 1) * n * k]);
    let got = dev.download(&out)?;
    let mut errs = [0.0; hopper::VARIANTS];
    for (v, e) in errs.iter_mut().enumerate() {
        *e = rel_frobenius_error(&got[v * m * n..(v + 1) * m * n], &reference);
    }
    Ok(errs)
}

/// [`hopper::wgmma_transposed`]: `A · Bᵀ` (`64 x 128 x 64`) with A, B or
/// both read through transposed SMEM views (MN-major operands), against
/// the CPU product; returns each variant's relative Frobenius error.
pub fn wgmma_transposed(dev: &Device) -> Result<[f64; hopper::TRANSPOSED_VARIANTS]> {
    use kernels::hopper::{TrKm, TrKn, VarA};
    let (m, n, k) = (64, 128, 64);
    let a_mk = randn_f16(m * k, 31);
    let b_nk = randn_f16(n * k, 32);
    let transpose = |x: &[f16], rows: usize, cols: usize| -> Vec<f16> { (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect() };
    let (a_km, b_kn) = (transpose(&a_mk, m, k), transpose(&b_nk, n, k));
    let (da_mk, da_km, db_nk, db_kn) = (dev.upload(&a_mk)?, dev.upload(&a_km)?, dev.upload(&b_nk)?, dev.upload(&b_kn)?);
    let mut out = poisoned(dev, hopper::TRANSPOSED_VARIANTS * m * n)?;
    let maps = (
        TileMap::<VarA>::new_2d(&da_mk, m, k)?,
        TileMap::<TrKm>::new_2d(&da_km, k, m)?,
        TileMap::<kernel_device::Tile<f16, 128, 64, hopper::Sw>>::new_2d(&db_nk, n, k)?,
        TileMap::<TrKn>::new_2d(&db_kn, k, n)?,
    );
    dev.load(&kernels::DEVICE_CODE)?
        .kernel::<hopper::wgmma_transposed>()?
        .launch_sync(1u32, (&maps.0, &maps.1, &maps.2, &maps.3, &mut out))?;
    let reference = reference_gemm_nt(m, n, k, &a_mk, &b_nk);
    let got: Vec<f32> = dev.download(&out)?;
    let mut errs = [0.0; hopper::TRANSPOSED_VARIANTS];
    for (v, e) in errs.iter_mut().enumerate() {
        *e = kernel_host::rel_frobenius_error_f32(&got[v * m * n..(v + 1) * m * n], &reference);
    }
    Ok(errs)
}

/// The FP8 wgmma forms of [`hopper::wgmma_fp8`] (`m64n256k32`, e4m3 and
/// e5m2) against the CPU: returns each format's relative Frobenius error
/// against the f64 product of the FP8 inputs (iid N(0, 1) rounded to each
/// format), which is exact up to the MMA's accumulation.
pub fn wgmma_fp8(dev: &Device) -> Result<[f64; 2]> {
    use kernel_device::{E4M3, E5M2};
    use kernels::hopper::{Fp8A, Fp8B};
    let (m, n, k) = (64, 256, 128);
    let randn = |len, seed| -> Vec<f32> { kernel_host::randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    let (a, b) = (randn(m * k, 21), randn(n * k, 22));
    let (a4, b4): (Vec<E4M3>, Vec<E4M3>) = (a.iter().map(|&x| E4M3::from_f32(x)).collect(), b.iter().map(|&x| E4M3::from_f32(x)).collect());
    let (a5, b5): (Vec<E5M2>, Vec<E5M2>) = (a.iter().map(|&x| E5M2::from_f32(x)).collect(), b.iter().map(|&x| E5M2::from_f32(x)).collect());
    let reference = |a: &[f32], b: &[f32]| -> Vec<f32> {
        (0..m * n).map(|i| (0..k).map(|kk| f64::from(a[i / n * k + kk]) * f64::from(b[i % n * k + kk])).sum::<f64>() as f32).collect()
    };
    let want4 = reference(&a4.iter().map(|x| x.to_f32()).collect::<Vec<_>>(), &b4.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
    let want5 = reference(&a5.iter().map(|x| x.to_f32()).collect::<Vec<_>>(), &b5.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
    let (da4, db4, da5, db5) = (dev.upload(&a4)?, dev.upload(&b4)?, dev.upload(&a5)?, dev.upload(&b5)?);
    let mut out = dev.upload(&vec![f32::NAN; 2 * m * n])?;
    let (am4, bm4) = (TileMap::<Fp8A<E4M3>>::new_2d(&da4, m, k)?, TileMap::<Fp8B<E4M3>>::new_2d(&db4, n, k)?);
    let (am5, bm5) = (TileMap::<Fp8A<E5M2>>::new_2d(&da5, m, k)?, TileMap::<Fp8B<E5M2>>::new_2d(&db5, n, k)?);
    dev.load(&kernels::DEVICE_CODE)?.kernel::<hopper::wgmma_fp8>()?.launch_sync(1u32, (&am4, &bm4, &am5, &bm5, &mut out))?;
    let got = dev.download(&out)?;
    let err = |v: usize, want: &[f32]| {
        let (num, den) = got[v * m * n..(v + 1) * m * n].iter().zip(want).fold((0f64, 0f64), |(s, t), (&g, &w)| {
            (s + (f64::from(g) - f64::from(w)).powi(2), t + f64::from(w).powi(2))
        });
        (num / den).sqrt()
    };
    Ok([err(0, &want4), err(1, &want5)])
}

/// [`hopper::warp_roles`]: a TMA warp and a consumer warp; `y = 2 x` over 4 tiles.
pub fn warp_roles(dev: &Device) -> Result<Outcome> {
    let tiles = 4usize;
    let x: Vec<f32> = crate::inputs(tiles * 64 * 64, 9);
    let dx = dev.upload(&x)?;
    let mut dy = poisoned(dev, x.len())?;
    let xm = TileMap::<hopper::RoleTile>::new_2d(&dx, tiles * 64, 64)?;
    dev.load(&kernels::DEVICE_CODE)?.kernel::<hopper::warp_roles>()?.launch_sync(tiles as u32, (&xm, &mut dy))?;
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    crate::check("warp_roles", &dev.download(&dy)?, &want)
}
