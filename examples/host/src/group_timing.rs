//! How the multi-GPU benchmarks (`multi_gpu`, `reduce_scatter_bench`) time
//! their contenders on a group of GPUs: each warmed to the steady clock,
//! then the median wall time of samples of back-to-back calls (the group
//! synchronized after each sample), in interleaved rounds, with GPU 0's SM
//! clock and power.
use kernel_device::{bf16, f16};
use kernel_host::cudarc::cublas::{CudaBlas, Gemm};
use kernel_host::cudarc::nccl::NcclType;
use kernel_host::group::DeviceGroup;
use kernel_host::BlasElem;
use kernel_ops::collective::CollectiveElem;
use kernel_host::{ClockPower, ClockSampler};
use std::time::Instant;

/// The benchmarks' `--dtype`: the element type of every contender.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Dtype {
    F16,
    Bf16,
}

/// An element type every contender of the multi-GPU benchmarks takes:
/// ours, cuBLAS's and NCCL's.
pub trait Elem: CollectiveElem + BlasElem + NcclType
where
    CudaBlas: Gemm<Self>,
{
}
impl Elem for f16 {}
impl Elem for bf16 {}

/// A benchmark's result type.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// A contender: its name and one call of it.
pub type Contender<'a> = (&'a str, Box<dyn FnMut() -> Res<()> + 'a>);

/// The timing settings (the benchmarks' `--iters`, `--rounds`,
/// `--warmup-ms`, `--reps`).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Timed samples per round; the median is reported.
    pub iters: usize,
    /// Interleaved rounds over every contender; a contender's time is the
    /// median of its round medians.
    pub rounds: usize,
    /// Milliseconds of untimed calls first, so the GPUs hold their steady
    /// clock.
    pub warmup_ms: f64,
    /// Back-to-back calls per sample (for calls of tens of microseconds,
    /// where a host synchronization per call would dominate).
    pub reps: usize,
}

/// One contender's timing: median wall ms per call, clock and power.
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    /// Milliseconds per call.
    pub ms: f64,
    /// GPU 0's SM clock and power while timed.
    pub clock: Option<ClockPower>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Warms `f` up for `t.warmup_ms`, then times `t.iters` samples of
/// `t.reps` calls (the group synchronized after each sample): the median
/// per call, with GPU 0's clock.
pub fn time(group: &DeviceGroup, t: Timing, f: &mut dyn FnMut() -> Res<()>) -> Res<Timed> {
    let start = Instant::now();
    while start.elapsed().as_secs_f64() * 1e3 < t.warmup_ms {
        f()?;
        group.synchronize()?;
    }
    let sampler = ClockSampler::start(0);
    let mut samples = Vec::with_capacity(t.iters);
    for _ in 0..t.iters {
        let t0 = Instant::now();
        for _ in 0..t.reps {
            f()?;
        }
        group.synchronize()?;
        samples.push(t0.elapsed().as_secs_f64() * 1e3 / t.reps as f64);
    }
    Ok(Timed { ms: median(samples), clock: sampler.stop() })
}

/// Runs every contender once per round, starting at another one each
/// round; a contender's time is the median of its round medians.
pub fn rounds(group: &DeviceGroup, t: Timing, fs: &mut [Contender<'_>]) -> Res<Vec<Timed>> {
    let n = fs.len();
    let mut per: Vec<Vec<Timed>> = (0..n).map(|_| Vec::new()).collect();
    for r in 0..t.rounds {
        for i in 0..n {
            let c = (r + i) % n;
            let timed = time(group, t, &mut *fs[c].1)?;
            eprintln!("  round {r}: {:<48} {:8.3} ms", fs[c].0, timed.ms);
            per[c].push(timed);
        }
    }
    Ok(per
        .into_iter()
        .map(|ts| {
            let ms = median(ts.iter().map(|t| t.ms).collect());
            let clock = ts.iter().find_map(|t| t.clock);
            Timed { ms, clock }
        })
        .collect())
}

/// `"1410 MHz, 690 W"`, or `"-"` when nothing was sampled.
pub fn clock_text(c: &Option<ClockPower>) -> String {
    c.map(|c| format!("{:.0} MHz, {:.0} W", c.sm_mhz, c.power_w)).unwrap_or_else(|| "-".into())
}
