//! The Hopper GEMM benchmark: every ladder step, the ready `kernel_ops`
//! matmul (autotuned), cuBLAS (`cublasGemmEx`) and cuBLASLt (the fastest of
//! its top heuristic algorithms), in one process, on the same iid N(0, 1)
//! f16 inputs: A `M x K` row-major; B both `N x K` and `K x N` row-major,
//! each contender on the layout it prefers (said in the output). CUDA
//! events; before each timing the contender runs for `--warmup-ms` (default
//! 300) so every contender is timed at the GPU's steady, power-limited
//! clock, then `--warmup` more runs and the median of `--iters` (default 50),
//! with the SM clock and board power sampled (nvidia-smi) over the last
//! 200 ms of the warm-up and the timed runs (reported with TFLOP/s per GHz);
//! `--rounds` (default 3) rounds run every contender once each, in turn,
//! each round starting at another contender, and a contender's time is the
//! median of its round medians. Every
//! contender's output is checked first, on a NaN-poisoned C: relative
//! Frobenius error against an f64 CPU reference of sampled rows, below
//! [`TOLERANCE`] (f16 output rounding alone gives ~3e-4).
//!
//! `--dtype bf16` times the bf16 contenders instead, on the same samples
//! rounded to bf16: `kernel_ops::matmul` (its bf16 kernels, tuned apart
//! from f16), cuBLAS (`cublasGemmEx`, `CUDA_R_16BF`) and cuBLASLt (bf16 in
//! and out); the ladder's steps are f16 only and are left out. The error
//! bound is then [`TOLERANCE_BF16`] (bf16 output rounding: 8 bits).
//!
//! ```text
//! bench [--quick] [--retune] [--iters N] [--warmup N] [--warmup-ms MS] [--rounds N] [--out DIR]
//!       [--shape MxNxK]... [--only SUBSTRING]... [--dtype f16|bf16]
//! ```
//! Writes `bench.md` (a table per shape: TFLOP/s, % of the 989 TFLOP/s
//! dense f16 peak, ratio to cuBLAS and to the best cuBLASLt) and `bench.csv`
//! (every contender) to `--out` (default `.`), and prints the tables.
//! Exit status 0 only if every contender was correct.
use clap::{Parser, ValueEnum};
use examples::hopper::{prepare_matmul, Problem};
use examples::ladder;
use kernel_device::{bf16, f16};
use kernel_host::{time_kernel, Blas, BlasElem, ClockPower, ClockSampler, Device, Gpu, Timing};
use kernel_ops::blaslt::{BLayout, BlasLt, LtElem};
use kernel_ops::{Ctas, Matmul, MatmulElem};
use std::fmt::Write as _;
use std::process::ExitCode;

/// Largest relative Frobenius error accepted.
const TOLERANCE: f64 = 2e-3;
/// Largest relative Frobenius error accepted with `--dtype bf16`.
const TOLERANCE_BF16: f64 = 8e-3;
/// Dense f16 tensor-core peak of an H100 SXM (datasheet, 1830 MHz boost).
const PEAK_TFLOPS: f64 = 989.0;

/// The shape suite as `(M, N, K, label)`; labels give the issue's `M x K x N`.
const SHAPES: [(usize, usize, usize, &str); 14] = [
    (4096, 8192, 4096, "seed: M x K x N = 4096 x 4096 x 8192"),
    (8192, 8192, 8192, "8192^3"),
    (4096, 4096, 4096, "4096^3"),
    (2048, 2048, 2048, "2048^3"),
    (8192, 8192, 1024, "M x K x N = 8192 x 1024 x 8192"),
    (1024, 8192, 8192, "M x K x N = 1024 x 8192 x 8192"),
    (16896, 512, 640, "pipelining guide: M x K x N = 16896 x 640 x 512"),
    (8192, 14336, 4096, "LLM: M x K x N = 8192 x 4096 x 14336"),
    // The decode rows (issue 40): a few tokens against a weight.
    (64, 4096, 4096, "decode: M x K x N = 64 x 4096 x 4096"),
    (64, 8192, 8192, "decode: M x K x N = 64 x 8192 x 8192"),
    (128, 4096, 14336, "decode: M x K x N = 128 x 14336 x 4096"),
    (128, 8192, 8192, "decode: M x K x N = 128 x 8192 x 8192"),
    (256, 4096, 4096, "decode: M x K x N = 256 x 4096 x 4096"),
    (256, 14336, 4096, "decode: M x K x N = 256 x 4096 x 14336"),
];

