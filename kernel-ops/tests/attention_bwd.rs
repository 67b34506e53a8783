//! Attention backward (`kernel_ops::attention::attention_backward`: the
//! kernels `attention_bwd_pre`, `attention_bwd`, `attention_bwd_dq`) on the
//! CPU emulator through the entry point, race checks on, against
//! `kernel_ops::attention::reference_backward`: the forward's own `o` and
//! `lse` as inputs, ragged sequence lengths (a partial last Q block and key
//! block), enough steps that the Q/dO ring wraps, causal and not, GQA (dK
//! and dV summed over the group), both head dims, f16 and bf16, several
//! schedules; and every bad input refused with its rule, the gradients
//! untouched.
use kernel_device::{bf16, f16};
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernel_ops::attention::{attention, attention_backward, reference_backward, AttnType, Options, Shape};

fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    let (num, den) = got.iter().zip(want).fold((0f64, 0f64), |(n, d), (g, w)| (n + f64::from(g - w).powi(2), d + f64::from(*w).powi(2)));
    (num / den).sqrt()
}

/// Runs forward then backward on the emulator with `seed`'s schedule;
/// returns the relative Frobenius errors of dQ, dK, dV.
fn run<T: AttnType + Default + kernel_host::cudarc::driver::DeviceRepr + kernel_host::cudarc::driver::ValidAsZeroBits>(shape: Shape, opts: Options, seed: u64, to: fn(f32) -> T, from: fn(T) -> f32) -> [f64; 3] {
    let gen = |len: usize, s: u64| -> Vec<T> { kernel_host::randn_f16(len, s).iter().map(|v| to(v.to_f32())).collect() };
    let (q, k, v, d_o) = (gen(shape.q_len(), 11), gen(shape.kv_len(), 12), gen(shape.kv_len(), 13), gen(shape.q_len(), 14));
    let f = |x: &[T]| -> Vec<f32> { x.iter().map(|v| from(*v)).collect() };
    let (want_dq, want_dk, want_dv) = reference_backward(&f(&q), &f(&k), &f(&v), &f(&d_o), shape, opts);
    let dev = Device::emulator_with(Emulator::new(seed));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let up = |x: &[T]| dev.upload(x).unwrap();
    let (bq, bk, bv, bdo) = (up(&q), up(&k), up(&v), up(&d_o));
    let mut o = dev.zeros::<T>(shape.q_len()).unwrap();
    let mut lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
    attention(&dev, &ops, &bq, &bk, &bv, &mut o, &mut lse, shape, opts).unwrap();
    let nan = to(f32::NAN);
    let (mut dq, mut dk, mut dv) = (up(&vec![nan; shape.q_len()]), up(&vec![nan; shape.kv_len()]), up(&vec![nan; shape.kv_len()]));
    attention_backward(&dev, &ops, &bq, &bk, &bv, &o, &lse, &bdo, &mut dq, &mut dk, &mut dv, shape, opts).unwrap_or_else(|e| panic!("{shape:?} {opts:?} seed {seed}: {e}"));
    let (dq, dk, dv) = (f(&dev.download(&dq).unwrap()), f(&dev.download(&dk).unwrap()), f(&dev.download(&dv).unwrap()));
    for (name, g) in [("dq", &dq), ("dk", &dk), ("dv", &dv)] {
        assert!(g.iter().all(|x| !x.is_nan()), "{shape:?}: an element of {name} was not written");
    }
    let e = [rel_err(&dq, &want_dq), rel_err(&dk, &want_dk), rel_err(&dv, &want_dv)];
    eprintln!("{shape:?} {opts:?} seed {seed}: relative errors dq {:.2e}, dk {:.2e}, dv {:.2e}", e[0], e[1], e[2]);
    e
}

/// P and dS are rounded to the element type before their GEMMs, and O
/// (the input of delta) was rounded by the forward: f16 errors near 1e-3.
const F16_BOUND: f64 = 1e-2;
/// bf16: 8 bits of mantissa.
const BF16_BOUND: f64 = 4e-2;

/// f16 at `shape`: dQ, dK and dV within [`F16_BOUND`] of the CPU's. One
/// test per shape, so that the test harness runs them side by side.
fn check_f16(shape: Shape, opts: Options, seed: u64) {
    let e = run::<f16>(shape, opts, seed, f16::from_f32, f16::to_f32);
    assert!(e.iter().all(|x| *x < F16_BOUND), "{shape:?} {opts:?}: dq, dk, dv errors {e:?}");
}

#[test]
fn attention_backward_matches_the_cpu_reference_on_the_emulator() {
    // 2 key blocks (128 + 72), 4 Q blocks, 2 Q heads per K/V head:
    // up to 8 steps through 2 slots; causal.
    check_f16(Shape { batch: 1, seq: 200, heads: 2, kv_heads: 1, head_dim: 64 }, Options { causal: true, scale: None }, 0);
}

