//! `attention_bench --variants`: the forward's variants
//! (`kernel_ops::attention::attention_variant`: sliding window, soft-cap,
//! sinks) beside the plain forward at the same shapes. On a GPU: batch 1,
//! 16384 tokens, f16, head dim 64 (32 heads); the plain
//! kernel, the variant kernel with no variant (its cost: 80-key blocks and
//! the variant code), a causal sliding window of 4096 keys (Mistral's),
//! causal with a soft-cap of 50 (Gemma 2's attention cap) and causal with
//! sinks (gpt-oss). TFLOP/s counts the visible query-key pairs only (`4 H
//! D · pairs`), so a window is credited only with the blocks it computes.
//! Each output is checked finite and the no-variant run against the plain
//! kernel's output; the variants' values are checked against the CPU
//! reference by the GPU test (`kernel-ops/tests/gpu.rs`). On the emulator:
//! one small problem of each variant, checked whole against the reference.
//! Writes `attention_variants_bench.csv` under `--out`.
use kernel_device::f16;
use kernel_host::{randn_f16, rel_frobenius_error, time_at_steady_clock, Device};
use kernel_ops::attention::{attention, attention_variant, reference_variant, Options, Shape, Variant};

fn host(e: kernel_ops::Error) -> kernel_host::Error {
    match e {
        kernel_ops::Error::Runtime(e) => e,
        other => kernel_host::Error::InvalidArgument { function: "attention_variant", problem: other.to_string() },
    }
}

/// Query-key pairs row `i` of `seq` sees.
fn pairs(seq: usize, causal: bool, window: Option<(usize, usize)>) -> f64 {
    (0..seq)
        .map(|i| {
            let (l, r) = window.unwrap_or((seq, seq));
            let hi = if causal { i } else { (i + r).min(seq - 1) };
            (hi - i.saturating_sub(l) + 1) as f64
        })
        .sum()
}

/// Runs `--variants` (see the module); `Ok(false)` when a check failed.
pub fn run(dev: &Device, iters: usize, warmup_ms: f64, out: &std::path::Path) -> Result<bool, Box<dyn std::error::Error>> {
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE)?;
    let gpu = dev.is_gpu();
    let dims: Vec<(usize, usize, usize)> = if gpu { vec![(16384, 32, 64)] } else { vec![(200, 2, 64)] };
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let mut csv = String::from("date,device,seq,heads,head_dim,variant,median_ms,tflops_visible,vs_plain,sm_mhz,power_w,check\n");
    println!("\n| S x H x D | variant | median ms | TFLOP/s (visible pairs) | vs plain | SM clock, power | check |\n|---|---|---:|---:|---:|---|---|");
    let mut ok = true;
    for (seq, heads, d) in dims {
        let shape = Shape { batch: 1, seq, heads, kv_heads: heads, head_dim: d };
        let (q, k, v) = (randn_f16(shape.q_len(), 1), randn_f16(shape.kv_len(), 2), randn_f16(shape.kv_len(), 3));
        let sinks_h: Vec<f32> = (0..heads).map(|h| (h % 5) as f32 - 2.0).collect();
        let (dq, dk, dv, ds) = (dev.upload(&q)?, dev.upload(&k)?, dev.upload(&v)?, dev.upload(&sinks_h)?);
        let mut o = dev.zeros::<f16>(shape.q_len())?;
        let mut lse = dev.zeros::<f32>(shape.lse_len())?;
        let window = (if gpu { 4095 } else { 37 }, 0);
        let causal = Options { causal: true, scale: None };
        // (name, options, variant; None = the plain kernel)
        let runs: Vec<(&str, Options, Option<Variant>)> = vec![
            ("plain", Options::default(), None),
            ("plain causal", causal, None),
            ("variant kernel, no variant", Options::default(), Some(Variant::default())),
            ("causal window", causal, Some(Variant { window: Some(window), ..Variant::default() })),
            ("causal soft-cap 50", causal, Some(Variant { softcap: Some(50.0), ..Variant::default() })),
            ("causal sinks", causal, Some(Variant { sinks: Some(&ds), ..Variant::default() })),
        ];
        let mut plain_o: Option<Vec<f16>> = None;
        let mut t_plain = [f64::NAN; 2];
        for (name, opts, variant) in runs {
            let call = |o: &mut kernel_host::Buffer<f16>, lse: &mut kernel_host::Buffer<f32>| match variant {
                None => attention(dev, &ops, &dq, &dk, &dv, o, lse, shape, opts).map_err(host),
                Some(var) => attention_variant(dev, &ops, &dq, &dk, &dv, o, lse, shape, opts, var).map_err(host),
            };
            call(&mut o, &mut lse)?;
            dev.synchronize()?;
            let got = dev.download(&o)?;
            let mut check = if got.iter().all(|x| x.is_finite()) { "finite".to_string() } else { "NOT FINITE".to_string() };
            let mut good = got.iter().all(|x| x.is_finite());
            if name == "plain" {
                plain_o = Some(got.clone());
            }
            if name == "variant kernel, no variant" {
                let want: Vec<f32> = plain_o.as_ref().unwrap().iter().map(|x| x.to_f32()).collect();
                let e = rel_frobenius_error(&got, &want);
                good &= e < 2e-3;
                check = format!("{e:.1e} from plain");
            }
            if !gpu {
                // Whole against the reference.
                let f = |x: &[f16]| x.iter().map(|v| v.to_f32()).collect::<Vec<f32>>();
                let (w, s, sk) = match variant {
                    Some(var) => (var.window, var.softcap, var.sinks.map(|_| sinks_h.as_slice())),
                    None => (None, None, None),
                };
                let (want, _) = reference_variant(&f(&q), &f(&k), &f(&v), shape, opts, w, s, sk);
                let e = rel_frobenius_error(&got, &want);
                good &= e < 4e-3;
                check = format!("{e:.1e} from the reference");
            }
            ok &= good;
            let vis = pairs(seq, opts.causal, variant.and_then(|v| v.window));
            let flops = 4.0 * heads as f64 * d as f64 * vis;
            if !gpu {
                println!("| {seq} x {heads} x {d} | {name} | - | - | - | emulator | {check}{} |", if good { "" } else { " FAIL" });
                continue;
            }
            let (t, clock) = time_at_steady_clock(dev.as_gpu().unwrap(), warmup_ms, iters, &mut || call(&mut o, &mut lse))?;
            let tf = flops / t.median_ms / 1e9;
            if name.starts_with("plain") {
                t_plain[opts.causal as usize] = tf;
            }
            let vs = tf / t_plain[opts.causal as usize];
            let (mhz, w) = clock.map_or((f64::NAN, f64::NAN), |c| (c.sm_mhz, c.power_w));
            println!("| {seq} x {heads} x {d} | {name} | {:.4} | {tf:.1} | {vs:.3} | {mhz:.0} MHz, {w:.0} W | {check}{} |", t.median_ms, if good { "" } else { " FAIL" });
            csv += &format!("{date},{},{seq},{heads},{d},{name},{:.5},{tf:.1},{vs:.4},{mhz:.0},{w:.1},{check}\n", dev.describe(), t.median_ms);
        }
    }
    if gpu {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("attention_variants_bench.csv"), csv)?;
    }
    Ok(ok)
}
