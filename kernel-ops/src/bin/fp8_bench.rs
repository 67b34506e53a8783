//! The FP8 GEMM (`kernel_ops::fp8::matmul_fp8`: e4m3 in, per-tensor scales,
//! f16 out) against cuBLASLt's FP8 matmul (the same problem: e4m3 "TN",
//! scale pointers, f32 compute, f16 out; the fastest of its top heuristic
//! algorithms, tuned on the real buffers), both its default (partial sums
//! promoted to f32) and with fast accumulation (the tensor core's FP8
//! accumulator for the whole K, as ours; torch's `use_fast_accum`); ratios
//! are to the faster of the two. On the same inputs: iid N(0, 1)
//! quantized per tensor (`kernel_ops::fp8::quantize`); and the block-scaled
//! GEMM (`kernel_ops::fp8::matmul_fp8_blockscaled`) on the same values
//! quantized with 1 x 128 / 128 x 128 block scales (checked against its own
//! reference), and the row-wise GEMM (`kernel_ops::fp8::matmul_fp8_rowwise`)
//! on them quantized with one scale per row of A and of B (checked
//! against its own reference); the per-tensor GEMM also at planar-snake
//! width 16 and with a CTA on every SM (`kernel_ops::Ctas::EverySm`, the
//! grid before even waves), and with A quantized to e5m2 instead (the
//! FP8 training backward's e5m2 gradient times e4m3 weights,
//! `m64nNk32.f32.e5m2.e4m3`; checked against its own reference). Every contender is
//! checked against the CPU reference on rows spread over M (relative
//! Frobenius error), then timed in interleaved rounds: `--warmup-ms`
//! (default 500) of runs so the GPU holds its steady, power-limited clock,
//! then the median of `--iters` (default 50) CUDA-event-timed runs, with
//! the SM clock and board power sampled (nvidia-smi) over the last 200 ms
//! of the warm-up and the timed runs. Without a GPU the same program checks
//! ours on the CPU emulator at a small ragged shape (no timing, no cuBLASLt).
//!
//! ```text
//! fp8_bench [--shape MxNxK]... [--iters N] [--rounds N] [--warmup-ms MS] [--out DIR]
//! ```
//! Default shapes (M x N x K): 4096 x 8192 x 4096 (the Hopper ladder's seed
//! shape, M x K x N = 4096 x 4096 x 8192), 8192³, 4096³, 8192 x 8192 x 1024,
//! 8192 x 14336 x 4096.
use clap::Parser;
use kernel_device::{f16, E4M3, E5M2};
use kernel_host::{rel_frobenius_error, time_at_steady_clock, time_kernel, Buffer, ClockPower, Device};
use kernel_ops::blaslt::BlasLt;
use kernel_ops::Ctas;
use kernel_ops::fp8::{matmul_fp8_blockscaled, matmul_fp8_rowwise, matmul_fp8_with, quantize, quantize_128x128, quantize_1x128, quantize_rowwise, quantize_to, reference, reference_blockscaled, reference_rowwise};
use std::fmt::Write as _;
use std::process::ExitCode;

/// Relative Frobenius error accepted: f16 output rounding plus the FP8
/// MMA's narrower-than-f32 accumulation.
const TOLERANCE: f64 = 5e-3;

