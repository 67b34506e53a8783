//! Row softmax, layer norm, RMS norm and the fused residual RMS norm (with
//! `y`, and with an FP8 output scaled per row) on a GPU, at every row
//! length of `norms::BENCH_COLS` (768 .. 16384 and odd multiples of 8),
//! `norms::WIDE_BENCH_COLS` (32768, 65536: a cluster per row) and two
//! widths that are not a multiple of 8 (1001, 50257: one element per
//! access), in f16, bf16 and f32 (the fused norms: f16 and bf16): each
//! checked against the CPU reference (on 64 rows spread over the problem)
//! and timed (CUDA events, median of 50 runs after 5 warm-up), reported in
//! GB/s (bytes read once plus written once) beside the copy rate of the
//! same bytes (`cuMemcpyDtoDAsync` of the input, timed the same way, per
//! problem size), and written as CSV. Without a GPU the same program runs
//! each op on the CPU emulator at a few rows (correctness only).
//!
//! ```text
//! norms_bench [--quick] [--cols 768,65536] [--dtype f32] [--csv PATH]
//! ```
//! `--quick`: 768, 4096, 12288 and 65536 columns only; `--cols` and
//! `--dtype` (comma lists) pick others. `python/bench/norms_bench.py` times
//! torch on the same shapes.
use clap::Parser;
use kernel_device::{bf16, f16, E4M3};
use kernel_host::{time_kernel, Buffer, Device, Program};
use kernel_ops::norms::{self, Fp8Scale, NormElem, NormOut};
use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

/// Elements per problem on a GPU: 2^25 (64 MB of 16-bit input, 64 MB of
/// output; twice that in f32). The emulator runs a few rows.
const ELEMS: usize = 1 << 25;
/// Rows per problem on the emulator (one per cluster row above 16384 columns).
fn emulated_rows(cols: usize) -> usize {
    if cols > norms::FUSED_MAX_COLS {
        1
    } else {
        4
    }
}
/// Widths that are not a multiple of 8: one element per access.
const ODD_BENCH_COLS: [usize; 2] = [1001, 50257];

use kernel_host::uniform_f32 as inputs;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Softmax,
    LayerNorm,
    RmsNorm,
    AddRmsNorm,
    AddRmsNormFp8,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Softmax => "softmax",
            Op::LayerNorm => "layer_norm",
            Op::RmsNorm => "rms_norm",
            Op::AddRmsNorm => "add_rms_norm",
            Op::AddRmsNormFp8 => "add_rms_norm_fp8_rowwise",
        }
    }
    /// Bytes moved per element of `T` (`s` bytes): reads plus writes.
    fn bytes_per_elem(self, s: usize) -> usize {
        match self {
            Op::Softmax | Op::LayerNorm | Op::RmsNorm => 2 * s,
            Op::AddRmsNorm => 4 * s,        // x, residual in; new_residual, y out
            Op::AddRmsNormFp8 => 3 * s + 1, // x, residual in; new_residual, q out
        }
    }
    fn fused(self) -> bool {
        matches!(self, Op::AddRmsNorm | Op::AddRmsNormFp8)
    }
}

struct Bufs<T: NormElem> {
    x: Buffer<T>,
    r: Buffer<T>,
    g: Buffer<T>,
    b: Buffer<T>,
    y: Buffer<T>,
    new_r: Buffer<T>,
    q: Buffer<E4M3>,
    scales: Buffer<f32>,
}

/// An element type of the benchmark: the fused norms where it has them.
trait BenchElem: NormElem {
    /// `norms::add_rms_norm` with `y` or per-row FP8 out (f16, bf16 only).
    fn add_rms_norm(ops: &Program, bf: &mut Bufs<Self>, fp8: bool, eps: f32, rows: usize, cols: usize) -> Result<(), kernel_ops::Error>;
    const FUSED: bool;
}
macro_rules! fused_elem {
    ($($t:ty),*) => {$(
        impl BenchElem for $t {
            fn add_rms_norm(ops: &Program, bf: &mut Bufs<Self>, fp8: bool, eps: f32, rows: usize, cols: usize) -> Result<(), kernel_ops::Error> {
                let out = if fp8 { NormOut::Fp8 { q: &mut bf.q, scales: &mut bf.scales, scale: Fp8Scale::PerRow } } else { NormOut::Y(&mut bf.y) };
                norms::add_rms_norm(ops, &bf.x, &bf.r, &bf.g, &mut bf.new_r, out, eps, rows, cols)
            }
            const FUSED: bool = true;
        }
    )*};
}
fused_elem!(f16, bf16);
impl BenchElem for f32 {
    fn add_rms_norm(_: &Program, _: &mut Bufs<Self>, _: bool, _: f32, _: usize, _: usize) -> Result<(), kernel_ops::Error> {
        unreachable!("the fused norms take f16 and bf16 (FUSED is false)")
    }
    const FUSED: bool = false;
}

