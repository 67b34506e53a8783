//! The grouped GEMM (mixture of experts; f16, and its bf16 time on the same
//! values) against a loop of cuBLAS calls
//! (`cublasGemmEx`, one per non-empty group, on the same stream): what users
//! run without a grouped kernel. Same iid N(0, 1) f16 inputs for both; our
//! output checked against cuBLAS's (relative Frobenius error) and, on 64
//! sampled rows, against an f64 CPU reference; each contender warmed up for
//! `--warmup-ms` (default 300), then the median of `--iters` (default 30)
//! CUDA-event timings, over `--rounds` (default 3) interleaved rounds, SM
//! clock and power sampled during the timed runs.
//!
//! Problems: experts G in {8, 64}, (K, N) in {(4096, 2048), (2048, 1536)},
//! total M in {16384, 65536}, group sizes uniform or skewed (`M_g` about
//! proportional to `(g + 1)^-1.2`: a few hot experts, some empty).
//!
//! ```text
//! grouped_bench [--quick] [--iters N] [--rounds N] [--warmup-ms MS] [--out DIR]
//! ```
//! Writes `grouped_bench.md` and `grouped_bench.csv` to `--out` (default `.`).
use kernel_device::f16;
use kernel_host::{randn_f16, rel_frobenius_error, time_kernel, warm_up, Blas, ClockPower, ClockSampler, Device};
use kernel_ops::grouped::{GroupedMatmul, Tiles};
use std::fmt::Write as _;

#[path = "common/grouped_args.rs"]
mod grouped_args;
use grouped_args::{parse, sizes, Args};

fn main() -> std::process::ExitCode {
    kernel_ops::bench_main(
        parse(
            "grouped_bench",
            "Times the grouped GEMM of mixture-of-experts layers (f16, and bf16 on the same values) against a loop of cuBLAS calls, one per non-empty group, on the same inputs, checked against cuBLAS and an f64 CPU reference first, on a GPU. Writes grouped_bench.md and grouped_bench.csv into --out",
        ),
        run,
    )
}