/// Steps 0 and 1 of the ladder (in `examples::hopper`), with their steps.
const EARLY: [(&str, u32); 3] = [("pipelined<4>", 0), ("warp_specialized<4,8>", 1), ("warp_specialized<4,16>", 1)];

#[derive(Clone)]
struct Row {
    shape: String,
    m: usize,
    n: usize,
    k: usize,
    name: String,
    kind: &'static str,
    step: Option<u32>,
    b_layout: &'static str,
    timing: Timing,
    tflops: f64,
    rel_err: f64,
    /// The median TFLOP/s of each timed round.
    rounds: Vec<f64>,
    /// SM clock and board power sampled (nvidia-smi, every 50 ms) over the
    /// last 200 ms of each round's warm-up and its timed runs.
    clock: Vec<ClockPower>,
}

impl Row {
    /// Median SM clock (MHz) and power (W) over the rounds (NaN when
    /// nvidia-smi gave nothing).
    fn clock_power(&self) -> (f64, f64) {
        let median = |mut v: Vec<f64>| {
            if v.is_empty() {
                return f64::NAN;
            }
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        (median(self.clock.iter().map(|c| c.sm_mhz).collect()), median(self.clock.iter().map(|c| c.power_w).collect()))
    }

    /// TFLOP/s per GHz of the median SM clock: the work done per cycle,
    /// which the power-limited clock does not blur.
    fn tflops_per_ghz(&self) -> f64 {
        self.tflops / (self.clock_power().0 / 1e3)
    }
}

/// The Hopper GEMM benchmark: every ladder step, the autotuned
/// `kernel_ops` matmul, cuBLAS and cuBLASLt in one process on the same
/// inputs, each checked against an f64 CPU reference on a NaN-poisoned C,
/// then timed at the GPU's steady clock in interleaved rounds. Writes
/// `bench.md` and `bench.csv` into `--out`. A GPU is required.
#[derive(Parser)]
#[command(name = "bench")]
struct Args {
    /// Only the first shape (the seed's), unless `--shape` is given.
    #[arg(long)]
    quick: bool,
    /// Autotune `kernel_ops::matmul` again instead of using its cache.
    #[arg(long)]
    retune: bool,
    /// CUDA-event-timed runs per contender and round; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 50)]
    iters: usize,
    /// Untimed runs after the warm-up time, before the timed ones.
    #[arg(long, value_name = "N", default_value_t = 5)]
    warmup: usize,
    /// Directory `bench.md` and `bench.csv` are written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: std::path::PathBuf,
    /// A problem `MxNxK` (repeatable); default: the shape suite.
    #[arg(long = "shape", value_name = "MxNxK", value_parser = kernel_ops::parse_mnk)]
    shape_args: Vec<(usize, usize, usize)>,
    /// The problems, with their labels: `--shape`s or the suite.
    #[arg(skip)]
    shapes: Vec<(usize, usize, usize, String)>,
    /// Only the contenders whose name contains this (repeatable).
    #[arg(long, value_name = "SUBSTRING")]
    only: Vec<String>,
    /// Rounds over every contender, each starting at another; a
    /// contender's time is the median of its round medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,
    /// Milliseconds each contender runs before it is timed, so every one is
    /// timed at the GPU's steady, power-limited clock.
    #[arg(long, value_name = "MS", default_value_t = 300.0)]
    warmup_ms: f64,
    /// The element type timed: f16 (every contender) or bf16 (no ladder steps).
    #[arg(long, value_name = "TYPE", value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
}

/// `--dtype`: the element type of A, B and C.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Dtype {
    F16,
    Bf16,
}

impl Args {
    fn tolerance(&self) -> f64 {
        if self.dtype == Dtype::Bf16 { TOLERANCE_BF16 } else { TOLERANCE }
    }
}

