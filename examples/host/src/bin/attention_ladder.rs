//! The attention ladder (`kernels::attention_ladder`) step by step: each
//! step checked against the f64 CPU reference on sampled rows, then on a
//! GPU timed (warm-up to the steady clock, CUDA events, median of
//! `--iters`), on FlashAttention-3's shapes (16k tokens, hidden 2048);
//! without a GPU, small ragged problems on the CPU emulator (no timing).
//!
//! ```text
//! attention_ladder [--iters N] [--warmup-ms MS] [--out DIR]
//! ```
use clap::Parser;
use examples::attention_ladder::{run, Problem, STEPS};
use kernel_host::{time_at_steady_clock, Device};
use kernel_ops::attention::Shape;
use std::process::ExitCode;

/// Runs the attention ladder (`kernels::attention_ladder`) step by step,
/// each step checked against the f64 CPU reference on sampled rows and, on
/// a GPU, timed on FlashAttention-3's shapes (16k tokens, hidden 2048);
/// without a GPU, small ragged problems on the CPU emulator (no timing).
/// Writes `attention_ladder.csv` into `--out`.
#[derive(Parser)]
#[command(name = "attention_ladder")]
struct Args {
    /// CUDA-event-timed runs per step; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 20)]
    iters: usize,
    /// Milliseconds of untimed runs first, so the GPU holds its steady clock.
    #[arg(long, value_name = "MS", default_value_t = 400.0)]
    warmup_ms: f64,
    /// Directory `attention_ladder.csv` is written to (created if missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: std::path::PathBuf,
}

fn main() -> ExitCode {
    let Args { iters, warmup_ms, out } = Args::parse();
    match main_inner(iters, warmup_ms, &out) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("FAIL: an output differs from the CPU reference");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main_inner(iters: usize, warmup_ms: f64, out: &std::path::Path) -> Result<bool, Box<dyn std::error::Error>> {
    let dev = Device::gpu_or_emulator()?;
    println!("device: {}", dev.describe());
    let prog = dev.load(&kernels::DEVICE_CODE)?;
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let problems: Vec<(Shape, bool)> = if dev.is_gpu() {
        vec![
            (Shape { batch: 1, seq: 16384, heads: 16, kv_heads: 16, head_dim: 128 }, false),
            (Shape { batch: 1, seq: 16384, heads: 16, kv_heads: 16, head_dim: 128 }, true),
            (Shape { batch: 4, seq: 4096, heads: 32, kv_heads: 32, head_dim: 64 }, false),
        ]
    } else {
        vec![(Shape { batch: 1, seq: 200, heads: 2, kv_heads: 1, head_dim: 64 }, true), (Shape { batch: 1, seq: 150, heads: 1, kv_heads: 1, head_dim: 128 }, false)]
    };
    let mut ok = true;
    let mut csv = String::from("device,batch,seq,heads,head_dim,causal,step,median_ms,tflops,sm_mhz,power_w,o_rel_err\n");
    println!("\n| problem | step | median ms | TFLOP/s | SM clock, power | O rel. error |\n|---|---|---:|---:|---|---:|");
    for (shape, causal) in problems {
        let mut p = Problem::new(&dev, shape, causal, 20)?;
        for (step, name) in STEPS.iter().enumerate() {
            dev.write(&mut p.o, &vec![kernel_device::f16::NAN; shape.q_len()])?;
            run(&dev, &prog, &ops, step, &mut p)?;
            dev.synchronize()?;
            let (mut ms, mut mhz, mut w) = (f64::NAN, f64::NAN, f64::NAN);
            if let Some(gpu) = dev.as_gpu() {
                let mut f = || run(&dev, &prog, &ops, step, &mut p).map_err(|e| kernel_host::Error::InvalidArgument { function: "attention_ladder", problem: e.to_string() });
                let (t, clock) = time_at_steady_clock(gpu, warmup_ms, iters, &mut f)?;
                ms = t.median_ms;
                if let Some(c) = clock {
                    (mhz, w) = (c.sm_mhz, c.power_w);
                }
            }
            let err = p.error(&dev, if dev.is_gpu() { 16 } else { shape.seq })?;
            ok &= err < 5e-3;
            let tf = shape.flops(causal) / ms / 1e9;
            let label = format!("S{} D{}{}", shape.seq, shape.head_dim, if causal { " causal" } else { "" });
            println!("| {label} | {name} | {ms:.4} | {tf:.1} | {mhz:.0} MHz, {w:.0} W | {err:.2e} |");
            csv += &format!("{},{},{},{},{},{},{step},{ms:.5},{tf:.1},{mhz:.0},{w:.1},{err:.3e}\n", dev.describe(), shape.batch, shape.seq, shape.heads, shape.head_dim, causal as u8);
        }
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("attention_ladder.csv"), csv)?;
    Ok(ok)
}