/// Times the FP8 GEMMs of `kernel_ops::fp8` (per-tensor, row-wise and
/// block-scaled scales) against cuBLASLt's FP8 matmul on the same
/// quantized inputs, each checked against the CPU reference first, on a
/// GPU; without one it checks ours on the CPU emulator at a small ragged
/// shape (no timing, no cuBLASLt).
#[derive(Parser)]
#[command(name = "fp8_bench")]
struct Args {
    /// A problem `MxNxK` (repeatable); default: 4096x8192x4096, 8192x8192x8192,
    /// 4096x4096x4096, 8192x8192x1024 and 8192x14336x4096.
    #[arg(long = "shape", value_name = "MxNxK", value_parser = kernel_ops::parse_mnk)]
    shapes: Vec<(usize, usize, usize)>,
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

/// The parsed command line, with the default shapes if none was given.
fn args() -> Args {
    let mut a = Args::parse();
    if a.shapes.is_empty() {
        a.shapes = vec![(4096, 8192, 4096), (8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024), (8192, 14336, 4096)];
    }
    a
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    name: String,
    err: f64,
    rounds_ms: Vec<f64>,
    clock: Vec<ClockPower>,
}

/// One shape: returns (all correct, markdown rows, csv rows).
fn shape(dev: &Device, a: &Args, (m, n, k): (usize, usize, usize), date: &str) -> Result<(bool, String, String), Box<dyn std::error::Error>> {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let randn = |len: usize, seed: u64| -> Vec<f32> { kernel_host::randn_f16(len, seed).iter().map(|x| x.to_f32()).collect() };
    let (a32, b32) = (randn(m * k, 41), randn(n * k, 42));
    let (ah, sa) = quantize(&a32);
    let (bh, sb) = quantize(&b32);
    let rows: Vec<usize> = if dev.is_gpu() { (0..16).map(|i| i * m / 16).collect() } else { (0..m).collect() };
    let ar: Vec<E4M3> = rows.iter().flat_map(|&r| ah[r * k..(r + 1) * k].iter().copied()).collect();
    let want = reference(&ar, &bh, (sa, sb), rows.len(), n, k);
    // The same inputs quantized with block scales, and their reference.
    let (abh, abs) = quantize_1x128(&a32, m, k);
    let (bbh, bbs) = quantize_128x128(&b32, n, k);
    let kb = k.div_ceil(128);
    let abr: Vec<E4M3> = rows.iter().flat_map(|&r| abh[r * k..(r + 1) * k].iter().copied()).collect();
    let absr: Vec<f32> = (0..kb).flat_map(|b| rows.iter().map(move |&r| (b, r))).map(|(b, r)| abs[b * m + r]).collect();
    let want_bs = reference_blockscaled(&abr, &absr, &bbh, &bbs, rows.len(), n, k);
    // And with row-wise scales (one per row of A, one per row of B).
    let (arh, ars) = quantize_rowwise(&a32, m, k);
    let (brh, brs) = quantize_rowwise(&b32, n, k);
    let arr: Vec<E4M3> = rows.iter().flat_map(|&r| arh[r * k..(r + 1) * k].iter().copied()).collect();
    let arsr: Vec<f32> = rows.iter().map(|&r| ars[r]).collect();
    let want_rw = reference_rowwise(&arr, &arsr, &brh, &brs, rows.len(), n, k);
    // And A in e5m2 (a gradient), B in e4m3.
    let (agh, sag) = quantize_to::<E5M2>(&a32);
    let agr: Vec<E5M2> = rows.iter().flat_map(|&r| agh[r * k..(r + 1) * k].iter().copied()).collect();
    let want_g = reference(&agr, &bh, (sag, sb), rows.len(), n, k);
    let (dag, dsg) = (dev.upload(&agh)?, dev.upload(&[sag, sb])?);
    let (dar, dars, dbr, dbrs) = (dev.upload(&arh)?, dev.upload(&ars)?, dev.upload(&brh)?, dev.upload(&brs)?);
    let (dab, dabs, dbb, dbbs) = (dev.upload(&abh)?, dev.upload(&abs)?, dev.upload(&bbh)?, dev.upload(&bbs)?);
    let (da, db, ds): (Buffer<E4M3>, Buffer<E4M3>, Buffer<f32>) = (dev.upload(&ah)?, dev.upload(&bh)?, dev.upload(&[sa, sb])?);
    let mut c = dev.upload(&vec![f16::NAN; m * n])?;
    let err_of = |c: &Buffer<f16>, want: &[f32]| -> Result<f64, kernel_host::Error> {
        let all = dev.download(c)?;
        let got: Vec<f16> = rows.iter().flat_map(|&r| all[r * n..(r + 1) * n].iter().copied()).collect();
        Ok(rel_frobenius_error(&got, want))
    };
    let host_err = |e: kernel_ops::Error| match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "matmul_fp8", problem: other.to_string() },
    };
    let label = format!("{m}x{n}x{k}");
    let Some(gpu) = dev.as_gpu() else {
        matmul_fp8_with(dev, &ops, &da, &db, &ds, &mut c, (m, n, k), 8, Ctas::EvenWaves).map_err(host_err)?;
        let err = err_of(&c, &want)?;
        println!("{label}: matmul_fp8 on the CPU emulator: relative Frobenius error {err:.2e} (no timing)");
        matmul_fp8_blockscaled(dev, &ops, &dab, &dabs, &dbb, &dbbs, &mut c, (m, n, k)).map_err(host_err)?;
        let err_bs = err_of(&c, &want_bs)?;
        println!("{label}: matmul_fp8_blockscaled on the CPU emulator: relative Frobenius error {err_bs:.2e} (no timing)");
        matmul_fp8_rowwise(dev, &ops, &dar, &dars, &dbr, &dbrs, &mut c, (m, n, k)).map_err(host_err)?;
        let err_rw = err_of(&c, &want_rw)?;
        println!("{label}: matmul_fp8_rowwise on the CPU emulator: relative Frobenius error {err_rw:.2e} (no timing)");
        matmul_fp8_with(dev, &ops, &dag, &db, &dsg, &mut c, (m, n, k), 8, Ctas::EvenWaves).map_err(host_err)?;
        let err_g = err_of(&c, &want_g)?;
        println!("{label}: matmul_fp8 e5m2 x e4m3 on the CPU emulator: relative Frobenius error {err_g:.2e} (no timing)");
        return Ok((err < TOLERANCE && err_bs < TOLERANCE && err_rw < TOLERANCE && err_g < TOLERANCE, String::new(), String::new()));
    };
    // cuBLASLt's scale pointers: one allocation each (16-byte aligned).
    let (lt_sa, lt_sb) = (gpu.upload(&[sa])?, gpu.upload(&[sb])?);
    // Two cuBLASLt problems: its default (partial sums promoted to f32) and
    // fast accumulation (the tensor core's FP8 accumulator for the whole K,
    // as ours). For each, every heuristic algorithm is timed on the real
    // buffers and the fastest is the contender.
    let mut lts = Vec::new();
    for fast in [false, true] {
        let mut lt = BlasLt::new_fp8(gpu, m, n, k, &lt_sa, &lt_sb, fast)?;
        let mut times = Vec::new();
        for i in 0..lt.algo_count() {
            match time_kernel(gpu, 3, 10, || lt.matmul_fp8_with(i, da.cuda()?, db.cuda()?, c.cuda_mut()?)) {
                Ok(t) => times.push((i, t.median_ms)),
                Err(e) => eprintln!("{label}: cuBLASLt FP8 (fast accumulation: {fast}) algorithm #{i}: {e}"),
            }
        }
        match times.iter().min_by(|x, y| x.1.total_cmp(&y.1)).map(|t| t.0) {
            Some(best) => {
                let name = format!("cuBLASLt FP8{} (best of {} heuristic algos: #{best})", if fast { ", fast accumulation" } else { "" }, times.len());
                lts.push((lt, best, name));
            }
            None => eprintln!("{label}: no cuBLASLt FP8 algorithm ran (fast accumulation: {fast})"),
        }
    }
    let baselines = lts.len();
    /// A contender: cuBLASLt problem `i`'s best algorithm, or ours with a
    /// planar-snake width and a grid sizing.
    enum Who {
        Lt(usize),
        Ours(u32, Ctas),
        Blocks,
        Rows,
        Grad,
    }
    let names: Vec<String> = lts.iter().map(|l| l.2.clone()).collect();
    let mut run_one = |who: &Who, c: &mut Buffer<f16>| -> kernel_host::Result<()> {
        match who {
            Who::Lt(i) => {
                let (lt, best, _) = &mut lts[*i];
                lt.matmul_fp8_with(*best, da.cuda()?, db.cuda()?, c.cuda_mut()?)
            }
            Who::Ours(w, ctas) => matmul_fp8_with(dev, &ops, &da, &db, &ds, c, (m, n, k), *w, *ctas).map_err(host_err),
            Who::Blocks => matmul_fp8_blockscaled(dev, &ops, &dab, &dabs, &dbb, &dbbs, c, (m, n, k)).map_err(host_err),
            Who::Rows => matmul_fp8_rowwise(dev, &ops, &dar, &dars, &dbr, &dbrs, c, (m, n, k)).map_err(host_err),
            Who::Grad => matmul_fp8_with(dev, &ops, &dag, &db, &dsg, c, (m, n, k), 8, Ctas::EvenWaves).map_err(host_err),
        }
    };
    let row = |name: String| Row { name, err: 0.0, rounds_ms: Vec::new(), clock: Vec::new() };
    let mut contenders: Vec<(Row, Who)> = names.into_iter().enumerate().map(|(i, n)| (row(n), Who::Lt(i))).collect();
    for w in kernel_ops::fp8::GRID_WIDTHS {
        contenders.push((row(format!("kernel_ops::fp8::matmul_fp8 (128x256 s4 w{w})")), Who::Ours(w, Ctas::EvenWaves)));
    }
    contenders.push((row("kernel_ops::fp8::matmul_fp8 (128x256 s4 w8, a CTA on every SM)".into()), Who::Ours(8, Ctas::EverySm)));
    contenders.push((row("kernel_ops::fp8::matmul_fp8_blockscaled (1x128 / 128x128 scales, 128x256 s4 w8)".into()), Who::Blocks));
    contenders.push((row("kernel_ops::fp8::matmul_fp8_rowwise (per-row / per-column scales, 128x256 s4 w8)".into()), Who::Rows));
    contenders.push((row("kernel_ops::fp8::matmul_fp8 e5m2 x e4m3 (128x256 s4 w8)".into()), Who::Grad));
    let mut ok = true;
    for (row, who) in contenders.iter_mut() {
        dev.write(&mut c, &vec![f16::NAN; m * n])?;
        run_one(who, &mut c)?;
        dev.synchronize()?;
        row.err = err_of(&c, match who {
            Who::Blocks => &want_bs,
            Who::Rows => &want_rw,
            Who::Grad => &want_g,
            _ => &want,
        })?;
        ok &= row.err < TOLERANCE;
        eprintln!("{label}: {:<56} err {:.2e}{}", row.name, row.err, if row.err < TOLERANCE { "" } else { "  FAIL" });
    }
    let count = contenders.len();
    for round in 0..a.rounds {
        for i in 0..count {
            let (row, who) = &mut contenders[(i + round) % count];
            let mut g = || run_one(who, &mut c);
            let (t, clock) = time_at_steady_clock(gpu, a.warmup_ms, a.iters, &mut g)?;
            if let Some(cp) = clock {
                row.clock.push(cp);
            }
            row.rounds_ms.push(t.median_ms);
        }
    }
    // Outputs after the timed runs are still right (ours ran last in the
    // last round or not: check ours once more).
    run_one(&Who::Ours(8, Ctas::EvenWaves), &mut c)?;
    dev.synchronize()?;
    ok &= err_of(&c, &want)? < TOLERANCE;
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    // The baseline: the faster of cuBLASLt's two problems.
    let t_lt = contenders[..baselines].iter().map(|(r, _)| median(&r.rounds_ms)).fold(f64::NAN, f64::min);
    let (mut md, mut csv) = (String::new(), String::new());
    for (row, _) in &contenders {
        let t = median(&row.rounds_ms);
        let (mhz, w) = (median(&row.clock.iter().map(|c| c.sm_mhz).collect::<Vec<_>>()), median(&row.clock.iter().map(|c| c.power_w).collect::<Vec<_>>()));
        let tf = flops / t / 1e9;
        let rounds: Vec<String> = row.rounds_ms.iter().map(|t| format!("{t:.4}")).collect();
        let _ = writeln!(md, "| {label} | {} | {t:.4} | {tf:.1} | {:.3} | {mhz:.0} MHz, {w:.0} W | {:.1} | {:.2e} | {} |", row.name, t_lt / t, tf / (mhz / 1e3), row.err, rounds.join(" "));
        let _ = writeln!(csv, "{date},{},{m},{n},{k},\"{}\",{t:.5},{tf:.1},{:.4},{mhz:.0},{w:.1},{:.3e},{}", gpu.name(), row.name, t_lt / t, row.err, rounds.join(" "));
    }
    Ok((ok, md, csv))
}

fn run(dev: &Device, a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    println!("device: {}", dev.describe());
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let shapes = if dev.is_gpu() { a.shapes.clone() } else { vec![(200, 264, 272)] };
    let mut md = String::from("| M x N x K | contender | median ms | TFLOP/s | vs best cuBLASLt FP8 | SM clock, power | TFLOP/s per GHz | rel. error | rounds ms |\n|---|---|---:|---:|---:|---|---:|---:|---|\n");
    let mut csv = String::from("date,device,m,n,k,contender,median_ms,tflops,vs_best_cublaslt_fp8,sm_mhz,power_w,rel_err,rounds_ms\n");
    let mut ok = true;
    for s in shapes {
        let (good, m, c) = shape(dev, a, s, &date)?;
        ok &= good;
        md += &m;
        csv += &c;
    }
    if dev.is_gpu() {
        println!("\n{md}");
        std::fs::create_dir_all(&a.out)?;
        std::fs::write(a.out.join("fp8_bench.md"), &md)?;
        std::fs::write(a.out.join("fp8_bench.csv"), csv)?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    kernel_ops::bench_main(args(), run)
}
