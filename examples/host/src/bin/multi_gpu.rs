//! The multi-GPU benchmark (issue 20) on a group of GPUs with peer access:
//!
//! 1. **Shard exchange** (the seed's `exchange_shards`, bulk copies over
//!    NVLink, device `r` -> `r + 1`) and our **ring all-gather**, against
//!    **NCCL's all-gather** of the same shard, per shard size: time and the
//!    bytes each device receives from its peers per second.
//! 2. **All-gather matmul** (`kernel_ops::collective::AllGatherMatmul`: the
//!    ring of copy-engine shard copies under a `kernel_ops::matmul` launch
//!    per shard, `run`, or under one persistent matmul per device that waits
//!    for each shard's arrival flag, `run_persistent`, or one persistent
//!    matmul per device that forwards the shards itself by TMA and signals
//!    each row's arrival on the next device, `run_forwarding`) against
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
//!           [--shapes MxNxK,..] [--reps N] [--skip-exchange]
//! ```
//! Writes `multi_gpu.md` and `multi_gpu.csv` to `--out` (default `.`).
//! Exit status 0 only if every contender was correct.
use clap::Parser;
use kernel_device::{bf16, f16};
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_host::nccl::Nccl;
use kernel_host::cudarc::cublas::{CudaBlas, Gemm};
use kernel_host::{randn_f32, Blas, ClockPower};
use kernel_ops::collective::{AllGatherMatmul, FORWARDING_TILE_ROWS};
use kernel_ops::matmul::MatmulElem;
use kernel_ops::Matmul;
use kernels::peer;
use std::fmt::Write as _;
use std::process::ExitCode;

use examples::group_timing::{clock_text, rounds, Contender, Dtype, Elem, Res, Timing};

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
    /// The all-gather matmul's shapes, `MxNxK,..` (shard rows, B rows, K;
    /// default 4096x8192x8192). Pallas's collective matmul guide uses
    /// 1024x4096x4096.
    #[arg(long, value_name = "SHAPES")]
    shapes: Option<String>,
    /// Back-to-back calls per timed sample (the group synchronized after
    /// each sample): for calls of tens of microseconds, where a host
    /// synchronization per call would dominate.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10000))]
    reps: usize,
    /// Skip the shard exchange section.
    #[arg(long)]
    skip_exchange: bool,
    /// The all-gather matmul's element type (every contender's A, B and C).
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
}

