//! Decode attention (`kernel_ops::attention::decode`) on issue 38's shapes:
//! bf16 queries, head_dim 128, 32 query heads, batch x KV heads x length
//! 8x8x8192, 64x8x2048, 8x4x8192 (8 query heads per KV head), 1x8x32768,
//! 128x8x1024, every sequence full length (as the issue's table); then at
//! 8x8x8192 a paged cache (pages of 16, 64 and 256 keys, shuffled block
//! table over the same memory); an FP8 e4m3 cache at every shape (and at
//! 8x8x8192 with pages of 64 and 16, and with 4 query tokens); 4 query
//! tokens per sequence. Each row is run once and checked
//! against the CPU (f64) on 16 `(b, h, t)` rows spread over the problem,
//! then timed: `--warmup-ms` (default 500) of runs to the steady clock, the
//! median of `--iters` (default 50) CUDA-event-timed runs, SM clock and
//! power sampled. GB/s = K and V bytes read (batch x length x kv_heads x
//! head_dim x element bytes x 2) / time; "vs bf16" is the time of the
//! contiguous bf16 row of the same shape over this row's (FP8's target is
//! 1.8x: the same tokens per second on half the bytes). Writes
//! `decode_bench.csv` into `--out` (default `.`).
//!
//! Without a GPU it checks small ragged problems on the CPU emulator (no
//! timing).
//!
//! ```text
//! decode_bench [--iters N] [--warmup-ms MS] [--out DIR] [--only NAME_SUBSTRING] [--splits LIST] [--kernels LIST]
//! ```
//!
//! `--splits 0,4,8` times every row at each split count of the list (0:
//! the plan's own choice, `decode::splits_for`; counts above the cache's
//! blocks of 64 keys are skipped), to tune that choice. `--kernels
//! wgmma,warp` times each bf16-cache row on each kernel of the list
//! (`auto`, `wgmma`, `warp`: `DecodeKernel`), in turn, in one process; the
//! first one's time is the "vs bf16" base.
use clap::Parser;
use kernel_device::{bf16, E4M3};
use kernel_host::{randn_f32, time_at_steady_clock, Buffer, Device, Program};
use kernel_ops::attention::decode::{reference_row, CacheElem, CacheLayout, Decode, DecodeKernel, DecodeOptions, DecodeShape, KvCache};
use std::process::ExitCode;

/// Largest absolute error of O allowed (bf16 P and output).
const O_BOUND: f32 = 2e-2;
const LSE_BOUND: f32 = 1e-2;

/// Times decode attention (bf16 queries, head dim 128) on issue 38's
/// shapes, then a paged cache, an FP8 cache and several query tokens per
/// sequence, each checked against the f64 CPU reference first, on a GPU;
/// without one it checks small ragged problems on the CPU emulator (no
/// timing). Writes `decode_bench.csv` into `--out`.
#[derive(Parser)]
#[command(name = "decode_bench")]
struct Args {
    /// CUDA-event-timed runs per row; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 50)]
    iters: usize,
    /// Milliseconds of untimed runs first, so the GPU holds its steady clock.
    #[arg(long, value_name = "MS", default_value_t = 500.0)]
    warmup_ms: f64,
    /// Directory `decode_bench.csv` is written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: std::path::PathBuf,
    /// Only the rows whose name contains this.
    #[arg(long, value_name = "NAME_SUBSTRING")]
    only: Option<String>,
    /// Time every row at each split count of this comma-separated list (0:
    /// the plan's own choice; counts above the cache's blocks of 64 keys
    /// are skipped), to tune that choice.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "0")]
    splits: Vec<usize>,
    /// Time each bf16-cache row on each kernel of this comma-separated list
    /// (`auto`: the plan's choice; `wgmma`; `warp`: warp MMAs; `warp8`:
    /// warp MMAs on 8 consumer warps, head dim 128; its rows are skipped
    /// where it does not apply).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "auto")]
    kernels: Vec<KernelArg>,
}

/// A `--kernels` entry.
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
enum KernelArg {
    Auto,
    Wgmma,
    Warp,
    Warp8,
}

impl KernelArg {
    fn kernel(self) -> DecodeKernel {
        match self {
            KernelArg::Auto => DecodeKernel::Auto,
            KernelArg::Wgmma => DecodeKernel::Wgmma,
            KernelArg::Warp => DecodeKernel::WarpMma,
            KernelArg::Warp8 => DecodeKernel::WarpMma8,
        }
    }
}

