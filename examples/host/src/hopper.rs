//! Host side of the Hopper examples: the pipelining guide's matmuls checked
//! and timed against cuBLAS on the same inputs, and the TMA multicast copy.
use crate::{ExampleError, Outcome, Result};
use kernel_host::{
    randn_f16, reference_gemm_nt, rel_frobenius_error, time_kernel, Blas, Buffer, Gpu, Module, TensorMap, Timing,
};
use kernels::hopper::{self, ATile, BTile, BTileWs, McHalf, McTile, OTile, OTileWs, TILE_K, TILE_M, TILE_N};
use kernel_device::f16;

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

/// Device buffers of one problem: A (M x K), B (N x K), C (M x N), all row-major.
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_host: Vec<f16>,
    pub b_host: Vec<f16>,
    pub a: Buffer<f16>,
    pub b: Buffer<f16>,
    /// B transposed: `K x N` row-major (for the kernels that read B that way).
    pub b_kn: Buffer<f16>,
    pub c: Buffer<f16>,
    /// Rows of C checked against the CPU, and their reference values.
    pub check_rows: Vec<usize>,
    pub reference: Vec<f32>,
}

impl Problem {
    /// iid N(0, 1) f16 inputs; the reference is computed on `rows_checked`
    /// rows spread over M (all rows when `rows_checked >= m`).
    pub fn new(gpu: &Gpu, m: usize, n: usize, k: usize, rows_checked: usize, seed: u64) -> Result<Problem> {
        let a_host = randn_f16(m * k, seed);
        let b_host = randn_f16(n * k, seed + 1);
        let check_rows: Vec<usize> = if rows_checked >= m { (0..m).collect() } else { (0..rows_checked).map(|i| i * m / rows_checked).collect() };
        let a_rows: Vec<f16> = check_rows.iter().flat_map(|&r| a_host[r * k..(r + 1) * k].iter().copied()).collect();
        let reference = reference_gemm_nt(check_rows.len(), n, k, &a_rows, &b_host);
        let up = |v: &[f16]| -> Result<Buffer<f16>> { Ok(Buffer::from(gpu.upload(v)?)) };
        Ok(Problem {
            m,
            n,
            k,
            a: up(&a_host)?,
            b: up(&b_host)?,
            b_kn: up(&(0..k * n).map(|i| b_host[(i % n) * k + i / n]).collect::<Vec<f16>>())?,
            c: up(&vec![f16::NAN; m * n])?,
            a_host,
            b_host,
            check_rows,
            reference,
        })
    }

    /// Fills C with NaN, so an unwritten element fails the check.
    pub fn poison(&mut self, gpu: &Gpu) -> Result<()> {
        self.c = Buffer::from(gpu.upload(&vec![f16::NAN; self.m * self.n])?);
        Ok(())
    }

    /// Relative Frobenius error of C's checked rows.
    pub fn error(&self, gpu: &Gpu) -> Result<f64> {
        let c = gpu.download(self.c.cuda()?)?;
        let got: Vec<f16> = self.check_rows.iter().flat_map(|&r| c[r * self.n..(r + 1) * self.n].iter().copied()).collect();
        Ok(rel_frobenius_error(&got, &self.reference))
    }
}

fn check_shape(name: &str, p: &Problem, tile_n: usize) -> Result<()> {
    if p.m % TILE_M != 0 || p.n % tile_n != 0 || p.k % TILE_K != 0 || p.k == 0 {
        return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
            function: "hopper matmul",
            problem: format!("{name} needs M % {TILE_M} == 0, N % {tile_n} == 0, K % {TILE_K} == 0, K > 0; got {} x {} x {}", p.m, p.n, p.k),
        }));
    }
    Ok(())
}

