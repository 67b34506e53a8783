//! Attention forward (`kernel_ops::attention::attention`) on the shapes of
//! FlashAttention-3's setting (total tokens 16k, hidden 2048: batch =
//! 16384 / seq, heads = 2048 / head_dim), causal and not, plus a GQA case,
//! on iid N(0, 1) f16 q, k, v. Each shape is checked against the CPU (f64)
//! on rows spread over the first and last heads, then timed: run for
//! `--warmup-ms` (default 500) so the GPU holds its steady, power-limited
//! clock, then the median of `--iters` (default 30) CUDA-event-timed runs,
//! the SM clock and board power sampled over the last 200 ms of the warm-up
//! and the timed runs; TFLOP/s = 4 B H S² D / time (halved when causal).
//! `--dump DIR` writes each shape's q, k, v (raw little-endian f16,
//! `[batch, seq, heads, head_dim]`) and `shapes.csv`, so the baselines
//! (`kernel-ops/bench/attention_baselines.py`: cuDNN and FlashAttention-2
//! through torch SDPA, Pallas `attention_mgpu`) run on the same inputs.
//! Without a GPU the same program checks small ragged problems on the CPU
//! emulator (no timing).
//!
//!
//! `--backward` measures the backward pass instead
//! (`kernel_ops::attention::attention_backward`, head dims 64 and 128, on
//! the forward's own `o` and `lse` and an iid N(0, 1) `dO`; TFLOP/s = 2.5
//! times the forward's FLOPs / time, the field's count for 5 GEMMs); with
//! `--dump DIR` it writes q, k, v, dO and our dQ, dK, dV
//! (`b{i}_{q,k,v,do,dq,dk,dv}.bin`) and `shapes_bwd.csv`, and
//! `attention_baselines.py --backward` checks ours against an f32 torch
//! reference on two heads and times cuDNN's and FlashAttention-2's
//! backward on the same inputs. On the emulator it checks small ragged
//! problems against `reference_backward`.
//!
//! `--varlen` measures attention over packed variable-length sequences
//! against the dense kernels at the same total tokens (module `varlen`);
//! `--variants` the forward's variants (sliding window, soft-cap, sinks)
//! beside the plain forward (module `variants`).
//!
//! ```text
//! attention_bench [--backward | --varlen | --variants] [--iters N] [--warmup-ms MS] [--out DIR] [--dump DIR] [--only S,D]
//! ```
use clap::Parser;
use kernel_device::f16;
use kernel_host::{randn_f16, time_at_steady_clock, Device};
use kernel_ops::attention::{attention, attention_backward, attention_with, configs, reference_backward, reference_row, Options, Shape, BWD_HEAD_DIMS};
use std::process::ExitCode;

#[path = "attention_bench/varlen.rs"]
mod varlen;
#[path = "attention_bench/variants.rs"]
mod variants;

/// Relative error bound of O (f16 P and f16 output: ~1e-3 typical).
const O_BOUND: f64 = 5e-3;
/// Absolute error bound of the log-sum-exp.
const LSE_BOUND: f64 = 5e-3;

/// Times the attention forward (or, with `--backward`, the backward; with
/// `--varlen`, packed variable-length sequences) on FlashAttention-3's
/// shapes against the f64 CPU reference, on a GPU; without one it checks
/// small ragged problems on the CPU emulator (no timing). Writes
/// `attention_bench.csv` (or `attention_bwd_bench.csv`) into `--out`.
#[derive(Parser)]
#[command(name = "attention_bench")]
struct Args {
    /// CUDA-event-timed runs per shape; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 30)]
    iters: usize,
    /// Milliseconds of untimed runs first, so the GPU holds its steady clock.
    #[arg(long, value_name = "MS", default_value_t = 500.0)]
    warmup_ms: f64,
    /// Directory the CSV is written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: std::path::PathBuf,
    /// Write each shape's inputs (raw little-endian f16) and `shapes.csv`
    /// here, for `bench/attention_baselines.py` to run on the same inputs.
    #[arg(long, value_name = "DIR")]
    dump: Option<std::path::PathBuf>,
    /// Only the shapes of this sequence length and head dim.
    #[arg(long, value_name = "SEQ,HEAD_DIM", value_parser = parse_only)]
    only: Option<(usize, usize)>,
    /// Measure the backward pass (dQ, dK, dV; head dims 64 and 128).
    #[arg(long, conflicts_with = "varlen")]
    backward: bool,
    /// Measure packed variable-length sequences against the dense kernels.
    #[arg(long, conflicts_with = "variants")]
    varlen: bool,
    /// Measure the forward's variants (sliding window, soft-cap, sinks)
    /// beside the plain forward.
    #[arg(long, conflicts_with = "backward")]
    variants: bool,
}