/// One row of the benchmark.
#[derive(Clone, Copy, Debug)]
struct Row {
    batch: usize,
    kv_heads: usize,
    heads: usize,
    head_dim: usize,
    len: usize,
    tokens: usize,
    page: Option<usize>,
    fp8: bool,
    /// Ragged lengths (emulator rows): from `len / 2 + 1` to `len`.
    ragged: bool,
}

impl Row {
    fn name(&self) -> String {
        let mut s = format!("{}x{}x{}", self.batch, self.kv_heads, self.len);
        if self.heads / self.kv_heads != 4 {
            s += &format!(" G{}", self.heads / self.kv_heads);
        }
        if self.tokens > 1 {
            s += &format!(" T{}", self.tokens);
        }
        if let Some(p) = self.page {
            s += &format!(" paged{p}");
        }
        if self.fp8 {
            s += " fp8";
        }
        s
    }
    fn shape(&self) -> DecodeShape {
        DecodeShape { batch: self.batch, heads: self.heads, kv_heads: self.kv_heads, head_dim: self.head_dim, tokens: self.tokens }
    }
    fn layout(&self) -> CacheLayout {
        match self.page {
            None => CacheLayout::Contiguous { max_len: self.len },
            Some(ps) => CacheLayout::Paged { num_pages: self.batch * self.len / ps, page_size: ps, max_pages: self.len / ps },
        }
    }
    fn lens(&self) -> Vec<u32> {
        (0..self.batch).map(|b| if self.ragged { (self.len - (b * 7919) % (self.len / 2)) as u32 } else { self.len as u32 }).collect()
    }
    /// The contiguous bf16 single-token row of the same sizes.
    fn base(&self) -> (usize, usize, usize) {
        (self.batch, self.kv_heads, self.len)
    }
}

fn rows(gpu: bool) -> Vec<Row> {
    let r = |batch, kv_heads, len| Row { batch, kv_heads, heads: 32, head_dim: 128, len, tokens: 1, page: None, fp8: false, ragged: false };
    if !gpu {
        let e = |batch, kv_heads, heads, head_dim, len| Row { batch, kv_heads, heads, head_dim, len, tokens: 1, page: None, fp8: false, ragged: true };
        return vec![
            e(3, 2, 8, 128, 256),
            Row { page: Some(16), ..e(3, 1, 8, 64, 128) },
            Row { fp8: true, page: Some(64), ..e(2, 2, 8, 64, 192) },
            Row { tokens: 3, ..e(2, 1, 4, 64, 130) },
        ];
    }
    let mut v = vec![r(8, 8, 8192), r(64, 8, 2048), r(8, 4, 8192), r(1, 8, 32768), r(128, 8, 1024)];
    for ps in [16, 64, 256] {
        v.push(Row { page: Some(ps), ..r(8, 8, 8192) });
    }
    // FP8 at every shape (its "vs bf16" beside the same shape's bf16 row).
    for (b, kvh, len) in [(8, 8, 8192), (64, 8, 2048), (8, 4, 8192), (1, 8, 32768), (128, 8, 1024)] {
        v.push(Row { fp8: true, ..r(b, kvh, len) });
    }
    v.push(Row { fp8: true, page: Some(64), ..r(8, 8, 8192) });
    v.push(Row { fp8: true, page: Some(16), ..r(8, 8, 8192) });
    v.push(Row { fp8: true, tokens: 4, ..r(8, 8, 8192) });
    v.push(Row { tokens: 4, ..r(8, 8, 8192) });
    v
}

/// A shuffled permutation of the pages as the block table (each sequence
/// gets `max_pages` distinct pages).
fn block_table(batch: usize, max_pages: usize, seed: u64) -> Vec<i32> {
    let mut t: Vec<i32> = (0..(batch * max_pages) as i32).collect();
    let mut s = seed;
    for i in (1..t.len()).rev() {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        t.swap(i, (s >> 33) as usize % (i + 1));
    }
    t
}

/// The host data of one size of cache (shared by the rows of that size).
struct Data {
    key: (usize, usize, usize, usize, usize),
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    dk: Buffer<bf16>,
    dv: Buffer<bf16>,
}