/// An element type the benchmark times: its `kernel_ops::matmul`, cuBLAS
/// and cuBLASLt contenders; the ladder's only on f16.
trait BenchElem: MatmulElem + BlasElem + LtElem
where
    kernel_host::cudarc::cublas::CudaBlas: kernel_host::cudarc::cublas::Gemm<Self>,
{
    /// The problem as an f16 one, for the f16-only ladder contenders.
    fn as_f16(p: &mut Problem<Self>) -> Option<&mut Problem<f16>>;
    /// The cuBLASLt problem of this type.
    fn blaslt(gpu: &Gpu, m: usize, n: usize, k: usize, layout: BLayout) -> kernel_host::Result<BlasLt>;
}
impl BenchElem for f16 {
    fn as_f16(p: &mut Problem<f16>) -> Option<&mut Problem<f16>> {
        Some(p)
    }
    fn blaslt(gpu: &Gpu, m: usize, n: usize, k: usize, layout: BLayout) -> kernel_host::Result<BlasLt> {
        BlasLt::new(gpu, m, n, k, layout)
    }
}
impl BenchElem for bf16 {
    fn as_f16(_: &mut Problem<bf16>) -> Option<&mut Problem<f16>> {
        None
    }
    fn blaslt(gpu: &Gpu, m: usize, n: usize, k: usize, layout: BLayout) -> kernel_host::Result<BlasLt> {
        BlasLt::new_bf16(gpu, m, n, k, layout)
    }
}

/// The parsed command line, with the problems to run.
fn parse_args() -> Args {
    let mut a = Args::parse();
    a.shapes = a.shape_args.iter().map(|&(m, n, k)| (m, n, k, format!("{m}x{n}x{k}"))).collect();
    if a.shapes.is_empty() {
        let n = if a.quick { 1 } else { SHAPES.len() };
        a.shapes = SHAPES[..n].iter().map(|&(m, n, k, l)| (m, n, k, l.to_string())).collect();
    }
    a
}