/// `--only SEQ,HEAD_DIM`.
fn parse_only(v: &str) -> Result<(usize, usize), String> {
    let (s, d) = v.split_once(',').ok_or("want SEQ,HEAD_DIM (as 4096,128)")?;
    Ok((s.trim().parse().map_err(|e| format!("SEQ `{s}`: {e}"))?, d.trim().parse().map_err(|e| format!("HEAD_DIM `{d}`: {e}"))?))
}

/// The benchmark's problems: `(name, shape, causal)`.
fn problems(gpu: bool) -> Vec<(String, Shape, bool)> {
    let mut v = Vec::new();
    if !gpu {
        for (seq, d, causal) in [(200, 64, true), (150, 128, false)] {
            v.push((format!("S{seq} D{d}{}", if causal { " causal" } else { "" }), Shape { batch: 1, seq, heads: 2, kv_heads: 1, head_dim: d }, causal));
        }
        return v;
    }
    for seq in [4096, 16384] {
        for d in [64, 128, 256] {
            for causal in [false, true] {
                let shape = Shape { batch: 16384 / seq, seq, heads: 2048 / d, kv_heads: 2048 / d, head_dim: d };
                v.push((format!("S{seq} D{d}{}", if causal { " causal" } else { "" }), shape, causal));
            }
        }
    }
    // GQA: 32 Q heads over 8 K/V heads.
    v.push(("S4096 D128 GQA 32/8".into(), Shape { batch: 4, seq: 4096, heads: 32, kv_heads: 8, head_dim: 128 }, false));
    v
}

fn write_f16(path: &std::path::Path, x: &[f16]) -> std::io::Result<()> {
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
    std::fs::write(path, bytes)
}