fn data(dev: &Device, row: &Row, tokens_max: usize) -> Result<Data, Box<dyn std::error::Error>> {
    let n = row.batch * row.len * row.kv_heads * row.head_dim;
    let round = |x: Vec<f32>| -> Vec<f32> { x.into_iter().map(|v| bf16::from_f32(v).to_f32()).collect() };
    let q = round(randn_f32(row.batch * tokens_max * row.heads * row.head_dim, 1));
    let (k, v) = (round(randn_f32(n, 2)), round(randn_f32(n, 3)));
    let up = |x: &[f32]| dev.upload(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>());
    let (dk, dv) = (up(&k)?, up(&v)?);
    Ok(Data { key: (row.batch, row.kv_heads, row.heads, row.head_dim, row.len), q, k, v, dk, dv })
}

/// Runs (and on a GPU times) `row`; returns (median ms, clock, max O error,
/// max lse error, splits).
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn measure<C: CacheElem<bf16>>(dev: &Device, ops: &Program, a: &Args, row: &Row, (want_splits, kernel): (usize, DecodeKernel), d: &Data, cache: KvCache<'_, C>, scales: Option<&[f32]>, kf: &[f32], vf: &[f32]) -> Result<(f64, Option<kernel_host::ClockPower>, f32, f32, usize), Box<dyn std::error::Error>> {
    let (shape, layout) = (row.shape(), row.layout());
    let lens = row.lens();
    let table = row.page.map(|ps| block_table(row.batch, row.len / ps, 7));
    let qf = &d.q[..shape.q_len()];
    let q = dev.upload(&qf.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())?;
    let lens_buf = dev.upload(&lens)?;
    let table_buf = match &table {
        Some(t) => Some(dev.upload(t)?),
        None => None,
    };
    let cache = KvCache { block_table: table_buf.as_ref(), ..cache };
    let mut out = dev.upload(&vec![bf16::from_f32(f32::NAN); shape.q_len()])?;
    let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()])?;
    let mut plan = Decode::new::<bf16, C>(dev, ops, shape, layout, DecodeOptions { splits: (want_splits > 0).then_some(want_splits), kernel, ..DecodeOptions::default() })?;
    let splits = plan.splits();
    plan.run(dev, ops, &q, &cache, &lens_buf, &mut out, &mut lse)?;
    dev.synchronize()?;
    let (got, got_lse) = (dev.download(&out)?, dev.download(&lse)?);
    let (mut err, mut lerr) = (0f32, 0f32);
    let checks = if dev.is_gpu() { 16 } else { shape.lse_len() };
    for i in 0..checks {
        let (b, h, t) = if dev.is_gpu() { ((i * 37) % row.batch, (i * 11 + i / 8) % row.heads, i % row.tokens) } else { (i / (row.heads * row.tokens), (i / row.tokens) % row.heads, i % row.tokens) };
        let (want, want_lse) = reference_row(qf, kf, vf, &lens, table.as_deref(), scales, shape, layout, None, (b, h, t));
        let at = ((b * row.tokens + t) * row.heads + h) * row.head_dim;
        for (g, w) in got[at..at + row.head_dim].iter().zip(&want) {
            let e = (g.to_f32() - w).abs();
            err = if e.is_nan() { f32::INFINITY } else { err.max(e) };
        }
        let gl = got_lse[(b * row.heads + h) * row.tokens + t];
        lerr = if want_lse == gl { lerr } else { lerr.max((gl - want_lse).abs()) };
    }
    let timing = match dev.as_gpu() {
        Some(gpu) => {
            let mut f = || {
                plan.run(dev, ops, &q, &cache, &lens_buf, &mut out, &mut lse).map_err(|e| match e {
                    kernel_ops::Error::Runtime(e) => e,
                    other => kernel_host::Error::InvalidArgument { function: "decode", problem: other.to_string() },
                })
            };
            let (t, clock) = time_at_steady_clock(gpu, a.warmup_ms, a.iters, &mut f)?;
            (t.median_ms, clock)
        }
        None => (f64::NAN, None),
    };
    plan.check(dev)?;
    Ok((timing.0, timing.1, err, lerr, splits))
}

