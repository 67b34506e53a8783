//! `attention_bench --variants`: the variants
//! (`kernel_ops::attention::attention_variant` and
//! `attention_variant_backward`: sliding window, soft-cap, sinks), forward
//! and backward, beside the plain kernels at the same shapes. On a GPU: batch 1,
//! 16384 tokens, f16, head dim 64 (32 heads) and 128 (16 heads, the forward only: the variants' backward is built at 64); the plain
//! kernel, the variant kernel with no variant (its cost: two consumer warpgroups where the plain f16 kernel has three, and
//! the variant code), a causal sliding window of 4096 keys (Mistral's),
//! causal with a soft-cap of 50 (Gemma 2's attention cap) and causal with
//! sinks (gpt-oss). TFLOP/s counts the visible query-key pairs only (`4 H
//! D · pairs`; the backward 2.5 times that), so a window is credited only
//! with the blocks it computes. Each output and gradient is checked finite
//! and the no-variant run's against the plain kernels'; the variants' values are checked against the CPU
//! reference by the GPU test (`kernel-ops/tests/gpu.rs`). On the emulator:
//! one small problem of each variant, checked whole against the references
//! (the backward's dQ and, with sinks, their gradient).
//! Writes `attention_variants_bench.csv` under `--out`.
use kernel_device::f16;
use kernel_host::{randn_f16, rel_frobenius_error, time_at_steady_clock, Device};
use kernel_ops::attention::{attention, attention_backward, attention_variant, attention_variant_backward, reference_variant, reference_variant_backward, Options, Shape, Variant};

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
    // Head dim 128: the forward only (its backward is not built).
    let dims: Vec<(usize, usize, usize)> = if gpu { vec![(16384, 32, 64), (16384, 16, 128)] } else { vec![(200, 2, 64), (130, 1, 128)] };
    let date = std::process::Command::new("date").arg("-u").arg("+%Y-%m-%dT%H:%M:%SZ").output().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let mut csv = String::from("date,device,seq,heads,head_dim,variant,median_ms,tflops_visible,vs_plain,bwd_median_ms,bwd_tflops_visible,bwd_vs_plain,sm_mhz,power_w,check\n");
    println!("\n| S x H x D | variant | fwd ms | fwd TFLOP/s (visible pairs) | vs plain | bwd ms | bwd TFLOP/s | vs plain | SM clock, power | check |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|");
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
        let d_o = randn_f16(shape.q_len(), 4);
        let bdo = dev.upload(&d_o)?;
        let (mut gq, mut gk, mut gv) = (dev.zeros::<f16>(shape.q_len())?, dev.zeros::<f16>(shape.kv_len())?, dev.zeros::<f16>(shape.kv_len())?);
        let mut gds = dev.zeros::<f32>(heads)?;
        let mut plain_o: Option<Vec<f16>> = None;
        let mut plain_dq: Option<Vec<f16>> = None;
        let mut t_plain = [[f64::NAN; 2]; 2];
        for (name, opts, variant) in runs {
            let call = |o: &mut kernel_host::Buffer<f16>, lse: &mut kernel_host::Buffer<f32>| match variant {
                None => attention(dev, &ops, &dq, &dk, &dv, o, lse, shape, opts).map_err(host),
                Some(var) => attention_variant(dev, &ops, &dq, &dk, &dv, o, lse, shape, opts, var).map_err(host),
            };
            call(&mut o, &mut lse)?;
            let backward = |o_ref: &kernel_host::Buffer<f16>, lse_ref: &kernel_host::Buffer<f32>, gq: &mut kernel_host::Buffer<f16>, gk: &mut kernel_host::Buffer<f16>, gv: &mut kernel_host::Buffer<f16>, gds: &mut kernel_host::Buffer<f32>| match variant {
                None => attention_backward(dev, &ops, &dq, &dk, &dv, o_ref, lse_ref, &bdo, gq, gk, gv, shape, opts).map_err(host),
                Some(var) => attention_variant_backward(dev, &ops, &dq, &dk, &dv, o_ref, lse_ref, &bdo, gq, gk, gv, var.sinks.map(|_| gds), shape, opts, var).map_err(host),
            };
            // The variants' backward is built at head dim 64 only.
            let bwd = d == 64;
            if bwd {
                backward(&o, &lse, &mut gq, &mut gk, &mut gv, &mut gds)?;
            }
            dev.synchronize()?;
            let got = dev.download(&o)?;
            let (got_dq, got_dk, got_dv) = if bwd { (dev.download(&gq)?, dev.download(&gk)?, dev.download(&gv)?) } else { (vec![], vec![], vec![]) };
            let finite = got.iter().chain(&got_dq).chain(&got_dk).chain(&got_dv).all(|x| x.is_finite());
            let mut check = if finite { "finite".to_string() } else { "NOT FINITE".to_string() };
            let mut good = finite;
            if name == "plain" {
                plain_o = Some(got.clone());
                plain_dq = Some(got_dq.clone());
            }
            if name == "variant kernel, no variant" {
                let f = |x: &Option<Vec<f16>>| -> Vec<f32> { x.as_ref().unwrap().iter().map(|x| x.to_f32()).collect() };
                let (e, e_dq) = (rel_frobenius_error(&got, &f(&plain_o)), if bwd { rel_frobenius_error(&got_dq, &f(&plain_dq)) } else { 0.0 });
                good &= e < 2e-3 && e_dq < 1e-2;
                check = format!("O {e:.1e}, dQ {e_dq:.1e} from plain");
            }
            if !gpu {
                // Whole against the references.
                let f = |x: &[f16]| x.iter().map(|v| v.to_f32()).collect::<Vec<f32>>();
                let (w, s, sk) = match variant {
                    Some(var) => (var.window, var.softcap, var.sinks.map(|_| sinks_h.as_slice())),
                    None => (None, None, None),
                };
                let (want, _) = reference_variant(&f(&q), &f(&k), &f(&v), shape, opts, w, s, sk);
                let e = rel_frobenius_error(&got, &want);
                let (e_dq, e_ds) = if bwd {
                    let (want_dq, _, _, want_ds) = reference_variant_backward(&f(&q), &f(&k), &f(&v), &f(&d_o), shape, opts, w, s, sk);
                    let got_ds = dev.download(&gds)?;
                    (rel_frobenius_error(&got_dq, &want_dq), want_ds.iter().zip(&got_ds).map(|(w, g)| f64::from((w - g).abs())).fold(0.0, f64::max))
                } else {
                    (0.0, 0.0)
                };
                good &= e < 4e-3 && e_dq < 1e-2 && e_ds < 1e-2;
                check = format!("O {e:.1e}, dQ {e_dq:.1e}, d_sinks {e_ds:.1e} from the references");
            }
            ok &= good;
            let vis = pairs(seq, opts.causal, variant.and_then(|v| v.window));
            let flops = 4.0 * heads as f64 * d as f64 * vis;
            if !gpu {
                println!("| {seq} x {heads} x {d} | {name} | - | - | - | - | - | - | emulator | {check}{} |", if good { "" } else { " FAIL" });
                continue;
            }
            let g = dev.as_gpu().unwrap();
            let (t, clock_fwd) = time_at_steady_clock(g, warmup_ms, iters, &mut || call(&mut o, &mut lse))?;
            // Without a built backward its columns are NaN.
            let (tb_ms, clock) = if bwd {
                let (tb, c) = time_at_steady_clock(g, warmup_ms, iters, &mut || backward(&o, &lse, &mut gq, &mut gk, &mut gv, &mut gds))?;
                (tb.median_ms, c)
            } else {
                (f64::NAN, clock_fwd)
            };
            let (tf, tfb) = (flops / t.median_ms / 1e9, 2.5 * flops / tb_ms / 1e9);
            if name.starts_with("plain") {
                t_plain[opts.causal as usize] = [tf, tfb];
            }
            let [pf, pb] = t_plain[opts.causal as usize];
            let (mhz, w) = clock.map_or((f64::NAN, f64::NAN), |c| (c.sm_mhz, c.power_w));
            println!(
                "| {seq} x {heads} x {d} | {name} | {:.4} | {tf:.1} | {:.3} | {:.4} | {tfb:.1} | {:.3} | {mhz:.0} MHz, {w:.0} W | {check}{} |",
                t.median_ms,
                tf / pf,
                tb_ms,
                tfb / pb,
                if good { "" } else { " FAIL" }
            );
            csv += &format!("{date},{},{seq},{heads},{d},{name},{:.5},{tf:.1},{:.4},{:.5},{tfb:.1},{:.4},{mhz:.0},{w:.1},{check}\n", dev.describe(), t.median_ms, tf / pf, tb_ms, tfb / pb);
        }
    }
    if gpu {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("attention_variants_bench.csv"), csv)?;
    }
    Ok(ok)
}
