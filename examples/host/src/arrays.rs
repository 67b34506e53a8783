//! Register arrays and fused epilogues: the `arrays` example kernels and
//! `fused::matmul_bias_relu`, against CPU references, on a [`Device`] (a GPU
//! or the CPU emulator); and, on a GPU, the bias+ReLU matmul timed against
//! the same matmul without epilogue, in one process on the same inputs.
use crate::{check, inputs, invalid, poisoned, ExampleError, Outcome, Result};
use kernel_device::f16;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, time_kernel, Device, TileMap, Timing};
use kernels::arrays::{self, STRIDED_LEN};
use kernels::hopper::{self, ATile, BTileWs, OTileWs, TILE_K, TILE_M, TILE_N};

/// Inputs of `array_wgmma_ops`: `x` (64 x 64 f16), `col` (64 f16), `row` (64 f32).
pub fn wgmma_ops_inputs() -> (Vec<f16>, Vec<f16>, Vec<f32>) {
    let x = inputs(64 * 64, 21).into_iter().map(f16::from_f32).collect();
    let col = inputs(64, 22).into_iter().map(f16::from_f32).collect();
    (x, col, inputs(64, 23))
}

/// CPU reference of `array_wgmma_ops`, in the kernel's f32 operation order.
pub fn wgmma_ops_reference(x: &[f16], col: &[f16], row: &[f32]) -> Vec<f32> {
    (0..64 * 64)
        .map(|e| {
            let (r, c) = (e / 64, e % 64);
            (x[e].to_f32() * 2.0 + col[c].to_f32()).max(0.0) - row[r] + (64 * r + c) as f32 / 1024.0
        })
        .collect()
}

/// CPU reference of `array_strided_ops`: `f16(3 f32(x) - 1)`.
pub fn strided_reference(x: &[f16]) -> Vec<f16> {
    x.iter().map(|v| f16::from_f32(v.to_f32() * 3.0 - 1.0)).collect()
}

fn check_f16(example: &'static str, got: &[f16], want: &[f16]) -> Result<Outcome> {
    let f = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    check(example, &f(got), &f(want))
}

/// Row sums and column maxima of the reference block: what `array_wgmma_ops`
/// writes to `sums` (the row sums as a tree of f32 adds, so they are
/// compared with a tolerance).
pub fn wgmma_ops_sums(y: &[f32]) -> Vec<f32> {
    let rows = (0..64).map(|r| y[64 * r..64 * r + 64].iter().map(|&v| v as f64).sum::<f64>() as f32);
    let cols = (0..64).map(|c| (0..64).map(|r| y[64 * r + c]).fold(f32::NEG_INFINITY, f32::max));
    rows.chain(cols).collect()
}

fn check_wgmma_ops(want: &[f32], y: &[f32], y2: &[f16], sums: &[f32]) -> Result<Outcome> {
    let o = check("array_wgmma_ops", y, want)?;
    let want16: Vec<f32> = want.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
    check("array_wgmma_ops (y2: Wgmma store_gmem as f16)", &y2.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), &want16)?;
    let ws = wgmma_ops_sums(want);
    // Column maxima are exact; row sums within f32 reassociation.
    check("array_wgmma_ops (col_reduce::<Max>)", &sums[64..], &ws[64..])?;
    for r in 0..64 {
        if (sums[r] - ws[r]).abs() > 1e-4 * (1.0 + ws[r].abs()) {
            return Err(ExampleError::Mismatch { example: "array_wgmma_ops (row_sum)", index: r, got: sums[r], want: ws[r], wrong: 1 });
        }
    }
    Ok(o)
}

/// `array_wgmma_ops` (exact check of the block, the f16 copy and the
/// column maxima; the row sums within rounding).
pub fn wgmma_ops(dev: &Device) -> Result<Outcome> {
    let (x, col, row) = wgmma_ops_inputs();
    let want = wgmma_ops_reference(&x, &col, &row);
    let (dx, dc, dr) = (dev.upload(&x)?, dev.upload(&col)?, dev.upload(&row)?);
    let mut dy = poisoned::<f32>(dev, 64 * 64)?;
    let mut dy2 = poisoned::<f16>(dev, 64 * 64)?;
    let mut ds = poisoned::<f32>(dev, 128)?;
    dev.load(&kernels::DEVICE_CODE)?
        .kernel::<arrays::array_wgmma_ops>()?
        .launch_sync(1u32, (&dx, &dc, &dr, &mut dy, &mut dy2, &mut ds))?;
    check_wgmma_ops(&want, &dev.download(&dy)?, &dev.download(&dy2)?, &dev.download(&ds)?)
}