#[test]
fn head_dim_128_attention_backward_matches_the_cpu_reference() {
    // The two warpgroups split dQ's columns; not causal, a scale.
    check_f16(Shape { batch: 2, seq: 150, heads: 1, kv_heads: 1, head_dim: 128 }, Options { causal: false, scale: Some(0.2) }, 1);
}

#[test]
fn causal_head_dim_128_attention_backward_with_gqa_matches_the_cpu_reference() {
    check_f16(Shape { batch: 1, seq: 130, heads: 2, kv_heads: 1, head_dim: 128 }, Options { causal: true, scale: None }, 2);
}

#[test]
fn bf16_attention_backward_matches_the_reference() {
    let shape = Shape { batch: 1, seq: 100, heads: 2, kv_heads: 2, head_dim: 64 };
    let e = run::<bf16>(shape, Options { causal: false, scale: None }, 3, bf16::from_f32, bf16::to_f32);
    assert!(e.iter().all(|x| *x < BF16_BOUND), "dq, dk, dv errors {e:?}");
}

#[test]
fn attention_backward_refuses_bad_inputs_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let ok = Shape { batch: 1, seq: 16, heads: 4, kv_heads: 2, head_dim: 64 };
    // (shape, which buffer gets a wrong length (or none), its length, the rule)
    let cases: [(Shape, &str, usize, &str); 5] = [
        (Shape { head_dim: 256, ..ok }, "", 0, "head_dim = 256: the backward pass is built for head_dim in [64, 128]"),
        (Shape { kv_heads: 3, ..ok }, "", 0, "heads = 4, kv_heads = 3: kv_heads must divide heads"),
        (ok, "d_o", 4095, "`d_o` holds 4095 elements; batch x seq x heads x head_dim = 4096 expected"),
        (ok, "dk", 4096, "`dk` holds 4096 elements; batch x seq x kv_heads x head_dim = 2048 expected"),
        (ok, "lse", 63, "`lse` holds 63 elements; batch x heads x seq = 64 expected"),
    ];
    for (shape, wrong, len, rule) in cases {
        let n = |name: &str, want: usize| if name == wrong { len } else { want };
        let buf = |len: usize| dev.upload(&vec![f16::ONE; len]).unwrap();
        let (q, k, v, o, d_o) = (buf(shape.q_len()), buf(shape.kv_len()), buf(shape.kv_len()), buf(shape.q_len()), buf(n("d_o", shape.q_len())));
        let lse = dev.upload(&vec![0f32; n("lse", shape.lse_len())]).unwrap();
        let seven = |len: usize| dev.upload(&vec![f16::from_f32(7.0); len]).unwrap();
        let (mut dq, mut dk, mut dv) = (seven(shape.q_len()), seven(n("dk", shape.kv_len())), seven(shape.kv_len()));
        let e = attention_backward(&dev, &ops, &q, &k, &v, &o, &lse, &d_o, &mut dq, &mut dk, &mut dv, shape, Options::default()).expect_err(rule).to_string();
        assert!(e.contains("attention_backward") && e.contains(rule), "{shape:?}: {e}");
        for g in [&dq, &dk, &dv] {
            assert!(dev.download(g).unwrap().iter().all(|v| v.to_f32() == 7.0), "{shape:?}: a gradient was written");
        }
    }
}

/// The variants' f64 reference checked against finite differences of the
/// forward's (`reference_variant`): with `L = Σ O ⊙ dO`, `∂L/∂x ≈ (L(x +
/// h) - L(x - h)) / 2h` for a few elements of q, k, v and every sink,
/// through a window, a soft-cap and sinks at once (a tiny head dim: the
/// reference takes any).
#[test]
fn the_variants_backward_reference_matches_finite_differences() {
    use kernel_ops::attention::{reference_variant, reference_variant_backward};
    let shape = Shape { batch: 1, seq: 7, heads: 2, kv_heads: 1, head_dim: 4 };
    let opts = Options { causal: false, scale: Some(0.8) };
    let (window, softcap, sinks) = (Some((2, 1)), Some(1.3f32), vec![0.4f32, -0.7]);
    let gen = |len: usize, s: u64| -> Vec<f32> { kernel_host::randn_f16(len, s).iter().map(|v| v.to_f32()).collect() };
    let (q, k, v, d_o) = (gen(shape.q_len(), 1), gen(shape.kv_len(), 2), gen(shape.kv_len(), 3), gen(shape.q_len(), 4));
    let loss = |q: &[f32], k: &[f32], v: &[f32], sinks: &[f32]| -> f64 {
        let (o, _) = reference_variant(q, k, v, shape, opts, window, softcap, Some(sinks));
        o.iter().zip(&d_o).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum()
    };
    let (dq, dk, dv, ds) = reference_variant_backward(&q, &k, &v, &d_o, shape, opts, window, softcap, Some(&sinks));
    let h = 1e-2f32;
    let fd = |which: usize, i: usize| -> f64 {
        let mut x = [q.clone(), k.clone(), v.clone(), sinks.clone()];
        x[which][i] += h;
        let up = loss(&x[0], &x[1], &x[2], &x[3]);
        x[which][i] -= 2.0 * h;
        let down = loss(&x[0], &x[1], &x[2], &x[3]);
        (up - down) / (2.0 * f64::from(h))
    };
    let mut checked = 0;
    for (which, grad) in [(0, &dq), (1, &dk), (2, &dv), (3, &ds)] {
        for i in (0..grad.len()).step_by(3) {
            let (want, got) = (fd(which, i), f64::from(grad[i]));
            // O is rounded to f32 by the forward reference: differences of
            // about 1e-7 / 2h.
            assert!((want - got).abs() < 2e-3 * (1.0 + want.abs()), "input {which} element {i}: finite difference {want:.5}, reference {got:.5}");
            checked += 1;
        }
    }
    assert!(checked > 20 && ds.iter().all(|x| x.abs() > 1e-3), "checked {checked} elements; sink gradients {ds:?}");
}

