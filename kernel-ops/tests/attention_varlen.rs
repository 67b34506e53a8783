//! Attention over packed variable-length sequences
//! (`kernel_ops::attention::varlen`: `attention_varlen`,
//! `attention_varlen_backward`) on the CPU emulator, race checks on,
//! against the CPU reference per sequence: empty and one-token sequences,
//! lengths not a multiple of the blocks, fewer queries than keys with the
//! causal mask (aligned bottom-right) and more (queries that see no key),
//! GQA, f16 and bf16, head dims 64 and 128 (and 256 forward); rows outside
//! every sequence never written; every bad host input refused naming its
//! rule; bad offsets that only the device sees clamped, nothing written
//! outside the outputs, and reported through `VarlenErrors`. The
//! `#[ignore]`d tests run the same at full size on a GPU.
use kernel_device::{bf16, f16};
use kernel_host::emulate::Emulator;
use kernel_host::Device;
use kernel_ops::attention::varlen::{attention_varlen, attention_varlen_backward, reference_varlen, reference_varlen_backward, VarlenErrors, VarlenShape, VarlenType};
use kernel_ops::attention::Options;

/// Offsets from lengths.
fn offsets(lens: &[usize]) -> Vec<u32> {
    let mut cu = vec![0u32];
    for l in lens {
        cu.push(cu.last().unwrap() + *l as u32);
    }
    cu
}