/// One table row (and CSV line): returns whether the check passed.
fn run<T: BenchElem>(dev: &Device, ops: &Program, op: Op, cols: usize, copy_gbs: f64, csv: &mut impl Write) -> Result<bool, Box<dyn std::error::Error>> {
    let rows = if dev.is_gpu() { (ELEMS / cols).max(1) } else { emulated_rows(cols) };
    let n = rows * cols;
    let eps = 1e-5f32;
    let name = T::NAME;
    let to = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let x_host = to(inputs(n, cols as u64));
    let r_host = to(inputs(n, cols as u64 + 1));
    let g_host = to(inputs(cols, 7).into_iter().map(|v| 1.0 + v / 8.0).collect());
    let b_host = to(inputs(cols, 8));
    let mut bf = Bufs {
        x: dev.upload(&x_host)?,
        r: dev.upload(&r_host)?,
        g: dev.upload(&g_host)?,
        b: dev.upload(&b_host)?,
        y: dev.upload(&vec![T::from_f32(f32::NAN); n])?,
        new_r: dev.upload(&vec![T::from_f32(f32::NAN); if op.fused() { n } else { 8 }])?,
        q: dev.upload(&vec![E4M3::from_f32(0.0); if op == Op::AddRmsNormFp8 { n } else { 8 }])?,
        scales: dev.upload(&vec![0f32; rows])?,
    };
    let launch = |bf: &mut Bufs<T>| -> Result<(), kernel_ops::Error> {
        match op {
            Op::Softmax => norms::softmax(ops, &bf.x, &mut bf.y, rows, cols),
            Op::LayerNorm => norms::layer_norm(ops, &bf.x, &bf.g, &bf.b, &mut bf.y, eps, rows, cols),
            Op::RmsNorm => norms::rms_norm(ops, &bf.x, &bf.g, &mut bf.y, eps, rows, cols),
            Op::AddRmsNorm => T::add_rms_norm(ops, bf, false, eps, rows, cols),
            Op::AddRmsNormFp8 => T::add_rms_norm(ops, bf, true, eps, rows, cols),
        }
    };
    launch(&mut bf)?;
    dev.synchronize()?;
    let y = dev.download(&bf.y)?;
    let (q, scales) = (dev.download(&bf.q)?, dev.download(&bf.scales)?);
    // 64 rows spread over the problem.
    let check_rows: Vec<usize> = (0..64.min(rows)).map(|i| i * rows / 64.min(rows)).collect();
    let f = |v: &[T]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let (gf, bff) = (f(&g_host), f(&b_host));
    let mut err = 0f64;
    for &r in &check_rows {
        let span = r * cols..(r + 1) * cols;
        let xr = f(&x_host[span.clone()]);
        let want = match op {
            Op::Softmax => norms::softmax_reference(&xr, cols),
            Op::LayerNorm => norms::layer_norm_reference(&xr, &gf, &bff, eps, cols),
            Op::RmsNorm => norms::rms_norm_reference(&xr, &gf, eps, cols),
            Op::AddRmsNorm | Op::AddRmsNormFp8 => norms::add_norm_reference(&xr, &f(&r_host[span.clone()]), &gf, None, eps, cols, |v| T::from_f32(v).to_f32()).1,
        };
        err = err.max(if op == Op::AddRmsNormFp8 {
            let deq: Vec<T> = q[span].iter().map(|v| T::from_f32(v.to_f32() * scales[r])).collect();
            norms::max_rel_error(&deq, &want)
        } else {
            norms::max_rel_error(&y[span], &want)
        });
    }
    let tol = if op == Op::AddRmsNormFp8 { 0.07 } else { T::TOLERANCE };
    let ok = err < tol;
    let verdict = if ok { "" } else { " FAIL" };
    let opname = op.name();
    let Some(gpu) = dev.as_gpu() else {
        println!("| {opname} | {name} | {rows} x {cols} | (emulator: not timed) | | | | {err:.1e}{verdict} |");
        writeln!(csv, "{opname},{name},{rows},{cols},,,,,{err:.3e},{ok}")?;
        return Ok(ok);
    };
    let t = time_kernel(gpu, 5, 50, || {
        launch(&mut bf).map_err(|e| match e {
            kernel_ops::Error::Runtime(e) => e,
            other => kernel_host::Error::InvalidArgument { function: "norms_bench", problem: other.to_string() },
        })
    })?;
    let bytes = (n * op.bytes_per_elem(std::mem::size_of::<T>())) as f64;
    let gbs = bytes / (t.median_ms * 1e-3) / 1e9;
    println!("| {opname} | {name} | {rows} x {cols} | {:.4} | {gbs:.0} | {copy_gbs:.0} | {:.3} | {err:.1e}{verdict} |", t.median_ms, gbs / copy_gbs);
    writeln!(csv, "{opname},{name},{rows},{cols},{:.5},{gbs:.1},{copy_gbs:.1},{:.4},{err:.3e},{ok}", t.median_ms, gbs / copy_gbs)?;
    Ok(ok)
}