fn run(dev: &Device, a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    println!("device: {}", dev.describe());
    if a.backward {
        return run_backward(dev, a);
    }
    if a.variants {
        return variants::run(dev, a.iters, a.warmup_ms, &a.out);
    }
    if a.varlen {
        return varlen::run(dev, a.iters, a.warmup_ms, &a.out);
    }
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let mut csv = String::from("date,device,name,batch,seq,heads,kv_heads,head_dim,causal,instance,median_ms,tflops,sm_mhz,power_w,o_rel_err,lse_abs_err\n");
    let mut shapes_csv = String::from("name,batch,seq,heads,kv_heads,head_dim,causal,file_prefix\n");
    println!("\n| problem | B x S x H (KV) x D | median ms | TFLOP/s | SM clock, power | O rel. error | LSE abs. error | TFLOP/s by instance (stages, keys per block, consumer warpgroups) |\n|---|---|---:|---:|---|---:|---:|---|");
    let mut ok = true;
    for (idx, (name, shape, causal)) in problems(dev.is_gpu()).into_iter().enumerate() {
        if let Some((s, d)) = a.only {
            if (shape.seq, shape.head_dim) != (s, d) {
                continue;
            }
        }
        let opts = Options { causal, scale: None };
        let (qh, kh, vh) = (randn_f16(shape.q_len(), 10 + 3 * idx as u64), randn_f16(shape.kv_len(), 11 + 3 * idx as u64), randn_f16(shape.kv_len(), 12 + 3 * idx as u64));
        if let Some(dir) = &a.dump {
            std::fs::create_dir_all(dir)?;
            let prefix = format!("p{idx}");
            write_f16(&dir.join(format!("{prefix}_q.bin")), &qh)?;
            write_f16(&dir.join(format!("{prefix}_k.bin")), &kh)?;
            write_f16(&dir.join(format!("{prefix}_v.bin")), &vh)?;
            let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
            shapes_csv += &format!("{name},{batch},{seq},{heads},{kv_heads},{head_dim},{},{prefix}\n", causal as u8);
        }
        let (q, k, v) = (dev.upload(&qh)?, dev.upload(&kh)?, dev.upload(&vh)?);
        let mut o = dev.upload(&vec![f16::NAN; shape.q_len()])?;
        let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()])?;
        // Each instance the head dimension is built with (`configs`); the
        // fastest is reported (the entry point `attention` takes the first).
        let mut timing: Option<(f64, Option<kernel_host::ClockPower>, String)> = None;
        let mut per_depth = Vec::new();
        for config in configs(shape.head_dim) {
            let label = format!("s{} n{} c{}", config.stages, config.block_n, config.consumers);
            let mut f = || attention_with(dev, &ops, &q, &k, &v, &mut o, &mut lse, shape, opts, config).map_err(|e| match e {
                kernel_ops::Error::Runtime(e) => e,
                other => kernel_host::Error::InvalidArgument { function: "attention", problem: other.to_string() },
            });
            f()?;
            dev.synchronize()?;
            if let Some(gpu) = dev.as_gpu() {
                let (t, clock) = time_at_steady_clock(gpu, a.warmup_ms, a.iters, &mut f)?;
                per_depth.push(format!("{label}: {:.1}", shape.flops(causal) / t.median_ms / 1e9));
                if timing.as_ref().is_none_or(|x| t.median_ms < x.0) {
                    timing = Some((t.median_ms, clock, label));
                }
            }
        }
        // Check rows spread over the first and last heads of the first and
        // last batches (after the timed runs: the outputs are still right).
        let (og, lg) = (dev.download(&o)?, dev.download(&lse)?);
        let (qf, kf, vf): (Vec<f32>, Vec<f32>, Vec<f32>) = (qh.iter().map(|x| x.to_f32()).collect(), kh.iter().map(|x| x.to_f32()).collect(), vh.iter().map(|x| x.to_f32()).collect());
        let rows = if dev.is_gpu() { 24 } else { shape.seq };
        let (mut num, mut den, mut lse_err) = (0f64, 0f64, 0f64);
        for (b, h) in [(0, 0), (shape.batch - 1, shape.heads - 1)] {
            for r in 0..rows {
                let i = if rows >= shape.seq { r } else { r * (shape.seq - 1) / (rows - 1) };
                let (want, want_lse) = reference_row(&qf, &kf, &vf, shape, opts, (b, h, i));
                let at = ((b * shape.seq + i) * shape.heads + h) * shape.head_dim;
                for (g, w) in og[at..at + shape.head_dim].iter().zip(&want) {
                    let g = f64::from(g.to_f32());
                    num += (g - f64::from(*w)).powi(2);
                    den += f64::from(*w).powi(2);
                }
                lse_err = lse_err.max(f64::from((lg[(b * shape.heads + h) * shape.seq + i] - want_lse).abs()));
            }
        }
        let err = if num.is_nan() { f64::INFINITY } else { (num / den).sqrt() };
        let good = err < O_BOUND && lse_err < LSE_BOUND;
        ok &= good;
        let dims = format!("{} x {} x {} ({}) x {}", shape.batch, shape.seq, shape.heads, shape.kv_heads, shape.head_dim);
        let (ms, tf, mhz, w) = match timing {
            Some((ms, cp, _)) => (ms, shape.flops(causal) / ms / 1e9, cp.map_or(f64::NAN, |c| c.sm_mhz), cp.map_or(f64::NAN, |c| c.power_w)),
            None => (f64::NAN, f64::NAN, f64::NAN, f64::NAN),
        };
        println!("| {name} | {dims} | {ms:.4} | {tf:.1} | {mhz:.0} MHz, {w:.0} W | {err:.2e} | {lse_err:.2e} | {} |{}", per_depth.join(", "), if good { "" } else { " FAIL" });
        let dev_name = dev.as_gpu().map_or("CPU emulator".to_string(), |g| g.name().to_string());
        let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
        csv += &format!("{date},{dev_name},{name},{batch},{seq},{heads},{kv_heads},{head_dim},{},{},{ms:.5},{tf:.1},{mhz:.0},{w:.1},{err:.3e},{lse_err:.3e}\n", causal as u8, timing.as_ref().map_or(String::new(), |t| t.2.clone()));
    }
    if !dev.is_gpu() {
        println!("(the CPU emulator checks correctness only: no timing)");
    }
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("attention_bench.csv"), csv)?;
    if let Some(dir) = &a.dump {
        std::fs::write(dir.join("shapes.csv"), shapes_csv)?;
    }
    Ok(ok)
}