fn main() -> ExitCode {
    let args = parse_args();
    // GPU-only: timing and cuBLAS. On the emulator `require_gpu` in `run`
    // says so (`Error::GpuOnly`).
    let dev = match Device::gpu_or_emulator() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&dev, &args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn wanted(args: &Args, name: &str) -> bool {
    args.only.is_empty() || args.only.iter().any(|o| name.contains(o.as_str()))
}

fn run(dev: &Device, args: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let gpu = dev.require_gpu("the GEMM benchmark (CUDA-event timing against cuBLAS)")?;
    let (major, minor) = gpu.compute_capability();
    let sms = gpu.sm_count();
    let device = format!("{} (sm_{major}{minor}, {sms} SMs)", gpu.name());
    println!("device: {device}");
    let blas = Blas::new(gpu)?;
    let ops = Matmul::new(dev)?;
    let (blas, ops) = (&blas, &ops);
    let mut rows: Vec<Row> = Vec::new();
    let mut ok = true;
    let (warmup, iters) = (args.warmup, args.iters);
    for (m, n, k, label) in &args.shapes {
        let shape = (*m, *n, *k);
        let shape_rows = if args.dtype == Dtype::Bf16 { bench_shape::<bf16>(dev, gpu, blas, ops, args, shape, label)? } else { bench_shape::<f16>(dev, gpu, blas, ops, args, shape, label)? };
        ok &= shape_rows.iter().all(|r| r.rel_err < args.tolerance());
        print!("{}", table(&shape_rows, args.tolerance()));
        rows.extend(shape_rows);
    }
    std::fs::create_dir_all(&args.out)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let (title, tol) = (if args.dtype == Dtype::Bf16 { "Hopper GEMM benchmark, bf16" } else { "Hopper GEMM benchmark" }, args.tolerance());
    let mut md = format!("# {title}\n\ndevice: {device}\ncommand: `{command}`\nper contender and round: {} ms of warm-up runs (steady clock), {warmup} more, median of {iters} CUDA-event-timed runs; median of {} rounds (all contenders in turn, rotating the start); correctness: relative Frobenius error of sampled rows < {tol:e} for every contender (NaN-poisoned C)\n\n", args.warmup_ms, args.rounds);
    let mut by_shape: Vec<String> = Vec::new();
    for r in &rows {
        if !by_shape.contains(&r.shape) {
            by_shape.push(r.shape.clone());
        }
    }
    for s in &by_shape {
        let rs: Vec<Row> = rows.iter().filter(|r| &r.shape == s).cloned().collect();
        md.push_str(&table(&rs, args.tolerance()));
        md.push('\n');
    }
    std::fs::write(args.out.join("bench.md"), md)?;
    let mut csv = String::from("shape,m,n,k,contender,kind,step,b_layout,median_ms,min_ms,max_ms,iters,tflops,pct_peak,vs_cublas,vs_cublaslt,rel_err,sm_mhz,power_w,tflops_per_ghz,round_tflops\n");
    for r in &rows {
        let (cb, lt) = baselines(&rows, &r.shape);
        let _ = writeln!(
            csv,
            "\"{}\",{},{},{},\"{}\",{},{},{},{:.5},{:.5},{:.5},{},{:.1},{:.1},{:.3},{:.3},{:.2e},{:.0},{:.1},{:.1},{}",
            r.shape, r.m, r.n, r.k, r.name, r.kind, r.step.map(|s| s.to_string()).unwrap_or_default(), r.b_layout,
            r.timing.median_ms, r.timing.min_ms, r.timing.max_ms, r.timing.iters, r.tflops, 100.0 * r.tflops / PEAK_TFLOPS, r.tflops / cb, r.tflops / lt, r.rel_err,
            r.clock_power().0, r.clock_power().1, r.tflops_per_ghz(),
            r.rounds.iter().map(|t| format!("{t:.1}")).collect::<Vec<_>>().join(" ")
        );
    }
    std::fs::write(args.out.join("bench.csv"), csv)?;
    println!("wrote {} and {}", args.out.join("bench.md").display(), args.out.join("bench.csv").display());
    Ok(ok)
}

/// The contenders at one shape on element type `E`, checked and timed:
/// their rows.
#[allow(clippy::too_many_arguments)]
fn bench_shape<E: BenchElem>(dev: &Device, gpu: &Gpu, blas: &Blas, ops: &Matmul<'_>, args: &Args, (m, n, k): (usize, usize, usize), label: &String) -> Result<Vec<Row>, Box<dyn std::error::Error>>
where
    kernel_host::cudarc::cublas::CudaBlas: kernel_host::cudarc::cublas::Gemm<E>,
{
    let (warmup, iters) = (args.warmup, args.iters);
    // The ready matmul with a CTA on every SM (the grid sizing before
    // `Ctas::EvenWaves`), timed beside the default.
    let every_sm = Matmul::new(dev)?.with_ctas(Ctas::EverySm);
    let rows_checked = if m * n * k <= 1 << 31 { 256 } else { 48 };
    let mut p = Problem::<E>::of(dev, m, n, k, rows_checked, 42)?;
    let mut shape_rows: Vec<Row> = Vec::new();
    // C's device address: poisoned in place (0xFFFF is an f16 and a bf16 NaN), so
    // launch closures made once (tensor maps encoded outside the timed
    // loop) stay valid.
    let c_ptr = {
        use kernel_host::cudarc::driver::DevicePtr;
        let (ptr, _guard) = p.c.cuda()?.device_ptr(gpu.stream());
        ptr
    };
    let stream = gpu.stream().cu_stream();
    let poison = || -> kernel_host::Result<()> {
        // SAFETY: C is m x n f16 elements at `c_ptr`, alive for the shape.
        unsafe { kernel_host::cudarc::driver::result::memset_d8_async(c_ptr, 0xFF, m * n * 2, stream) }
            .map_err(|e| kernel_host::Error::InvalidArgument { function: "bench (poison C)", problem: format!("{e:?}") })
    };
    // Checks the contender's output (C poisoned with NaN first) and keeps
    // it for the timed rounds.
    let mut contenders: Vec<(Row, Box<dyn FnMut() -> kernel_host::Result<()> + '_>)> = Vec::new();
    let check = |p: &Problem<E>, name: String, kind: &'static str, step: Option<u32>, b_layout: &'static str, f: &mut dyn FnMut() -> kernel_host::Result<()>| -> Result<Row, Box<dyn std::error::Error>> {
        poison()?;
        f()?;
        gpu.synchronize()?;
        let rel_err = p.error(dev)?;
        let bad = !(rel_err < args.tolerance());
        eprintln!("{label}: {name:<48} err {rel_err:.2e}{}", if bad { "  FAIL" } else { "" });
        let timing = Timing { median_ms: f64::NAN, min_ms: f64::NAN, max_ms: f64::NAN, iters: 0 };
        Ok(Row { shape: label.clone(), m, n, k, name, kind, step, b_layout, timing, tflops: f64::NAN, rel_err, rounds: Vec::new(), clock: Vec::new() })
    };
    macro_rules! measure {
        ($p:expr, $name:expr, $kind:expr, $step:expr, $layout:expr, $f:expr) => {{
            let mut f: Box<dyn FnMut() -> kernel_host::Result<()> + '_> = $f;
            let row = check($p, $name, $kind, $step, $layout, &mut *f)?;
            contenders.push((row, f));
        }};
    }
    // The library and the cuBLAS handles take `&mut C`: a second view of
    // the same buffer through a raw pointer is avoided by giving them the
    // real `&mut p.c` inside the closure and checking through `p` after.
    if wanted(args, "cuBLAS") {
        for (b_name, nn) in [("N x K", false), ("K x N", true)] {
            let pp: *mut Problem<E> = &mut p;
            // SAFETY: `measure` only reads `p` (the check) between calls of
            // the closure, never while it runs; single-threaded.
            measure!(unsafe { &*pp }, "cuBLAS (cublasGemmEx)".into(), "cublas", None, b_name, Box::new(move || {
                let Problem { a, b, b_kn, c, .. } = unsafe { &mut *pp };
                if nn { blas.gemm_nn(m, n, k, a.cuda()?, b_kn.cuda()?, c.cuda_mut()?) } else { blas.gemm_nt(m, n, k, a.cuda()?, b.cuda()?, c.cuda_mut()?) }
            }));
        }
    }
    if wanted(args, "cuBLASLt") {
        for layout in [BLayout::NxK, BLayout::KxN] {
            let mut lt = E::blaslt(gpu, m, n, k, layout)?;
            let pp: *mut Problem<E> = &mut p;
            {
                // SAFETY: as above.
                let Problem { a, b, b_kn, c, .. } = unsafe { &mut *pp };
                let bb = if layout == BLayout::NxK { &*b } else { &*b_kn };
                lt.tune(gpu, a.cuda()?, bb.cuda()?, c.cuda_mut()?, 2, 10)?;
            }
            let name = format!("cuBLASLt (best of {} heuristic algos: #{})", lt.algo_count(), lt.best());
            let b_name = if layout == BLayout::NxK { "N x K" } else { "K x N" };
            measure!(unsafe { &*pp }, name, "cublaslt", None, b_name, Box::new(move || {
                let Problem { a, b, b_kn, c, .. } = unsafe { &mut *pp };
                lt.matmul(a.cuda()?, if layout == BLayout::NxK { b.cuda()? } else { b_kn.cuda()? }, c.cuda_mut()?)
            }));
        }
    }
    // The ladder's steps (f16 kernels): on the f16 problem only.
    let pe: *mut Problem<E> = &mut p;
    // SAFETY: as above; `pf` is `p` itself (E is f16) or absent.
    if let Some(pf) = E::as_f16(unsafe { &mut *pe }) {
        let pf: *mut Problem<f16> = pf;
        for (name, step) in EARLY {
            let tile_n = if step == 0 { 128 } else { 256 };
            if !wanted(args, name) || m % 128 != 0 || n % tile_n != 0 || k % 64 != 0 {
                continue;
            }
            // SAFETY: as above (the closure writes C only while it runs).
            let launch = prepare_matmul(dev, name, unsafe { &mut *pf })?;
            measure!(unsafe { &*pe }, format!("step {step}: {name}"), "ours", Some(step), "N x K", Box::new(move || launch().map(drop)));
        }
        for inst in ladder::instances() {
            if !wanted(args, inst.name) {
                continue;
            }
            // SAFETY: as above.
            let launch = ladder::prepare(dev, inst.name, unsafe { &mut *pf })?;
            measure!(unsafe { &*pe }, inst.name.to_string(), "ours", Some(inst.step), "N x K", Box::new(move || launch().map(drop)));
        }
    }
    if wanted(args, "kernel_ops") {
        let tuned = ops.tune_elem::<E>(m, n, k, args.retune, 3, 10).map_err(|e| e.to_string())?;
        let inst = ops.instance_for_elem::<E>(m, n, k);
        let how = if tuned.len() > 1 { format!("tuned over {}", tuned.len()) } else { "cached".to_string() };
        let pp: *mut Problem<E> = &mut p;
        measure!(unsafe { &*pp }, format!("kernel_ops::matmul ({}, {how})", inst.name), "library", None, "N x K", Box::new(move || {
            // SAFETY: as above.
            let Problem { a, b, c, .. } = unsafe { &mut *pp };
            ops.matmul(a, (m, k), b, (n, k), c).map_err(|e| match e {
                kernel_ops::MatmulError::Cuda(e) => e,
                other => kernel_host::Error::InvalidArgument { function: "bench", problem: other.to_string() },
            })
        }));
        let every_sm = &every_sm;
        measure!(unsafe { &*pp }, format!("kernel_ops::matmul ({}, a CTA on every SM)", inst.name), "library", None, "N x K", Box::new(move || {
            // SAFETY: as above.
            let Problem { a, b, c, .. } = unsafe { &mut *pp };
            every_sm.matmul_with(inst, a, b, c, m, n, k).map_err(|e| match e {
                kernel_ops::MatmulError::Cuda(e) => e,
                other => kernel_host::Error::InvalidArgument { function: "bench", problem: other.to_string() },
            })
        }));
    }
    // Timed rounds: every contender once per round, in order, so clock
    // and power drift spread over all of them; a contender's time is the
    // median of its round medians.
    let count = contenders.len();
    for round in 0..args.rounds {
        // Each round starts at another contender, and each contender first
        // runs for `--warmup-ms` so the GPU is at its steady (power-
        // limited) clock: a contender timed right after the GPU idled
        // (the checks, a previous shape) otherwise gets boost clocks that
        // the others do not (seen: cuBLAS first in a round at 767 TFLOP/s,
        // 670 when timed after other work).
        for i in 0..count {
            let (row, f) = &mut contenders[(i + round * count / args.rounds.max(1)) % count];
            let start = std::time::Instant::now();
            let mut sampler = None;
            while start.elapsed().as_secs_f64() * 1e3 < args.warmup_ms {
                if sampler.is_none() && start.elapsed().as_secs_f64() * 1e3 >= args.warmup_ms - 200.0 {
                    sampler = Some(ClockSampler::start(gpu.ordinal()));
                }
                for _ in 0..8 {
                    f()?;
                }
                gpu.synchronize()?;
            }
            let sampler = sampler.unwrap_or_else(|| ClockSampler::start(gpu.ordinal()));
            let t = time_kernel(gpu, warmup, iters, &mut **f)?;
            if let Some(cp) = sampler.stop() {
                row.clock.push(cp);
            }
            row.rounds.push(t.tflops(m, n, k));
            if row.timing.iters == 0 || t.median_ms < row.timing.min_ms {
                row.timing.min_ms = t.min_ms;
            }
            row.timing.max_ms = if row.timing.iters == 0 { t.max_ms } else { row.timing.max_ms.max(t.max_ms) };
            row.timing.iters += t.iters;
            row.timing.median_ms = if row.timing.median_ms.is_nan() { t.median_ms } else { row.timing.median_ms };
            let mut r = row.rounds.clone();
            r.sort_by(f64::total_cmp);
            row.tflops = r[r.len() / 2];
            row.timing.median_ms = 2.0 * m as f64 * n as f64 * k as f64 / row.tflops / 1e9;
        }
    }
    for (row, _) in contenders.drain(..) {
        eprintln!("{label}: {:<48} {:7.1} TFLOP/s (rounds {:?})", row.name, row.tflops, row.rounds.iter().map(|t| (t * 10.0).round() / 10.0).collect::<Vec<_>>());
        shape_rows.push(row);
    }
    Ok(shape_rows)
}

/// (best cuBLAS, best cuBLASLt) TFLOP/s at a shape (NaN if absent).
fn baselines(rows: &[Row], shape: &str) -> (f64, f64) {
    let best = |kind: &str| rows.iter().filter(|r| r.shape == shape && r.kind == kind).map(|r| r.tflops).fold(f64::NAN, f64::max);
    (best("cublas"), best("cublaslt"))
}

fn table(rows: &[Row], tolerance: f64) -> String {
    let Some(first) = rows.first() else { return String::new() };
    let (cb, lt) = baselines(rows, &first.shape);
    let mut s = format!("\n### {} (M x N x K = {} x {} x {})\n\n| contender | B layout | median ms | TFLOP/s | % of peak | vs best cuBLAS | vs best cuBLASLt | SM clock, power | TFLOP/s per GHz | rel. error |\n|---|---|---:|---:|---:|---:|---:|---|---:|---:|\n", first.shape, first.m, first.n, first.k);
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.4} | {:.1} | {:.1} | {:.3} | {:.3} | {:.0} MHz, {:.0} W | {:.1} | {:.2e}{} |",
            r.name, r.b_layout, r.timing.median_ms, r.tflops, 100.0 * r.tflops / PEAK_TFLOPS, r.tflops / cb, r.tflops / lt,
            r.clock_power().0, r.clock_power().1, r.tflops_per_ghz(), r.rel_err,
            if r.rel_err < tolerance { "" } else { " FAIL" }
        );
    }
    s
}
