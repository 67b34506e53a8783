//! Host time per kernel launch on a GPU, from the CUDA driver's floor up to
//! `kernel_ops::norms::rms_norm` as the Python package calls it: what a
//! tiny op costs the host at each layer, so the Python numbers
//! (`python/bench/torch_bench.py`) can be read against what the driver
//! alone takes on the same machine.
//!
//! ```text
//! launch_overhead            # a GPU is required
//! ```
//!
//! Each row is the median over 9 loops of the mean host time of one call,
//! 2048 calls per loop. Only the calls are timed: every 256 calls the stream
//! is synchronized outside the timed span, so the launch queue never fills
//! and the GPU's own speed (a tiny kernel runs for a few microseconds) does
//! not enter the figure. The rows:
//! - `cuCtxGetCurrent`: one driver call that does nothing (the floor of any
//!   driver call);
//! - `cuLaunchKernel` / `cuLaunchKernelEx`, an empty kernel with no
//!   parameters, and with 4 (three pointers and a float, as the RMS norm's);
//!   the kernels are PTX JIT-compiled by the driver at start;
//! - `rms_norm, owned buffers`: `kernel_ops::norms::rms_norm` (8 x 1024
//!   f16) on buffers allocated once: the argument checks, the kernel
//!   lookup, the context bind and one `cuLaunchKernelEx` (cudarc's event
//!   tracking off, as the Python package runs);
//! - `rms_norm, borrowed buffers`: the same with the three buffers made by
//!   `Buffer::borrow_gpu` on every call, as `kernel_ops._native.rms_norm`
//!   does for the arrays Python hands it.
use clap::Parser;
use kernel_device::f16;
use kernel_host::cudarc::driver::{sys, DevicePtr};
use kernel_host::{Buffer, Device, Gpu};
use std::ffi::{c_void, CString};
use std::process::ExitCode;
use std::time::Instant;

const LOOPS: usize = 9;
const CALLS: usize = 2048;
const SYNC_EVERY: usize = 256;

/// Two empty kernels, JIT-compiled by the driver.
const PTX: &str = "\
.version 8.0
.target sm_90
.address_size 64
.visible .entry noop() { ret; }
.visible .entry noop4(.param .u64 a, .param .u64 b, .param .u64 c, .param .f32 e) { ret; }
";

fn check(r: sys::CUresult, what: &str) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r:?}"))
    }
}

/// Median over [`LOOPS`] of the mean host microseconds of one `call`, the
/// stream synchronized (untimed) every [`SYNC_EVERY`] calls.
fn us_per_call(mut call: impl FnMut() -> Result<(), String>, sync: &dyn Fn() -> Result<(), String>) -> Result<f64, String> {
    for _ in 0..256 {
        call()?;
    }
    sync()?;
    let mut loops = Vec::with_capacity(LOOPS);
    for _ in 0..LOOPS {
        let mut timed = 0f64;
        for _ in 0..CALLS / SYNC_EVERY {
            let t0 = Instant::now();
            for _ in 0..SYNC_EVERY {
                call()?;
            }
            timed += t0.elapsed().as_secs_f64();
            sync()?;
        }
        loops.push(timed / CALLS as f64 * 1e6);
    }
    loops.sort_by(f64::total_cmp);
    Ok(loops[LOOPS / 2])
}

