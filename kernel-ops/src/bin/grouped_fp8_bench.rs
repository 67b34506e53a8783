//! The grouped block-scaled FP8 GEMM (mixture of experts:
//! `GroupedMatmul::run_fp8_blockscaled`, 1 x 128 scales for the tokens,
//! 128 x 128 per expert weight, promoted every 128 of K) against what users
//! have without it: a loop of cuBLASLt FP8 calls, one per non-empty group
//! on the same stream (per-tensor scales, e4m3 in, f16 out; cuBLASLt on
//! Hopper has no block scales), with its default accumulation (partial sums
//! promoted, the accuracy class of ours) and with fast accumulation; each
//! group's problem takes the heuristic's first algorithm, as a plain
//! `cublasLtMatmul` user gets.
//!
//! The same iid N(0, 1) values, quantized both ways: blocks for ours, one
//! scale per tensor for cuBLASLt. Every output is checked on 64 sampled
//! rows (every 97th column) against an f64 CPU reference of its own
//! quantized inputs (relative Frobenius error below 2e-3 for ours and
//! cuBLASLt's promoting loop; 4e-3 for fast accumulation); each contender
//! is warmed up for `--warmup-ms` (default 300), then the median of
//! `--iters` (default 30) CUDA-event timings, over `--rounds` (default 3)
//! interleaved rounds, SM clock and power sampled during the timed runs.
//!
//! Problems (`grouped_bench`'s): experts G in {8, 64}, (K, N) in
//! {(4096, 2048), (2048, 1536)}, total M in {16384, 65536}, sizes uniform
//! or skewed (`M_g` about proportional to `(g + 1)^-1.2`).
//!
//! ```text
//! grouped_fp8_bench [--quick] [--iters N] [--rounds N] [--warmup-ms MS] [--out DIR]
//! ```
//! Writes `grouped_fp8_bench.md` and `grouped_fp8_bench.csv` to `--out`.
use kernel_device::f16;
use kernel_host::{randn_f16, time_kernel, warm_up, ClockPower, ClockSampler, Device};
use kernel_ops::blaslt::BlasLt;
use kernel_ops::fp8::{quantize, quantize_1x128};
use kernel_ops::grouped::{quantize_experts_128x128, GroupedMatmul};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[path = "common/grouped_args.rs"]
mod grouped_args;
use grouped_args::{parse, sizes, Args};

fn main() -> std::process::ExitCode {
    kernel_ops::bench_main(
        parse(
            "grouped_fp8_bench",
            "Times the grouped block-scaled FP8 GEMM of mixture-of-experts layers (1 x 128 token scales, 128 x 128 weight scales) against a loop of cuBLASLt FP8 calls, one per non-empty group, on the same values, each checked against an f64 CPU reference of its own quantized inputs first, on a GPU. Writes grouped_fp8_bench.md and grouped_fp8_bench.csv into --out",
        ),
        run,
    )
}

fn host_err(e: kernel_ops::Error) -> kernel_host::Error {
    match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "grouped_matmul_fp8_blockscaled", problem: other.to_string() },
    }
}

fn randn(len: usize, seed: u64) -> Vec<f32> {
    randn_f16(len, seed).iter().map(|x| x.to_f32()).collect()
}

/// Relative Frobenius error of `got` on the sampled `(row, col)` against
/// `dot(row, col)` (f64).
fn sampled_error(got: &[f16], n: usize, samples: &[(usize, usize)], dot: impl Fn(usize, usize) -> f64) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for &(r, c) in samples {
        let want = dot(r, c);
        num += (f64::from(got[r * n + c].to_f32()) - want).powi(2);
        den += want * want;
    }
    (num / den).sqrt()
}

