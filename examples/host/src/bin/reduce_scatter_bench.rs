//! The reduce-scatter matmul benchmark (issue 43, part 2) on a group of
//! GPUs with peer access: `C = A · Bᵀ` with K sharded across the `p`
//! devices (device `d` holds `A_d`, `M x K/p`, and `B_d`, `N x K/p`),
//! reduce-scattered by rows (device `d` receives row block `d` of `C`,
//! `M/p x N`).
//!
//! Contenders, on the same iid N(0, 1) inputs:
//! 1. **cuBLAS + NCCL**: each device's partial `A_d · B_dᵀ` (`M x N`, f16)
//!    with cuBLAS, then NCCL's reduce-scatter (sum) of the partials;
//! 2. **kernel_ops::matmul + NCCL**: the same with our matmul (autotuned);
//! 3. **ReduceScatterMatmul::run** (ours): one persistent kernel per
//!    device, the reduction inside the matmul's epilogue over NVLink;
//!
//! and, as the bounds no overlap can beat, cuBLAS's partials alone and
//! `kernel_ops::matmul`'s (no reduce-scatter; their outputs are not a
//! contender's and are not checked).
//!
//! Then the all-reduce (every device ends with all of `C`, `M x N`) at
//! smaller outputs, `256 p x 8192 x 8192` and `128 p x 4096 x 8192`: the
//! same contenders with NCCL's all-reduce, and
//! `ReduceScatterMatmul::run_all_reduce` (ours).
//!
//! Every output is checked against cuBLAS on the unsharded problem (one
//! GEMM over the whole K on GPU 0: f32 accumulation, one rounding),
//! relative Frobenius error below 2e-3 (1e-2 in bf16). Shapes `M x N x K` (K the total):
//! 4096 x 8192 x 8192, and Pallas's 1024 p x 4096 x 4096 (`--quick`: 1024
//! p x 2048 x 2048 only). Warmed to the steady clock (`--warmup-ms`), wall
//! time of the work on every device (the group synchronized after each
//! run), median of `--iters`, median of `--rounds` interleaved rounds.
//!
//! ```text
//! reduce_scatter_bench [--devices N] [--iters N] [--rounds N] [--warmup-ms MS] [--out DIR] [--quick] [--reps N] [--dtype f16|bf16]
//! ```
//! Writes `reduce_scatter.md` and `reduce_scatter.csv` to `--out` (default
//! `.`). Exit status 0 only if every contender was correct.
use clap::Parser;
use kernel_device::{bf16, f16};
use kernel_host::group::DeviceGroup;
use kernel_host::nccl::Nccl;
use kernel_host::cudarc::cublas::{CudaBlas, Gemm};
use kernel_host::{Blas, ClockPower};
use kernel_ops::matmul::MatmulElem;
use kernel_ops::reduce_scatter::{ReduceScatterMatmul, TILE_ROWS};
use kernel_ops::Matmul;
use std::fmt::Write as _;
use std::process::ExitCode;

use examples::group_timing::{clock_text, rounds, Contender, Dtype, Elem, Res, Timing};

/// Benchmarks the reduce-scatter matmul
/// (`kernel_ops::reduce_scatter::ReduceScatterMatmul`) against per-device
/// matmuls then NCCL's reduce-scatter, every contender checked against
/// cuBLAS on the unsharded problem. Writes `reduce_scatter.md` and
/// `reduce_scatter.csv` into `--out`. Needs at least `--devices` GPUs
/// (there is no emulator path).
#[derive(Parser)]
#[command(name = "reduce_scatter_bench")]
struct Opts {
    /// How many GPUs of the host to use (GPUs 0 .. N-1).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    devices: usize,
    /// Timed runs per round; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 50)]
    iters: usize,
    /// Interleaved rounds over every contender; a contender's time is the
    /// median of its round medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,
    /// Milliseconds of untimed runs first, so the GPUs hold their steady clock.
    #[arg(long, value_name = "MS", default_value_t = 400.0)]
    warmup_ms: f64,
    /// Directory the Markdown and CSV results are written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: String,
    /// One small shape (1024 p x 2048 x 2048).
    #[arg(long)]
    quick: bool,
    /// Back-to-back calls per timed sample (the group synchronized after
    /// each sample): for calls of tens of microseconds, where a host
    /// synchronization per call would dominate.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10000))]
    reps: usize,
    /// The element type (every contender's A, B, partials and C).
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
}

