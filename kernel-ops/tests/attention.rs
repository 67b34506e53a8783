//! Attention forward (`kernel_ops::attention::attention`,
//! `kernel_ops_kernels::attention::attention_fwd`) on the CPU emulator
//! through the entry point, race checks on, against
//! `kernel_ops::attention::reference`: ragged sequence lengths (a partial
//! last Q block and K/V block, TMA zero fill and clipped stores), enough
//! K/V blocks that the stage ring wraps, causal and not, GQA, both head
//! dims, under 4 schedules; and every bad input refused with its rule, O
//! untouched.
use kernel_device::f16;
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernel_ops::attention::{attention, reference, Options, Shape};

fn randn(len: usize, seed: u64) -> Vec<f16> {
    kernel_host::randn_f16(len, seed)
}

fn to_f32(x: &[f16]) -> Vec<f32> {
    x.iter().map(|v| v.to_f32()).collect()
}

/// Runs one problem on the emulator with `seed`'s schedule and returns the
/// relative Frobenius errors of O and the largest absolute error of the
/// log-sum-exp against the reference.
fn run(shape: Shape, opts: Options, seed: u64) -> (f64, f64) {
    run_with(shape, opts, seed, None)
}

/// [`run`] with the instance `config` (`None`: the entry point's default).
fn run_with(shape: Shape, opts: Options, seed: u64, config: Option<kernel_ops::attention::Config>) -> (f64, f64) {
    let (q, k, v) = (randn(shape.q_len(), 1), randn(shape.kv_len(), 2), randn(shape.kv_len(), 3));
    let (want_o, want_lse) = reference(&to_f32(&q), &to_f32(&k), &to_f32(&v), shape, opts);
    let dev = Device::emulator_with(Emulator::new(seed));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let (dq, dk, dv) = (dev.upload(&q).unwrap(), dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
    let mut o = dev.upload(&vec![f16::NAN; shape.q_len()]).unwrap();
    let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
    match config {
        None => attention(&dev, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts),
        Some(c) => kernel_ops::attention::attention_with(&dev, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts, c),
    }
    .unwrap_or_else(|e| panic!("{shape:?} {opts:?} seed {seed}: {e}"));
    let o = dev.download(&o).unwrap();
    assert!(o.iter().all(|x| !x.is_nan()), "{shape:?}: an output element was not written");
    let lse = dev.download(&lse).unwrap();
    let lse_err = lse.iter().zip(&want_lse).map(|(a, b)| f64::from((a - b).abs())).fold(0.0, f64::max);
    (kernel_host::rel_frobenius_error(&o, &want_o), lse_err)
}

/// P is rounded to f16 before `P V` (as every FlashAttention does) and O
/// once more at the end: relative errors near 1e-3.
const O_BOUND: f64 = 4e-3;
const LSE_BOUND: f64 = 2e-3;

#[test]
fn attention_matches_the_cpu_reference_on_the_emulator() {
    // seq 300: Q blocks of 128 + 128 + 44, K/V blocks of 128 + 128 + 44 (the
    // D = 128 instance has 2 stages, so its third block reuses slot 0).
    let cases = [
        (Shape { batch: 1, seq: 300, heads: 1, kv_heads: 1, head_dim: 128 }, Options::default()),
        (Shape { batch: 2, seq: 200, heads: 2, kv_heads: 1, head_dim: 64 }, Options { causal: true, scale: Some(0.2) }),
        // D 256: blocks of 64 keys through 2 slots (3 blocks: the ring wraps).
        (Shape { batch: 1, seq: 150, heads: 1, kv_heads: 1, head_dim: 256 }, Options { causal: true, scale: None }),
    ];
    for (i, (shape, opts)) in cases.into_iter().enumerate() {
        for seed in 0..2 {
            let (o_err, lse_err) = run(shape, opts, 2 * i as u64 + seed);
            assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "{shape:?} {opts:?} seed {seed}: O error {o_err:.2e}, lse error {lse_err:.2e}");
        }
    }
}

#[test]
fn causal_attention_with_ragged_blocks_matches_the_reference() {
    // 5 K/V blocks for the last Q block of D = 64 (3 stages: the ring wraps),
    // the diagonal inside blocks, a 4-row tail.
    let shape = Shape { batch: 1, seq: 516, heads: 1, kv_heads: 1, head_dim: 64 };
    let (o_err, lse_err) = run(shape, Options { causal: true, scale: None }, 7);
    assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "O error {o_err:.2e}, lse error {lse_err:.2e}");
}

