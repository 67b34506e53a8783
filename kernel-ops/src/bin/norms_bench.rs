//! Row softmax, layer norm and RMS norm on a GPU: each op, element type and
//! row length checked against the CPU reference (on 64 rows spread over the
//! problem) and timed (CUDA events, median of 50 runs after 5 warm-up),
//! reported in GB/s (bytes read once plus written once) and against the
//! device's DRAM bandwidth (from its memory clock and bus width). Without a
//! GPU the same program runs each op on the CPU emulator at a few rows
//! (correctness only).
//!
//! ```text
//! norms_bench [--quick]      # --quick: 2048 and 8192 columns only
//! ```
//! `bench/norms_torch.py` times torch on the same shapes.
use kernel_device::{bf16, f16};
use kernel_host::cudarc::driver::sys::CUdevice_attribute as A;
use kernel_host::{time_kernel, Buffer, Device, Program};
use kernel_ops::norms::{self, NormElem};
use std::process::ExitCode;

/// Elements per problem on a GPU: 2^25 (64 MB of 16-bit input, 64 MB of
/// output). The emulator runs 4 rows.
const ELEMS: usize = 1 << 25;
const EMULATED_ROWS: usize = 4;

use kernel_host::uniform_f32 as inputs;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Softmax,
    LayerNorm,
    RmsNorm,
}

struct Bufs<T: NormElem> {
    x_host: Vec<T>,
    g_host: Vec<T>,
    b_host: Vec<T>,
    x: Buffer<T>,
    g: Buffer<T>,
    b: Buffer<T>,
    y: Buffer<T>,
}

/// Runs `op` once on `dev`, checks 64 rows (all rows on the emulator)
/// against the CPU reference and, on a GPU, times it; prints one table row.
fn run<T: NormElem>(dev: &Device, ops: &Program, op: Op, cols: usize, peak_gbs: f64, name: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let rows = if dev.is_gpu() { ELEMS / cols } else { EMULATED_ROWS };
    let eps = 1e-5f32;
    let to = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let x_host = to(inputs(rows * cols, cols as u64));
    let g_host = to(inputs(cols, 7).into_iter().map(|v| 1.0 + v / 8.0).collect());
    let b_host = to(inputs(cols, 8));
    let mut bf = Bufs { x: dev.upload(&x_host)?, g: dev.upload(&g_host)?, b: dev.upload(&b_host)?, y: dev.upload(&vec![T::from_f32(f32::NAN); rows * cols])?, x_host, g_host, b_host };
    let launch = |bf: &mut Bufs<T>| -> Result<(), kernel_ops::Error> {
        match op {
            Op::Softmax => norms::softmax(ops, &bf.x, &mut bf.y, rows, cols),
            Op::LayerNorm => norms::layer_norm(ops, &bf.x, &bf.g, &bf.b, &mut bf.y, eps, rows, cols),
            Op::RmsNorm => norms::rms_norm(ops, &bf.x, &bf.g, &mut bf.y, eps, rows, cols),
        }
    };
    launch(&mut bf)?;
    dev.synchronize()?;
    let y = dev.download(&bf.y)?;
    // 64 rows spread over the problem.
    let check_rows: Vec<usize> = (0..64.min(rows)).map(|i| i * rows / 64.min(rows)).collect();
    let f = |v: &[T]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let (gf, bff) = (f(&bf.g_host), f(&bf.b_host));
    let mut err = 0f64;
    for &r in &check_rows {
        let xr = f(&bf.x_host[r * cols..(r + 1) * cols]);
        let want = match op {
            Op::Softmax => norms::softmax_reference(&xr, cols),
            Op::LayerNorm => norms::layer_norm_reference(&xr, &gf, &bff, eps, cols),
            Op::RmsNorm => norms::rms_norm_reference(&xr, &gf, eps, cols),
        };
        err = err.max(norms::max_rel_error(&y[r * cols..(r + 1) * cols], &want));
    }
    let tol = if name == "bf16" { 2e-2 } else { 4e-3 };
    let opname = match op {
        Op::Softmax => "softmax",
        Op::LayerNorm => "layer_norm",
        Op::RmsNorm => "rms_norm",
    };
    let ok = err < tol;
    let verdict = if ok { "" } else { " FAIL" };
    let Some(gpu) = dev.as_gpu() else {
        println!("| {opname} | {name} | {rows} x {cols} | (emulator: not timed) | | | {err:.1e}{verdict} |");
        return Ok(ok);
    };
    let t = time_kernel(gpu, 5, 50, || launch(&mut bf).map_err(|e| match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "norms_bench", problem: other.to_string() },
    }))?;
    let bytes = 2.0 * (rows * cols * std::mem::size_of::<T>()) as f64;
    let gbs = bytes / (t.median_ms * 1e-3) / 1e9;
    println!("| {opname} | {name} | {rows} x {cols} | {:.4} | {gbs:.0} | {:.0} % | {err:.1e}{verdict} |", t.median_ms, 100.0 * gbs / peak_gbs);
    Ok(ok)
}

fn main() -> ExitCode {
    let quick = std::env::args().any(|a| a == "--quick");
    let dev = match Device::gpu_or_emulator() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let peak_gbs = match dev.as_gpu() {
        Some(gpu) => {
            let ctx = gpu.context();
            let (clock_khz, bus_bits) = (ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0), ctx.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).unwrap_or(0));
            // DDR: two transfers per clock.
            let peak = 2.0 * clock_khz as f64 * 1e3 * (bus_bits as f64 / 8.0) / 1e9;
            println!("device: {} ({} SMs), DRAM peak {peak:.0} GB/s ({clock_khz} kHz x {bus_bits} bits x 2)", gpu.name(), gpu.sm_count());
            peak
        }
        None => {
            println!("device: {}
no CUDA GPU: the norm kernels run on the CPU emulator ({EMULATED_ROWS} rows each, correctness only)", dev.describe());
            f64::NAN
        }
    };
    println!("\n| op | dtype | rows x cols | median ms | GB/s | of peak | max rel. error |\n|---|---|---|---:|---:|---:|---:|");
    let r = (|| -> Result<bool, Box<dyn std::error::Error>> {
        let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
        let mut ok = true;
        let cols_list: &[usize] = if quick || !dev.is_gpu() { &[2048, 8192] } else { &norms::COLS };
        for op in [Op::Softmax, Op::LayerNorm, Op::RmsNorm] {
            for &cols in cols_list {
                ok &= run::<f16>(&dev, &ops, op, cols, peak_gbs, "f16")?;
                ok &= run::<bf16>(&dev, &ops, op, cols, peak_gbs, "bf16")?;
            }
        }
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