fn run() -> Result<(), String> {
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            println!("launch_overhead: no GPU here ({e}); skipped (the emulator has no launch overhead to measure)");
            return Ok(());
        }
    };
    // As `kernel_py` (the Python package) does: one stream, ordered with the
    // caller's by events of its own, so cudarc's per-buffer event tracking
    // is off.
    // SAFETY: all work of this program goes to the one stream of `gpu`.
    unsafe { gpu.context().disable_event_tracking() };
    let dev = Device::gpu(gpu);
    let gpu = dev.as_gpu().expect("made from a Gpu");
    let ctx = gpu.context().clone();
    ctx.bind_to_thread().map_err(|e| format!("cuCtxSetCurrent: {e:?}"))?;
    let stream = gpu.stream().cu_stream();
    let sync = || -> Result<(), String> { gpu.synchronize().map_err(|e| e.to_string()) };

    // The empty kernels.
    let src = CString::new(PTX).expect("no NUL in the PTX");
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: out-pointer valid; `src` NUL-terminated PTX; the context is current.
    check(unsafe { sys::cuModuleLoadData(&mut module, src.as_ptr().cast()) }, "cuModuleLoadData (PTX JIT)")?;
    let func = |name: &str| -> Result<sys::CUfunction, String> {
        let mut f: sys::CUfunction = std::ptr::null_mut();
        let n = CString::new(name).expect("no NUL");
        // SAFETY: out-pointer valid, module loaded above, name NUL-terminated.
        check(unsafe { sys::cuModuleGetFunction(&mut f, module, n.as_ptr()) }, "cuModuleGetFunction")?;
        Ok(f)
    };
    let (noop, noop4) = (func("noop")?, func("noop4")?);

    // The RMS norm's buffers: 8 rows of 1024 f16.
    let (rows, cols) = (8usize, 1024usize);
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).map_err(|e| e.to_string())?;
    let x: Buffer<f16> = dev.upload(&vec![f16::from_f32(0.5); rows * cols]).map_err(|e| e.to_string())?;
    let g: Buffer<f16> = dev.upload(&vec![f16::from_f32(1.0); cols]).map_err(|e| e.to_string())?;
    let mut y: Buffer<f16> = dev.upload(&vec![f16::from_f32(0.0); rows * cols]).map_err(|e| e.to_string())?;
    let raw = |b: &Buffer<f16>| -> Result<u64, String> { Ok(b.cuda().map_err(|e| e.to_string())?.device_ptr(gpu.stream()).0) };
    let ptrs = [raw(&x)?, raw(&g)?, raw(&y)?];

    let mut a = ptrs;
    let mut eps = 1e-6f32;
    let mut params: [*mut c_void; 4] = [
        std::ptr::from_mut(&mut a[0]).cast(),
        std::ptr::from_mut(&mut a[1]).cast(),
        std::ptr::from_mut(&mut a[2]).cast(),
        std::ptr::from_mut(&mut eps).cast(),
    ];
    let cfg = sys::CUlaunchConfig {
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 128,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        hStream: stream,
        attrs: std::ptr::null_mut(),
        numAttrs: 0,
    };

    let mut rows_out: Vec<(&str, f64)> = Vec::new();
    let mut cur: sys::CUcontext = std::ptr::null_mut();
    // SAFETY (every raw call below): out-pointers valid, functions of the
    // module loaded above in the current context, `params` points to 4
    // values of the kernel's parameter types that outlive the calls.
    rows_out.push(("cuCtxGetCurrent", us_per_call(|| check(unsafe { sys::cuCtxGetCurrent(&mut cur) }, "cuCtxGetCurrent"), &sync)?));
    rows_out.push((
        "cuLaunchKernel, empty kernel, no parameters",
        us_per_call(|| check(unsafe { sys::cuLaunchKernel(noop, 1, 1, 1, 128, 1, 1, 0, stream, std::ptr::null_mut(), std::ptr::null_mut()) }, "cuLaunchKernel"), &sync)?,
    ));
    rows_out.push((
        "cuLaunchKernel, empty kernel, 4 parameters",
        us_per_call(|| check(unsafe { sys::cuLaunchKernel(noop4, 1, 1, 1, 128, 1, 1, 0, stream, params.as_mut_ptr(), std::ptr::null_mut()) }, "cuLaunchKernel"), &sync)?,
    ));
    rows_out.push((
        "cuLaunchKernelEx, empty kernel, no parameters",
        us_per_call(|| check(unsafe { sys::cuLaunchKernelEx(&cfg, noop, std::ptr::null_mut(), std::ptr::null_mut()) }, "cuLaunchKernelEx"), &sync)?,
    ));
    rows_out.push((
        "cuLaunchKernelEx, empty kernel, 4 parameters",
        us_per_call(|| check(unsafe { sys::cuLaunchKernelEx(&cfg, noop4, params.as_mut_ptr(), std::ptr::null_mut()) }, "cuLaunchKernelEx"), &sync)?,
    ));
    rows_out.push((
        "kernel_ops::norms::rms_norm, owned buffers",
        us_per_call(|| kernel_ops::norms::rms_norm(&ops, &x, &g, &mut y, 1e-6, rows, cols).map_err(|e| e.to_string()), &sync)?,
    ));
    rows_out.push((
        "kernel_ops::norms::rms_norm, borrowed buffers",
        us_per_call(
            || {
                // SAFETY: the three allocations above outlive every call and
                // nothing else uses them meanwhile.
                let (bx, bg, mut by) = unsafe {
                    (
                        Buffer::<f16>::borrow_gpu(&dev, ptrs[0], rows * cols),
                        Buffer::<f16>::borrow_gpu(&dev, ptrs[1], cols),
                        Buffer::<f16>::borrow_gpu(&dev, ptrs[2], rows * cols),
                    )
                };
                let (bx, bg) = (bx.map_err(|e| e.to_string())?, bg.map_err(|e| e.to_string())?);
                let by = by.as_mut().map_err(|e| e.to_string())?;
                kernel_ops::norms::rms_norm(&ops, &bx, &bg, by, 1e-6, rows, cols).map_err(|e| e.to_string())
            },
            &sync,
        )?,
    ));
    // The RMS norm's result is right (x = 0.5, gamma = 1: y = 1).
    let out = dev.download(&y).map_err(|e| e.to_string())?;
    let bad = out.iter().filter(|v| (v.to_f32() - 1.0).abs() > 1e-2).count();

    println!("# host microseconds per call, {} (median of {LOOPS} loops of {CALLS} calls, stream synchronized untimed every {SYNC_EVERY})", gpu.name());
    println!("| call | host us |");
    println!("|---|---:|");
    for (name, us) in &rows_out {
        println!("| {name} | {us:.3} |");
    }
    println!("rms_norm result check: {} of {} outputs off", bad, out.len());
    // SAFETY: the module is unused from here on.
    unsafe { sys::cuModuleUnload(module) };
    if bad > 0 {
        return Err("the RMS norm's output is wrong".into());
    }
    Ok(())
}

/// Measures the host time of one kernel launch on a GPU at each layer,
/// from the CUDA driver's floor (`cuCtxGetCurrent`, `cuLaunchKernel` of an
/// empty kernel) up to `kernel_ops::norms::rms_norm` on borrowed buffers as
/// the Python package calls it. A GPU is required; there are no options.
#[derive(Parser)]
#[command(name = "launch_overhead")]
struct Args {}

fn main() -> ExitCode {
    Args::parse();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("launch_overhead: {e}");
            ExitCode::FAILURE
        }
    }
}