/// The variants' backward (`attention_variant_backward`: `attention_bwd_ext`
/// and `attention_bwd_sinks`) on the emulator against
/// `reference_variant_backward`, from the variants' forward's own `o` and
/// `lse`: a window that leaves key block 0 out of Q blocks 2 and 3 and
/// key block 1 out of Q block 0 (`seq` 200, window (37, 20)), a soft-cap
/// that bends the scores, sinks, GQA (f16); causal with a left window and
/// sinks (bf16). The sinks' gradient within 1e-2 of the reference's,
/// relative to its largest.
#[test]
fn attention_variant_backward_matches_the_cpu_reference_on_the_emulator() {
    use kernel_ops::attention::{attention_variant, attention_variant_backward, reference_variant_backward, Variant};
    fn case<T: AttnType + Default + kernel_host::cudarc::driver::DeviceRepr + kernel_host::cudarc::driver::ValidAsZeroBits>(
        shape: Shape,
        opts: Options,
        window: Option<(usize, usize)>,
        softcap: Option<f32>,
        sinks: Vec<f32>,
        (to, from): (fn(f32) -> T, fn(T) -> f32),
        bound: f64,
    ) {
        let gen = |len: usize, s: u64| -> Vec<T> { kernel_host::randn_f16(len, s).iter().map(|v| to(v.to_f32())).collect() };
        let (q, k, v, d_o) = (gen(shape.q_len(), 21), gen(shape.kv_len(), 22), gen(shape.kv_len(), 23), gen(shape.q_len(), 24));
        let f = |x: &[T]| -> Vec<f32> { x.iter().map(|v| from(*v)).collect() };
        let (want_dq, want_dk, want_dv, want_ds) = reference_variant_backward(&f(&q), &f(&k), &f(&v), &f(&d_o), shape, opts, window, softcap, Some(&sinks));
        // The variant changes the gradients (so the checks can fail).
        let (plain_dq, ..) = reference_backward(&f(&q), &f(&k), &f(&v), &f(&d_o), shape, opts);
        assert!(rel_err(&plain_dq, &want_dq) > 0.05, "the variant's dq is the plain one's");
        let dev = Device::emulator_with(Emulator::new(5));
        let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
        let up = |x: &[T]| dev.upload(x).unwrap();
        let (bq, bk, bv, bdo) = (up(&q), up(&k), up(&v), up(&d_o));
        let bs = dev.upload(&sinks).unwrap();
        let variant = Variant { window, softcap, sinks: Some(&bs) };
        let mut o = dev.zeros::<T>(shape.q_len()).unwrap();
        let mut lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
        attention_variant(&dev, &ops, &bq, &bk, &bv, &mut o, &mut lse, shape, opts, variant).unwrap();
        let nan = to(f32::NAN);
        let (mut dq, mut dk, mut dv) = (up(&vec![nan; shape.q_len()]), up(&vec![nan; shape.kv_len()]), up(&vec![nan; shape.kv_len()]));
        let mut ds = dev.upload(&vec![f32::NAN; shape.heads]).unwrap();
        attention_variant_backward(&dev, &ops, &bq, &bk, &bv, &o, &lse, &bdo, &mut dq, &mut dk, &mut dv, Some(&mut ds), shape, opts, variant).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        let (dq, dk, dv) = (f(&dev.download(&dq).unwrap()), f(&dev.download(&dk).unwrap()), f(&dev.download(&dv).unwrap()));
        let ds = dev.download(&ds).unwrap();
        let e = [rel_err(&dq, &want_dq), rel_err(&dk, &want_dk), rel_err(&dv, &want_dv)];
        let big = want_ds.iter().fold(0f32, |m, x| m.max(x.abs()));
        let ds_err = ds.iter().zip(&want_ds).map(|(a, b)| (a - b).abs() / big).fold(0f32, f32::max);
        eprintln!("{shape:?} {opts:?} {window:?} {softcap:?}: dq {:.2e}, dk {:.2e}, dv {:.2e}, d_sinks {ds_err:.2e} ({ds:?} against {want_ds:?})", e[0], e[1], e[2]);
        assert!(e.iter().all(|x| *x < bound) && ds_err < 1e-2, "{shape:?}: dq, dk, dv errors {e:?}, d_sinks {ds_err:.2e}");
    }
    let f16s = (f16::from_f32 as fn(f32) -> f16, f16::to_f32 as fn(f16) -> f32);
    case::<f16>(Shape { batch: 1, seq: 200, heads: 2, kv_heads: 1, head_dim: 64 }, Options::default(), Some((37, 20)), Some(0.9), vec![0.5, -1.0], f16s, F16_BOUND);
    let bf16s = (bf16::from_f32 as fn(f32) -> bf16, bf16::to_f32 as fn(bf16) -> f32);
    case::<bf16>(Shape { batch: 2, seq: 100, heads: 1, kv_heads: 1, head_dim: 64 }, Options { causal: true, scale: None }, Some((30, 0)), None, vec![1.5], bf16s, BF16_BOUND);
}