/// `array_strided_ops` over `blocks` blocks (exact check of both outputs;
/// the binary runs 264 on a GPU, 2 on the emulator).
pub fn strided_ops(dev: &Device, blocks: usize) -> Result<Outcome> {
    let x: Vec<f16> = inputs(blocks * STRIDED_LEN, 24).into_iter().map(f16::from_f32).collect();
    let want = strided_reference(&x);
    let mut dx = dev.upload(&x)?;
    let (mut dy, mut dz) = (poisoned::<f16>(dev, x.len())?, poisoned::<f16>(dev, x.len())?);
    dev.load(&kernels::DEVICE_CODE)?
        .kernel::<arrays::array_strided_ops>()?
        .launch_sync(blocks as u32, (&mut dx, &mut dy, &mut dz))?;
    check_f16("array_strided_ops (z, through SMEM)", &dev.download(&dz)?, &want)?;
    check_f16("array_strided_ops (y)", &dev.download(&dy)?, &want)
}

/// `relu(A·Bᵀ + bias)` in f32 from the f32 reference product.
pub fn bias_relu_reference(product: &[f32], bias: &[f16], n: usize) -> Vec<f32> {
    product.iter().enumerate().map(|(i, &v)| (v + bias[i % n].to_f32()).max(0.0)).collect()
}

fn check_ws_shape(m: usize, n: usize, k: usize) -> Result<()> {
    if m % TILE_M != 0 || n % (2 * TILE_N) != 0 || k % TILE_K != 0 || k == 0 {
        return Err(invalid(
            "matmul_bias_relu",
            format!("needs M % {TILE_M} == 0, N % {} == 0, K % {TILE_K} == 0, K > 0; got {m} x {n} x {k}", 2 * TILE_N),
        ));
    }
    Ok(())
}

/// `matmul_bias_relu<4, 8>` at `m x n x k`: the relative Frobenius error
/// against the CPU reference over every row.
pub fn bias_relu(dev: &Device, m: usize, n: usize, k: usize) -> Result<f64> {
    check_ws_shape(m, n, k)?;
    let a = randn_f16(m * k, 31);
    let b = randn_f16(n * k, 32);
    let bias = randn_f16(n, 33);
    let (da, db, dbias) = (dev.upload(&a)?, dev.upload(&b)?, dev.upload(&bias)?);
    let mut dc = poisoned::<f16>(dev, m * n)?;
    let m_tiles = (m / TILE_M) as u32;
    let grid = m_tiles * (n / (2 * TILE_N)) as u32;
    {
        let am = TileMap::<ATile>::new_2d(&da, m, k)?;
        let bm = TileMap::<BTileWs>::new_2d(&db, n, k)?;
        let cm = TileMap::<OTileWs>::new_2d_mut(&mut dc, m, n)?;
        dev.load(&kernels::DEVICE_CODE)?
            .kernel::<kernels::fused::matmul_bias_relu<4, 8>>()?
            .launch_sync(grid, (&am, &bm, &cm, &dbias, m_tiles, (k / TILE_K) as u32))?;
    }
    let want = bias_relu_reference(&reference_gemm_nt(m, n, k, &a, &b), &bias, n);
    Ok(rel_frobenius_error(&dev.download(&dc)?, &want))
}

/// The bias+ReLU matmul against the same matmul without epilogue
/// (`matmul_warp_specialized<4, 8>`) at one shape, on the same inputs.
#[derive(Debug, Clone)]
pub struct BiasReluResult {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Median of each round's median, plain and fused.
    pub plain: Timing,
    pub fused: Timing,
    pub plain_tflops: f64,
    pub fused_tflops: f64,
    /// Relative Frobenius error of the fused output on the checked rows.
    pub rel_err: f64,
}

