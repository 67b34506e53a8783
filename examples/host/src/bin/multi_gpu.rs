//! The multi-GPU benchmark (issue 20) on a group of GPUs with peer access:
//!
//! 1. **Shard exchange** (the seed's `exchange_shards`, bulk copies over
//!    NVLink, device `r` -> `r + 1`) and our **ring all-gather**, against
//!    **NCCL's all-gather** of the same shard, per shard size: time and the
//!    bytes each device receives from its peers per second.
//! 2. **All-gather matmul** (`kernel_ops::collective::AllGatherMatmul`: the
//!    ring of copy-engine shard copies under a `kernel_ops::matmul` launch
//!    per shard, `run`, or under one persistent matmul per device that waits
//!    for each shard's arrival flag, `run_persistent`) against
//!    **NCCL all-gather, then cuBLAS** on the gathered `A`, and NCCL then our
//!    matmul, at `P x (M x K)` shards of `A` and one `N x K` `B` per device.
//!
//! Every contender on the same iid N(0, 1) inputs, checked (exchange and
//! gathers element for element; the matmul's C against cuBLAS's, relative
//! Frobenius error below 2e-3); warmed to the steady clock (`--warmup-ms`,
//! default 400) before timing; wall time of the work on every device (the
//! group synchronized after each run) over `--iters` (default 50), median;
//! `--rounds` (default 3) interleaved rounds, median of round medians; SM
//! clock and power of GPU 0 sampled during the timed runs.
//!
//! ```text
//! multi_gpu [--devices N] [--iters N] [--rounds N] [--warmup-ms MS] [--out DIR] [--quick]
//! ```
//! Writes `multi_gpu.md` and `multi_gpu.csv` to `--out` (default `.`).
//! Exit status 0 only if every contender was correct.
use clap::Parser;
use kernel_device::f16;
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_host::nccl::Nccl;
use kernel_host::{randn_f16, randn_f32, Blas, ClockPower, ClockSampler};
use kernel_ops::collective::AllGatherMatmul;
use kernel_ops::Matmul;
use kernels::peer;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Benchmarks a group of GPUs with peer access: the seed's shard exchange
/// and our ring all-gather against NCCL's all-gather, then the all-gather
/// matmul (`kernel_ops::collective::AllGatherMatmul`) against NCCL then
/// cuBLAS, every contender checked on the same inputs first. Writes
/// `multi_gpu.md` and `multi_gpu.csv` into `--out`. Needs at least
/// `--devices` GPUs (there is no emulator path).
#[derive(Parser)]
#[command(name = "multi_gpu")]
struct Opts {
    /// How many GPUs of the host to use (GPUs 0 .. N-1).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    devices: usize,
    /// Timed runs per round; the median is reported.
    #[arg(long, value_name = "N", default_value_t = 50)]
    iters: usize,
    /// Interleaved rounds over every contender; a contender's time is the
    /// median of its round medians.
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,
    /// Milliseconds of untimed runs first, so the GPUs hold their steady clock.
    #[arg(long, value_name = "MS", default_value_t = 400.0)]
    warmup_ms: f64,
    /// Directory the Markdown and CSV results are written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: String,
    /// One shard size (16 MiB) and a smaller matmul (1024 x 2048 x 2048).
    #[arg(long)]
    quick: bool,
}