#[test]
fn attention_refuses_bad_inputs_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let ok = Shape { batch: 1, seq: 16, heads: 4, kv_heads: 2, head_dim: 64 };
    let cases: [(Shape, Options, [usize; 5], &str); 6] = [
        (Shape { head_dim: 96, ..ok }, Options::default(), [0; 5], "head_dim = 96: the kernel is built for head_dim in [64, 128, 256]"),
        (Shape { kv_heads: 3, ..ok }, Options::default(), [0; 5], "heads = 4, kv_heads = 3: kv_heads must divide heads"),
        (Shape { seq: 0, ..ok }, Options::default(), [0; 5], "seq = 0: every size must be at least 1"),
        (ok, Options::default(), [4096, 2047, 2048, 4096, 64], "`k` holds 2047 elements; batch x seq x kv_heads x head_dim = 2048 expected"),
        (ok, Options::default(), [4096, 2048, 2048, 4096, 63], "`lse` holds 63 elements; batch x heads x seq = 64 expected"),
        (ok, Options { causal: false, scale: Some(f32::NAN) }, [4096, 2048, 2048, 4096, 64], "scale = NaN: the softmax scale must be finite and positive"),
    ];
    for (shape, opts, lens, rule) in cases {
        let lens = if lens == [0; 5] { [shape.q_len(), shape.kv_len(), shape.kv_len(), shape.q_len(), shape.lse_len()] } else { lens };
        let buf = |len: usize| dev.upload(&vec![f16::ONE; len]).unwrap();
        let (q, k, v) = (buf(lens[0]), buf(lens[1]), buf(lens[2]));
        let mut o = dev.upload(&vec![f16::from_f32(7.0); lens[3]]).unwrap();
        let mut lse = dev.upload(&vec![0f32; lens[4]]).unwrap();
        let e = attention(&dev, &ops, &q, &k, &v, &mut o, &mut lse, shape, opts).expect_err(rule).to_string();
        assert!(e.contains("attention") && e.contains(rule), "{shape:?}: {e}");
        assert!(dev.download(&o).unwrap().iter().all(|v| v.to_f32() == 7.0), "{shape:?}: o was written");
    }
}

#[test]
fn bf16_attention_matches_the_reference() {
    use kernel_device::bf16;
    let shape = Shape { batch: 1, seq: 140, heads: 2, kv_heads: 2, head_dim: 64 };
    let opts = Options { causal: true, scale: None };
    let h = |x: Vec<f16>| -> Vec<bf16> { x.iter().map(|v| bf16::from_f32(v.to_f32())).collect() };
    let (q, k, v) = (h(randn(shape.q_len(), 4)), h(randn(shape.kv_len(), 5)), h(randn(shape.kv_len(), 6)));
    let f = |x: &[bf16]| -> Vec<f32> { x.iter().map(|v| v.to_f32()).collect() };
    let (want_o, want_lse) = reference(&f(&q), &f(&k), &f(&v), shape, opts);
    let dev = Device::emulator_with(Emulator::new(3));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let (dq, dk, dv) = (dev.upload(&q).unwrap(), dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
    let mut o = dev.upload(&vec![bf16::NAN; shape.q_len()]).unwrap();
    let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
    attention(&dev, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts).unwrap();
    let o = f(&dev.download(&o).unwrap());
    let (num, den) = o.iter().zip(&want_o).fold((0f64, 0f64), |(n, d), (g, w)| (n + f64::from(g - w).powi(2), d + f64::from(*w).powi(2)));
    let err = (num / den).sqrt();
    let lse_err = dev.download(&lse).unwrap().iter().zip(&want_lse).map(|(a, b)| f64::from((a - b).abs())).fold(0.0, f64::max);
    // bf16 has 8 bits of mantissa: P and O rounded to 2^-9 relative.
    assert!(err < 2e-2 && lse_err < LSE_BOUND, "O error {err:.2e}, lse error {lse_err:.2e}");
}

#[test]
fn both_d64_instance_families_match_the_reference() {
    use kernel_ops::attention::configs;
    // 420 rows: Q blocks of 192 + 192 + 36 (three consumers) or 128 x 3 +
    // 36 (two); 4 K/V blocks through 3 slots.
    let shape = Shape { batch: 1, seq: 420, heads: 2, kv_heads: 1, head_dim: 64 };
    for (seed, causal, consumers) in [(5, true, 3), (6, false, 3), (7, true, 2)] {
        let config = *configs(64).iter().find(|c| c.consumers == consumers && c.stages == 3).unwrap();
        let (o_err, lse_err) = run_with(shape, Options { causal, scale: None }, seed, Some(config));
        assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "{config:?} causal {causal}: O error {o_err:.2e}, lse error {lse_err:.2e}");
    }
}