impl Opts {
    fn timing(&self) -> Timing {
        Timing { iters: self.iters, rounds: self.rounds, warmup_ms: self.warmup_ms, reps: self.reps }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The columns `d k .. (d + 1) k` of a row-major `rows x (p k)` matrix
/// given as `p` shards of `rows x k`: the unsharded matrix.
fn unshard<E: Copy>(shards: &[Vec<E>], rows: usize, k: usize) -> Vec<E> {
    let p = shards.len();
    let mut full = Vec::with_capacity(rows * p * k);
    for r in 0..rows {
        for s in shards {
            full.extend_from_slice(&s[r * k..(r + 1) * k]);
        }
    }
    full
}

/// One shape: the contenders checked, then timed; rows into `md` and
/// `csv`. Returns whether every contender was correct.
#[allow(clippy::too_many_arguments)]
#[allow(clippy::too_many_arguments)]
fn shape<E: Elem>(group: &DeviceGroup, o: &Opts, nccl: &Nccl, blas: &[Blas], rs: &ReduceScatterMatmul<'_>, all_reduce: bool, (m, n, k_total): (usize, usize, usize), md: &mut String, csv: &mut String) -> Res<bool>
where
    CudaBlas: Gemm<E>,
{
    let p = group.len();
    let dtype = <E as MatmulElem>::NAME;
    // The rows of C each device ends with, and the first of them.
    let rows = if all_reduce { m } else { m / p };
    let first = |d: usize| if all_reduce { 0 } else { d * rows };
    let what = if all_reduce { "all-reduce" } else { "reduce-scatter" };
    let k = k_total / p;
    writeln!(md, "\n## {what}, {dtype}, M x N x K = {m} x {n} x {k_total} on {p} devices (K/p = {k} per device, {rows} output rows per device)\n")?;
    if k_total % p != 0 || m % (p * TILE_ROWS) != 0 || k % 8 != 0 {
        writeln!(md, "skipped: K must split into multiples of 8 and M into row blocks of a multiple of {TILE_ROWS} over {p} devices")?;
        return Ok(true);
    }
    writeln!(md, "TFLOP/s per device: 2 x {m} x {n} x {k} / time.\n")?;
    writeln!(md, "| contender | ms | TFLOP/s per device | vs cuBLAS + NCCL | clock, power | correct (rel. error vs unsharded cuBLAS) |")?;
    writeln!(md, "|---|---:|---:|---:|---|---|")?;
    let a_parts: Vec<Vec<E>> = (0..p).map(|d| E::randn(m * k, 500 + d as u64)).collect();
    let b_parts: Vec<Vec<E>> = (0..p).map(|d| E::randn(n * k, 600 + d as u64)).collect();
    // The reference: one GEMM over the whole K on GPU 0.
    let reference: Vec<f32> = {
        let dev = group.device(0);
        let a_full = dev.upload(&unshard(&a_parts, m, k))?;
        let b_full = dev.upload(&unshard(&b_parts, n, k))?;
        let mut c_full = dev.zeros::<E>(m * n)?;
        blas[0].gemm_nt(m, n, k_total, a_full.cuda()?, b_full.cuda()?, c_full.cuda_mut()?)?;
        dev.download(&c_full)?.iter().map(|&x| x.into()).collect()
    };
    let a = group.upload(&a_parts)?;
    let b = group.upload(&b_parts)?;
    let mut partial = group.zeros::<E>(m * n)?;
    let mut partial2 = group.zeros::<E>(m * n)?;
    let mut partial3 = group.zeros::<E>(m * n)?;
    let mut partial4 = group.zeros::<E>(m * n)?;
    // NaN until written: a row block a contender misses fails the check.
    let nan_blocks = vec![vec![E::NAN; rows * n]; p];
    let mut c_blas = group.upload(&nan_blocks)?;
    let mut c_mm = group.upload(&nan_blocks)?;
    let mut c_ours = group.upload(&nan_blocks)?;
    let mms: Vec<Matmul> = (0..p).map(|d| Matmul::new(group.device(d))).collect::<Result<_, _>>()?;
    for mm in &mms {
        mm.tune(m, n, k, false, 5, 20)?;
    }
    println!("  ReduceScatterMatmul instance: {}", kernel_ops::reduce_scatter::INSTANCE_NAMES[rs.instance_for((m, n, k))]);
    let flops = 2.0 * m as f64 * n as f64 * k as f64;
    macro_rules! contenders {
        () => {{
            let v: Vec<Contender<'_>> = vec![
                (if all_reduce { "cuBLAS partials + NCCL all-reduce" } else { "cuBLAS partials + NCCL reduce-scatter" }, Box::new(|| {
                    for d in 0..p {
                        blas[d].gemm_nt(m, n, k, a.part(d).cuda()?, b.part(d).cuda()?, partial.part_mut(d).cuda_mut()?)?;
                    }
                    Ok(if all_reduce { nccl.all_reduce_sum(&partial, &mut c_blas)? } else { nccl.reduce_scatter_sum(&partial, &mut c_blas)? })
                })),
                (if all_reduce { "kernel_ops::matmul partials + NCCL all-reduce" } else { "kernel_ops::matmul partials + NCCL reduce-scatter" }, Box::new(|| {
                    for d in 0..p {
                        mms[d].matmul(a.part(d), (m, k), b.part(d), (n, k), partial2.part_mut(d))?;
                    }
                    Ok(if all_reduce { nccl.all_reduce_sum(&partial2, &mut c_mm)? } else { nccl.reduce_scatter_sum(&partial2, &mut c_mm)? })
                })),
                (if all_reduce { "ReduceScatterMatmul::run_all_reduce (one kernel per device, ours)" } else { "ReduceScatterMatmul::run (one kernel per device, ours)" }, Box::new(|| {
                    Ok(if all_reduce { rs.run_all_reduce(&a, &b, &mut c_ours, (m, n, k))? } else { rs.run(&a, &b, &mut c_ours, (m, n, k))? })
                })),
                ("bound: cuBLAS partials alone, no communication", Box::new(|| {
                    for d in 0..p {
                        blas[d].gemm_nt(m, n, k, a.part(d).cuda()?, b.part(d).cuda()?, partial3.part_mut(d).cuda_mut()?)?;
                    }
                    Ok(())
                })),
                ("bound: kernel_ops::matmul partials alone", Box::new(|| {
                    for d in 0..p {
                        mms[d].matmul(a.part(d), (m, k), b.part(d), (n, k), partial4.part_mut(d))?;
                    }
                    Ok(())
                })),
            ];
            v
        }};
    }
    // Correctness: each contender once (twice for ours: its counters
    // carry over between calls), against the unsharded reference.
    let mut fs = contenders!();
    for f in fs.iter_mut().take(3) {
        (f.1)()?;
    }
    (fs[2].1)()?;
    group.synchronize()?;
    drop(fs);
    let mut errs = [0f64; 3];
    for (i, c) in [&c_blas, &c_mm, &c_ours].into_iter().enumerate() {
        for (d, got) in group.download(c)?.iter().enumerate() {
            let got: Vec<f32> = got.iter().map(|&x| x.into()).collect();
            errs[i] = errs[i].max(kernel_host::rel_frobenius_error_f32(&got, &reference[first(d) * n..(first(d) + rows) * n]));
        }
    }
    // Within the rounding of the partials and the sum (bf16 keeps 8 bits,
    // f16 11).
    let tolerance = if dtype == "bf16" { 1e-2 } else { 2e-3 };
    let ok = errs.map(|e| e < tolerance);
    let checked = |i: usize| match i {
        0..3 => format!("{} ({:.1e})", if ok[i] { "yes" } else { "NO" }, errs[i]),
        _ => "- (no communication)".to_string(),
    };
    let mut fs = contenders!();
    let ts = rounds(group, o.timing(), &mut fs)?;
    for (i, t) in ts.iter().enumerate() {
        let tf = flops / (t.ms * 1e-3) / 1e12;
        writeln!(md, "| {} | {:.3} | {:.1} | {:.3}x | {} | {} |", fs[i].0, t.ms, tf, ts[0].ms / t.ms, clock_text(&t.clock), checked(i))?;
        let c = t.clock.unwrap_or(ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 });
        let (err, correct) = if i < 3 { (format!("{:.2e}", errs[i]), ok[i].to_string()) } else { (String::new(), String::new()) };
        writeln!(csv, "{what},{},{dtype},{p}x{m}x{n}x{k_total},{:.4},{:.1},{:.3},{:.0},{:.0},{err},{correct}", fs[i].0, t.ms, tf, ts[0].ms / t.ms, c.sm_mhz, c.power_w)?;
    }
    Ok(ok.iter().all(|&x| x))
}

fn run() -> Res<bool> {
    let o = Opts::parse();
    let group = DeviceGroup::gpus(o.devices)?;
    let p = group.len();
    let nccl = Nccl::new(&group)?;
    println!("{}", group.describe());
    let blas: Vec<Blas> = (0..p).map(|d| Blas::new(group.device(d).as_gpu().expect("GPUs"))).collect::<Result<_, _>>()?;
    let rs = ReduceScatterMatmul::new(&group)?;
    let mut md = String::from("# Reduce-scatter and all-reduce matmuls\n");
    let mut csv = String::from("collective,contender,dtype,shape,ms,tflops_per_device,speedup_vs_cublas_nccl,sm_mhz,power_w,rel_error,correct\n");
    // (all-reduce?, shape)
    let shapes: Vec<(bool, (usize, usize, usize))> = if o.quick {
        vec![(false, (1024 * p, 2048, 2048)), (true, (128 * p, 2048, 2048))]
    } else {
        vec![(false, (4096, 8192, 8192)), (false, (1024 * p, 4096, 4096)), (true, (256 * p, 8192, 8192)), (true, (128 * p, 4096, 8192))]
    };
    let mut all_ok = true;
    for (all_reduce, s) in shapes {
        all_ok &= match o.dtype {
            Dtype::F16 => shape::<f16>(&group, &o, &nccl, &blas, &rs, all_reduce, s, &mut md, &mut csv)?,
            Dtype::Bf16 => shape::<bf16>(&group, &o, &nccl, &blas, &rs, all_reduce, s, &mut md, &mut csv)?,
        };
    }
    println!("{md}");
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(format!("{}/reduce_scatter.md", o.out), &md)?;
    std::fs::write(format!("{}/reduce_scatter.csv", o.out), &csv)?;
    if !all_ok {
        eprintln!("error: a contender gave a wrong result (see the tables)");
    }
    Ok(all_ok)
}