/// A packed problem: query and key lengths per sequence, plus `pad`
/// rows after the last sequence in q/o (never written).
struct Problem {
    lq: Vec<usize>,
    lk: Vec<usize>,
    pad: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl Problem {
    fn shape(&self) -> VarlenShape {
        let (tq, tk) = (self.lq.iter().sum::<usize>() + self.pad, self.lk.iter().sum::<usize>());
        VarlenShape {
            batch: self.lq.len(),
            total_q: tq,
            total_k: tk,
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            max_seqlen_q: *self.lq.iter().max().unwrap(),
            max_seqlen_k: *self.lk.iter().max().unwrap(),
        }
    }
}

trait Elem: VarlenType + kernel_host::cudarc::driver::DeviceRepr + kernel_host::cudarc::driver::ValidAsZeroBits + Default {
    fn of(x: f32) -> Self;
    fn to(self) -> f32;
}
impl Elem for f16 {
    fn of(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
}
impl Elem for bf16 {
    fn of(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
}

fn gen<T: Elem>(len: usize, seed: u64) -> Vec<T> {
    kernel_host::randn_f16(len, seed).iter().map(|v| T::of(v.to_f32())).collect()
}

/// Runs the forward on the emulator (schedule `seed`) and returns the
/// relative Frobenius error of O over the sequences' rows and the largest
/// lse error; asserts that rows outside the sequences stay untouched and
/// that no offset was reported.
fn run_forward<T: Elem>(p: &Problem, opts: Options, seed: u64) -> (f64, f64) {
    forward_on::<T>(&Device::emulator_with(Emulator::new(seed)), p, opts)
}

/// [`run_forward`] on `dev` (the emulator or a GPU).
fn forward_on<T: Elem>(dev: &Device, p: &Problem, opts: Options) -> (f64, f64) {
    let shape = p.shape();
    let (cu_q, cu_k) = (offsets(&p.lq), offsets(&p.lk));
    let (q, k, v) = (gen::<T>(shape.q_len(), 1), gen::<T>(shape.kv_len(), 2), gen::<T>(shape.kv_len(), 3));
    let f = |x: &[T]| -> Vec<f32> { x.iter().map(|v| v.to()).collect() };
    let (want_o, want_lse) = reference_varlen(&f(&q), &f(&k), &f(&v), &cu_q, &cu_k, shape, opts);
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let (bq, bk, bv) = (dev.upload(&q).unwrap(), dev.upload(&k).unwrap(), dev.upload(&v).unwrap());
    let (bcq, bck) = (dev.upload(&cu_q).unwrap(), dev.upload(&cu_k).unwrap());
    let mut o = dev.upload(&vec![T::of(f32::NAN); shape.q_len()]).unwrap();
    let mut lse = dev.upload(&vec![f32::NAN; shape.lse_len()]).unwrap();
    let mut errors = VarlenErrors::new(dev).unwrap();
    attention_varlen(dev, &ops, &bq, &bk, &bv, &bcq, &bck, &mut o, &mut lse, shape, opts, &mut errors).unwrap_or_else(|e| panic!("{shape:?} {opts:?}: {e}"));
    errors.check(dev).unwrap();
    let (o, lse) = (f(&dev.download(&o).unwrap()), dev.download(&lse).unwrap());
    let end = *cu_q.last().unwrap() as usize;
    let row_len = shape.heads * shape.head_dim;
    assert!(o[..end * row_len].iter().all(|x| !x.is_nan()), "{shape:?}: an O element inside a sequence was not written");
    assert!(o[end * row_len..].iter().all(|x| x.is_nan()), "{shape:?}: a row outside every sequence was written");
    let (mut num, mut den, mut lse_err) = (0f64, 0f64, 0f64);
    for (g, w) in o[..end * row_len].iter().zip(&want_o) {
        num += f64::from(g - w).powi(2);
        den += f64::from(*w).powi(2);
    }
    for h in 0..shape.heads {
        for r in 0..shape.total_q {
            let (g, w) = (lse[h * shape.total_q + r], want_lse[h * shape.total_q + r]);
            if r >= end {
                assert!(g.is_nan(), "{shape:?}: lse of row {r} outside every sequence was written");
            } else if w == f32::NEG_INFINITY {
                assert_eq!(g, w, "{shape:?}: row {r} of head {h} sees no key: lse -inf");
            } else {
                lse_err = lse_err.max(f64::from((g - w).abs()));
            }
        }
    }
    ((num / den).sqrt(), lse_err)
}

const O_BOUND: f64 = 4e-3;
const LSE_BOUND: f64 = 2e-3;
const BF16_O_BOUND: f64 = 2e-2;

#[test]
fn varlen_forward_causal_ragged_matches_the_reference() {
    // An empty sequence, one token against 3 keys, 130 queries against
    // 150 keys (two Q blocks, two K/V blocks, the diagonal shifted by 20),
    // 6 queries against 2 keys (the first 4 see no key), 5 against 5;
    // 3 rows of padding after the last sequence. D 64: 3 stages. (The
    // emulator runs at most 10 CTAs of 384 threads: grid 2 x 1 x 5.)
    let p = Problem { lq: vec![0, 1, 130, 6, 5], lk: vec![0, 3, 150, 2, 5], pad: 3, heads: 1, kv_heads: 1, head_dim: 64 };
    let (o_err, lse_err) = run_forward::<f16>(&p, Options { causal: true, scale: None }, 0);
    assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "O error {o_err:.2e}, lse error {lse_err:.2e}");
}

#[test]
fn varlen_forward_bf16_head_dim_128_matches_the_reference() {
    // Not causal: 70 queries against 200 keys (the 2-stage ring wraps),
    // a one-token sequence, an empty key set (O = 0, lse = -inf).
    let p = Problem { lq: vec![70, 1, 3], lk: vec![200, 1, 0], pad: 0, heads: 1, kv_heads: 1, head_dim: 128 };
    let (o_err, lse_err) = run_forward::<bf16>(&p, Options { causal: false, scale: Some(0.1) }, 1);
    assert!(o_err < BF16_O_BOUND && lse_err < LSE_BOUND, "O error {o_err:.2e}, lse error {lse_err:.2e}");
}

#[test]
fn varlen_forward_gqa_causal_head_dim_128_matches_the_reference() {
    // Two Q heads per K/V head; 20 queries against 33 keys, 7 against 7.
    let p = Problem { lq: vec![20, 7], lk: vec![33, 7], pad: 1, heads: 2, kv_heads: 1, head_dim: 128 };
    let (o_err, lse_err) = run_forward::<f16>(&p, Options { causal: true, scale: None }, 2);
    assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "O error {o_err:.2e}, lse error {lse_err:.2e}");
}

#[test]
fn varlen_forward_head_dim_256_matches_the_reference() {
    // 80-key blocks: 90 keys are two blocks, the second ragged.
    let p = Problem { lq: vec![9, 40], lk: vec![90, 40], pad: 0, heads: 1, kv_heads: 1, head_dim: 256 };
    let (o_err, lse_err) = run_forward::<f16>(&p, Options { causal: true, scale: None }, 3);
    assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "O error {o_err:.2e}, lse error {lse_err:.2e}");
}

fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    let (num, den) = got.iter().zip(want).fold((0f64, 0f64), |(n, d), (g, w)| (n + f64::from(g - w).powi(2), d + f64::from(*w).powi(2)));
    (num / den.max(1e-30)).sqrt()
}

/// Forward then backward on the emulator; returns the relative errors of
/// dQ, dK, dV over the sequences' rows. Rows of dq outside every sequence
/// must stay untouched.
fn run_backward<T: Elem>(p: &Problem, opts: Options, seed: u64) -> [f64; 3] {
    backward_on::<T>(&Device::emulator_with(Emulator::new(seed)), p, opts)
}

/// [`run_backward`] on `dev`.
fn backward_on<T: Elem>(dev: &Device, p: &Problem, opts: Options) -> [f64; 3] {
    let shape = p.shape();
    let (cu_q, cu_k) = (offsets(&p.lq), offsets(&p.lk));
    let (q, k, v, d_o) = (gen::<T>(shape.q_len(), 11), gen::<T>(shape.kv_len(), 12), gen::<T>(shape.kv_len(), 13), gen::<T>(shape.q_len(), 14));
    let f = |x: &[T]| -> Vec<f32> { x.iter().map(|v| v.to()).collect() };
    let (want_dq, want_dk, want_dv) = reference_varlen_backward(&f(&q), &f(&k), &f(&v), &f(&d_o), &cu_q, &cu_k, shape, opts);
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let up = |x: &[T]| dev.upload(x).unwrap();
    let (bq, bk, bv, bdo) = (up(&q), up(&k), up(&v), up(&d_o));
    let (bcq, bck) = (dev.upload(&cu_q).unwrap(), dev.upload(&cu_k).unwrap());
    let mut o = dev.zeros::<T>(shape.q_len()).unwrap();
    let mut lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
    let mut errors = VarlenErrors::new(dev).unwrap();
    attention_varlen(dev, &ops, &bq, &bk, &bv, &bcq, &bck, &mut o, &mut lse, shape, opts, &mut errors).unwrap();
    let nan = T::of(f32::NAN);
    let (mut dq, mut dk, mut dv) = (up(&vec![nan; shape.q_len()]), up(&vec![nan; shape.kv_len()]), up(&vec![nan; shape.kv_len()]));
    attention_varlen_backward(dev, &ops, &bq, &bk, &bv, &o, &lse, &bdo, &bcq, &bck, &mut dq, &mut dk, &mut dv, shape, opts, &mut errors).unwrap_or_else(|e| panic!("{shape:?} {opts:?}: {e}"));
    errors.check(dev).unwrap();
    let (dq, dk, dv) = (f(&dev.download(&dq).unwrap()), f(&dev.download(&dk).unwrap()), f(&dev.download(&dv).unwrap()));
    let q_end = *cu_q.last().unwrap() as usize * shape.heads * shape.head_dim;
    assert!(dq[..q_end].iter().all(|x| !x.is_nan()), "{shape:?}: an element of dq inside a sequence was not written");
    assert!(dq[q_end..].iter().all(|x| x.is_nan()), "{shape:?}: a row of dq outside every sequence was written");
    for (name, g) in [("dk", &dk), ("dv", &dv)] {
        assert!(g.iter().all(|x| !x.is_nan()), "{shape:?}: an element of {name} was not written");
    }
    let e = [rel_err(&dq[..q_end], &want_dq[..q_end]), rel_err(&dk, &want_dk), rel_err(&dv, &want_dv)];
    eprintln!("{shape:?} {opts:?}: relative errors dq {:.2e}, dk {:.2e}, dv {:.2e}", e[0], e[1], e[2]);
    e
}

const BWD_F16_BOUND: f64 = 1e-2;
const BWD_BF16_BOUND: f64 = 4e-2;

