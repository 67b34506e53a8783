//! `attention_bench --varlen`: attention over packed variable-length
//! sequences (`kernel_ops::attention::varlen`) against the dense kernels at
//! the same total tokens. On a GPU: 16384 tokens as sequences of lengths
//! drawn uniformly from 128..=8192 (fixed seed; the last one takes the
//! rest), 16 heads, head dim 128, f16, causal and not; the varlen forward
//! and backward timed at the steady clock beside the dense forward and
//! backward at 1 x 16384 and 4 x 4096 (TFLOP/s counts only the visible
//! query-key pairs: `4 H D Σ lq lk`, causal halved per sequence; backward
//! 2.5 times that), the forward checked on rows sampled from every
//! sequence of the first and last heads and the backward's gradients
//! checked finite. On the emulator: small ragged problems checked whole
//! against the CPU reference (forward and backward), no timing. Writes
//! `attention_varlen_bench.csv` under `--out`.
use kernel_device::f16;
use kernel_host::{randn_f16, time_at_steady_clock, Device};
use kernel_ops::attention::varlen::{attention_varlen, attention_varlen_backward, reference_varlen_backward, reference_varlen_row, VarlenErrors, VarlenShape};
use kernel_ops::attention::{attention, attention_backward, Options, Shape};

/// The sequence lengths of the GPU problem: uniform in 128..=8192 from a
/// fixed-seed generator until they sum to `total` (the last takes the rest).
pub fn lengths(total: usize, seed: u64) -> Vec<usize> {
    let mut s = seed;
    let mut v = Vec::new();
    let mut left = total;
    while left > 0 {
        // SplitMix64.
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let l = (128 + (z % (8192 - 128 + 1)) as usize).min(left);
        v.push(l);
        left -= l;
    }
    v
}

fn offsets(lens: &[usize]) -> Vec<u32> {
    let mut cu = vec![0u32];
    for l in lens {
        cu.push(cu.last().unwrap() + *l as u32);
    }
    cu
}

fn host(e: kernel_ops::Error) -> kernel_host::Error {
    match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "attention_varlen", problem: other.to_string() },
    }
}