/// The variants' backward's own rules (`d_sinks` with and without sinks,
/// its length) and the variants' (a soft-cap that is not positive);
/// nothing written.
#[test]
fn attention_variant_backward_refuses_bad_inputs_naming_the_rule() {
    use kernel_ops::attention::{attention_variant_backward, Variant};
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let shape = Shape { batch: 1, seq: 16, heads: 2, kv_heads: 2, head_dim: 64 };
    let buf = |len: usize| dev.upload(&vec![f16::ONE; len]).unwrap();
    let (q, k, o) = (buf(shape.q_len()), buf(shape.kv_len()), buf(shape.q_len()));
    let lse = dev.upload(&vec![0f32; shape.lse_len()]).unwrap();
    let sinks = dev.upload(&[0f32; 2]).unwrap();
    let seven = |len: usize| dev.upload(&vec![f16::from_f32(7.0); len]).unwrap();
    let (mut dq, mut dk, mut dv) = (seven(shape.q_len()), seven(shape.kv_len()), seven(shape.kv_len()));
    let (mut ds2, mut ds3) = (dev.upload(&[7f32; 2]).unwrap(), dev.upload(&[7f32; 3]).unwrap());
    let with_sinks = Variant { sinks: Some(&sinks), ..Variant::default() };
    let cases: [(Variant<'_>, Option<&mut kernel_host::Buffer<f32>>, &str); 4] = [
        (with_sinks, None, "sinks given without `d_sinks`"),
        (Variant::default(), Some(&mut ds2), "`d_sinks` given without sinks"),
        (with_sinks, Some(&mut ds3), "`d_sinks` holds 3 values; one per Q head (2) expected"),
        (Variant { softcap: Some(-1.0), ..Variant::default() }, None, "softcap = -1: the soft-cap must be finite and positive"),
    ];
    for (variant, d_sinks, rule) in cases {
        let e = attention_variant_backward(&dev, &ops, &q, &k, &k, &o, &lse, &q, &mut dq, &mut dk, &mut dv, d_sinks, shape, Options::default(), variant).expect_err(rule).to_string();
        assert!(e.contains("attention_variant_backward") && e.contains(rule), "{e}");
    }
    // Head dim 128: the variants' forward is built, their backward is not.
    let s128 = Shape { head_dim: 128, ..shape };
    let (q2, k2) = (buf(s128.q_len()), buf(s128.kv_len()));
    let (mut dq2, mut dk2, mut dv2) = (seven(s128.q_len()), seven(s128.kv_len()), seven(s128.kv_len()));
    let e = attention_variant_backward(&dev, &ops, &q2, &k2, &k2, &q2, &lse, &q2, &mut dq2, &mut dk2, &mut dv2, None, s128, Options::default(), Variant::default()).unwrap_err().to_string();
    assert!(e.contains("head_dim = 128: the variants' backward is built for head_dim in [64]"), "{e}");
    for g in [&dq, &dk, &dv, &dq2, &dk2, &dv2] {
        assert!(dev.download(g).unwrap().iter().all(|v| v.to_f32() == 7.0), "a gradient was written");
    }
    assert!(dev.download(&ds2).unwrap().iter().chain(&dev.download(&ds3).unwrap()).all(|v| *v == 7.0), "d_sinks was written");
}