#[test]
fn varlen_backward_causal_ragged_matches_the_reference() {
    // A sequence with keys but no query (dK = dV = 0), one query against
    // 3 keys, 100 queries against 150 keys (2 key blocks, 2 Q blocks of
    // each of 2 Q heads per key block: the ring wraps; the diagonal
    // shifted by 50), 6 queries against 2 keys (queries that see nothing);
    // 2 Q heads per K/V head.
    let p = Problem { lq: vec![0, 1, 100, 6], lk: vec![5, 3, 150, 2], pad: 2, heads: 2, kv_heads: 1, head_dim: 64 };
    let e = run_backward::<f16>(&p, Options { causal: true, scale: None }, 0);
    assert!(e.iter().all(|x| *x < BWD_F16_BOUND), "dq, dk, dv errors {e:?}");
}

#[test]
fn varlen_backward_head_dim_128_bf16_matches_the_reference() {
    // Not causal, D 128 (the warpgroups split dQ's columns), bf16.
    let p = Problem { lq: vec![70, 1, 9], lk: vec![140, 1, 9], pad: 0, heads: 1, kv_heads: 1, head_dim: 128 };
    let e = run_backward::<bf16>(&p, Options { causal: false, scale: Some(0.1) }, 1);
    assert!(e.iter().all(|x| *x < BWD_BF16_BOUND), "dq, dk, dv errors {e:?}");
}

#[test]
fn varlen_refuses_bad_host_inputs_naming_the_rule() {
    let dev = Device::emulator();
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let ok = VarlenShape { batch: 2, total_q: 16, total_k: 24, heads: 2, kv_heads: 1, head_dim: 64, max_seqlen_q: 10, max_seqlen_k: 12 };
    // (shape, the buffer given a wrong length (or none), its length, the rule)
    let cases: [(VarlenShape, &str, usize, &str); 8] = [
        (ok, "cu_seqlens_q", 2, "`cu_seqlens_q` holds 2 elements; batch + 1 = 3 expected"),
        (ok, "cu_seqlens_k", 4, "`cu_seqlens_k` holds 4 elements; batch + 1 = 3 expected"),
        (VarlenShape { max_seqlen_q: 0, ..ok }, "", 0, "max_seqlen_q = 0, total_q = 16: max_seqlen_q must be at least 1 and at most total_q"),
        (VarlenShape { max_seqlen_k: 25, ..ok }, "", 0, "max_seqlen_k = 25, total_k = 24: max_seqlen_k must be at least 1 and at most total_k"),
        (ok, "q", 100, "`q` holds 100 elements; total_q x heads x head_dim = 2048 expected"),
        (ok, "lse", 16, "`lse` holds 16 elements; heads x total_q = 32 expected"),
        (VarlenShape { head_dim: 96, ..ok }, "", 0, "head_dim = 96: this pass is built for head_dim in [64, 128, 256]"),
        (VarlenShape { kv_heads: 3, heads: 4, ..ok }, "", 0, "heads = 4, kv_heads = 3: kv_heads must divide heads"),
    ];
    for (shape, wrong, len, rule) in cases {
        let n = |name: &str, want: usize| if name == wrong { len } else { want };
        let buf = |len: usize| dev.upload(&vec![f16::ONE; len]).unwrap();
        let (q, k, v) = (buf(n("q", shape.q_len())), buf(shape.kv_len()), buf(shape.kv_len()));
        let (cq, ck) = (dev.upload(&vec![0u32; n("cu_seqlens_q", 3)]).unwrap(), dev.upload(&vec![0u32; n("cu_seqlens_k", 3)]).unwrap());
        let mut o = dev.upload(&vec![f16::from_f32(7.0); shape.q_len()]).unwrap();
        let mut lse = dev.upload(&vec![7f32; n("lse", shape.lse_len())]).unwrap();
        let mut errors = VarlenErrors::new(&dev).unwrap();
        let e = attention_varlen(&dev, &ops, &q, &k, &v, &cq, &ck, &mut o, &mut lse, shape, Options::default(), &mut errors).expect_err(rule).to_string();
        assert!(e.contains("attention_varlen") && e.contains(rule), "{shape:?}: {e}");
        assert!(dev.download(&o).unwrap().iter().all(|v| v.to_f32() == 7.0), "{shape:?}: O was written");
    }
    // The backward: head dim 256 is not built, and the gradients' lengths.
    let shape = VarlenShape { head_dim: 256, ..ok };
    let buf = |len: usize| dev.upload(&vec![f16::ONE; len]).unwrap();
    let (q, k, v, o, d_o) = (buf(shape.q_len()), buf(shape.kv_len()), buf(shape.kv_len()), buf(shape.q_len()), buf(shape.q_len()));
    let (cq, ck) = (dev.upload(&[0u32, 5, 16]).unwrap(), dev.upload(&[0u32, 5, 24]).unwrap());
    let lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
    let (mut dq, mut dk, mut dv) = (buf(shape.q_len()), buf(shape.kv_len()), buf(shape.kv_len()));
    let mut errors = VarlenErrors::new(&dev).unwrap();
    let e = attention_varlen_backward(&dev, &ops, &q, &k, &v, &o, &lse, &d_o, &cq, &ck, &mut dq, &mut dk, &mut dv, shape, Options::default(), &mut errors).unwrap_err().to_string();
    assert!(e.contains("attention_varlen_backward: head_dim = 256: this pass is built for head_dim in [64, 128]"), "{e}");
    let shape = ok;
    let (q, k, v, o, d_o) = (buf(shape.q_len()), buf(shape.kv_len()), buf(shape.kv_len()), buf(shape.q_len()), buf(shape.q_len()));
    let lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
    let (mut dq, mut dk, mut dv) = (buf(shape.q_len()), buf(shape.kv_len() - 1), buf(shape.kv_len()));
    let e = attention_varlen_backward(&dev, &ops, &q, &k, &v, &o, &lse, &d_o, &cq, &ck, &mut dq, &mut dk, &mut dv, shape, Options::default(), &mut errors).unwrap_err().to_string();
    assert!(e.contains("`dk` holds 1535 elements; total_k x kv_heads x head_dim = 1536 expected"), "{e}");
}