fn run(dev: &Device, o: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let gpu = dev.require_gpu("grouped_fp8_bench (timing and cuBLASLt)")?.clone();
    let gm = GroupedMatmul::new(dev)?;
    println!("{}", dev.describe());
    let mut md = String::from(
        "| experts | K | N | total M | sizes | ours ms | cuBLASLt loop ms (promoting) | cuBLASLt loop ms (fast acc.) | ours TFLOP/s | best loop TFLOP/s | ours / best loop | ours / promoting loop | ours clock, power | best loop clock, power | ours err | promoting loop err | fast loop err |\n|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|\n",
    );
    let mut csv = String::from("experts,k,n,m_total,sizes,ours_ms,loop_ms,loop_fast_ms,ours_tflops,best_loop_tflops,speedup_vs_best_loop,speedup_vs_promoting_loop,ours_mhz,ours_w,loop_mhz,loop_w,err_ours,err_loop,err_loop_fast\n");
    let mut all_ok = true;
    let (ms, gs, kns): (Vec<usize>, Vec<usize>, Vec<(usize, usize)>) =
        if o.quick { (vec![8192], vec![8, 64], vec![(2048, 1536)]) } else { (vec![16384, 65536], vec![8, 64], vec![(4096, 2048), (2048, 1536)]) };
    let m_max = *ms.iter().max().unwrap();
    for &(k, n) in &kns {
        // A once per K at the largest M (smaller M use its first rows).
        let a32 = randn(m_max * k, 1);
        let (qa_bs_all, sa_all) = quantize_1x128(&a32, m_max, k);
        let (qa_pt_all, sa_pt) = quantize(&a32);
        drop(a32);
        let kb = k.div_ceil(128);
        for &groups in &gs {
            let b32 = randn(groups * n * k, 2);
            let (qb_bs, sb_bs) = quantize_experts_128x128(&b32, groups, n, k);
            let (qb_pt, sb_pt) = quantize(&b32);
            drop(b32);
            let (db_bs, dsb_bs, db_pt) = (dev.upload(&qb_bs)?, dev.upload(&sb_bs)?, dev.upload(&qb_pt)?);
            // cuBLASLt's scale pointers: one allocation each (16-byte aligned).
            let (lt_sa, lt_sb) = (gpu.upload(&[sa_pt])?, gpu.upload(&[sb_pt])?);
            for &m in &ms {
                let qa_bs = &qa_bs_all[..m * k];
                let sa_bs: Vec<f32> = (0..kb).flat_map(|b| sa_all[b * m_max..b * m_max + m].iter().copied()).collect();
                let qa_pt = &qa_pt_all[..m * k];
                let (da_bs, dsa_bs, da_pt) = (dev.upload(qa_bs)?, dev.upload(&sa_bs)?, dev.upload(qa_pt)?);
                for skewed in [false, true] {
                    let sz = sizes(groups, m, skewed);
                    let ds = dev.upload(&sz)?;
                    let mut c_ours = dev.upload(&vec![f16::NAN; m * n])?;
                    let mut c_loop = dev.upload(&vec![f16::NAN; m * n])?;
                    let ours = |c: &mut kernel_host::Buffer<f16>| -> kernel_host::Result<()> { gm.run_fp8_blockscaled(&da_bs, &dsa_bs, &db_bs, &dsb_bs, &ds, c, (m, n, k), groups).map_err(host_err) };
                    // One cuBLASLt problem per distinct group size and
                    // accumulation mode.
                    let loop_rows: Vec<(usize, usize, usize)> = {
                        let mut r = 0;
                        sz.iter().enumerate().map(|(g, &s)| { let x = (g, r, s as usize); r += s as usize; x }).filter(|x| x.2 > 0).collect()
                    };
                    let mut plans: [BTreeMap<usize, BlasLt>; 2] = [BTreeMap::new(), BTreeMap::new()];
                    for (fast, p) in plans.iter_mut().enumerate() {
                        for &(_, _, mg) in &loop_rows {
                            if let std::collections::btree_map::Entry::Vacant(e) = p.entry(mg) {
                                e.insert(BlasLt::new_fp8(&gpu, mg, n, k, &lt_sa, &lt_sb, fast == 1)?);
                            }
                        }
                    }
                    let mut cublas_loop = |fast: usize, c: &mut kernel_host::Buffer<f16>| -> kernel_host::Result<()> {
                        let (a, b) = (da_pt.cuda()?, db_pt.cuda()?);
                        let c = c.cuda_mut()?;
                        for &(g, r, mg) in &loop_rows {
                            let plan = plans[fast].get_mut(&mg).expect("a plan per size");
                            plan.matmul_fp8_views(0, &a.slice(r * k..(r + mg) * k), &b.slice(g * n * k..(g + 1) * n * k), &mut c.slice_mut(r * n..(r + mg) * n))?;
                        }
                        Ok(())
                    };
                    // Correctness first, on 64 sampled rows.
                    let samples: Vec<(usize, usize)> = (0..64usize).flat_map(|s| { let r = (s * 7919 + 13) % m; (0..n).step_by(97).map(move |c| (r, c)) }).collect();
                    let group_of = |row: usize| { let mut acc = 0usize; sz.iter().position(|&x| { acc += x as usize; row < acc }).unwrap_or(0) };
                    ours(&mut c_ours)?;
                    gm.status().map_err(host_err)?;
                    let got = dev.download(&c_ours)?;
                    let nb = n.div_ceil(128);
                    let err_ours = sampled_error(&got, n, &samples, |r, c| {
                        let g = group_of(r);
                        (0..kb).map(|bk| {
                            let ks = bk * 128..((bk + 1) * 128).min(k);
                            let dot: f64 = ks.map(|kk| f64::from(qa_bs[r * k + kk].to_f32()) * f64::from(qb_bs[(g * n + c) * k + kk].to_f32())).sum();
                            dot * f64::from(sa_bs[bk * m + r]) * f64::from(sb_bs[(g * nb + c / 128) * kb + bk])
                        }).sum()
                    });
                    let dot_pt = |r: usize, c: usize| -> f64 {
                        let g = group_of(r);
                        let dot: f64 = (0..k).map(|kk| f64::from(qa_pt[r * k + kk].to_f32()) * f64::from(qb_pt[(g * n + c) * k + kk].to_f32())).sum();
                        dot * f64::from(sa_pt) * f64::from(sb_pt)
                    };
                    let mut err_loop = [0f64; 2];
                    for (fast, e) in err_loop.iter_mut().enumerate() {
                        dev.write(&mut c_loop, &vec![f16::NAN; m * n])?;
                        cublas_loop(fast, &mut c_loop)?;
                        *e = sampled_error(&dev.download(&c_loop)?, n, &samples, dot_pt);
                    }
                    let ok = err_ours < 2e-3 && err_loop[0] < 2e-3 && err_loop[1] < 4e-3;
                    all_ok &= ok;
                    // Timing: interleaved rounds.
                    let mut t = [Vec::new(), Vec::new(), Vec::new()];
                    let mut clk: [Option<ClockPower>; 3] = [None; 3];
                    for r in 0..o.rounds {
                        for i in 0..3 {
                            let which = (r + i) % 3;
                            let mut f = || if which == 0 { ours(&mut c_ours) } else { cublas_loop(which - 1, &mut c_loop) };
                            warm_up(&gpu, o.warmup_ms, &mut f)?;
                            let s = ClockSampler::start(gpu.ordinal());
                            t[which].push(time_kernel(&gpu, 2, o.iters, &mut f)?.median_ms);
                            clk[which] = s.stop().or(clk[which]);
                        }
                    }
                    // Ours is still right after the timed runs.
                    ours(&mut c_ours)?;
                    all_ok &= dev.download(&c_ours)? == got;
                    let med = |v: &Vec<f64>| { let mut v = v.clone(); v.sort_by(f64::total_cmp); v[v.len() / 2] };
                    let (to, tl, tf) = (med(&t[0]), med(&t[1]), med(&t[2]));
                    let best = if tl <= tf { 1 } else { 2 };
                    let tb = tl.min(tf);
                    let flops = 2.0 * m as f64 * n as f64 * k as f64;
                    let tflops = |ms: f64| flops / (ms * 1e-3) / 1e12;
                    let dist = if skewed { "skewed" } else { "uniform" };
                    let ck = |c: &Option<ClockPower>| c.map(|c| format!("{:.0} MHz, {:.0} W", c.sm_mhz, c.power_w)).unwrap_or("-".into());
                    let line = format!(
                        "| {groups} | {k} | {n} | {m} | {dist} | {to:.3} | {tl:.3} | {tf:.3} | {:.1} | {:.1} | {:.2}x | {:.2}x | {} | {} | {err_ours:.1e} | {:.1e} | {:.1e} |{}",
                        tflops(to), tflops(tb), tb / to, tl / to, ck(&clk[0]), ck(&clk[best]), err_loop[0], err_loop[1], if ok { "" } else { " FAIL" }
                    );
                    println!("{line}");
                    writeln!(md, "{line}")?;
                    let z = ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 };
                    let (c0, c1) = (clk[0].unwrap_or(z), clk[best].unwrap_or(z));
                    writeln!(csv, "{groups},{k},{n},{m},{dist},{to:.4},{tl:.4},{tf:.4},{:.1},{:.1},{:.3},{:.3},{:.0},{:.0},{:.0},{:.0},{err_ours:.2e},{:.2e},{:.2e}", tflops(to), tflops(tb), tb / to, tl / to, c0.sm_mhz, c0.power_w, c1.sm_mhz, c1.power_w, err_loop[0], err_loop[1])?;
                }
            }
        }
    }
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(format!("{}/grouped_fp8_bench.md", o.out), &md)?;
    std::fs::write(format!("{}/grouped_fp8_bench.csv", o.out), &csv)?;
    Ok(all_ok)
}
