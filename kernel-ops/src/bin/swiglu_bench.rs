//! The fused SwiGLU (`kernel_ops::swiglu`: `silu(X·W1ᵀ) * (X·W3ᵀ)` in one
//! kernel) against what a user has without it: two `kernel_ops::Matmul`
//! calls (`G = X·W1ᵀ`, `U = X·W3ᵀ`, the matmul autotuned for the shape),
//! on the same iid N(0, 1) f16 inputs; also both with the grid of the
//! previous sizing, a CTA on every SM (`kernel_ops::Ctas::EverySm`, against
//! the default `EvenWaves`). Each contender is checked against
//! the CPU on rows spread over M, then timed in interleaved rounds: run for
//! `--warmup-ms` (default 500) so the GPU holds its steady, power-limited
//! clock, then the median of `--iters` (default 50) CUDA-event-timed runs,
//! with the SM clock and board power sampled (nvidia-smi) over the last
//! 200 ms of the warm-up and the timed runs. A contender's time is the
//! median of its round medians. Without a GPU the same program checks both
//! on the CPU emulator at a small ragged shape (no timing).
//!
//! ```text
//! swiglu_bench [--shape MxNxK] [--iters N] [--rounds N] [--warmup-ms MS] [--out DIR]
//! ```
//! Default shape 8192 x 8192 x 4096 (M x N x K: X is M x K, W1 and W3 N x K).
use clap::Parser;
use kernel_device::f16;
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error, time_at_steady_clock, Buffer, ClockPower, Device, Program};
use kernel_ops::swiglu::{swiglu, swiglu_reference, swiglu_with};
use kernel_ops::{Ctas, Matmul};
use std::process::ExitCode;

/// Relative Frobenius error accepted for f16 outputs with f32 accumulation.
const TOLERANCE: f64 = 2e-3;

/// Times the fused SwiGLU (`silu(X·W1ᵀ) * (X·W3ᵀ)` in one kernel) against
/// two autotuned `kernel_ops::Matmul` calls on the same inputs, each
/// checked against the CPU first, on a GPU; without one it checks both on
/// the CPU emulator at a small ragged shape (no timing).
#[derive(Parser)]
#[command(name = "swiglu_bench")]
struct Args {
    /// The problem `MxNxK`: X is M x K, W1 and W3 are N x K.
    #[arg(long, value_name = "MxNxK", value_parser = kernel_ops::parse_mnk, default_value = "8192x8192x4096")]
    shape: (usize, usize, usize),
    /// CUDA-event-timed runs per round; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 50)]
    iters: usize,
    /// Interleaved rounds over every contender; a contender's time is the
    /// median of its round medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,
    /// Milliseconds of untimed runs first, so the GPU holds its steady clock.
    #[arg(long, value_name = "MS", default_value_t = 500.0)]
    warmup_ms: f64,
    /// Directory the results are written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: std::path::PathBuf,
}

/// The problem on the device, and the rows of it checked against the CPU.
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    x: Buffer<f16>,
    w1: Buffer<f16>,
    w3: Buffer<f16>,
    out: Buffer<f16>,
    g: Buffer<f16>,
    u: Buffer<f16>,
    rows: Vec<usize>,
    /// SwiGLU, G and U on `rows` (f32, `rows.len() x n`).
    want: [Vec<f32>; 3],
}

impl Problem {
    fn new(dev: &Device, (m, n, k): (usize, usize, usize), checked_rows: usize) -> Result<Problem, kernel_host::Error> {
        let (xh, w1h, w3h) = (randn_f16(m * k, 1), randn_f16(n * k, 2), randn_f16(n * k, 3));
        let rows: Vec<usize> = if checked_rows >= m { (0..m).collect() } else { (0..checked_rows).map(|i| i * m / checked_rows).collect() };
        let xr: Vec<f16> = rows.iter().flat_map(|&r| xh[r * k..(r + 1) * k].iter().copied()).collect();
        let want = [
            swiglu_reference(&xr, &w1h, &w3h, rows.len(), n, k),
            reference_gemm_nt(rows.len(), n, k, &xr, &w1h),
            reference_gemm_nt(rows.len(), n, k, &xr, &w3h),
        ];
        let nan = vec![f16::NAN; m * n];
        Ok(Problem { m, n, k, x: dev.upload(&xh)?, w1: dev.upload(&w1h)?, w3: dev.upload(&w3h)?, out: dev.upload(&nan)?, g: dev.upload(&nan)?, u: dev.upload(&nan)?, rows, want })
    }