/// Prepares matmul `name` on `p`: the kernel handle and the tensor maps are
/// made once, so the returned closure only launches (asynchronously).
pub fn prepare_matmul<'p>(module: &Module, name: &str, p: &'p Problem) -> Result<Box<dyn Fn() -> kernel_host::Result<()> + 'p>> {
    let k_steps = (p.k / TILE_K) as u32;
    let a = TensorMap::<ATile>::new_2d(p.a.cuda()?, p.m, p.k)?;
    Ok(match name {
        "pipelined_kn<2>" | "pipelined_kn<4>" => {
            check_shape(name, p, TILE_N)?;
            let b = TensorMap::<kernels::hopper::BTileKn>::new_2d(p.b_kn.cuda()?, p.k, p.n)?;
            let c = TensorMap::<OTile>::new_2d(p.c.cuda()?, p.m, p.n)?;
            let grid = ((p.m / TILE_M) as u32, (p.n / TILE_N) as u32);
            if name == "pipelined_kn<2>" {
                let kernel = module.kernel::<hopper::matmul_pipelined_kn<2>>()?;
                Box::new(move || kernel.launch(grid, (&a, &b, &c, k_steps)))
            } else {
                let kernel = module.kernel::<hopper::matmul_pipelined_kn<4>>()?;
                Box::new(move || kernel.launch(grid, (&a, &b, &c, k_steps)))
            }
        }
        "pipelined<2>" | "pipelined<4>" => {
            check_shape(name, p, TILE_N)?;
            let b = TensorMap::<BTile>::new_2d(p.b.cuda()?, p.n, p.k)?;
            let c = TensorMap::<OTile>::new_2d(p.c.cuda()?, p.m, p.n)?;
            let grid = ((p.m / TILE_M) as u32, (p.n / TILE_N) as u32);
            if name == "pipelined<2>" {
                let kernel = module.kernel::<hopper::matmul_pipelined<2>>()?;
                Box::new(move || kernel.launch(grid, (&a, &b, &c, k_steps)))
            } else {
                let kernel = module.kernel::<hopper::matmul_pipelined<4>>()?;
                Box::new(move || kernel.launch(grid, (&a, &b, &c, k_steps)))
            }
        }
        ws if ws.starts_with("warp_specialized<") => {
            check_shape(name, p, 2 * TILE_N)?;
            let b = TensorMap::<BTileWs>::new_2d(p.b.cuda()?, p.n, p.k)?;
            let c = TensorMap::<OTileWs>::new_2d(p.c.cuda()?, p.m, p.n)?;
            let m_tiles = (p.m / TILE_M) as u32;
            let grid = m_tiles * (p.n / (2 * TILE_N)) as u32;
            macro_rules! ws {
                ($s:literal, $g:literal) => {{
                    let kernel = module.kernel::<hopper::matmul_warp_specialized<$s, $g>>()?;
                    Box::new(move || kernel.launch(grid, (&a, &b, &c, m_tiles, k_steps)))
                }};
            }
            match ws {
                "warp_specialized<2,0>" => ws!(2, 0),
                "warp_specialized<3,0>" => ws!(3, 0),
                "warp_specialized<4,0>" => ws!(4, 0),
                "warp_specialized<4,8>" => ws!(4, 8),
                "warp_specialized<4,16>" => ws!(4, 16),
                other => {
                    return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
                        function: "prepare_matmul",
                        problem: format!("unknown matmul `{other}`; known: {}", MATMULS.join(", ")),
                    }))
                }
            }
        }
        other => {
            return Err(ExampleError::Cuda(kernel_host::Error::InvalidArgument {
                function: "prepare_matmul",
                problem: format!("unknown matmul `{other}`; known: {}", MATMULS.join(", ")),
            }))
        }
    })
}

/// Checks and times every contender (cuBLAS first, then ours) at one shape,
/// on the same inputs. Each is run once on a NaN-poisoned C and checked,
/// then timed (5 warm-up runs, median of `iters`).
#[allow(clippy::too_many_arguments)]
pub fn bench_shape(gpu: &Gpu, module: &Module, blas: &Blas, m: usize, n: usize, k: usize, rows_checked: usize, iters: usize) -> Result<Vec<MatmulResult>> {
    let mut p = Problem::new(gpu, m, n, k, rows_checked, 42)?;
    let mut out = Vec::new();
    // cuBLAS writes through `&mut C`, so it is run directly.
    p.poison(gpu)?;
    blas.gemm_nt(m, n, k, p.a.cuda()?, p.b.cuda()?, p.c.cuda_mut()?)?;
    gpu.synchronize()?;
    let rel_err = p.error(gpu)?;
    let timing = {
        let (a, b, c) = (p.a.cuda()?, p.b.cuda()?, p.c.cuda_mut()?);
        time_kernel(gpu, 5, iters, || blas.gemm_nt(m, n, k, a, b, c))?
    };
    out.push(MatmulResult { name: "cuBLAS".into(), m, n, k, tflops: timing.tflops(m, n, k), timing, rel_err });
    // cuBLAS with B stored K x N (what the `_kn` kernels read).
    p.poison(gpu)?;
    blas.gemm_nn(m, n, k, p.a.cuda()?, p.b_kn.cuda()?, p.c.cuda_mut()?)?;
    gpu.synchronize()?;
    let rel_err = p.error(gpu)?;
    let timing = {
        let (a, b_kn, c) = (p.a.cuda()?, p.b_kn.cuda()?, p.c.cuda_mut()?);
        time_kernel(gpu, 5, iters, || blas.gemm_nn(m, n, k, a, b_kn, c))?
    };
    out.push(MatmulResult { name: "cuBLAS (B K x N)".into(), m, n, k, tflops: timing.tflops(m, n, k), timing, rel_err });
    for name in MATMULS {
        p.poison(gpu)?;
        let launch = prepare_matmul(module, name, &p)?;
        launch()?;
        gpu.synchronize()?;
        let rel_err = p.error(gpu)?;
        let timing = time_kernel(gpu, 5, iters, &launch)?;
        out.push(MatmulResult { name: name.into(), m, n, k, tflops: timing.tflops(m, n, k), timing, rel_err });
    }
    Ok(out)
}