/// Runs `--varlen` (see the module); `Ok(false)` when a check failed.
pub fn run(dev: &Device, iters: usize, warmup_ms: f64, out: &std::path::Path) -> Result<bool, Box<dyn std::error::Error>> {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let gpu = dev.is_gpu();
    // (name, query lengths, key lengths, heads, kv_heads, head_dim)
    let mut problems: Vec<(String, Vec<usize>, Vec<usize>, usize, usize, usize)> = Vec::new();
    if gpu {
        let l = lengths(16384, 38);
        problems.push((format!("16k tokens, {} sequences of 128..8192", l.len()), l.clone(), l, 16, 16, 128));
    } else {
        problems.push(("ragged D64 GQA".into(), vec![0, 1, 100, 6], vec![5, 3, 150, 2], 2, 1, 64));
        problems.push(("ragged D128".into(), vec![70, 1, 9], vec![140, 1, 9], 1, 1, 128));
    }
    let mut csv = String::from("device,name,pass,contender,lengths,heads,head_dim,causal,median_ms,tflops,sm_mhz,power_w,check\n");
    let dev_name = dev.as_gpu().map_or("CPU emulator".to_string(), |g| g.name().to_string());
    println!("\n| problem | pass | contender | median ms | TFLOP/s | SM clock, power | check |\n|---|---|---|---:|---:|---|---|");
    let mut ok = true;
    for (name, lq, lk, heads, kv_heads, d) in problems {
        let (cu_q, cu_k) = (offsets(&lq), offsets(&lk));
        let total_q = *cu_q.last().unwrap() as usize;
        let total_k = *cu_k.last().unwrap() as usize;
        let shape = VarlenShape { batch: lq.len(), total_q, total_k, heads, kv_heads, head_dim: d, max_seqlen_q: *lq.iter().max().unwrap(), max_seqlen_k: *lk.iter().max().unwrap() };
        let lens = lq.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(" ");
        for causal in [false, true] {
            let opts = Options { causal, scale: None };
            let (qh, kh, vh, doh) = (randn_f16(shape.q_len(), 1), randn_f16(shape.kv_len(), 2), randn_f16(shape.kv_len(), 3), randn_f16(shape.q_len(), 4));
            let (q, k, v, d_o) = (dev.upload(&qh)?, dev.upload(&kh)?, dev.upload(&vh)?, dev.upload(&doh)?);
            let (bcq, bck) = (dev.upload(&cu_q)?, dev.upload(&cu_k)?);
            let mut o = dev.upload(&vec![f16::NAN; shape.q_len()])?;
            let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()])?;
            let mut errors = VarlenErrors::new(dev)?;
            let flops = shape.flops(&cu_q, &cu_k, causal);
            let mut row = |pass: &str, contender: &str, ms: f64, fl: f64, cp: Option<kernel_host::ClockPower>, check: &str| {
                let (mhz, w) = (cp.map_or(f64::NAN, |c| c.sm_mhz), cp.map_or(f64::NAN, |c| c.power_w));
                let tf = fl / ms / 1e9;
                println!("| {name}{} | {pass} | {contender} | {ms:.4} | {tf:.1} | {mhz:.0} MHz, {w:.0} W | {check} |", if causal { " causal" } else { "" });
                csv += &format!("{dev_name},{name},{pass},{contender},{lens},{heads},{d},{},{ms:.5},{tf:.1},{mhz:.0},{w:.1},{check}\n", causal as u8);
            };
            // Forward: varlen, then the dense shapes at the same tokens.
            let mut f = || attention_varlen(dev, &ops, &q, &k, &v, &bcq, &bck, &mut o, &mut lse, shape, opts, &mut errors).map_err(host);
            f()?;
            dev.synchronize()?;
            let timed = match dev.as_gpu() {
                Some(g) => Some(time_at_steady_clock(g, warmup_ms, iters, &mut f)?),
                None => None,
            };
            errors.check(dev)?;
            let (og, lg) = (dev.download(&o)?, dev.download(&lse)?);
            let fl = |x: &[f16]| -> Vec<f32> { x.iter().map(|v| v.to_f32()).collect() };
            let (qf, kf, vf) = (fl(&qh), fl(&kh), fl(&vh));
            let (mut num, mut den, mut lse_err) = (0f64, 0f64, 0f64);
            for b in 0..shape.batch {
                let n = lq[b];
                let rows = if gpu { n.min(8) } else { n };
                for h in [0, heads - 1] {
                    for r in 0..rows {
                        let i = if rows >= n { r } else { r * (n - 1) / (rows - 1).max(1) };
                        let (want, want_lse) = reference_varlen_row(&qf, &kf, &vf, &cu_q, &cu_k, shape, opts, (b, h, i));
                        let at = ((cu_q[b] as usize + i) * heads + h) * d;
                        for (g, w) in og[at..at + d].iter().zip(&want) {
                            num += (f64::from(g.to_f32()) - f64::from(*w)).powi(2);
                            den += f64::from(*w).powi(2);
                        }
                        let gl = lg[h * total_q + cu_q[b] as usize + i];
                        if !(want_lse == f32::NEG_INFINITY && gl == want_lse) {
                            lse_err = lse_err.max(f64::from((gl - want_lse).abs()));
                        }
                    }
                }
            }
            let err = if num.is_nan() { f64::INFINITY } else { (num / den.max(1e-30)).sqrt() };
            let good = err < 5e-3 && lse_err < 5e-3;
            ok &= good;
            let check = format!("O {err:.2e}, lse {lse_err:.2e}{}", if good { "" } else { " FAIL" });
            match timed {
                Some((t, cp)) => row("forward", "varlen", t.median_ms, flops, cp, &check),
                None => row("forward", "varlen", f64::NAN, flops, None, &check),
            }
            let dense_shapes: Vec<Shape> = if gpu { vec![Shape { batch: 1, seq: 16384, heads, kv_heads, head_dim: d }, Shape { batch: 4, seq: 4096, heads, kv_heads, head_dim: d }] } else { vec![] };
            for ds in &dense_shapes {
                let (dq_, dk_, dv_) = (dev.upload(&randn_f16(ds.q_len(), 5))?, dev.upload(&randn_f16(ds.kv_len(), 6))?, dev.upload(&randn_f16(ds.kv_len(), 7))?);
                let mut dob = dev.zeros::<f16>(ds.q_len())?;
                let mut dl = dev.zeros::<f32>(ds.lse_len())?;
                let mut g = || attention(dev, &ops, &dq_, &dk_, &dv_, &mut dob, &mut dl, *ds, opts).map_err(host);
                if let Some(gpu) = dev.as_gpu() {
                    let (t, cp) = time_at_steady_clock(gpu, warmup_ms, iters, &mut g)?;
                    row("forward", &format!("dense {} x {}", ds.batch, ds.seq), t.median_ms, ds.flops(causal), cp, "");
                }
                let ddo = dev.upload(&randn_f16(ds.q_len(), 8))?;
                let (mut gq, mut gk, mut gv) = (dev.zeros::<f16>(ds.q_len())?, dev.zeros::<f16>(ds.kv_len())?, dev.zeros::<f16>(ds.kv_len())?);
                let mut gb = || attention_backward(dev, &ops, &dq_, &dk_, &dv_, &dob, &dl, &ddo, &mut gq, &mut gk, &mut gv, *ds, opts).map_err(host);
                if let Some(gpu) = dev.as_gpu() {
                    let (t, cp) = time_at_steady_clock(gpu, warmup_ms, iters, &mut gb)?;
                    row("backward", &format!("dense {} x {}", ds.batch, ds.seq), t.median_ms, 2.5 * ds.flops(causal), cp, "");
                }
            }
            // Backward on the varlen forward's own o and lse.
            let (mut dq, mut dk, mut dv) = (dev.zeros::<f16>(shape.q_len())?, dev.zeros::<f16>(shape.kv_len())?, dev.zeros::<f16>(shape.kv_len())?);
            let mut fb = || attention_varlen_backward(dev, &ops, &q, &k, &v, &o, &lse, &d_o, &bcq, &bck, &mut dq, &mut dk, &mut dv, shape, opts, &mut errors).map_err(host);
            fb()?;
            dev.synchronize()?;
            let timed = match dev.as_gpu() {
                Some(g) => Some(time_at_steady_clock(g, warmup_ms, iters, &mut fb)?),
                None => None,
            };
            errors.check(dev)?;
            let (gq, gk, gv) = (dev.download(&dq)?, dev.download(&dk)?, dev.download(&dv)?);
            let check = if gpu {
                let finite = [&gq, &gk, &gv].iter().all(|g| g.iter().all(|x| x.to_f32().is_finite()));
                ok &= finite;
                if finite { "finite (full check: attention_varlen test, --ignored)".to_string() } else { "non-finite FAIL".to_string() }
            } else {
                let (wq, wk, wv) = reference_varlen_backward(&qf, &kf, &vf, &fl(&doh), &cu_q, &cu_k, shape, opts);
                let mut errs = [0f64; 3];
                for (e, (g, w)) in errs.iter_mut().zip([(&gq, &wq), (&gk, &wk), (&gv, &wv)]) {
                    let (n, dd) = g.iter().zip(w.iter()).fold((0f64, 0f64), |(n, dd), (g, w)| (n + (f64::from(g.to_f32()) - f64::from(*w)).powi(2), dd + f64::from(*w).powi(2)));
                    *e = if n.is_nan() { f64::INFINITY } else { (n / dd.max(1e-30)).sqrt() };
                }
                let good = errs.iter().all(|e| *e < 1e-2);
                ok &= good;
                format!("dq {:.2e}, dk {:.2e}, dv {:.2e}{}", errs[0], errs[1], errs[2], if good { "" } else { " FAIL" })
            };
            match timed {
                Some((t, cp)) => row("backward", "varlen", t.median_ms, 2.5 * flops, cp, &check),
                None => row("backward", "varlen", f64::NAN, 2.5 * flops, None, &check),
            }
        }
    }
    if !gpu {
        println!("(the CPU emulator checks correctness only: no timing)");
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("attention_varlen_bench.csv"), csv)?;
    Ok(ok)
}