/// The backward pass (`--backward`): see the module.
fn run_backward(dev: &Device, a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let mut csv = String::from("date,device,name,batch,seq,heads,kv_heads,head_dim,causal,median_ms,tflops,sm_mhz,power_w,dq_rel_err,dk_rel_err,dv_rel_err\n");
    let mut shapes_csv = String::from("name,batch,seq,heads,kv_heads,head_dim,causal,file_prefix\n");
    println!("\n| problem (backward) | B x S x H (KV) x D | median ms | TFLOP/s | SM clock, power | dQ, dK, dV rel. error (emulator) |\n|---|---|---:|---:|---|---|");
    let mut ok = true;
    let err = |e: kernel_ops::Error| match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "attention_backward", problem: other.to_string() },
    };
    for (idx, (name, shape, causal)) in problems(dev.is_gpu()).into_iter().enumerate() {
        if !BWD_HEAD_DIMS.contains(&shape.head_dim) || a.only.is_some_and(|o| o != (shape.seq, shape.head_dim)) {
            continue;
        }
        let opts = Options { causal, scale: None };
        let seed = 100 + 4 * idx as u64;
        let (qh, kh, vh, doh) = (randn_f16(shape.q_len(), seed), randn_f16(shape.kv_len(), seed + 1), randn_f16(shape.kv_len(), seed + 2), randn_f16(shape.q_len(), seed + 3));
        let (q, k, v, d_o) = (dev.upload(&qh)?, dev.upload(&kh)?, dev.upload(&vh)?, dev.upload(&doh)?);
        let mut o = dev.zeros::<f16>(shape.q_len())?;
        let mut lse = dev.zeros::<f32>(shape.lse_len())?;
        attention(dev, &ops, &q, &k, &v, &mut o, &mut lse, shape, opts).map_err(err)?;
        let (mut dq, mut dk, mut dv) = (dev.zeros::<f16>(shape.q_len())?, dev.zeros::<f16>(shape.kv_len())?, dev.zeros::<f16>(shape.kv_len())?);
        let flops = 2.5 * shape.flops(causal);
        let (mut ms, mut tf, mut mhz, mut w) = (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
        let mut f = || attention_backward(dev, &ops, &q, &k, &v, &o, &lse, &d_o, &mut dq, &mut dk, &mut dv, shape, opts).map_err(err);
        f()?;
        dev.synchronize()?;
        if let Some(gpu) = dev.as_gpu() {
            let (t, cp) = time_at_steady_clock(gpu, a.warmup_ms, a.iters, &mut f)?;
            (ms, tf) = (t.median_ms, flops / t.median_ms / 1e9);
            (mhz, w) = (cp.map_or(f64::NAN, |c| c.sm_mhz), cp.map_or(f64::NAN, |c| c.power_w));
        }
        let (gq, gk, gv) = (dev.download(&dq)?, dev.download(&dk)?, dev.download(&dv)?);
        // On a GPU the check is the baselines script's (an f32 torch
        // reference on two heads, from the dumped inputs and gradients);
        // on the emulator, the whole CPU reference here.
        let mut errs = [f64::NAN; 3];
        if !dev.is_gpu() {
            let fl = |x: &[f16]| -> Vec<f32> { x.iter().map(|v| v.to_f32()).collect() };
            let (wq, wk, wv) = reference_backward(&fl(&qh), &fl(&kh), &fl(&vh), &fl(&doh), shape, opts);
            for (e, (g, want)) in errs.iter_mut().zip([(&gq, &wq), (&gk, &wk), (&gv, &wv)]) {
                let (num, den) = g.iter().zip(want.iter()).fold((0f64, 0f64), |(n, d), (g, w)| (n + (f64::from(g.to_f32()) - f64::from(*w)).powi(2), d + f64::from(*w).powi(2)));
                *e = if num.is_nan() { f64::INFINITY } else { (num / den).sqrt() };
            }
            ok &= errs.iter().all(|e| *e < 1e-2);
        } else {
            ok &= [&gq, &gk, &gv].iter().all(|g| g.iter().all(|x| x.to_f32().is_finite()));
        }
        if let Some(dir) = &a.dump {
            std::fs::create_dir_all(dir)?;
            let prefix = format!("b{idx}");
            for (part, x) in [("q", &qh), ("k", &kh), ("v", &vh), ("do", &doh), ("dq", &gq), ("dk", &gk), ("dv", &gv)] {
                write_f16(&dir.join(format!("{prefix}_{part}.bin")), x)?;
            }
            let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
            shapes_csv += &format!("{name},{batch},{seq},{heads},{kv_heads},{head_dim},{},{prefix}\n", causal as u8);
        }
        let dims = format!("{} x {} x {} ({}) x {}", shape.batch, shape.seq, shape.heads, shape.kv_heads, shape.head_dim);
        // On a GPU the errors are the baselines script's (all finite checked here).
        let errs_cell = if dev.is_gpu() { "finite; errors: attention_baselines.py --backward".to_string() } else { format!("{:.2e}, {:.2e}, {:.2e}", errs[0], errs[1], errs[2]) };
        println!("| {name} | {dims} | {ms:.4} | {tf:.1} | {mhz:.0} MHz, {w:.0} W | {errs_cell} |");
        let dev_name = dev.as_gpu().map_or("CPU emulator".to_string(), |g| g.name().to_string());
        let Shape { batch, seq, heads, kv_heads, head_dim } = shape;
        csv += &format!("{date},{dev_name},{name},{batch},{seq},{heads},{kv_heads},{head_dim},{},{ms:.5},{tf:.1},{mhz:.0},{w:.1},{:.3e},{:.3e},{:.3e}\n", causal as u8, errs[0], errs[1], errs[2]);
    }
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("attention_bwd_bench.csv"), csv)?;
    if let Some(dir) = &a.dump {
        std::fs::write(dir.join("shapes_bwd.csv"), shapes_csv)?;
    }
    Ok(ok)
}

fn main() -> ExitCode {
    kernel_ops::bench_main(Args::parse(), run)
}