impl Opts {
    fn timing(&self) -> Timing {
        Timing { iters: self.iters, rounds: self.rounds, warmup_ms: self.warmup_ms, reps: self.reps }
    }
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
    let sizes_mib: &[usize] = if o.skip_exchange { &[] } else if o.quick { &[16] } else { &[64, 256] };
    if !sizes_mib.is_empty() {
    writeln!(md, "## Shard exchange and all-gather ({p} devices)\n")?;
    writeln!(md, "GB/s: bytes each device receives from its peers per second (shard x (devices - 1) for the gathers, one shard for the exchange).\n")?;
    writeln!(md, "| shard (MiB) | contender | ms | GB/s | vs NCCL all-gather | clock, power | correct |")?;
    writeln!(md, "|---:|---|---:|---:|---:|---|---|")?;
    }
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
        let mut fs: Vec<Contender<'_>> = vec![
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
        let ts = rounds(&group, o.timing(), &mut fs)?;
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
    let shapes: Vec<(usize, usize, usize)> = match (&o.shapes, o.quick) {
        (Some(list), _) => parse_shapes(list)?,
        (None, true) => vec![(1024, 2048, 2048)],
        (None, false) => vec![(4096, 8192, 8192)],
    };
    for shape in shapes {
        all_ok &= match o.dtype {
            Dtype::F16 => allgather_matmul::<f16>(&group, &nccl, &o, shape, &mut md, &mut csv)?,
            Dtype::Bf16 => allgather_matmul::<bf16>(&group, &nccl, &o, shape, &mut md, &mut csv)?,
        };
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

/// `MxNxK,MxNxK,..` (shard rows, B rows, K) as tuples.
fn parse_shapes(list: &str) -> Res<Vec<(usize, usize, usize)>> {
    list.split(',')
        .map(|t| {
            let v: Vec<usize> = t.split('x').map(|x| x.trim().parse::<usize>()).collect::<Result<_, _>>().map_err(|e| format!("--shapes {t:?}: {e}"))?;
            match v[..] {
                [m, n, k] if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
                _ => Err(format!("--shapes {t:?}: give M x N x K as e.g. 1024x4096x4096 (shard rows, B rows, K), each positive").into()),
            }
        })
        .collect()
}

/// The dense f16 tensor-core peak of an H100/H200 SXM (TFLOP/s), which
/// Pallas's collective matmul guide divides by for its utilization.
const PEAK_TFLOPS: f64 = 989.4;

/// The all-gather matmul at `p x (m x k)` shards of A and an `n x k` B per
/// device: every contender checked against cuBLAS's C, then timed; the
/// table rows into `md` and `csv`. Also timed: cuBLAS and our matmul on
/// the already gathered A (no communication: what overlap can reach), and
/// cuBLAS on one shard, whose time `p` times over is the lower bound
/// Pallas's guide computes (it adds about 6 µs per round for its fences).
/// Returns whether every contender was correct.
fn allgather_matmul<E: Elem>(group: &DeviceGroup, nccl: &Nccl, o: &Opts, (m, n, k): (usize, usize, usize), md: &mut String, csv: &mut String) -> Res<bool>
where
    CudaBlas: Gemm<E>,
{
    let p = group.len();
    let dtype = <E as MatmulElem>::NAME;
    writeln!(md, "\n## All-gather matmul, {}: {p} x ({m} x {k}) shards of A, B {n} x {k} per device\n", dtype)?;
    writeln!(md, "TFLOP/s per device: 2 x {} x {n} x {k} / time; utilization: of the dense 16-bit peak, {PEAK_TFLOPS} TFLOP/s. Time: median over samples of {} back-to-back call(s), the group synchronized after each sample.\n", p * m, o.reps)?;
    writeln!(md, "| contender | ms | TFLOP/s per device | utilization | vs NCCL + cuBLAS | clock, power | correct (rel. error vs cuBLAS) |")?;
    writeln!(md, "|---|---:|---:|---:|---:|---|---|")?;
    let shards: Vec<Vec<E>> = (0..p).map(|j| E::randn(m * k, 200 + j as u64)).collect();
    let bs: Vec<Vec<E>> = (0..p).map(|d| E::randn(n * k, 300 + d as u64)).collect();
    let b = group.upload(&bs)?;
    let a_shard = group.upload(&shards)?;
    let mut a_full = group.zeros::<E>(p * m * k)?;
    let mut a_full2 = group.zeros::<E>(p * m * k)?;
    let mut c_full = group.zeros::<E>(p * m * n)?;
    let mut c_ours_seq = group.zeros::<E>(p * m * n)?;
    let mut c_alone = group.zeros::<E>(p * m * n)?;
    let a_gathered = group.upload(&vec![shards.concat(); p])?;
    let mut c_alone2 = group.zeros::<E>(p * m * n)?;
    let mut c_shard = group.zeros::<E>(m * n)?;
    let mut a_slots: Vec<PeerBuffer<E>> = (0..p)
        .map(|j| group.upload(&(0..p).map(|d| if d == j { shards[j].clone() } else { vec![E::default(); m * k] }).collect::<Vec<_>>()))
        .collect::<Result<_, _>>()?;
    let mut c_blocks: Vec<PeerBuffer<E>> = (0..p).map(|_| group.zeros::<E>(m * n)).collect::<Result<_, _>>()?;
    // run_persistent's and run_forwarding's A: p x m rows per device, its
    // own shard at rows d m (the kernels or the copies fill the others).
    let own_rows = || (0..p).map(|d| (0..p).flat_map(|j| if j == d { shards[j].clone() } else { vec![E::default(); m * k] }).collect::<Vec<_>>()).collect::<Vec<_>>();
    let mut a_gath = group.upload(&own_rows())?;
    let mut c_pers = group.zeros::<E>(p * m * n)?;
    let mut a_fwd = group.upload(&own_rows())?;
    let mut c_fwd = group.zeros::<E>(p * m * n)?;
    let blas: Vec<Blas> = (0..p).map(|d| Blas::new(group.device(d).as_gpu().expect("GPUs"))).collect::<Result<_, _>>()?;
    let mms: Vec<Matmul> = (0..p).map(|d| Matmul::new(group.device(d))).collect::<Result<_, _>>()?;
    let agm = AllGatherMatmul::new(group)?;
    // Our matmul contenders autotuned for their shapes (cuBLAS picks its
    // kernel by its heuristics).
    agm.tune((m, n, k))?;
    let aligned = m % FORWARDING_TILE_ROWS == 0;
    if aligned {
        for (name, ms) in agm.tune_persistent::<E>((m, n, k))? {
            println!("  run_persistent instance {name}: {ms:.3} ms");
        }
    }
    for mm in &mms {
        mm.tune(p * m, n, k, false, 5, 20)?;
    }
    let flops = 2.0 * (p * m) as f64 * n as f64 * k as f64;
    // The contenders (built twice: once for the correctness run, once for
    // the timed rounds).
    macro_rules! contenders {
        () => {{
            let mut v: Vec<Contender<'_>> = vec![
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
                ("AllGatherMatmul::run (copy engines, a matmul per shard, ours)", Box::new(|| Ok(agm.run(&mut a_slots, &b, &mut c_blocks, (m, n, k))?))),
                ("cuBLAS alone on the gathered A (no communication)", Box::new(|| {
                    for d in 0..p {
                        blas[d].gemm_nt(p * m, n, k, a_gathered.part(d).cuda()?, b.part(d).cuda()?, c_alone.part_mut(d).cuda_mut()?)?;
                    }
                    Ok(())
                })),
                ("kernel_ops::matmul alone on the gathered A (no communication)", Box::new(|| {
                    for d in 0..p {
                        mms[d].matmul(a_gathered.part(d), (p * m, k), b.part(d), (n, k), c_alone2.part_mut(d))?;
                    }
                    Ok(())
                })),
                ("cuBLAS on one shard, GPU 0 (x devices = the lower bound)", Box::new(|| {
                    blas[0].gemm_nt(m, n, k, a_shard.part(0).cuda()?, b.part(0).cuda()?, c_shard.part_mut(0).cuda_mut()?)?;
                    Ok(())
                })),
            ];
            if aligned {
                v.push(("AllGatherMatmul::run_persistent (copy engines, one gated kernel, ours)", Box::new(|| Ok(agm.run_persistent(&mut a_gath, &b, &mut c_pers, (m, n, k))?))));
                v.push(("AllGatherMatmul::run_forwarding (one kernel that forwards by TMA, ours)", Box::new(|| Ok(agm.run_forwarding(&mut a_fwd, &b, &mut c_fwd, (m, n, k))?))));
            }
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
    let to_f32 = |v: &[E]| v.iter().map(|&x| x.into()).collect::<Vec<f32>>();
    let err = |c: &PeerBuffer<E>| -> Res<f64> {
        let got = group.download(c)?;
        Ok((0..p).map(|d| kernel_host::rel_frobenius_error_f32(&to_f32(&got[d]), &to_f32(&c_ref[d]))).fold(0.0, f64::max))
    };
    let blocks: Vec<Vec<Vec<E>>> = c_blocks.iter().map(|c| group.download(c)).collect::<Result<_, _>>()?;
    let err_overlap = (0..p)
        .map(|d| {
            let ours: Vec<E> = (0..p).flat_map(|j| blocks[j][d].iter().copied()).collect();
            kernel_host::rel_frobenius_error_f32(&to_f32(&ours), &to_f32(&c_ref[d]))
        })
        .fold(0.0, f64::max);
    let shard_ref = kernel_host::reference_gemm_nt(m.min(64), n, k, &shards[0][..m.min(64) * k], &bs[0]);
    let err_shard = kernel_host::rel_frobenius_error_f32(&to_f32(&group.download(&c_shard)?[0][..m.min(64) * n]), &shard_ref);
    let mut errs = vec![0.0, err(&c_ours_seq)?, err_overlap, err(&c_alone)?, err(&c_alone2)?, err_shard];
    if aligned {
        errs.push(err(&c_pers)?);
        errs.push(err(&c_fwd)?);
    }
    // Within the output's rounding (bf16 keeps 8 bits, f16 11).
    let tolerance = if dtype == "bf16" { 1e-2 } else { 2e-3 };
    let ok: Vec<bool> = errs.iter().map(|&e| e < tolerance).collect();
    let mut fs = contenders!();
    let ts = rounds(group, o.timing(), &mut fs)?;
    // The index of "cuBLAS on one shard".
    const SHARD: usize = 5;
    let bound_ms = p as f64 * ts[SHARD].ms;
    for (i, t) in ts.iter().enumerate() {
        let tf = if i == SHARD { 2.0 * m as f64 * n as f64 * k as f64 } else { flops } / (t.ms * 1e-3) / 1e12;
        writeln!(md, "| {} | {:.4} | {:.1} | {:.0} % | {:.3}x | {} | {} ({:.1e}) |", fs[i].0, t.ms, tf, 100.0 * tf / PEAK_TFLOPS, ts[0].ms / t.ms, clock_text(&t.clock), if ok[i] { "yes" } else { "NO" }, errs[i])?;
        let c = t.clock.unwrap_or(ClockPower { sm_mhz: 0.0, power_w: 0.0, samples: 0 });
        writeln!(csv, "allgather_matmul_{},{},{p}x{m}x{n}x{k},{:.5},{:.1},{:.3},{:.0},{:.0},{}", dtype, fs[i].0, t.ms, tf, ts[0].ms / t.ms, c.sm_mhz, c.power_w, ok[i])?;
    }
    let bound_tf = flops / (bound_ms * 1e-3) / 1e12;
    writeln!(md, "| lower bound: {p} x cuBLAS on one shard | {bound_ms:.4} | {bound_tf:.1} | {:.0} % | {:.3}x | | |", 100.0 * bound_tf / PEAK_TFLOPS, ts[0].ms / bound_ms)?;
    writeln!(csv, "allgather_matmul_{},lower bound ({p} x one shard),{p}x{m}x{n}x{k},{bound_ms:.5},{bound_tf:.1},{:.3},0,0,true", dtype, ts[0].ms / bound_ms)?;
    Ok(ok.iter().all(|&x| x))
}