/// The copy rate (GB/s, bytes read plus written) of `bytes` bytes,
/// device to device, timed as the ops are.
fn copy_rate(dev: &Device, bytes: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let Some(gpu) = dev.as_gpu() else { return Ok(f64::NAN) };
    let src = dev.zeros::<u8>(bytes)?;
    let mut dst = dev.zeros::<u8>(bytes)?;
    let (s, d) = (src.cuda()?, dst.cuda_mut()?);
    let t = time_kernel(gpu, 5, 50, || gpu.stream().memcpy_dtod(s, d).map_err(|cuda| kernel_host::Error::Cuda { call: "cuMemcpyDtoDAsync (norms_bench copy)", cuda: cuda.into() }))?;
    Ok(2.0 * bytes as f64 / (t.median_ms * 1e-3) / 1e9)
}

/// Times row softmax, layer norm, RMS norm (f16, bf16 and f32) and the
/// fused residual RMS norms (f16, bf16) at every row length of
/// `norms::BENCH_COLS`, 32768 and 65536 (a cluster per row) and two widths
/// that are not a multiple of 8 (1001, 50257), in GB/s beside the copy
/// rate of the same bytes, each checked against the CPU reference first,
/// on a GPU; without one each op runs on the CPU emulator at a few rows
/// (correctness only). Writes a CSV of every row.
#[derive(Parser)]
#[command(name = "norms_bench")]
struct Args {
    /// Only 768, 4096, 12288 and 65536 columns (the emulator's default).
    #[arg(long)]
    quick: bool,
    /// These row lengths instead (comma-separated, 1 to 65536).
    #[arg(long, value_name = "N,..", value_delimiter = ',')]
    cols: Vec<usize>,
    /// Only these element types (comma-separated: f16, bf16, f32).
    #[arg(long, value_name = "T,..", value_delimiter = ',', value_parser = ["f16", "bf16", "f32"])]
    dtype: Vec<String>,
    /// Where the CSV is written.
    #[arg(long = "csv", value_name = "PATH", default_value = "norms_bench.csv")]
    csv_path: String,
}

fn main() -> ExitCode {
    let Args { quick, cols, dtype, csv_path } = Args::parse();
    let dev = match Device::gpu_or_emulator() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match dev.as_gpu() {
        Some(gpu) => println!("device: {} ({} SMs); CSV: {csv_path}", gpu.name(), gpu.sm_count()),
        None => println!("device: {}\nno CUDA GPU: the norm kernels run on the CPU emulator (a few rows each, correctness only); CSV: {csv_path}", dev.describe()),
    }
    println!("\n| op | dtype | rows x cols | median ms | GB/s | copy GB/s | of copy | max rel. error |\n|---|---|---|---:|---:|---:|---:|---:|");
    let want = |t: &str| dtype.is_empty() || dtype.iter().any(|d| d == t);
    let r = (|| -> Result<bool, Box<dyn std::error::Error>> {
        let mut csv = std::io::BufWriter::new(std::fs::File::create(&csv_path)?);
        writeln!(csv, "op,dtype,rows,cols,median_ms,gbs,copy_gbs,of_copy,max_rel_error,ok")?;
        let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
        let mut ok = true;
        let all: Vec<usize> = norms::BENCH_COLS.iter().chain(&norms::WIDE_BENCH_COLS).chain(&ODD_BENCH_COLS).copied().collect();
        let cols_list: Vec<usize> = if !cols.is_empty() {
            cols
        } else if quick || !dev.is_gpu() {
            vec![768, 4096, 12288, 65536]
        } else {
            all
        };
        // Every problem holds about 2^25 elements (rows = 2^25 / cols,
        // rounded down): the copy of the input's bytes is measured once
        // per byte count.
        let mut copies: HashMap<usize, f64> = HashMap::new();
        let mut copy = |bytes: usize| -> Result<f64, Box<dyn std::error::Error>> {
            if let Some(&c) = copies.get(&bytes) {
                return Ok(c);
            }
            let c = copy_rate(&dev, bytes)?;
            copies.insert(bytes, c);
            Ok(c)
        };
        for &c in &cols_list {
            let rows = (ELEMS / c).max(1);
            let (copy2, copy4) = (copy(rows * c * 2)?, if want("f32") { copy(rows * c * 4)? } else { f64::NAN });
            for op in [Op::Softmax, Op::LayerNorm, Op::RmsNorm, Op::AddRmsNorm, Op::AddRmsNormFp8] {
                // The fused norms: multiples of 8 up to 16384, f16 and bf16.
                let fused_ok = c % norms::COLS_MULTIPLE == 0 && c <= norms::FUSED_MAX_COLS;
                if op.fused() && !fused_ok {
                    continue;
                }
                if want("f16") {
                    ok &= run::<f16>(&dev, &ops, op, c, copy2, &mut csv)?;
                }
                if want("bf16") {
                    ok &= run::<bf16>(&dev, &ops, op, c, copy2, &mut csv)?;
                }
                if want("f32") && (!op.fused() || f32::FUSED) {
                    ok &= run::<f32>(&dev, &ops, op, c, copy4, &mut csv)?;
                }
            }
        }
        csv.flush()?;
        Ok(ok)
    })();
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