/// Checks `matmul_bias_relu<4, 8>` against the CPU on `rows_checked` rows,
/// then, after a warm-up, times it and `matmul_warp_specialized<4, 8>`
/// alternately (which goes first alternates too), `rounds` rounds of
/// `iters` runs each (CUDA events), and keeps each one's fastest round
/// median (the two kernels see the same clocks and inputs). GPU-only
/// (timing): on the emulator, [`kernel_host::Error::GpuOnly`].
#[allow(clippy::too_many_arguments)]
pub fn bench_bias_relu(dev: &Device, m: usize, n: usize, k: usize, rows_checked: usize, rounds: usize, iters: usize) -> Result<BiasReluResult> {
    let gpu = dev.require_gpu("timing the bias+ReLU matmul")?;
    check_ws_shape(m, n, k)?;
    let a_host = randn_f16(m * k, 31);
    let b_host = randn_f16(n * k, 32);
    let bias_host = randn_f16(n, 33);
    let rows: Vec<usize> = (0..rows_checked.min(m)).map(|i| i * m / rows_checked.min(m)).collect();
    let a_rows: Vec<f16> = rows.iter().flat_map(|&r| a_host[r * k..(r + 1) * k].iter().copied()).collect();
    let want = bias_relu_reference(&reference_gemm_nt(rows.len(), n, k, &a_rows, &b_host), &bias_host, n);
    let a = dev.upload(&a_host)?;
    let b = dev.upload(&b_host)?;
    let bias = dev.upload(&bias_host)?;
    let c = poisoned::<f16>(dev, m * n)?;
    let am = TileMap::<ATile>::new_2d(&a, m, k)?;
    let bm = TileMap::<BTileWs>::new_2d(&b, n, k)?;
    // On a GPU a tensor map is the same for loads and stores, so C's map is
    // made from a shared borrow and C can be read back while the map lives
    // (on the emulator a store destination needs `new_2d_mut`; this
    // function is GPU-only).
    let cm = TileMap::<OTileWs>::new_2d(&c, m, n)?;
    let m_tiles = (m / TILE_M) as u32;
    let grid = m_tiles * (n / (2 * TILE_N)) as u32;
    let k_steps = (k / TILE_K) as u32;
    let prog = dev.load(&kernels::DEVICE_CODE)?;
    let plain = prog.kernel::<hopper::matmul_warp_specialized<4, 8>>()?;
    let fused = prog.kernel::<kernels::fused::matmul_bias_relu<4, 8>>()?;
    fused.launch_sync(grid, (&am, &bm, &cm, &bias, m_tiles, k_steps))?;
    let out = dev.download(&c)?;
    let got: Vec<f16> = rows.iter().flat_map(|&r| out[r * n..(r + 1) * n].iter().copied()).collect();
    let rel_err = rel_frobenius_error(&got, &want);
    let (mut tp, mut tf): (Option<Timing>, Option<Timing>) = (None, None);
    // Warm the GPU to its loaded clocks first: the first timed kernel would
    // otherwise run at a cold GPU's boost clock, which favours whichever
    // kernel is timed first at long-running shapes.
    time_kernel(gpu, 0, 3 * iters, || plain.launch(grid, (&am, &bm, &cm, m_tiles, k_steps)).map(drop))?;
    for round in 0..rounds {
        // Alternate which kernel goes first in a round.
        let time_plain = || time_kernel(gpu, 5, iters, || plain.launch(grid, (&am, &bm, &cm, m_tiles, k_steps)).map(drop));
        let time_fused = || time_kernel(gpu, 5, iters, || fused.launch(grid, (&am, &bm, &cm, &bias, m_tiles, k_steps)).map(drop));
        let (p, f) = if round % 2 == 0 {
            let p = time_plain()?;
            (p, time_fused()?)
        } else {
            let f = time_fused()?;
            (time_plain()?, f)
        };
        if tp.as_ref().is_none_or(|t| p.median_ms < t.median_ms) {
            tp = Some(p);
        }
        if tf.as_ref().is_none_or(|t| f.median_ms < t.median_ms) {
            tf = Some(f);
        }
    }
    let (plain, fused) = (tp.expect("rounds >= 1"), tf.expect("rounds >= 1"));
    Ok(BiasReluResult { m, n, k, plain_tflops: plain.tflops(m, n, k), fused_tflops: fused.tflops(m, n, k), plain, fused, rel_err })
}