/// One contender's timing: median wall ms, clock and power.
struct Timed {
    ms: f64,
    clock: Option<ClockPower>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Warm up `f` for `warmup_ms`, then time `iters` runs (each followed by
/// the group's synchronization): the median, with GPU 0's clock.
fn time(group: &DeviceGroup, o: &Opts, f: &mut dyn FnMut() -> Res<()>) -> Res<Timed> {
    let start = Instant::now();
    while start.elapsed().as_secs_f64() * 1e3 < o.warmup_ms {
        f()?;
        group.synchronize()?;
    }
    let sampler = ClockSampler::start(0);
    let mut samples = Vec::with_capacity(o.iters);
    for _ in 0..o.iters {
        let t = Instant::now();
        f()?;
        group.synchronize()?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Timed { ms: median(samples), clock: sampler.stop() })
}

/// Runs every contender once per round, starting at another one each
/// round; a contender's time is the median of its round medians.
fn rounds(group: &DeviceGroup, o: &Opts, fs: &mut [(&str, Box<dyn FnMut() -> Res<()> + '_>)]) -> Res<Vec<Timed>> {
    let n = fs.len();
    let mut per: Vec<Vec<Timed>> = (0..n).map(|_| Vec::new()).collect();
    for r in 0..o.rounds {
        for i in 0..n {
            let c = (r + i) % n;
            let t = time(group, o, &mut *fs[c].1)?;
            eprintln!("  round {r}: {:<40} {:8.3} ms", fs[c].0, t.ms);
            per[c].push(t);
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

fn clock_text(c: &Option<ClockPower>) -> String {
    c.map(|c| format!("{:.0} MHz, {:.0} W", c.sm_mhz, c.power_w)).unwrap_or_else(|| "-".into())
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Res<bool> {
    let o = Opts::parse();
    let group = DeviceGroup::gpus(o.devices)?;
    let p = group.len();
    let nccl = Nccl::new(&group)?;
    println!("{}", group.describe());
    let mut md = String::new();
    let mut csv = String::from("section,contender,size,ms,gb_per_s_or_tflops,ratio_to_nccl,sm_mhz,power_w,correct\n");
    let mut all_ok = true;
    let sms = group.device(0).sm_count();
    let prog = group.load(&kernels::DEVICE_CODE)?;
    let exchange = prog.kernel::<peer::exchange_shards>()?;
    let ring = prog.kernel::<peer::ring_all_gather>()?;

    // ----- 1. shard exchange and all-gather -----
    writeln!(md, "## Shard exchange and all-gather ({p} devices)\n")?;
    writeln!(md, "GB/s: bytes each device receives from its peers per second (shard x (devices - 1) for the gathers, one shard for the exchange).\n")?;
    writeln!(md, "| shard (MiB) | contender | ms | GB/s | vs NCCL all-gather | clock, power | correct |")?;
    writeln!(md, "|---:|---|---:|---:|---:|---|---|")?;
    let sizes_mib: &[usize] = if o.quick { &[16] } else { &[64, 256] };
    for &mib in sizes_mib {
        let len = mib * 1024 * 1024 / 4;
        let chunks = len / peer::CHUNK;
        let xs: Vec<Vec<f32>> = (0..p).map(|d| randn_f32(len, 100 + d as u64)).collect();
        let x = group.upload(&xs)?;
        let y = group.zeros::<f32>(len)?;
        let mut gathered = group.zeros::<f32>(p * len)?;
        let ring_out = group.zeros::<f32>(p * len)?;
        let grid = (4 * sms as usize).min(chunks) as u32;
        let sems = group.zeros::<u32>(grid as usize)?;
        let bytes_gather = (p - 1) as f64 * len as f64 * 4.0;
        let bytes_exchange = len as f64 * 4.0;
        // Correctness of each contender on these inputs.
        let want_gather: Vec<f32> = xs.concat();
        exchange.launch(grid, |r| (x.on(r), y.on(r), sems.on(r)))?;
        ring.launch(grid, |r| (x.on(r), ring_out.on(r), sems.on(r)))?;
        nccl.all_gather(&x, &mut gathered)?;
        group.synchronize()?;
        let ys = group.download(&y)?;
        let ok_exchange = (0..p).all(|d| ys[d] == xs[(d + p - 1) % p]);
        let ok_ring = group.download(&ring_out)?.iter().all(|g| *g == want_gather);
        let ok_nccl = group.download(&gathered)?.iter().all(|g| *g == want_gather);
        all_ok &= ok_exchange && ok_ring && ok_nccl;
        let mut fs: Vec<(&str, Box<dyn FnMut() -> Res<()> + '_>)> = vec![
            ("NCCL all-gather", Box::new(|| Ok(nccl.all_gather(&x, &mut gathered)?))),
            ("exchange_shards (bulk copies, ours)", Box::new(|| {
                exchange.launch(grid, |r| (x.on(r), y.on(r), sems.on(r)))?;
                Ok(())
            })),
            ("ring_all_gather (bulk copies, ours)", Box::new(|| {
                ring.launch(grid, |r| (x.on(r), ring_out.on(r), sems.on(r)))?;
                Ok(())
            })),
        ];
        let ts = rounds(&group, &o, &mut fs)?;
        let names: Vec<&str> = fs.iter().map(|f| f.0).collect();
        let nccl_gbs = bytes_gather / (ts[0].ms * 1e-3) / 1e9;
        for (i, t) in ts.iter().enumerate() {
            let bytes = if i == 1 { bytes_exchange } else { bytes_gather };
            let gbs = bytes / (t.ms * 1e-3) / 1e9;
            let ok = [ok_nccl, ok_exchange, ok_ring][i];
            writeln!(md, "| {mib} | {} | {:.3} | {:.1} | {:.2}x | {} | {} |", names[i], t.ms, gbs, gbs / nccl_gbs, clock_text(&t.clock), if ok { "yes" } else { "NO" })?;
            let c = t.clock.unwrap_or(ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 });
            writeln!(csv, "exchange,{},{mib}MiB,{:.4},{:.2},{:.3},{:.0},{:.0},{ok}", names[i], t.ms, gbs, gbs / nccl_gbs, c.sm_mhz, c.power_w)?;
        }
    }

    // ----- 2. all-gather matmul -----
    let (m, n, k) = if o.quick { (1024, 2048, 2048) } else { (4096, 8192, 8192) };
    writeln!(md, "\n## All-gather matmul: {p} x ({m} x {k}) shards of A, B {n} x {k} per device\n")?;
    writeln!(md, "TFLOP/s per device: 2 x {} x {n} x {k} / time.\n", p * m)?;
    writeln!(md, "| contender | ms | TFLOP/s per device | vs NCCL + cuBLAS | clock, power | correct (rel. error vs cuBLAS) |")?;
    writeln!(md, "|---|---:|---:|---:|---|---|")?;
    let shards: Vec<Vec<f16>> = (0..p).map(|j| randn_f16(m * k, 200 + j as u64)).collect();
    let bs: Vec<Vec<f16>> = (0..p).map(|d| randn_f16(n * k, 300 + d as u64)).collect();
    let b = group.upload(&bs)?;
    let a_shard = group.upload(&shards)?;
    let mut a_full = group.zeros::<f16>(p * m * k)?;
    let mut a_full2 = group.zeros::<f16>(p * m * k)?;
    let mut c_full = group.zeros::<f16>(p * m * n)?;
    let mut c_ours_seq = group.zeros::<f16>(p * m * n)?;
    let mut a_slots: Vec<PeerBuffer<f16>> = (0..p)
        .map(|j| group.upload(&(0..p).map(|d| if d == j { shards[j].clone() } else { vec![f16::ZERO; m * k] }).collect::<Vec<_>>()))
        .collect::<Result<_, _>>()?;
    let mut c_blocks: Vec<PeerBuffer<f16>> = (0..p).map(|_| group.zeros::<f16>(m * n)).collect::<Result<_, _>>()?;
    // run_persistent's A: p x m rows per device, its own shard at rows d m.
    let mut a_gath = group.upload(&(0..p).map(|d| (0..p).flat_map(|j| if j == d { shards[j].clone() } else { vec![f16::ZERO; m * k] }).collect::<Vec<_>>()).collect::<Vec<_>>())?;
    let mut c_pers = group.zeros::<f16>(p * m * n)?;
    let blas: Vec<Blas> = (0..p).map(|d| Blas::new(group.device(d).as_gpu().expect("GPUs"))).collect::<Result<_, _>>()?;
    let mms: Vec<Matmul> = (0..p).map(|d| Matmul::new(group.device(d))).collect::<Result<_, _>>()?;
    let agm = AllGatherMatmul::new(&group)?;
    // Both of our matmul contenders autotuned for their shapes (cuBLAS
    // picks its kernel by its heuristics).
    agm.tune((m, n, k))?;
    for (name, ms) in agm.tune_persistent((m, n, k))? {
        println!("  run_persistent instance {name}: {ms:.3} ms");
    }
    for mm in &mms {
        mm.tune(p * m, n, k, false, 5, 20)?;
    }
    let flops = 2.0 * (p * m) as f64 * n as f64 * k as f64;
    // The contenders (built twice: once for the correctness run, once for
    // the timed rounds).
    macro_rules! contenders {
        () => {{
            let v: Vec<(&str, Box<dyn FnMut() -> Res<()> + '_>)> = vec![
        ("NCCL all-gather + cuBLAS", Box::new(|| {
            nccl.all_gather(&a_shard, &mut a_full)?;
            for d in 0..p {
                blas[d].gemm_nt(p * m, n, k, a_full.part(d).cuda()?, b.part(d).cuda()?, c_full.part_mut(d).cuda_mut()?)?;
            }
            Ok(())
        })),
        ("NCCL all-gather + kernel_ops::matmul", Box::new(|| {
            nccl.all_gather(&a_shard, &mut a_full2)?;
            for d in 0..p {
                mms[d].matmul(a_full2.part(d), (p * m, k), b.part(d), (n, k), c_ours_seq.part_mut(d))?;
            }
            Ok(())
        })),
        ("AllGatherMatmul::run (overlapped, a matmul per shard, ours)", Box::new(|| Ok(agm.run(&mut a_slots, &b, &mut c_blocks, (m, n, k))?))),
        ("AllGatherMatmul::run_persistent (overlapped, one gated kernel, ours)", Box::new(|| Ok(agm.run_persistent(&mut a_gath, &b, &mut c_pers, (m, n, k))?))),
            ];
            v
        }};
    }
    let mut fs = contenders!();
    // Correctness: each contender once, compared with cuBLAS's C.
    for f in fs.iter_mut() {
        (f.1)()?;
    }
    group.synchronize()?;
    drop(fs);
    let c_ref = group.download(&c_full)?;
    let c_seq = group.download(&c_ours_seq)?;
    let blocks: Vec<Vec<Vec<f16>>> = c_blocks.iter().map(|c| group.download(c)).collect::<Result<_, _>>()?;
    let to_f32 = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let mut err_seq: f64 = 0.0;
    let mut err_overlap: f64 = 0.0;
    let mut err_pers: f64 = 0.0;
    let c_p = group.download(&c_pers)?;
    for d in 0..p {
        let r = to_f32(&c_ref[d]);
        err_seq = err_seq.max(kernel_host::rel_frobenius_error(&c_seq[d], &r));
        let ours: Vec<f16> = (0..p).flat_map(|j| blocks[j][d].iter().copied()).collect();
        err_overlap = err_overlap.max(kernel_host::rel_frobenius_error(&ours, &r));
        err_pers = err_pers.max(kernel_host::rel_frobenius_error(&c_p[d], &r));
    }
    let ok = [true, err_seq < 2e-3, err_overlap < 2e-3, err_pers < 2e-3];
    all_ok &= ok.iter().all(|&x| x);
    let mut fs = contenders!();
    let ts = rounds(&group, &o, &mut fs)?;
    let errs = [0.0, err_seq, err_overlap, err_pers];
    for (i, t) in ts.iter().enumerate() {
        let tf = flops / (t.ms * 1e-3) / 1e12;
        writeln!(md, "| {} | {:.3} | {:.1} | {:.3}x | {} | {} ({:.1e}) |", fs[i].0, t.ms, tf, ts[0].ms / t.ms, clock_text(&t.clock), if ok[i] { "yes" } else { "NO" }, errs[i])?;
        let c = t.clock.unwrap_or(ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 });
        writeln!(csv, "allgather_matmul,{},{p}x{m}x{n}x{k},{:.4},{:.1},{:.3},{:.0},{:.0},{}", fs[i].0, t.ms, tf, ts[0].ms / t.ms, c.sm_mhz, c.power_w, ok[i])?;
    }
    println!("{md}");
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(format!("{}/multi_gpu.md", o.out), &md)?;
    std::fs::write(format!("{}/multi_gpu.csv", o.out), &csv)?;
    if !all_ok {
        eprintln!("error: a contender gave a wrong result (see the tables)");
    }
    Ok(all_ok)
}