fn run(dev: &Device, o: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let gpu = dev.require_gpu("grouped_bench (timing and cuBLAS)")?.clone();
    let blas = Blas::new(&gpu)?;
    let gm = GroupedMatmul::new(dev)?;
    println!("{}", dev.describe());
    let mut md = String::from(
        "| experts | K | N | total M | sizes | ours ms (128x256) | ours ms (128x128) | ours bf16 ms (128x256) | cuBLAS loop ms | ours TFLOP/s | cuBLAS loop TFLOP/s | ours / loop | ours clock, power | loop clock, power | rel. error vs cuBLAS | sampled rows vs f64 |\n|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|\n",
    );
    let mut csv = String::from("experts,k,n,m_total,sizes,ours_ms,ours_128x128_ms,ours_bf16_ms,loop_ms,ours_tflops,loop_tflops,speedup,ours_mhz,ours_w,loop_mhz,loop_w,err_vs_cublas,err_sampled\n");
    let mut all_ok = true;
    let problems: Vec<(usize, usize, usize, usize, bool)> = if o.quick {
        vec![(8, 2048, 1536, 8192, false), (64, 2048, 1536, 8192, true)]
    } else {
        let mut p = Vec::new();
        for (k, n) in [(4096, 2048), (2048, 1536)] {
            for g in [8, 64] {
                for m in [16384, 65536] {
                    for skewed in [false, true] {
                        p.push((g, k, n, m, skewed));
                    }
                }
            }
        }
        p
    };
    for (groups, k, n, m, skewed) in problems {
        let sz = sizes(groups, m, skewed);
        let a = randn_f16(m * k, 1);
        let b = randn_f16(groups * n * k, 2);
        let (da, db, ds) = (dev.upload(&a)?, dev.upload(&b)?, dev.upload(&sz)?);
        let mut c_ours = dev.upload(&vec![f16::NAN; m * n])?;
        let mut c_ref = dev.upload(&vec![f16::NAN; m * n])?;
        // The same inputs in bf16, for our bf16 kernel's time (cuBLAS's loop
        // is timed in f16 only).
        let to_bf16 = |v: &[f16]| v.iter().map(|x| kernel_device::bf16::from_f32(x.to_f32())).collect::<Vec<_>>();
        let (da16, db16) = (dev.upload(&to_bf16(&a))?, dev.upload(&to_bf16(&b))?);
        let mut c16 = dev.upload(&vec![kernel_device::bf16::ZERO; m * n])?;
        let ours = |tiles: Tiles, c: &mut kernel_host::Buffer<f16>| -> kernel_host::Result<()> {
            gm.run_with(tiles, &da, &db, &ds, c, (m, n, k), groups).map_err(|e| kernel_host::Error::InvalidArgument { function: "grouped", problem: e.to_string() })
        };
        let loop_rows: Vec<(usize, usize, usize)> = {
            let mut r = 0;
            sz.iter().enumerate().map(|(g, &s)| { let x = (g, r, s as usize); r += s as usize; x }).filter(|x| x.2 > 0).collect()
        };
        let cublas_loop = |c: &mut kernel_host::Buffer<f16>| -> kernel_host::Result<()> {
            let (a, b) = (da.cuda()?, db.cuda()?);
            let c = c.cuda_mut()?;
            for &(g, r, mg) in &loop_rows {
                blas.gemm_nt_views(mg, n, k, &a.slice(r * k..(r + mg) * k), &b.slice(g * n * k..(g + 1) * n * k), &mut c.slice_mut(r * n..(r + mg) * n))?;
            }
            Ok(())
        };
        // Correctness first: both tile shapes against cuBLAS.
        cublas_loop(&mut c_ref)?;
        let reference: Vec<f32> = dev.download(&c_ref)?.iter().map(|x| x.to_f32()).collect();
        ours(Tiles::Narrow, &mut c_ours)?;
        gm.status()?;
        let err_narrow = rel_frobenius_error(&dev.download(&c_ours)?, &reference);
        dev.write(&mut c_ours, &vec![f16::NAN; m * n])?;
        ours(Tiles::Wide, &mut c_ours)?;
        gm.status()?;
        let got = dev.download(&c_ours)?;
        let err = rel_frobenius_error(&got, &reference).max(err_narrow);
        // 64 sampled rows against an f64 dot product.
        let mut num = 0f64;
        let mut den = 0f64;
        for s in 0..64usize {
            let row = (s * 7919 + 13) % m;
            let mut acc_row = 0usize;
            let g = sz.iter().position(|&x| { acc_row += x as usize; row < acc_row }).unwrap_or(0);
            for col in (0..n).step_by(97) {
                let dot: f64 = (0..k).map(|i| f64::from(a[row * k + i].to_f32()) * f64::from(b[(g * n + col) * k + i].to_f32())).sum();
                num += (f64::from(got[row * n + col].to_f32()) - dot).powi(2);
                den += dot * dot;
            }
        }
        let err_sampled = (num / den).sqrt();
        let ok = err < 2e-3 && err_sampled < 2e-3;
        all_ok &= ok;
        // Timing: interleaved rounds.
        gm.run(&da16, &db16, &ds, &mut c16, (m, n, k), groups)?;
        gm.status()?;
        let mut t_ours = Vec::new();
        let mut t_bf16 = Vec::new();
        let mut t_narrow = Vec::new();
        let mut t_loop = Vec::new();
        let (mut clk_ours, mut clk_loop): (Option<ClockPower>, Option<ClockPower>) = (None, None);
        for r in 0..o.rounds {
            for i in 0..4 {
                let which = (r + i) % 4;
                if which == 3 {
                    warm_up(&gpu, o.warmup_ms, || gm.run(&da16, &db16, &ds, &mut c16, (m, n, k), groups).map_err(|e| kernel_host::Error::InvalidArgument { function: "grouped", problem: e.to_string() }))?;
                    t_bf16.push(time_kernel(&gpu, 2, o.iters, || gm.run(&da16, &db16, &ds, &mut c16, (m, n, k), groups).map_err(|e| kernel_host::Error::InvalidArgument { function: "grouped", problem: e.to_string() }))?.median_ms);
                    continue;
                }
                if which == 0 {
                    warm_up(&gpu, o.warmup_ms, || ours(Tiles::Wide, &mut c_ours))?;
                    let s = ClockSampler::start(gpu.ordinal());
                    t_ours.push(time_kernel(&gpu, 2, o.iters, || ours(Tiles::Wide, &mut c_ours))?.median_ms);
                    clk_ours = s.stop().or(clk_ours);
                } else if which == 1 {
                    warm_up(&gpu, o.warmup_ms, || ours(Tiles::Narrow, &mut c_ours))?;
                    t_narrow.push(time_kernel(&gpu, 2, o.iters, || ours(Tiles::Narrow, &mut c_ours))?.median_ms);
                } else {
                    warm_up(&gpu, o.warmup_ms, || cublas_loop(&mut c_ref))?;
                    let s = ClockSampler::start(gpu.ordinal());
                    t_loop.push(time_kernel(&gpu, 2, o.iters, || cublas_loop(&mut c_ref))?.median_ms);
                    clk_loop = s.stop().or(clk_loop);
                }
            }
        }
        let med = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); v[v.len() / 2] };
        let (to, tn, tl, tb) = (med(t_ours), med(t_narrow), med(t_loop), med(t_bf16));
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let tf = |ms: f64| flops / (ms * 1e-3) / 1e12;
        let dist = if skewed { "skewed" } else { "uniform" };
        let ck = |c: &Option<ClockPower>| c.map(|c| format!("{:.0} MHz, {:.0} W", c.sm_mhz, c.power_w)).unwrap_or("-".into());
        let line = format!(
            "| {groups} | {k} | {n} | {m} | {dist} | {to:.3} | {tn:.3} | {tb:.3} | {tl:.3} | {:.1} | {:.1} | {:.2}x | {} | {} | {err:.1e} | {err_sampled:.1e} |",
            tf(to), tf(tl), tl / to, ck(&clk_ours), ck(&clk_loop)
        );
        println!("{line}");
        writeln!(md, "{line}")?;
        let c0 = clk_ours.unwrap_or(ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 });
        let c1 = clk_loop.unwrap_or(ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 });
        writeln!(csv, "{groups},{k},{n},{m},{dist},{to:.4},{tn:.4},{tb:.4},{tl:.4},{:.1},{:.1},{:.3},{:.0},{:.0},{:.0},{:.0},{err:.2e},{err_sampled:.2e}", tf(to), tf(tl), tl / to, c0.sm_mhz, c0.power_w, c1.sm_mhz, c1.power_w)?;
    }
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(format!("{}/grouped_bench.md", o.out), &md)?;
    std::fs::write(format!("{}/grouped_bench.csv", o.out), &csv)?;
    Ok(all_ok)
}