    /// The relative error of `buf`'s checked rows against `want`.
    fn error(&self, dev: &Device, buf: &Buffer<f16>, want: &[f32]) -> Result<f64, kernel_host::Error> {
        let all = dev.download(buf)?;
        let got: Vec<f16> = self.rows.iter().flat_map(|&r| all[r * self.n..(r + 1) * self.n].iter().copied()).collect();
        Ok(rel_frobenius_error(&got, want))
    }
}

struct Row {
    name: &'static str,
    err: f64,
    rounds_ms: Vec<f64>,
    clock: Vec<ClockPower>,
}

fn run(dev: &Device, a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let shape = if dev.is_gpu() { a.shape } else { (200, 136, 72) };
    let (m, n, k) = shape;
    println!("device: {}\nshape: M x N x K = {m} x {n} x {k} (X: M x K, W1 and W3: N x K, f16, f32 accumulation)", dev.describe());
    let ops: Program = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let mm = Matmul::new(dev)?;
    let mut p = Problem::new(dev, shape, if dev.is_gpu() { 16 } else { m })?;
    if dev.is_gpu() {
        // The strongest plain-GEMM baseline: the instance tuned for the shape.
        let tuned = mm.tune(m, n, k, false, 3, 10)?;
        println!("kernel_ops::matmul instance for {m}x{n}x{k}: {} ({} tuned)", mm.instance_for(m, n, k).name, tuned.len());
    }
    let host_err = |e: kernel_ops::Error| match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "swiglu", problem: other.to_string() },
    };
    // The entry points (planar-snake width 8, even waves), and both with a
    // CTA on every SM (read after the tuning above has filled the cache).
    let mm_every = Matmul::new(dev)?.with_ctas(Ctas::EverySm);
    let fused_with = |p: &mut Problem, ctas: Ctas| -> kernel_host::Result<()> { swiglu_with(dev, &ops, &p.x, &p.w1, &p.w3, &mut p.out, (p.m, p.n, p.k), 8, ctas).map_err(host_err) };
    let fused = |p: &mut Problem| -> kernel_host::Result<()> { swiglu(dev, &ops, &p.x, &p.w1, &p.w3, &mut p.out, (p.m, p.n, p.k)).map_err(host_err) };
    let two_gemms_with = |p: &mut Problem, mm: &Matmul| -> kernel_host::Result<()> {
        let unwrap = |e: kernel_ops::MatmulError| match e {
            kernel_ops::MatmulError::Cuda(e) => e,
            other => kernel_host::Error::InvalidArgument { function: "matmul", problem: other.to_string() },
        };
        mm.matmul(&p.x, (p.m, p.k), &p.w1, (p.n, p.k), &mut p.g).map_err(unwrap)?;
        mm.matmul(&p.x, (p.m, p.k), &p.w3, (p.n, p.k), &mut p.u).map_err(unwrap)
    };
    // Correctness of every contender first.
    let mut errs = [0.0f64; 4];
    for (c, err) in errs.iter_mut().enumerate() {
        dev.write(&mut p.out, &vec![f16::NAN; m * n])?;
        dev.write(&mut p.g, &vec![f16::NAN; m * n])?;
        dev.write(&mut p.u, &vec![f16::NAN; m * n])?;
        match c {
            0 => fused(&mut p)?,
            1 => two_gemms_with(&mut p, &mm)?,
            2 => fused_with(&mut p, Ctas::EverySm)?,
            _ => two_gemms_with(&mut p, &mm_every)?,
        }
        dev.synchronize()?;
        *err = if c % 2 == 0 { p.error(dev, &p.out, &p.want[0])? } else { p.error(dev, &p.g, &p.want[1])?.max(p.error(dev, &p.u, &p.want[2])?) };
    }
    println!("relative Frobenius error on {} rows: swiglu {:.2e} (every SM: {:.2e}); matmuls G and U {:.2e} (every SM: {:.2e})", p.rows.len(), errs[0], errs[2], errs[1], errs[3]);
    let ok = errs.iter().all(|&e| e < TOLERANCE);
    let Some(gpu) = dev.as_gpu() else {
        println!("(the CPU emulator checks correctness only: no timing)");
        return Ok(ok);
    };
    let mut rows = [
        Row { name: "swiglu fused (kernel_ops::swiglu)", err: errs[0], rounds_ms: Vec::new(), clock: Vec::new() },
        Row { name: "2 x kernel_ops::matmul (G, U)", err: errs[1], rounds_ms: Vec::new(), clock: Vec::new() },
        Row { name: "swiglu fused, a CTA on every SM", err: errs[2], rounds_ms: Vec::new(), clock: Vec::new() },
        Row { name: "2 x kernel_ops::matmul, a CTA on every SM", err: errs[3], rounds_ms: Vec::new(), clock: Vec::new() },
    ];
    for round in 0..a.rounds {
        for i in 0..rows.len() {
            let c = (i + round) % rows.len();
            let mut f = || match c {
                0 => fused(&mut p),
                1 => two_gemms_with(&mut p, &mm),
                2 => fused_with(&mut p, Ctas::EverySm),
                _ => two_gemms_with(&mut p, &mm_every),
            };
            let (t, clock) = time_at_steady_clock(gpu, a.warmup_ms, a.iters, &mut f)?;
            if let Some(cp) = clock {
                rows[c].clock.push(cp);
            }
            rows[c].rounds_ms.push(t.median_ms);
        }
    }
    // Outputs after the timed runs are still right.
    dev.synchronize()?;
    let after = p.error(dev, &p.out, &p.want[0])?;
    let ok = ok && after < TOLERANCE;
    let flops = 4.0 * m as f64 * n as f64 * k as f64; // two products
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let t_fused = median(&rows[0].rounds_ms);
    let t_two = median(&rows[1].rounds_ms);
    println!("\n| contender | median ms | TFLOP/s (4MNK) | time / two matmuls | SM clock, power | rel. error | rounds ms |\n|---|---:|---:|---:|---|---:|---|");
    let mut csv = String::from("date,device,m,n,k,contender,median_ms,tflops,ratio_to_two_matmuls,sm_mhz,power_w,rel_err,rounds_ms\n");
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    for row in &rows {
        let t = median(&row.rounds_ms);
        let (mhz, w) = if row.clock.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (median(&row.clock.iter().map(|c| c.sm_mhz).collect::<Vec<_>>()), median(&row.clock.iter().map(|c| c.power_w).collect::<Vec<_>>()))
        };
        let rounds: Vec<String> = row.rounds_ms.iter().map(|t| format!("{t:.4}")).collect();
        println!("| {} | {t:.4} | {:.1} | {:.3} | {mhz:.0} MHz, {w:.0} W | {:.2e} | {} |", row.name, flops / t / 1e9, t / t_two, row.err, rounds.join(" "));
        csv += &format!("{date},{},{m},{n},{k},{},{t:.5},{:.1},{:.4},{mhz:.0},{w:.1},{:.3e},{}\n", gpu.name(), row.name, flops / t / 1e9, t / t_two, row.err, rounds.join(" "));
    }
    let ratio = t_fused / t_two;
    println!(
        "\nswiglu takes {ratio:.3}x the time of two kernel_ops::matmul calls (target: at most 0.95x){}; with a CTA on every SM, both: {:.3}x",
        if ratio <= 0.95 { "" } else { "  ABOVE TARGET" },
        median(&rows[2].rounds_ms) / median(&rows[3].rounds_ms)
    );
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("swiglu_bench.csv"), csv)?;
    Ok(ok)
}

fn main() -> ExitCode {
    kernel_ops::bench_main(Args::parse(), run)
}