fn run(dev: &Device, a: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    println!("device: {}", dev.describe());
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let dev_name = dev.as_gpu().map_or("CPU emulator".to_string(), |g| g.name().to_string());
    let mut csv = String::from("date,device,name,batch,kv_heads,heads,head_dim,tokens,len,layout,page_size,cache,splits,median_ms,gb_s,vs_bf16,sm_mhz,power_w,o_max_abs_err,lse_max_abs_err\n");
    println!("\n| problem | splits | median ms | GB/s (K+V) | vs bf16 | SM clock, power | O max error | lse max error |\n|---|---:|---:|---:|---:|---|---:|---:|");
    let mut ok = true;
    let mut data_cache: Option<Data> = None;
    let mut base_ms: Vec<((usize, usize, usize), f64)> = Vec::new();
    for row in rows(dev.is_gpu()) {
        let name = row.name();
        if a.only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let key = (row.batch, row.kv_heads, row.heads, row.head_dim, row.len);
        if data_cache.as_ref().is_none_or(|d| d.key != key) {
            // Free the previous size's device buffers first.
            drop(data_cache.take());
            data_cache = Some(data(dev, &row, 8)?);
        }
        let d = data_cache.as_ref().unwrap();
        // An FP8 cache has one kernel.
        let kernels = if row.fp8 { &[KernelArg::Auto][..] } else { &a.kernels[..] };
        for (&want_splits, &kernel) in a.splits.iter().flat_map(|s| kernels.iter().map(move |k| (s, k))) {
            if want_splits > row.len.div_ceil(64) || (kernel == KernelArg::Warp8 && row.head_dim != 128) {
                continue;
            }
            let name = if kernels.len() > 1 { format!("{} [{kernel:?}]", row.name()) } else { row.name() };
            let choice = (want_splits, kernel.kernel());
            let (ms, clock, err, lerr, splits) = if row.fp8 {
                // Per-tensor scales; the reference reads the dequantized values.
                let scales = [0.02f32, 0.025];
                let quant = |x: &[f32], s: f32| -> (Vec<E4M3>, Vec<f32>) { x.iter().map(|&v| E4M3::from_f32(v / s)).map(|e| (e, e.to_f32())).unzip() };
                let ((k8, kf), (v8, vf)) = (quant(&d.k, scales[0]), quant(&d.v, scales[1]));
                let (k, v, s) = (dev.upload(&k8)?, dev.upload(&v8)?, dev.upload(&scales)?);
                measure::<E4M3>(dev, &ops, a, &row, choice, d, KvCache::contiguous(&k, &v).with_scales(&s), Some(&scales), &kf, &vf)?
            } else {
                measure::<bf16>(dev, &ops, a, &row, choice, d, KvCache::contiguous(&d.dk, &d.dv), None, &d.k, &d.v)?
            };
            let bytes = (row.batch * row.len * row.kv_heads * row.head_dim * 2) as f64 * if row.fp8 { 1.0 } else { 2.0 };
            let gbs = bytes / ms / 1e6;
            if row.page.is_none() && !row.fp8 && row.tokens == 1 && want_splits == a.splits[0] && kernel == a.kernels[0] {
                base_ms.push((row.base(), ms));
            }
            let vs = base_ms.iter().find(|(k, _)| *k == row.base()).map_or(f64::NAN, |(_, b)| b / ms);
            let good = err < O_BOUND && lerr < LSE_BOUND;
            ok &= good;
            let (mhz, w) = clock.map_or((f64::NAN, f64::NAN), |c| (c.sm_mhz, c.power_w));
            println!("| {name} | {splits} | {ms:.4} | {gbs:.0} | {vs:.2} | {mhz:.0} MHz, {w:.0} W | {err:.2e} | {lerr:.2e} |{}", if good { "" } else { " FAIL" });
            let (layout, ps) = match row.page {
                Some(p) => ("paged", p),
                None => ("contiguous", 0),
            };
            csv += &format!(
                "{date},{dev_name},{name},{},{},{},{},{},{},{layout},{ps},{},{splits},{ms:.5},{gbs:.1},{vs:.3},{mhz:.0},{w:.1},{err:.3e},{lerr:.3e}\n",
                row.batch,
                row.kv_heads,
                row.heads,
                row.head_dim,
                row.tokens,
                row.len,
                if row.fp8 { "e4m3" } else { "bf16" }
            );
        }
    }
    if !dev.is_gpu() {
        println!("(the CPU emulator checks correctness only: no timing)");
    }
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("decode_bench.csv"), csv)?;
    Ok(ok)
}

fn main() -> ExitCode {
    kernel_ops::bench_main(Args::parse(), run)
}