/// Offsets that only the device sees: a decreasing pair in
/// `cu_seqlens_q`, an offset past `total_k` and a key count past
/// `max_seqlen_k` in `cu_seqlens_k`. The kernels clamp (nothing written
/// outside the clamped sequences: the rows after the last valid query keep
/// their sentinel), and `VarlenErrors::check` names each rule.
#[test]
fn varlen_clamps_bad_device_offsets_and_reports_them() {
    let dev = Device::emulator_with(Emulator::new(5));
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
    let shape = VarlenShape { batch: 2, total_q: 48, total_k: 64, heads: 1, kv_heads: 1, head_dim: 64, max_seqlen_q: 40, max_seqlen_k: 40 };
    let (cq, ck) = (dev.upload(&[0u32, 40, 30]).unwrap(), dev.upload(&[0u32, 10, 500]).unwrap());
    let gen16 = |len: usize, seed: u64| dev.upload(&kernel_host::randn_f16(len, seed)).unwrap();
    let (q, k, v, d_o) = (gen16(shape.q_len(), 1), gen16(shape.kv_len(), 2), gen16(shape.kv_len(), 3), gen16(shape.q_len(), 4));
    let sentinel = f16::from_f32(7.0);
    let mut o = dev.upload(&vec![sentinel; shape.q_len()]).unwrap();
    let mut lse = dev.upload(&vec![7f32; shape.lse_len()]).unwrap();
    let mut errors = VarlenErrors::new(&dev).unwrap();
    let opts = Options { causal: true, scale: None };
    attention_varlen(&dev, &ops, &q, &k, &v, &cq, &ck, &mut o, &mut lse, shape, opts, &mut errors).unwrap();
    let words = errors.words(&dev).unwrap();
    assert_eq!(words, vec![2, 2, 0, 2], "sequence 1 broke the q offset rule, the k offset rule and max_seqlen_k");
    let e = errors.check(&dev).unwrap_err().to_string();
    for rule in ["cu_seqlens_q[1..=2] decreases or passes total_q", "cu_seqlens_k[1..=2] decreases or passes total_k", "sequence 1 (the last such) has more keys than max_seqlen_k"] {
        assert!(e.contains(rule), "{e}");
    }
    let (o_h, lse_h) = (dev.download(&o).unwrap(), dev.download(&lse).unwrap());
    assert!(o_h[..40 * 64].iter().all(|x| x.to_f32() != 7.0) && o_h[40 * 64..].iter().all(|x| *x == sentinel), "O: sequence 0 written, nothing after it");
    assert!(lse_h[40..].iter().all(|x| *x == 7.0), "lse: nothing after sequence 0");
    // The backward with the same offsets: dq after sequence 0 untouched.
    let (mut dq, mut dk, mut dv) = (dev.upload(&vec![sentinel; shape.q_len()]).unwrap(), dev.upload(&vec![sentinel; shape.kv_len()]).unwrap(), dev.upload(&vec![sentinel; shape.kv_len()]).unwrap());
    errors.clear(&dev).unwrap();
    attention_varlen_backward(&dev, &ops, &q, &k, &v, &o, &lse, &d_o, &cq, &ck, &mut dq, &mut dk, &mut dv, shape, opts, &mut errors).unwrap();
    assert_eq!(errors.words(&dev).unwrap(), vec![2, 2, 0, 2]);
    let dq_h = dev.download(&dq).unwrap();
    assert!(dq_h[40 * 64..].iter().all(|x| *x == sentinel), "dq: nothing after sequence 0");
    // Sequence 1 has keys 10 .. 50 (clamped at max_seqlen_k) and no query:
    // zero gradients there; keys 50 .. 64 are in no sequence: untouched.
    let dk_h = dev.download(&dk).unwrap();
    assert!(dk_h[10 * 64..50 * 64].iter().all(|x| x.to_f32() == 0.0) && dk_h[50 * 64..].iter().all(|x| *x == sentinel), "dk: zeros for the query-less sequence, nothing past it");
}