/// The variants (`attention_variant`, `attention_fwd_ext`) against
/// `reference_variant`: a sliding window that skips whole K/V blocks on
/// both sides of a Q block (128-row Q blocks, 128-key blocks: Q block 2 of
/// `seq` 300 starts at key block 1 with `left = 37`, Q block 0 stops after
/// key block 1 with `right = 5`), a soft-cap that bends the scores (0.9, against scores of about
/// N(0, 1)), sinks on some heads, GQA; causal with a left window and sinks
/// at D 128; no variant at all (the plain softmax through the variant
/// kernel).
#[test]
fn attention_variants_match_the_cpu_reference_on_the_emulator() {
    use kernel_ops::attention::{attention_variant, reference_variant, Variant};
    let cases: [(Shape, Options, Option<(usize, usize)>, Option<f32>, Option<Vec<f32>>); 3] = [
        (Shape { batch: 1, seq: 300, heads: 2, kv_heads: 1, head_dim: 64 }, Options::default(), Some((37, 5)), Some(0.9), Some(vec![0.5, -1.0])),
        (Shape { batch: 1, seq: 260, heads: 2, kv_heads: 2, head_dim: 128 }, Options { causal: true, scale: None }, Some((100, 7)), None, Some(vec![3.0, -20.0])),
        (Shape { batch: 2, seq: 90, heads: 1, kv_heads: 1, head_dim: 64 }, Options { causal: true, scale: Some(0.3) }, None, None, None),
    ];
    for (i, (shape, opts, window, softcap, sinks)) in cases.into_iter().enumerate() {
        let (q, k, v) = (randn(shape.q_len(), 11), randn(shape.kv_len(), 12), randn(shape.kv_len(), 13));
        let (want_o, want_lse) = reference_variant(&to_f32(&q), &to_f32(&k), &to_f32(&v), shape, opts, window, softcap, sinks.as_deref());
        if i < 2 {
            // The variants change the result (so the check below can fail).
            let (plain_o, _) = reference(&to_f32(&q), &to_f32(&k), &to_f32(&v), shape, opts);
            let apart = plain_o.iter().zip(&want_o).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>().sqrt() / want_o.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>().sqrt();
            assert!(apart > 0.05, "case {i}: the variant's reference is {apart:.2e} from the plain one");
        }
        let dev = Device::emulator_with(Emulator::new(i as u64));
        let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
        let (dq, dk, dv) = (dev.upload(&q).unwrap(), dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
        let ds = sinks.as_ref().map(|s| dev.upload(s).unwrap());
        let mut o = dev.upload(&vec![f16::NAN; shape.q_len()]).unwrap();
        let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
        let variant = Variant { window, softcap, sinks: ds.as_ref() };
        attention_variant(&dev, &ops, &dq, &dk, &dv, &mut o, &mut lse, shape, opts, variant).unwrap_or_else(|e| panic!("case {i}: {e}"));
        let o = dev.download(&o).unwrap();
        assert!(o.iter().all(|x| !x.is_nan()), "case {i}: an output element was not written");
        let lse = dev.download(&lse).unwrap();
        let lse_err = lse.iter().zip(&want_lse).map(|(a, b)| f64::from((a - b).abs())).fold(0.0, f64::max);
        let o_err = kernel_host::rel_frobenius_error(&o, &want_o);
        // tanh.approx's relative 2^-11 on the capped scores adds to P's f16
        // rounding.
        assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "case {i} {shape:?} {opts:?}: O error {o_err:.2e}, lse error {lse_err:.2e}");
    }
}

/// The variants' rules: a soft-cap that is not positive, sinks of the wrong
/// count, a head dim not built; nothing launched, O untouched.
#[test]
fn attention_variant_refuses_bad_parameters_naming_the_rule() {
    use kernel_ops::attention::{attention_variant, Variant};
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let shape = Shape { batch: 1, seq: 8, heads: 2, kv_heads: 2, head_dim: 64 };
    let (q, k) = (dev.upload(&randn(shape.q_len(), 1)).unwrap(), dev.upload(&randn(shape.kv_len(), 2)).unwrap());
    let mut o = dev.upload(&vec![f16::NAN; shape.q_len()]).unwrap();
    let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
    let three = dev.upload(&[0f32; 3]).unwrap();
    for (variant, want) in [
        (Variant { softcap: Some(0.0), ..Variant::default() }, "softcap = 0: the soft-cap must be finite and positive"),
        (Variant { softcap: Some(f32::NAN), ..Variant::default() }, "must be finite and positive"),
        (Variant { sinks: Some(&three), ..Variant::default() }, "`sinks` holds 3 values; one per Q head (2) expected"),
        (Variant { window: Some((1 << 31, 0)), ..Variant::default() }, "window left = 2147483648: at most 2^31 - 1"),
    ] {
        let e = attention_variant(&dev, &ops, &q, &k, &k, &mut o, &mut lse, shape, Options::default(), variant).expect_err(want).to_string();
        assert!(e.contains(want), "{e}");
    }
    let s256 = Shape { head_dim: 256, ..shape };
    let (q2, k2) = (dev.upload(&randn(s256.q_len(), 1)).unwrap(), dev.upload(&randn(s256.kv_len(), 2)).unwrap());
    let mut o2 = dev.upload(&vec![f16::NAN; s256.q_len()]).unwrap();
    let e = attention_variant(&dev, &ops, &q2, &k2, &k2, &mut o2, &mut lse, s256, Options::default(), Variant::default()).unwrap_err().to_string();
    assert!(e.contains("head_dim = 256: the variants are built for head_dim in [64, 128]"), "{e}");
    assert!(dev.download(&o).unwrap().iter().all(|x| x.is_nan()), "O was written");
}