/// The reference's TMA multicast example: a cluster of 2 loads one `16 x 32`
/// f32 tile collectively; each CTA writes it out: `y = [x; x]`.
pub fn run_multicast(gpu: &Gpu, module: &Module) -> Result<Outcome> {
    use kernels::hopper::{MC_COLS, MC_ROWS};
    let x: Vec<f32> = crate::inputs(MC_ROWS * MC_COLS, 5);
    let dx = gpu.upload(&x)?;
    let dy = gpu.upload(&vec![f32::NAN; 2 * MC_ROWS * MC_COLS])?;
    let xm = TensorMap::<McHalf>::new_2d(&dx, MC_ROWS, MC_COLS)?;
    let ym = TensorMap::<McTile>::new_2d(&dy, 2 * MC_ROWS, MC_COLS)?;
    module.kernel::<hopper::multicast_copy>()?.launch_sync(2u32, (&xm, &ym))?;
    let want: Vec<f32> = x.iter().chain(x.iter()).copied().collect();
    crate::check("multicast_copy", &gpu.download(&dy)?, &want)
}

/// The three wgmma forms of [`hopper::wgmma_variants`] against the CPU:
/// returns each variant's relative Frobenius error (f32 SS, f16-accumulator
/// SS, f32 with A from registers).
pub fn run_wgmma_variants(gpu: &Gpu, module: &Module) -> Result<[f64; hopper::VARIANTS]> {
    use kernels::hopper::{VarA, VarB};
    let (m, n, k, batches, batch) = (64, 128, 64, 3, 2);
    let a_host = randn_f16(m * k, 7);
    let b_host = randn_f16(batches * n * k, 8);
    let a = gpu.upload(&a_host)?;
    let b = gpu.upload(&b_host)?;
    let mut out = gpu.upload(&vec![f16::NAN; hopper::VARIANTS * m * n])?;
    let am = TensorMap::<VarA>::new_2d(&a, m, k)?;
    let bm = TensorMap::<VarB, 3>::new_batched(&b, batches, n, k)?;
    module.kernel::<hopper::wgmma_variants>()?.launch_sync(1u32, (&am, &bm, batch as u32, &mut out))?;
    let reference = reference_gemm_nt(m, n, k, &a_host, &b_host[batch * n * k..(batch + 1) * n * k]);
    let got = gpu.download(&out)?;
    let mut errs = [0.0; hopper::VARIANTS];
    for (v, e) in errs.iter_mut().enumerate() {
        *e = rel_frobenius_error(&got[v * m * n..(v + 1) * m * n], &reference);
    }
    Ok(errs)
}

/// [`hopper::warp_roles`]: a TMA warp and a consumer warp; `y = 2 x` over 4 tiles.
pub fn run_warp_roles(gpu: &Gpu, module: &Module) -> Result<Outcome> {
    let tiles = 4usize;
    let x: Vec<f32> = crate::inputs(tiles * 64 * 64, 9);
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&vec![f32::NAN; x.len()])?;
    let xm = TensorMap::<kernels::hopper::RoleTile>::new_2d(&dx, tiles * 64, 64)?;
    module.kernel::<hopper::warp_roles>()?.launch_sync(tiles as u32, (&xm, &mut dy))?;
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    crate::check("warp_roles", &gpu.download(&dy)?, &want)
}