fn gpu() -> Device {
    Device::gpu(kernel_host::Gpu::new(0).unwrap())
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn gpu_varlen_forward_matches_the_reference_at_ragged_lengths() {
    let dev = gpu();
    let lq = vec![1, 127, 128, 129, 700, 1500, 3, 0, 333];
    for (lk, causal) in [(lq.clone(), true), (lq.iter().map(|l| l + 17).collect(), true), (lq.clone(), false)] {
        for d in [64, 128, 256] {
            let p = Problem { lq: lq.clone(), lk: lk.clone(), pad: 5, heads: 4, kv_heads: 2, head_dim: d };
            let opts = Options { causal, scale: None };
            let (o_err, lse_err) = forward_on::<f16>(&dev, &p, opts);
            assert!(o_err < O_BOUND && lse_err < LSE_BOUND, "f16 D {d} causal {causal}: O error {o_err:.2e}, lse error {lse_err:.2e}");
            let (o_err, lse_err) = forward_on::<bf16>(&dev, &p, opts);
            assert!(o_err < BF16_O_BOUND && lse_err < LSE_BOUND, "bf16 D {d} causal {causal}: O error {o_err:.2e}, lse error {lse_err:.2e}");
        }
    }
}

#[test]
#[ignore = "needs a Hopper GPU"]
fn gpu_varlen_backward_matches_the_reference_at_ragged_lengths() {
    let dev = gpu();
    let lq = vec![1, 127, 200, 65, 0, 300];
    for (lk, causal) in [(lq.clone(), true), (lq.iter().map(|l| l + 40).collect(), true), (lq.clone(), false)] {
        for d in [64, 128] {
            let p = Problem { lq: lq.clone(), lk: lk.clone(), pad: 3, heads: 4, kv_heads: 2, head_dim: d };
            let opts = Options { causal, scale: None };
            let e = backward_on::<f16>(&dev, &p, opts);
            assert!(e.iter().all(|x| *x < BWD_F16_BOUND), "f16 D {d} causal {causal}: dq, dk, dv errors {e:?}");
            let e = backward_on::<bf16>(&dev, &p, opts);
            assert!(e.iter().all(|x| *x < BWD_BF16_BOUND), "bf16 D {d} causal {causal}: dq, dk, dv errors {e:?}");
        }
    }
}
