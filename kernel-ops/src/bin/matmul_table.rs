//! Writes `kernel_ops::matmul`'s table of tuned choices for the GPU it runs
//! on: the autotuner's sweep (`Matmul::tune_buffers`: every instance, CUDA
//! events, median of `--iters` runs after `--warmup` runs) at each shape
//! of a grid of shape classes, the winners written in the tuning cache's
//! format to `--out`. The library ships the file it wrote on each device
//! measured (`kernel-ops/data/matmul_table.tsv`) and uses it at the first
//! call of a shape it has no tuned winner for
//! (`kernel_ops::matmul::table_instance`).
//!
//! ```text
//! matmul_table --out table.tsv [--m 64,128,..] [--n ..] [--k ..] [--dtype f16|bf16] [--warmup 3] [--iters 10]
//! ```
//!
//! The inputs are iid N(0, 1), made once at the grid's largest sizes; each
//! shape reads prefixes of them. A GPU is required.
use clap::{Parser, ValueEnum};
use kernel_device::{bf16, f16};
use kernel_host::{Buffer, Device};
use kernel_ops::{Matmul, MatmulElem};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Dtype {
    F16,
    Bf16,
}

/// Tunes kernel_ops::matmul over a grid of shapes and writes the winners.
#[derive(Parser, Debug)]
#[command(name = "matmul_table", about)]
struct Args {
    /// The table to write (the tuning cache's format; existing entries of
    /// other shapes are kept).
    #[arg(long)]
    out: PathBuf,
    /// The grid's M values.
    #[arg(long, value_delimiter = ',', default_values_t = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])]
    m: Vec<usize>,
    /// The grid's N values (multiples of 8).
    #[arg(long, value_delimiter = ',', default_values_t = [1024, 2048, 4096, 8192, 16384])]
    n: Vec<usize>,
    /// The grid's K values (multiples of 8).
    #[arg(long, value_delimiter = ',', default_values_t = [512, 1024, 2048, 4096, 8192, 16384])]
    k: Vec<usize>,
    /// The element type tuned.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    /// Untimed runs per instance and shape.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Timed runs per instance and shape (their median counts).
    #[arg(long, default_value_t = 10)]
    iters: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.dtype {
        Dtype::F16 => run::<f16>(&args),
        Dtype::Bf16 => run::<bf16>(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run<E: MatmulElem>(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::gpu_or_emulator()?;
    let gpu = dev.require_gpu("matmul_table (it times the kernels)")?;
    let max = |v: &[usize]| v.iter().copied().max().unwrap_or(0);
    let (mm_, nn, kk) = (max(&args.m), max(&args.n), max(&args.k));
    if mm_ == 0 || nn == 0 || kk == 0 {
        return Err("every grid dimension needs at least one value above 0".into());
    }
    let a = dev.upload(&E::randn(mm_ * kk, 1))?;
    let b = dev.upload(&E::randn(nn * kk, 2))?;
    let c = dev.zeros::<E>(mm_ * nn)?;
    let mm = Matmul::with_cache(&dev, args.out.clone())?;
    let shapes: Vec<(usize, usize, usize)> = args.m.iter().flat_map(|&m| args.n.iter().flat_map(move |&n| args.k.iter().map(move |&k| (m, n, k)))).collect();
    println!("device: {} ({} SMs), {} shapes, {}", gpu.name(), gpu.sm_count(), shapes.len(), E::NAME);
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        // SAFETY: prefixes of buffers this function owns and keeps alive
        // past the views (which are dropped at the end of the iteration).
        let (av, bv, mut cv) = unsafe {
            (
                Buffer::<E>::borrow_gpu(&dev, a.address(), m * k)?,
                Buffer::<E>::borrow_gpu(&dev, b.address(), n * k)?,
                Buffer::<E>::borrow_gpu(&dev, c.address(), m * n)?,
            )
        };
        let results = mm.tune_buffers(&av, &bv, &mut cv, (m, n, k), args.warmup, args.iters)?;
        let (best, t) = results.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1)).ok_or("no instance ran")?;
        let default = kernel_ops::matmul::default_instance(m, n, k, gpu.sm_count());
        let t_default = results.iter().find(|r| r.0.name == default.name).map_or(f64::NAN, |r| r.1);
        println!("{:>3}/{} {m:>6} x {n:>6} x {k:>6}: {:<24} {t:7.1} TFLOP/s (default {} {t_default:.1}, {:.2}x)", i + 1, shapes.len(), best.name, default.name, t / t_default);
    }
    println!("wrote {}", args.out.display());
    Ok(())
}
