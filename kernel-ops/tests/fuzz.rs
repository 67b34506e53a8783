//! Property-based tests of every `kernel_ops` entry point on the CPU
//! emulator (race checks on): each case draws a shape within the entry
//! point's documented limits (sizes of 1, primes, tile edges and one past
//! them), element types, scales, group sizes and options, and checks that
//!
//! * the result is within the documented bound of the library's float64
//!   CPU reference (the bounds the op's own tests hold it to);
//! * every output sits between canary bytes that stay unchanged (each
//!   buffer is a view into a larger allocation: `common/fuzz.rs`), and
//!   every input is unchanged;
//! * a call that breaks one rule (a size, a length, a type's limit) is
//!   refused with the documented error, nothing written; values only the
//!   device sees (group sizes, sequence offsets, lengths, page tables) are
//!   flagged as documented, nothing written outside the outputs.
//!
//! CI runs a few cases per op from a fixed seed (about a minute in all on
//! 2 cores); `KERNEL_FUZZ_CASES=N` runs N per op, `KERNEL_FUZZ_SEED=S`
//! another stream, and a failing case prints the `KERNEL_FUZZ_REPLAY`
//! line that runs it alone (`common/fuzz.rs` lists the variables).
mod common;
#[path = "common/fuzz.rs"]
mod harness;

use common::MatmulTestElem;
use harness::{emulator, fuzz, guards_after_refusal, guards_after_run, ran, refused, rel_err, same_bits, within, Canary, Guarded, Note, Rng};
use kernel_device::{bf16, f16, E4M3};
use kernel_host::Device;

/// The 16-bit element types, from and to f32, and the bounds each op's
/// own tests hold it to (`tests/*.rs`).
trait Half: Canary + Into<f32> + kernel_host::cudarc::driver::ValidAsZeroBits + Default {
    const TY: &'static str;
    /// The norms' `max_rel_error` (`kernel_ops::norms::max_rel_error`'s doc).
    const NORM: f64;
    /// Attention O's relative Frobenius error (tests/attention.rs, tests/attention_varlen.rs).
    const ATTN: f64;
    /// dQ, dK, dV's (tests/attention_bwd.rs).
    const ATTN_BWD: f64;
    /// Decode O's (tests/decode.rs).
    const DECODE: f64;
    fn of(x: f32) -> Self;
}
impl Half for f16 {
    const TY: &'static str = "f16";
    const NORM: f64 = 4e-3;
    const ATTN: f64 = 4e-3;
    const ATTN_BWD: f64 = 1e-2;
    const DECODE: f64 = 3e-3;
    fn of(x: f32) -> Self {
        f16::from_f32(x)
    }
}
impl Half for bf16 {
    const TY: &'static str = "bf16";
    const NORM: f64 = 2e-2;
    const ATTN: f64 = 2e-2;
    const ATTN_BWD: f64 = 4e-2;
    const DECODE: f64 = 1.2e-2;
    fn of(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

/// `n` N(0, 1) samples times `scale`, rounded to `T`.
fn randn<T: Half>(n: usize, seed: u64, scale: f32) -> Vec<T> {
    kernel_host::randn_f32(n, seed).into_iter().map(|x| T::of(x * scale)).collect()
}

fn f32s<T: Copy + Into<f32>>(x: &[T]) -> Vec<f32> {
    x.iter().map(|&v| v.into()).collect()
}

/// The output fill of a refused call (a finite value, so "unchanged" is
/// plain to read in a report).
const SEVEN: f32 = 7.0;

/// Runs `f16` or `bf16` at random.
macro_rules! either_type {
    ($rng:ident, $f:ident($($arg:expr),*)) => {
        if $rng.chance(0.5) { $f::<f16>($($arg),*) } else { $f::<bf16>($($arg),*) }
    };
}

// ---------------------------------------------------------------- harness

/// The harness catches what it is for: a write one element past a guarded
/// view, or one before it, and a write inside an output a refused call
/// must leave alone (through a second, wider view of the same memory).
#[test]
fn canaries_report_writes_outside_and_inside_a_view() {
    let dev = Device::emulator();
    let mut rng = Rng::new(1);
    for (before, says) in [(false, "canary overwritten 1 elements after"), (true, "canary overwritten 1 elements before")] {
        let g = Guarded::out(&dev, &mut rng, "c", 10, 1f32);
        let start = g.buf().address() as *mut f32;
        // SAFETY: the 11 elements lie in `g`'s allocation (at least 16
        // canary elements either side), which outlives `wide`; nothing
        // else accesses them meanwhile.
        let mut wide = unsafe { kernel_host::Buffer::borrow_host(&dev, if before { start.sub(1) } else { start }, 11) }.unwrap();
        assert!(g.intact().is_ok());
        dev.write(&mut wide, &[2f32; 11]).unwrap();
        drop(wide);
        let e = g.intact().expect_err("a write past the view");
        assert!(e.contains("`c` (10 elements)") && e.contains(says), "{e}");
    }
    let mut g = Guarded::out(&dev, &mut rng, "y", 4, f16::from_f32(SEVEN));
    assert!(g.untouched().is_ok());
    dev.write(g.buf_mut(), &[f16::from_f32(SEVEN), f16::ZERO, f16::from_f32(SEVEN), f16::from_f32(SEVEN)]).unwrap();
    assert_eq!(g.intact(), Ok(()));
    assert_eq!(g.untouched(), Err("`y` (4 elements): element 1 was written".into()));
}

/// Found by fuzzing: a buffer whose start is not a multiple of 16 bytes
/// (a view borrowed at an offset) reached the kernels, whose 16-byte
/// vector accesses trap on a GPU (the emulator reported the misuse from
/// inside the kernel, `Error::Runtime`). Every entry point now refuses it
/// before launching, naming the buffer (`kernel_ops::check_aligned`).
#[test]
fn found_misaligned_views_are_refused_before_any_launch() {
    use kernel_ops::attention::{attention_varlen, Options, VarlenErrors, VarlenShape};
    let dev = Device::emulator();
    let ops = ops(&dev).unwrap();
    let mut rng = Rng::new(2);
    let (rows, cols) = (2, 64);
    let x = Guarded::at(&dev, &mut rng, "x", &vec![f16::from_f32(1.0); rows * cols], 2);
    let mut y = Guarded::at(&dev, &mut rng, "y", &vec![f16::from_f32(SEVEN); rows * cols], 0);
    let e = kernel_ops::norms::softmax(&ops, x.buf(), y.buf_mut(), rows, cols).unwrap_err().to_string();
    assert!(e.starts_with("softmax: `x` starts at") && e.contains("2 bytes past a multiple of 16"), "{e}");
    assert_eq!(guards_after_refusal(&[&x, &y]), Ok(()));
    let shape = VarlenShape { batch: 1, total_q: 3, total_k: 3, heads: 1, kv_heads: 1, head_dim: 64, max_seqlen_q: 3, max_seqlen_k: 3 };
    let q = Guarded::at(&dev, &mut rng, "q", &vec![f16::from_f32(0.5); shape.q_len()], 0);
    let cu = Guarded::at(&dev, &mut rng, "cu", &[0u32, 3], 0);
    let mut o = Guarded::at(&dev, &mut rng, "o", &vec![f16::from_f32(SEVEN); shape.q_len()], 6);
    let mut lse = Guarded::at(&dev, &mut rng, "lse", &vec![SEVEN; 3], 0);
    let mut errors = VarlenErrors::new(&dev).unwrap();
    let e = attention_varlen(&dev, &ops, q.buf(), q.buf(), q.buf(), cu.buf(), cu.buf(), o.buf_mut(), lse.buf_mut(), shape, Options::default(), &mut errors).unwrap_err().to_string();
    assert!(e.starts_with("attention_varlen: `o` starts at") && e.contains("6 bytes past a multiple of 16"), "{e}");
    assert_eq!(guards_after_refusal(&[&q, &cu, &o, &lse]), Ok(()));
    let mm = kernel_ops::Matmul::with_cache(&dev, std::env::temp_dir().join("kernel-ops-fuzz-no-cache.tsv")).unwrap();
    let a = Guarded::at(&dev, &mut rng, "a", &vec![f16::from_f32(1.0); 64 * 64], 0);
    let mut c = Guarded::at(&dev, &mut rng, "c", &vec![f16::from_f32(SEVEN); 64 * 64], 14);
    let e = mm.matmul(a.buf(), (64, 64), a.buf(), (64, 64), c.buf_mut()).unwrap_err();
    assert!(matches!(e, kernel_ops::MatmulError::Misaligned { name: "c", .. }), "{e}");
    assert_eq!(guards_after_refusal(&[&a, &c]), Ok(()));
}

// ---------------------------------------------------------------- matmul

#[test]
fn fuzz_matmul() {
    fuzz("matmul", 4, |rng, note| either_type!(rng, matmul_case(rng, note)));
}

fn matmul_case<E: Half + MatmulTestElem>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::matmul::INSTANCES;
    use kernel_ops::Matmul;
    let (mut m, mut n, k) = (rng.size(1, 300, 1, &[128, 256]), rng.size(8, 272, 8, &[128, 256]), rng.size(8, 200, 8, &[64, 128]));
    let sms = rng.range(1, 8);
    let inst = rng.chance(0.5).then(|| &INSTANCES[rng.below(INSTANCES.len())]);
    // The split-K kernels run a CTA per tile and split, not a persistent
    // grid: halve M, then N, until that grid fits the emulator.
    if let Some(i) = inst {
        use kernel_device::launch::KernelSpec;
        // Every split-K instance has the same block (three warpgroups).
        let block = <kernel_ops_kernels::matmul::matmul_splitk<f16, 64, 64, 32, 13> as KernelSpec>::BLOCK.volume() as usize;
        let threads = |m, n| kernel_ops::matmul::launch_dims(i, m, n, k, sms as u32, kernel_ops::Ctas::default()).0 as usize * block;
        while threads(m, n) > kernel_host::emulate::MAX_THREADS {
            if m > i.bm {
                m = m.div_ceil(2);
            } else {
                n = (n / 2).max(8) / 8 * 8;
            }
        }
    }
    let dev = emulator(rng, sms);
    let mm = Matmul::with_cache(&dev, std::env::temp_dir().join("kernel-ops-fuzz-no-cache.tsv")).map_err(|e| e.to_string())?;
    note.set(format!("{} M x N x K = {m} x {n} x {k}, instance {}, {sms} SMs", E::TY, inst.map_or("(default)", |i| i.name)));
    let (ah, bh) = (randn::<E>(m * k, rng.seed(), 1.0), randn::<E>(n * k, rng.seed(), 1.0));
    let (a, b) = (Guarded::new(&dev, rng, "a", &ah), Guarded::new(&dev, rng, "b", &bh));
    let mut c = Guarded::out(&dev, rng, "c", m * n, E::of(f32::NAN));
    ran(match inst {
        None => mm.matmul(a.buf(), (m, k), b.buf(), (n, k), c.buf_mut()),
        Some(i) => mm.matmul_with(i, a.buf(), b.buf(), c.buf_mut(), m, n, k),
    })?;
    guards_after_run(&[&a, &b], &[&c])?;
    // The f64 reference: one group of the grouped GEMM's.
    let want = kernel_ops::grouped::grouped_reference(&ah, &bh, &[m as u32], n, k);
    within("C", rel_err(&f32s(&c.get()), &want), E::TOL)?;

    // One rule broken: refused before anything runs, nothing written.
    let (mut shape, mut lens) = ((m, n, k, k), [0isize; 3]);
    let rule = match rng.below(7) {
        0 => {
            shape.1 += rng.range(1, 7);
            "N must be a multiple of 8"
        }
        6 => {
            rng.misalign = Some(rng.pick(&["a", "b", "c"]));
            "multiple of 16"
        }
        1 => {
            let bump = rng.range(1, 7);
            (shape.2, shape.3) = (k + bump, k + bump);
            "K must be a multiple of 8"
        }
        2 => {
            shape.0 = 0;
            "every dimension must be at least 1"
        }
        3 => {
            shape.3 = k + 8;
            "must have the same K"
        }
        4 => {
            lens[2] = rng.pick(&[-1, 1, 8]);
            "`c` must hold"
        }
        _ => {
            lens[0] = 8;
            "`a` must hold"
        }
    };
    let (m, n, k, kb) = shape;
    let len = |want: usize, delta: isize| (want as isize + delta).max(0) as usize;
    let a = Guarded::new(&dev, rng, "a", &vec![E::of(1.0); len(m * k, lens[0])]);
    let b = Guarded::new(&dev, rng, "b", &vec![E::of(1.0); n * kb]);
    let mut c = Guarded::out(&dev, rng, "c", len(m * n, lens[2]), E::of(SEVEN));
    note.add(format!("{} M x N x K = {m} x {n} x {k} (B's K {kb}), lengths {:?}: refused, \"{rule}\"", E::TY, [a.buf().len(), b.buf().len(), c.buf().len()]));
    refused(
        match inst {
            None => mm.matmul(a.buf(), (m, k), b.buf(), (n, kb), c.buf_mut()),
            Some(i) if k == kb => mm.matmul_with(i, a.buf(), b.buf(), c.buf_mut(), m, n, k),
            Some(_) => mm.matmul(a.buf(), (m, k), b.buf(), (n, kb), c.buf_mut()),
        },
        rule,
    )?;
    guards_after_refusal(&[&a, &b, &c])
}

/// The cached kernels of a case's emulator.
fn ops(dev: &Device) -> Result<kernel_host::Program, String> {
    dev.load(&kernel_ops_kernels::DEVICE_CODE).map_err(|e| e.to_string())
}

/// `len` changed by `delta` (at least 0).
fn bump(len: usize, delta: isize) -> usize {
    (len as isize + delta).max(0) as usize
}

// ---------------------------------------------------------------- FP8

/// The FP8 GEMMs: per-tensor scales (with a planar-snake width and grid
/// policy), row-wise scales, block scales.
#[derive(Clone, Copy, Debug)]
enum Fp8Kind {
    Tensor { grid_w: u32, ctas: kernel_ops::Ctas },
    Rowwise,
    Block,
}

/// One call of variant `v`; `sa` is `[scale_a, scale_b]` for per-tensor
/// scales (`sb` unused), else A's scales and `sb` B's.
#[allow(clippy::too_many_arguments)]
fn fp8_call(dev: &Device, ops: &kernel_host::Program, v: Fp8Kind, a: &Guarded<E4M3>, sa: &Guarded<f32>, b: &Guarded<E4M3>, sb: &Guarded<f32>, c: &mut Guarded<f16>, shape: (usize, usize, usize)) -> Result<(), kernel_ops::Error> {
    use kernel_ops::fp8::*;
    match v {
        Fp8Kind::Tensor { grid_w, ctas } => matmul_fp8_with(dev, ops, a.buf(), b.buf(), sa.buf(), c.buf_mut(), shape, grid_w, ctas),
        Fp8Kind::Rowwise => matmul_fp8_rowwise(dev, ops, a.buf(), sa.buf(), b.buf(), sb.buf(), c.buf_mut(), shape),
        Fp8Kind::Block => matmul_fp8_blockscaled(dev, ops, a.buf(), sa.buf(), b.buf(), sb.buf(), c.buf_mut(), shape),
    }
}

/// The lengths of the scale buffers of variant `v` at `m x n x k`.
fn fp8_scale_lens(v: Fp8Kind, (m, n, k): (usize, usize, usize)) -> (usize, usize) {
    match v {
        Fp8Kind::Tensor { .. } => (2, 0),
        Fp8Kind::Rowwise => (m, n),
        Fp8Kind::Block => (k.div_ceil(128) * m, n.div_ceil(128) * k.div_ceil(128)),
    }
}

/// A `rows x cols` matrix of N(0, 1) samples scaled by 2^e, e varying by
/// row and by 128-column block within 2^-3..2^3 (so that a scale applied
/// to the wrong row or block is a large error), sometimes one row all
/// zero, as f32.
fn ragged_magnitudes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let (er, ec): (Vec<i32>, Vec<i32>) = ((0..5).map(|_| rng.range(0, 3) as i32 - 2).collect(), (0..3).map(|_| rng.range(0, 2) as i32 - 1).collect());
    // Sometimes a row of zeros (its scales are 1).
    let zero = (rows > 0 && rng.chance(0.2)).then(|| rng.below(rows));
    let x = kernel_host::randn_f32(rows * cols, rng.seed());
    x.iter().enumerate().map(|(i, v)| if Some(i / cols) == zero { 0.0 } else { v * 2f32.powi(er[(i / cols) % 5] + ec[(i % cols) / 128 % 3]) }).collect()
}

#[test]
fn fuzz_fp8() {
    fuzz("fp8", 6, fp8_case);
}

fn fp8_case(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::fp8::*;
    let v = match rng.cycle(&[0, 2, 3, 1]) {
        0 | 1 => Fp8Kind::Tensor { grid_w: rng.pick(&GRID_WIDTHS), ctas: rng.pick(&[kernel_ops::Ctas::EvenWaves, kernel_ops::Ctas::EverySm]) },
        2 => Fp8Kind::Rowwise,
        _ => Fp8Kind::Block,
    };
    let (m, n, k) = (rng.size(1, 300, 1, &[128, 256]), rng.size(8, 272, 8, &[128, 256]), rng.size(16, 288, 16, &[128, 256]));
    let sms = rng.range(1, 4);
    let dev = emulator(rng, sms);
    let ops = ops(&dev)?;
    note.set(format!("{v:?} M x N x K = {m} x {n} x {k}, {sms} SMs"));
    let (af, bf) = (ragged_magnitudes(rng, m, k), ragged_magnitudes(rng, n, k));
    let (qa, qb, sa, sb, want) = match v {
        Fp8Kind::Tensor { .. } => {
            let ((qa, sa), (qb, sb)) = (quantize(&af), quantize(&bf));
            let want = reference(&qa, &qb, (sa, sb), m, n, k);
            (qa, qb, vec![sa, sb], vec![], want)
        }
        Fp8Kind::Rowwise => {
            let ((qa, sa), (qb, sb)) = (quantize_rowwise(&af, m, k), quantize_rowwise(&bf, n, k));
            let want = reference_rowwise(&qa, &sa, &qb, &sb, m, n, k);
            (qa, qb, sa, sb, want)
        }
        Fp8Kind::Block => {
            let ((qa, sa), (qb, sb)) = (quantize_1x128(&af, m, k), quantize_128x128(&bf, n, k));
            let want = reference_blockscaled(&qa, &sa, &qb, &sb, m, n, k);
            (qa, qb, sa, sb, want)
        }
    };
    let (a, b) = (Guarded::new(&dev, rng, "a", &qa), Guarded::new(&dev, rng, "b", &qb));
    let (gsa, gsb) = (Guarded::new(&dev, rng, "a_scales", &sa), Guarded::new(&dev, rng, "b_scales", &sb));
    let mut c = Guarded::out(&dev, rng, "c", m * n, f16::NAN);
    ran(fp8_call(&dev, &ops, v, &a, &gsa, &b, &gsb, &mut c, (m, n, k)))?;
    guards_after_run(&[&a, &b, &gsa, &gsb], &[&c])?;
    // Exact products summed in f32, one f16 rounding (tests/fp8.rs).
    within("C", rel_err(&f32s(&c.get()), &want), 1e-3)?;

    let (mut shape, mut lens) = ((m, n, k), [0isize; 5]);
    let rule = match rng.below(7) {
        0 => {
            shape.2 += 8;
            "must be a multiple of 16"
        }
        6 => {
            let scales: &[&'static str] = if let Fp8Kind::Tensor { .. } = v { &["a_scales"] } else { &["a_scales", "b_scales"] };
            rng.misalign = Some(rng.pick(&[["a", "b", "c"].as_slice(), scales].concat()));
            "multiple of 16"
        }
        1 => {
            shape.1 += rng.range(1, 7);
            "must be a multiple of 8"
        }
        2 => {
            shape = zero_one(rng, shape);
            "every dimension must be at least 1"
        }
        3 => {
            lens[2] = rng.pick(&[-1, 1]);
            "`c` holds"
        }
        4 => {
            lens[3] = rng.pick(&[-1, 1]);
            if let Fp8Kind::Tensor { .. } = v { "`scales` holds" } else { "`a_scales` holds" }
        }
        _ => match v {
            Fp8Kind::Tensor { ctas, .. } => {
                let v = Fp8Kind::Tensor { grid_w: 12, ctas };
                return fp8_refusal(&dev, &ops, rng, note, v, shape, lens, "planar-snake widths");
            }
            _ => {
                lens[4] = 1;
                "`b_scales` holds"
            }
        },
    };
    fp8_refusal(&dev, &ops, rng, note, v, shape, lens, rule)
}

/// `shape` with one of its three dimensions set to 0.
fn zero_one(rng: &mut Rng, (m, n, k): (usize, usize, usize)) -> (usize, usize, usize) {
    match rng.below(3) {
        0 => (0, n, k),
        1 => (m, 0, k),
        _ => (m, n, 0),
    }
}

/// Variant `v` at `shape` with the lengths of a, b, c, A's and B's scales
/// changed by `lens`: refused with `rule`, nothing written.
#[allow(clippy::too_many_arguments)]
fn fp8_refusal(dev: &Device, ops: &kernel_host::Program, rng: &mut Rng, note: &Note, v: Fp8Kind, (m, n, k): (usize, usize, usize), lens: [isize; 5], rule: &str) -> Result<(), String> {
    let (lsa, lsb) = fp8_scale_lens(v, (m, n, k));
    let one = E4M3::from_f32(1.0);
    let (a, b) = (Guarded::new(dev, rng, "a", &vec![one; bump(m * k, lens[0])]), Guarded::new(dev, rng, "b", &vec![one; bump(n * k, lens[1])]));
    let (sa, sb) = (Guarded::new(dev, rng, "a_scales", &vec![1f32; bump(lsa, lens[3])]), Guarded::new(dev, rng, "b_scales", &vec![1f32; bump(lsb, lens[4])]));
    let mut c = Guarded::out(dev, rng, "c", bump(m * n, lens[2]), f16::from_f32(SEVEN));
    note.add(format!("{v:?} M x N x K = {m} x {n} x {k}, lengths {lens:?} off: refused, \"{rule}\""));
    refused(fp8_call(dev, ops, v, &a, &sa, &b, &sb, &mut c, (m, n, k)), rule)?;
    guards_after_refusal(&[&a, &b, &sa, &sb, &c])
}

// ---------------------------------------------------------------- grouped

#[test]
fn fuzz_grouped() {
    fuzz("grouped", 5, |rng, note| match rng.cycle(&[0, 2, 1]) {
        0 => grouped_case::<f16>(rng, note),
        1 => grouped_case::<bf16>(rng, note),
        _ => grouped_fp8_case(rng, note),
    });
}

/// 1 to 8 ragged group sizes (empty ones, one row, primes, a 128-row block
/// and one row either side, any) of at most `cap` rows in all; sometimes
/// all empty.
fn group_sizes(rng: &mut Rng, cap: usize) -> Vec<u32> {
    let g = rng.range(1, 8);
    if rng.chance(0.1) {
        return vec![0; g];
    }
    let mut sizes: Vec<u32> = (0..g)
        .map(|_| {
            let any = [rng.size(1, 150, 1, &[]), rng.size(1, 200, 1, &[64])];
            rng.pick(&[0, 1, 127, 128, 129, any[0], any[1]]) as u32
        })
        .collect();
    while sizes.iter().sum::<u32>() as usize > cap {
        let i = rng.below(g);
        sizes[i] /= 2;
    }
    sizes
}

/// One rule of the grouped GEMMs broken at `(m, n, k)` with `sizes`:
/// `(shape, groups, length deltas of a, b, sizes, c, a_scales, b_scales,
/// the rule)`. `unit`: K's multiple (8, or 16 for FP8).
#[allow(clippy::type_complexity)]
fn grouped_rule(rng: &mut Rng, (m, n, k): (usize, usize, usize), groups: usize, unit: usize, fp8: bool) -> ((usize, usize, usize), usize, [isize; 6], String) {
    let mut lens = [0isize; 6];
    let (mut shape, mut g) = ((m, n, k), groups);
    let rule = match rng.below(if fp8 { 8 } else { 7 }) {
        0 => {
            g = 0;
            "N, K and the group count must be at least 1".to_string()
        }
        6 => {
            let rows: &[&'static str] = if m > 0 { &["a", "c"] } else { &[] };
            let scales: &[&'static str] = if fp8 { &["b_scales"] } else { &[] };
            rng.misalign = Some(rng.pick(&[rows, &["b", "sizes"], scales].concat()));
            "multiple of 16".into()
        }
        1 => {
            shape.1 += rng.range(1, 7);
            format!("N = {}: must be a multiple of 8", shape.1)
        }
        2 => {
            shape.2 += unit / 2;
            format!("K = {}: must be a multiple of {unit}", shape.2)
        }
        3 => {
            lens[1] = -1;
            "`b` holds".into()
        }
        4 => {
            lens[2] = 1;
            "`sizes` holds".into()
        }
        5 => {
            lens[3] = if m > 0 { rng.pick(&[-1, 1]) } else { 1 };
            "`c` holds".into()
        }
        _ => {
            lens[4 + rng.below(2)] = 1;
            "_scales` holds".into()
        }
    };
    (shape, g, lens, rule)
}

fn grouped_case<E: Half + MatmulTestElem + kernel_ops::grouped::GroupedElem>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::grouped::{grouped_reference, GroupedMatmul, Tiles};
    let sizes = group_sizes(rng, 400);
    let (g, m) = (sizes.len(), sizes.iter().sum::<u32>() as usize);
    let (n, k) = (rng.size(8, 272, 8, &[128, 256]), rng.size(8, 136, 8, &[64, 128]));
    let tiles = rng.pick(&[Tiles::Wide, Tiles::Narrow, Tiles::for_n(n)]);
    let sms = rng.range(1, 4);
    let dev = emulator(rng, sms);
    let gm = GroupedMatmul::new(&dev).map_err(|e| e.to_string())?;
    note.set(format!("{} sizes {sizes:?} (M = {m}), N x K = {n} x {k}, {} tiles, {sms} SMs", E::TY, tiles.name()));
    let (ah, bh) = (randn::<E>(m * k, rng.seed(), 1.0), randn::<E>(g * n * k, rng.seed(), 1.0));
    let (a, b, s) = (Guarded::new(&dev, rng, "a", &ah), Guarded::new(&dev, rng, "b", &bh), Guarded::new(&dev, rng, "sizes", &sizes));
    let mut c = Guarded::out(&dev, rng, "c", m * n, E::of(f32::NAN));
    ran(gm.run_with(tiles, a.buf(), b.buf(), s.buf(), c.buf_mut(), (m, n, k), g))?;
    ran(gm.status())?;
    guards_after_run(&[&a, &b, &s], &[&c])?;
    within("C", rel_err(&f32s(&c.get()), &grouped_reference(&ah, &bh, &sizes, n, k)), E::TOL)?;

    if m > 0 && rng.chance(0.3) {
        // Sizes that do not add up to M, seen only by the kernel: nothing
        // computed, and the status says so.
        let mut bad = sizes.clone();
        let i = rng.below(g);
        bad[i] = if rng.chance(0.5) { bad[i] + 1 } else { bad[i].wrapping_sub(1 + bad.iter().sum::<u32>()) };
        let s = Guarded::new(&dev, rng, "sizes", &bad);
        let mut c = Guarded::out(&dev, rng, "c", m * n, E::of(SEVEN));
        note.add(format!("sizes {bad:?}: the status says they do not add up"));
        ran(gm.run_with(tiles, a.buf(), b.buf(), s.buf(), c.buf_mut(), (m, n, k), g))?;
        refused(gm.status(), "do not add up to M")?;
        return guards_after_refusal(&[&a, &b, &s, &c]);
    }
    let ((m, n, k), g, lens, rule) = grouped_rule(rng, (m, n, k), g, 8, false);
    let a = Guarded::new(&dev, rng, "a", &vec![E::of(1.0); bump(m * k, lens[0])]);
    let b = Guarded::new(&dev, rng, "b", &vec![E::of(1.0); bump(g * n * k, lens[1])]);
    let s = Guarded::new(&dev, rng, "sizes", &vec![0u32; bump(g, lens[2])]);
    let mut c = Guarded::out(&dev, rng, "c", bump(m * n, lens[3]), E::of(SEVEN));
    note.add(format!("M x N x K = {m} x {n} x {k}, {g} groups, lengths {lens:?} off: refused, \"{rule}\""));
    refused(gm.run_with(tiles, a.buf(), b.buf(), s.buf(), c.buf_mut(), (m, n, k), g), &rule)?;
    guards_after_refusal(&[&a, &b, &s, &c])
}

fn grouped_fp8_case(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::fp8::quantize_1x128;
    use kernel_ops::grouped::{grouped_reference_blockscaled, quantize_experts_128x128, GroupedMatmul};
    let sizes = group_sizes(rng, 400);
    let (g, m) = (sizes.len(), sizes.iter().sum::<u32>() as usize);
    let (n, k) = (rng.size(8, 272, 8, &[128, 256]), rng.size(16, 288, 16, &[128, 256]));
    let sms = rng.range(1, 4);
    let dev = emulator(rng, sms);
    let gm = GroupedMatmul::new(&dev).map_err(|e| e.to_string())?;
    note.set(format!("FP8 block-scaled sizes {sizes:?} (M = {m}), N x K = {n} x {k}, {sms} SMs"));
    let (af, bf) = (ragged_magnitudes(rng, m, k), ragged_magnitudes(rng, g * n, k));
    let ((qa, sa), (qb, sb)) = (quantize_1x128(&af, m, k), quantize_experts_128x128(&bf, g, n, k));
    let (a, b, s) = (Guarded::new(&dev, rng, "a", &qa), Guarded::new(&dev, rng, "b", &qb), Guarded::new(&dev, rng, "sizes", &sizes));
    let (gsa, gsb) = (Guarded::new(&dev, rng, "a_scales", &sa), Guarded::new(&dev, rng, "b_scales", &sb));
    let mut c = Guarded::out(&dev, rng, "c", m * n, f16::NAN);
    ran(gm.run_fp8_blockscaled(a.buf(), gsa.buf(), b.buf(), gsb.buf(), s.buf(), c.buf_mut(), (m, n, k), g))?;
    ran(gm.status())?;
    guards_after_run(&[&a, &b, &s, &gsa, &gsb], &[&c])?;
    within("C", rel_err(&f32s(&c.get()), &grouped_reference_blockscaled(&qa, &sa, &qb, &sb, &sizes, n, k)), 1e-3)?;

    let ((m, n, k), g, lens, rule) = grouped_rule(rng, (m, n, k), g, 16, true);
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let one = E4M3::from_f32(1.0);
    let a = Guarded::new(&dev, rng, "a", &vec![one; bump(m * k, lens[0])]);
    let b = Guarded::new(&dev, rng, "b", &vec![one; bump(g * n * k, lens[1])]);
    let s = Guarded::new(&dev, rng, "sizes", &vec![0u32; bump(g, lens[2])]);
    let sa = Guarded::new(&dev, rng, "a_scales", &vec![1f32; bump(kb * m, lens[4])]);
    let sb = Guarded::new(&dev, rng, "b_scales", &vec![1f32; bump(g * nb * kb, lens[5])]);
    let mut c = Guarded::out(&dev, rng, "c", bump(m * n, lens[3]), f16::from_f32(SEVEN));
    note.add(format!("M x N x K = {m} x {n} x {k}, {g} groups, lengths {lens:?} off: refused, \"{rule}\""));
    refused(gm.run_fp8_blockscaled(a.buf(), sa.buf(), b.buf(), sb.buf(), s.buf(), c.buf_mut(), (m, n, k), g), &rule)?;
    guards_after_refusal(&[&a, &b, &s, &sa, &sb, &c])
}

// ---------------------------------------------------------------- SwiGLU

#[test]
fn fuzz_swiglu() {
    fuzz("swiglu", 4, swiglu_case);
}

fn swiglu_case(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::swiglu::{swiglu_reference, swiglu_with, GRID_WIDTHS};
    let (m, n, k) = (rng.size(1, 300, 1, &[128, 256]), rng.size(8, 272, 8, &[128, 256]), rng.size(8, 200, 8, &[64, 128]));
    let (grid_w, ctas) = (rng.pick(&GRID_WIDTHS), rng.pick(&[kernel_ops::Ctas::EvenWaves, kernel_ops::Ctas::EverySm]));
    let sms = rng.range(1, 4);
    let dev = emulator(rng, sms);
    let ops = ops(&dev)?;
    note.set(format!("M x N x K = {m} x {n} x {k}, grid_w {grid_w}, {ctas:?}, {sms} SMs"));
    let (xh, w1h, w3h) = (randn::<f16>(m * k, rng.seed(), 1.0), randn::<f16>(n * k, rng.seed(), 0.5), randn::<f16>(n * k, rng.seed(), 0.5));
    let (x, w1, w3) = (Guarded::new(&dev, rng, "x", &xh), Guarded::new(&dev, rng, "w1", &w1h), Guarded::new(&dev, rng, "w3", &w3h));
    let mut out = Guarded::out(&dev, rng, "out", m * n, f16::NAN);
    ran(swiglu_with(&dev, &ops, x.buf(), w1.buf(), w3.buf(), out.buf_mut(), (m, n, k), grid_w, ctas))?;
    guards_after_run(&[&x, &w1, &w3], &[&out])?;
    let (got, want) = (f32s(&out.get()), swiglu_reference(&xh, &w1h, &w3h, m, n, k));
    // Every element within f16 rounding (2^-10 relative) plus 1e-3 for the
    // f32 accumulation near zero, as tests/swiglu.rs.
    if let Some(i) = (0..got.len()).find(|&i| !((got[i] - want[i]).abs() <= 2f32.powi(-10) * want[i].abs() + 1e-3)) {
        return Err(format!("out[{}, {}] = {}, reference {}", i / n, i % n, got[i], want[i]));
    }
    within("out", rel_err(&got, &want), 1e-3)?;

    let (mut shape, mut lens, mut grid_w) = ((m, n, k), [0isize; 4], grid_w);
    let rule = match rng.below(7) {
        0 => {
            grid_w = 12;
            "planar-snake widths"
        }
        6 => {
            rng.misalign = Some(rng.pick(&["x", "w1", "w3", "out"]));
            "multiple of 16"
        }
        1 => {
            shape.1 += rng.range(1, 7);
            "must be a multiple of 8"
        }
        2 => {
            shape.2 += rng.range(1, 7);
            "must be a multiple of 8"
        }
        3 => {
            shape = zero_one(rng, shape);
            "every dimension must be at least 1"
        }
        4 => {
            lens[2] = -1;
            "`w3` holds"
        }
        _ => {
            lens[3] = 1;
            "`out` holds"
        }
    };
    let (m, n, k) = shape;
    let one = f16::from_f32(1.0);
    let x = Guarded::new(&dev, rng, "x", &vec![one; bump(m * k, lens[0])]);
    let w1 = Guarded::new(&dev, rng, "w1", &vec![one; bump(n * k, lens[1])]);
    let w3 = Guarded::new(&dev, rng, "w3", &vec![one; bump(n * k, lens[2])]);
    let mut out = Guarded::out(&dev, rng, "out", bump(m * n, lens[3]), f16::from_f32(SEVEN));
    note.add(format!("M x N x K = {m} x {n} x {k}, grid_w {grid_w}, lengths {lens:?} off: refused, \"{rule}\""));
    refused(swiglu_with(&dev, &ops, x.buf(), w1.buf(), w3.buf(), out.buf_mut(), shape, grid_w, ctas), rule)?;
    guards_after_refusal(&[&x, &w1, &w3, &out])
}

// ---------------------------------------------------------------- norms

/// A norm entry point and, for the fused ones, its output.
#[derive(Clone, Copy, Debug)]
enum NormOp {
    Softmax,
    LayerNorm,
    RmsNorm,
    /// `add_rms_norm`, or `add_layer_norm` when `layer`; `y` (None) or
    /// FP8 with this scaling.
    Add { layer: bool, fp8: Option<kernel_ops::norms::Fp8Scale> },
}

/// The buffers of a norm call (the ones `op` does not take are ignored).
struct NormBufs<T: Canary> {
    x: Guarded<T>,
    r: Guarded<T>,
    g: Guarded<T>,
    b: Guarded<T>,
    new_r: Guarded<T>,
    y: Guarded<T>,
    q: Guarded<E4M3>,
    s: Guarded<f32>,
}

impl<T: Half + kernel_ops::norms::FusedNormElem> NormBufs<T> {
    fn call(&mut self, ops: &kernel_host::Program, op: NormOp, eps: f32, rows: usize, cols: usize) -> Result<(), kernel_ops::Error> {
        use kernel_ops::norms::{self, NormOut};
        let NormBufs { x, r, g, b, new_r, y, q, s } = self;
        match op {
            NormOp::Softmax => norms::softmax(ops, x.buf(), y.buf_mut(), rows, cols),
            NormOp::LayerNorm => norms::layer_norm(ops, x.buf(), g.buf(), b.buf(), y.buf_mut(), eps, rows, cols),
            NormOp::RmsNorm => norms::rms_norm(ops, x.buf(), g.buf(), y.buf_mut(), eps, rows, cols),
            NormOp::Add { layer, fp8 } => {
                let out = match fp8 {
                    None => NormOut::Y(y.buf_mut()),
                    Some(scale) => NormOut::Fp8 { q: q.buf_mut(), scales: s.buf_mut(), scale },
                };
                if layer {
                    norms::add_layer_norm(ops, x.buf(), r.buf(), g.buf(), b.buf(), new_r.buf_mut(), out, eps, rows, cols)
                } else {
                    norms::add_rms_norm(ops, x.buf(), r.buf(), g.buf(), new_r.buf_mut(), out, eps, rows, cols)
                }
            }
        }
    }
    fn all(&self) -> [&dyn harness::Guard; 8] {
        [&self.x, &self.r, &self.g, &self.b, &self.new_r, &self.y, &self.q, &self.s]
    }
}

#[test]
fn fuzz_norms() {
    fuzz("norms", 20, |rng, note| either_type!(rng, norms_case(rng, note)));
}

fn norms_case<T: Half + kernel_ops::norms::FusedNormElem>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::norms::{self, Fp8Scale, FUSED_MAX_COLS, MAX_COLS};
    let fp8 = [None, None, Some(Fp8Scale::PerRow), Some(Fp8Scale::PerTensor(0.0)), Some(Fp8Scale::PerTensorDynamic)];
    let op = match rng.cycle(&[0, 1, 2, 3, 4]) {
        0 => NormOp::Softmax,
        1 => NormOp::LayerNorm,
        2 => NormOp::RmsNorm,
        _ => NormOp::Add { layer: rng.chance(0.5), fp8: rng.pick(&fp8) },
    };
    // The plain norms take any width up to `MAX_COLS` (a cluster per row
    // above 16384); the fused ones a multiple of 8 up to `FUSED_MAX_COLS`.
    let fused = matches!(op, NormOp::Add { .. });
    let cols = if fused {
        rng.size(8, FUSED_MAX_COLS, 8, &[256, 512, 768, 1024, 2048, 4096, 8192, 12288, FUSED_MAX_COLS])
    } else {
        rng.size(1, MAX_COLS, 1, &[768, 1000, 4096, 12288, 16384, 16392, 32768, MAX_COLS])
    };
    let rows = match cols {
        ..1024 => rng.range(1, 9),
        ..=8192 => rng.range(1, 3),
        _ => rng.range(1, 2),
    };
    let (n, eps) = (rows * cols, rng.pick(&[1e-5, 1e-6, 1e-2]));
    // A `y` longer than the rows (the entry points take it): its tail
    // must stay unwritten.
    let extra = if rng.chance(0.3) { rng.range(1, 8) } else { 0 };
    let dev = emulator(rng, 8);
    let ops = ops(&dev)?;
    let data = |rng: &mut Rng, len: usize, scale: f32, add: f32| -> Vec<T> {
        kernel_host::uniform_f32(len, rng.seed()).into_iter().map(|v| T::of(add + scale * v)).collect()
    };
    let magnitude = 2f32.powi(rng.range(0, 6) as i32 - 3);
    let (mut xh, mut rh) = (data(rng, n, magnitude, 0.0), data(rng, n, magnitude, 0.0));
    // Sometimes a constant row (variance 0: a layer norm that computes
    // E[x²] - E[x]² can go negative there), zero included.
    let constant = rng.chance(0.3).then(|| (rng.below(rows), rng.pick(&[0.0, 0.1, -3.0, magnitude])));
    if let Some((r, c)) = constant {
        xh[r * cols..][..cols].fill(T::of(c));
        rh[r * cols..][..cols].fill(T::of(c / 2.0));
    }
    let (gh, bh) = (data(rng, cols, 1.0 / 32.0, 1.0), data(rng, cols, 0.25, 0.0));
    let (xf, rf, gf, bf) = (f32s(&xh), f32s(&rh), f32s(&gh), f32s(&bh));
    let round = |v: f32| T::of(v).into();
    let (want_r, want_y) = match op {
        NormOp::Softmax => (vec![], norms::softmax_reference(&xf, cols)),
        NormOp::LayerNorm => (vec![], norms::layer_norm_reference(&xf, &gf, &bf, eps, cols)),
        NormOp::RmsNorm => (vec![], norms::rms_norm_reference(&xf, &gf, eps, cols)),
        NormOp::Add { layer, .. } => norms::add_norm_reference(&xf, &rf, &gf, layer.then_some(&bf[..]), eps, cols, round),
    };
    let amax = |v: &[f32]| v.iter().fold(0f32, |m, &x| m.max(x.abs()));
    let op = match op {
        // A calibrated scale near the amax (e4m3's largest finite value is 448).
        NormOp::Add { layer, fp8: Some(Fp8Scale::PerTensor(_)) } => NormOp::Add { layer, fp8: Some(Fp8Scale::PerTensor(amax(&want_y) / rng.uniform(380.0, 440.0))) },
        op => op,
    };
    note.set(format!("{} {op:?}, {rows} x {cols}, eps {eps:e}, inputs x {magnitude}, (row, constant) {constant:?}, y {extra} longer", T::TY));
    let nan = T::of(f32::NAN);
    let scales = if let NormOp::Add { fp8: Some(Fp8Scale::PerRow), .. } = op { rows } else { 1 };
    let mut bufs = NormBufs {
        x: Guarded::new(&dev, rng, "x", &xh),
        r: Guarded::new(&dev, rng, "residual", &rh),
        g: Guarded::new(&dev, rng, "gamma", &gh),
        b: Guarded::new(&dev, rng, "beta", &bh),
        new_r: Guarded::out(&dev, rng, "new_residual", n, nan),
        y: Guarded::out(&dev, rng, "y", n + extra, nan),
        q: Guarded::out(&dev, rng, "q", n, E4M3::NAN),
        s: Guarded::out(&dev, rng, "scales", scales, f32::NAN),
    };
    ran(bufs.call(&ops, op, eps, rows, cols))?;
    let b = &bufs;
    guards_after_run(&[&b.x, &b.r, &b.g, &b.b], &[&b.new_r, &b.y, &b.q, &b.s])?;
    if let NormOp::Add { .. } = op {
        if f32s(&b.new_r.get()) != want_r {
            return Err("new_residual is not round(x + residual)".into());
        }
    }
    match op {
        NormOp::Add { fp8: Some(scale), .. } => {
            // Dequantized q against the reference y: e4m3 rounds to 2^-4
            // relative of the row's or the tensor's amax (tests/norms.rs).
            let (q, s) = (b.q.get(), b.s.get());
            for row in 0..rows {
                let want = &want_y[row * cols..][..cols];
                // An all-zero row or tensor is scaled by 1 (`Fp8Scale`'s docs).
                let of_amax = |a: f32| if a > 0.0 { a / 448.0 } else { 1.0 };
                let sc = match scale {
                    Fp8Scale::PerRow => of_amax(amax(want)),
                    Fp8Scale::PerTensor(s) => s,
                    Fp8Scale::PerTensorDynamic => of_amax(amax(&want_y)),
                };
                let got_scale = s[if scale == Fp8Scale::PerRow { row } else { 0 }];
                if !((got_scale / sc - 1.0).abs() < 1e-2) {
                    return Err(format!("row {row}: scale {got_scale}, {sc} expected"));
                }
                let deq: Vec<f32> = q[row * cols..][..cols].iter().map(|v| v.to_f32() * got_scale).collect();
                if amax(want) == 0.0 {
                    if deq.iter().any(|&v| v != 0.0) {
                        return Err(format!("row {row} of q: not all zero, as y is"));
                    }
                    continue;
                }
                within(&format!("row {row} of q, dequantized"), norms::max_rel_error(&deq.iter().map(|&v| T::of(v)).collect::<Vec<T>>(), want), 0.07)?;
            }
        }
        _ => {
            let y = b.y.get();
            within("y", norms::max_rel_error(&y[..n], &want_y), T::NORM)?;
            if !same_bits(&y[n..], &vec![nan; extra]) {
                return Err(format!("y's {extra} elements past the rows were written"));
            }
        }
    }

    let (mut rows, mut cols, mut short) = (rows, cols, "");
    let rule = match rng.below(8) {
        0 if fused => {
            cols -= rng.range(1, 7);
            "the fused norms take rows of a non-zero multiple of 8"
        }
        7 => {
            rng.misalign = Some(rng.pick(match op {
                NormOp::Softmax => &["x", "y"][..],
                NormOp::LayerNorm => &["x", "gamma", "beta", "y"],
                NormOp::RmsNorm => &["x", "gamma", "y"],
                NormOp::Add { layer: true, fp8: None } => &["x", "residual", "gamma", "beta", "new_residual", "y"],
                NormOp::Add { layer: false, fp8: None } => &["x", "residual", "gamma", "new_residual", "y"],
                NormOp::Add { fp8: Some(_), .. } => &["x", "residual", "gamma", "new_residual", "q", "scales"],
            }));
            "multiple of 16"
        }
        1 => {
            cols = 0;
            if fused {
                "cols = 0: the fused norms take rows of a non-zero multiple of 8"
            } else {
                "cols = 0: rows of 1 to 65536 columns are implemented"
            }
        }
        2 if fused => {
            cols = FUSED_MAX_COLS + 8;
            "the fused norms take rows of at most 16384 columns"
        }
        0 | 2 => {
            cols = MAX_COLS + rng.range(1, 9);
            "rows of 1 to 65536 columns are implemented"
        }
        3 => {
            rows = 0;
            "rows = 0: must be in 1..="
        }
        4 => {
            short = "x";
            "`x` holds"
        }
        5 => match op {
            NormOp::Add { fp8: Some(_), .. } => {
                short = "q";
                "`q` holds"
            }
            _ => {
                short = "y";
                "`y` holds"
            }
        },
        _ => match op {
            NormOp::Softmax => {
                short = "x";
                "`x` holds"
            }
            NormOp::Add { fp8: Some(Fp8Scale::PerRow), .. } if rng.chance(0.5) => {
                short = "scales";
                "`scales` holds"
            }
            _ => {
                short = "gamma";
                "`gamma` holds"
            }
        },
    };
    let n = rows * cols;
    let len = |name: &str, want: usize| if name == short { want.saturating_sub(1) } else { want };
    let (one, seven) = (T::of(1.0), T::of(SEVEN));
    let mut bufs = NormBufs {
        x: Guarded::new(&dev, rng, "x", &vec![one; len("x", n)]),
        r: Guarded::new(&dev, rng, "residual", &vec![one; n]),
        g: Guarded::new(&dev, rng, "gamma", &vec![one; len("gamma", cols)]),
        b: Guarded::new(&dev, rng, "beta", &vec![one; cols]),
        new_r: Guarded::out(&dev, rng, "new_residual", n, seven),
        y: Guarded::out(&dev, rng, "y", len("y", n), seven),
        q: Guarded::out(&dev, rng, "q", len("q", n), E4M3::from_f32(SEVEN)),
        s: Guarded::out(&dev, rng, "scales", len("scales", scales), SEVEN),
    };
    let short = if short.is_empty() { String::new() } else { format!(", `{short}` one short") };
    note.add(format!("{rows} x {cols}{short}: refused, \"{rule}\""));
    refused(bufs.call(&ops, op, eps, rows, cols), rule)?;
    guards_after_refusal(&bufs.all())
}

// ---------------------------------------------------------------- attention

/// Options of a case: causal or not, the default scale or one in 0.05..0.3.
fn attention_options(rng: &mut Rng) -> kernel_ops::attention::Options {
    let scale = rng.chance(0.5).then(|| rng.uniform(0.05, 0.3));
    kernel_ops::attention::Options { causal: rng.chance(0.5), scale }
}

/// `(batch, heads, kv_heads)` with `batch x heads x blocks` at most
/// `ctas` (the emulator's time grows with the GPU threads), `kv_heads`
/// a divisor of `heads` (GQA, MQA, or multi-head).
fn heads_for(rng: &mut Rng, blocks: usize, ctas: usize) -> (usize, usize, usize) {
    let most = (ctas / blocks.max(1)).max(1);
    let batch = rng.range(1, most.min(2));
    let heads = rng.range(1, (most / batch).clamp(1, 4));
    let divisors: Vec<usize> = (1..=heads).filter(|d| heads % d == 0).collect();
    (batch, heads, rng.pick(&divisors))
}

/// The maximum absolute difference of the log-sum-exps; a row that sees
/// no key must be -inf in both.
fn lse_err(got: &[f32], want: &[f32]) -> Result<f64, String> {
    let mut e = 0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_infinite() || g.is_infinite() {
            if g != w {
                return Err(format!("lse[{i}] = {g}, {w} expected"));
            }
        } else {
            e = e.max(f64::from((g - w).abs()));
        }
    }
    Ok(e)
}

/// The log-sum-exp's bound (tests/attention.rs).
const LSE_BOUND: f64 = 2e-3;

#[test]
fn fuzz_attention() {
    fuzz("attention", 4, |rng, note| either_type!(rng, attention_case(rng, note)));
}

#[allow(clippy::too_many_arguments)]
fn attention_call<T: kernel_ops::attention::AttnType>(
    dev: &Device,
    ops: &kernel_host::Program,
    config: Option<kernel_ops::attention::Config>,
    [q, k, v]: [&Guarded<T>; 3],
    o: &mut Guarded<T>,
    lse: &mut Guarded<f32>,
    shape: kernel_ops::attention::Shape,
    opts: kernel_ops::attention::Options,
) -> Result<(), kernel_ops::Error>
where
    T: Canary,
{
    use kernel_ops::attention::{attention, attention_with};
    match config {
        None => attention(dev, ops, q.buf(), k.buf(), v.buf(), o.buf_mut(), lse.buf_mut(), shape, opts),
        Some(c) => attention_with(dev, ops, q.buf(), k.buf(), v.buf(), o.buf_mut(), lse.buf_mut(), shape, opts, c),
    }
}

fn attention_case<T: Half + kernel_ops::attention::AttnType>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::attention::{configs, reference, Config, Shape, HEAD_DIMS};
    let head_dim = rng.cycle(&HEAD_DIMS);
    let built: Vec<Config> = configs(head_dim).into_iter().filter(|c| c.consumers == 2 || T::TY == "f16").collect();
    let config = rng.chance(0.5).then(|| rng.pick(&built));
    // Q rows per CTA: 64 per consumer warpgroup.
    let q_rows = 64 * config.unwrap_or(built[0]).consumers;
    let seq = rng.size(1, 300, 1, &[64, 80, 128, 192, 256]);
    let (batch, heads, kv_heads) = heads_for(rng, seq.div_ceil(q_rows), 4);
    let shape = Shape { batch, seq, heads, kv_heads, head_dim };
    let opts = attention_options(rng);
    let dev = emulator(rng, 8);
    let ops = ops(&dev)?;
    note.set(format!("{} {shape:?} {opts:?}, {}", T::TY, config.map_or("the default instance".into(), |c| format!("{c:?}"))));
    let (qh, kh, vh) = (randn::<T>(shape.q_len(), rng.seed(), 1.0), randn::<T>(shape.kv_len(), rng.seed(), 1.0), randn::<T>(shape.kv_len(), rng.seed(), 1.0));
    let (q, k, v) = (Guarded::new(&dev, rng, "q", &qh), Guarded::new(&dev, rng, "k", &kh), Guarded::new(&dev, rng, "v", &vh));
    let mut o = Guarded::out(&dev, rng, "o", shape.q_len(), T::of(f32::NAN));
    let mut lse = Guarded::out(&dev, rng, "lse", shape.lse_len(), f32::NAN);
    ran(attention_call(&dev, &ops, config, [&q, &k, &v], &mut o, &mut lse, shape, opts))?;
    guards_after_run(&[&q, &k, &v], &[&o, &lse])?;
    let (want_o, want_lse) = reference(&f32s(&qh), &f32s(&kh), &f32s(&vh), shape, opts);
    within("O", rel_err(&f32s(&o.get()), &want_o), T::ATTN)?;
    within("lse", lse_err(&lse.get(), &want_lse)?, LSE_BOUND)?;

    let (mut shape, mut opts, mut config, mut lens) = (shape, opts, config, [0isize; 5]);
    let rule = match rng.below(8) {
        7 => {
            rng.misalign = Some(rng.pick(&["q", "k", "v", "o", "lse"]));
            "multiple of 16".into()
        }
        0 => {
            shape.head_dim = rng.pick(&[32, 96, 512]);
            format!("head_dim = {}: the kernel is built for head_dim in", shape.head_dim)
        }
        1 => {
            (shape.heads, shape.kv_heads) = rng.pick(&[(4, 3), (2, 4), (3, 2)]);
            "kv_heads must divide heads".into()
        }
        2 => {
            let name = match rng.below(4) {
                0 => { shape.batch = 0; "batch" }
                1 => { shape.seq = 0; "seq" }
                2 => { shape.heads = 0; "heads" }
                _ => { shape.kv_heads = 0; "kv_heads" }
            };
            format!("{name} = 0: every size must be at least 1")
        }
        3 => {
            opts.scale = Some(rng.pick(&[f32::NAN, 0.0, -0.125, f32::INFINITY]));
            "the softmax scale must be finite and positive".into()
        }
        4 => {
            let i = rng.pick(&[1, 3, 4]);
            lens[i] = rng.pick(&[-1, 1]);
            format!("`{}` holds", ["q", "k", "v", "o", "lse"][i])
        }
        5 => {
            config = Some(Config { stages: 7, block_n: 96, consumers: 2 });
            format!("head_dim {} is built as", shape.head_dim)
        }
        _ if T::TY == "bf16" && shape.head_dim == 64 => {
            config = Some(Config { stages: 3, block_n: 128, consumers: 3 });
            "are built for f16 only".into()
        }
        _ => {
            lens[0] = -1;
            "`q` holds".into()
        }
    };
    let l = [shape.q_len(), shape.kv_len(), shape.kv_len(), shape.q_len(), shape.lse_len()];
    let one = T::of(1.0);
    let (q, k, v) = (Guarded::new(&dev, rng, "q", &vec![one; bump(l[0], lens[0])]), Guarded::new(&dev, rng, "k", &vec![one; bump(l[1], lens[1])]), Guarded::new(&dev, rng, "v", &vec![one; l[2]]));
    let mut o = Guarded::out(&dev, rng, "o", bump(l[3], lens[3]), T::of(SEVEN));
    let mut lse = Guarded::out(&dev, rng, "lse", bump(l[4], lens[4]), SEVEN);
    note.add(format!("{shape:?} {opts:?} {config:?}, lengths {lens:?} off: refused, \"{rule}\""));
    refused(attention_call(&dev, &ops, config, [&q, &k, &v], &mut o, &mut lse, shape, opts), &rule)?;
    guards_after_refusal(&[&q, &k, &v, &o, &lse])
}

/// A gradient's relative Frobenius error, with the reference's norm
/// floored at 1e-3 per element: where every query sees one key (or P is
/// one-hot), dS and so dQ and dK are exactly 0 in f64, and the kernel's
/// are rounding noise (~1e-8: `delta` is taken from the rounded O), which
/// no relative bound admits.
fn grad_err(got: &[f32], want: &[f32]) -> f64 {
    let (num, den) = got.iter().zip(want).fold((0f64, 0f64), |(n, d), (&g, &w)| (n + f64::from(g - w).powi(2), d + f64::from(w).powi(2)));
    if got.iter().any(|g| !g.is_finite()) {
        return f64::INFINITY;
    }
    (num / den.max(1e-6 * want.len() as f64)).sqrt()
}

#[test]
fn fuzz_attention_backward() {
    fuzz("attention_backward", 3, |rng, note| either_type!(rng, attention_backward_case(rng, note)));
}

fn attention_backward_case<T: Half + kernel_ops::attention::AttnType>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::attention::{attention, attention_backward, reference_backward, Shape, BWD_HEAD_DIMS};
    let head_dim = rng.cycle(&BWD_HEAD_DIMS);
    let seq = rng.size(1, 200, 1, &[64, 128]);
    let (batch, heads, kv_heads) = heads_for(rng, seq.div_ceil(128), 2);
    let shape = Shape { batch, seq, heads, kv_heads, head_dim };
    let opts = attention_options(rng);
    let dev = emulator(rng, 8);
    let ops = ops(&dev)?;
    note.set(format!("{} {shape:?} {opts:?}", T::TY));
    let gen = |rng: &mut Rng, len| randn::<T>(len, rng.seed(), 1.0);
    let (qh, kh, vh, doh) = (gen(rng, shape.q_len()), gen(rng, shape.kv_len()), gen(rng, shape.kv_len()), gen(rng, shape.q_len()));
    let (q, k, v, d_o) = (Guarded::new(&dev, rng, "q", &qh), Guarded::new(&dev, rng, "k", &kh), Guarded::new(&dev, rng, "v", &vh), Guarded::new(&dev, rng, "d_o", &doh));
    let mut o = Guarded::out(&dev, rng, "o", shape.q_len(), T::default());
    let mut lse = Guarded::out(&dev, rng, "lse", shape.lse_len(), 0f32);
    ran(attention(&dev, &ops, q.buf(), k.buf(), v.buf(), o.buf_mut(), lse.buf_mut(), shape, opts))?;
    let (o, lse) = (Guarded::new(&dev, rng, "o", &o.get()), Guarded::new(&dev, rng, "lse", &lse.get()));
    let nan = T::of(f32::NAN);
    let mut dq = Guarded::out(&dev, rng, "dq", shape.q_len(), nan);
    let (mut dk, mut dv) = (Guarded::out(&dev, rng, "dk", shape.kv_len(), nan), Guarded::out(&dev, rng, "dv", shape.kv_len(), nan));
    ran(attention_backward(&dev, &ops, q.buf(), k.buf(), v.buf(), o.buf(), lse.buf(), d_o.buf(), dq.buf_mut(), dk.buf_mut(), dv.buf_mut(), shape, opts))?;
    guards_after_run(&[&q, &k, &v, &o, &lse, &d_o], &[&dq, &dk, &dv])?;
    let (want_dq, want_dk, want_dv) = reference_backward(&f32s(&qh), &f32s(&kh), &f32s(&vh), &f32s(&doh), shape, opts);
    within("dQ", grad_err(&f32s(&dq.get()), &want_dq), T::ATTN_BWD)?;
    within("dK", grad_err(&f32s(&dk.get()), &want_dk), T::ATTN_BWD)?;
    within("dV", grad_err(&f32s(&dv.get()), &want_dv), T::ATTN_BWD)?;

    let (mut shape, mut lens) = (shape, [0isize; 9]);
    let names = ["q", "k", "v", "o", "lse", "d_o", "dq", "dk", "dv"];
    let rule = match rng.below(4) {
        3 => {
            rng.misalign = Some(rng.pick(&names));
            "multiple of 16".into()
        }
        0 => {
            shape.head_dim = 256;
            "head_dim = 256: the backward pass is built for head_dim in [64, 128]".to_string()
        }
        1 => {
            (shape.heads, shape.kv_heads) = (4, 3);
            "kv_heads must divide heads".into()
        }
        _ => {
            let i = rng.range(4, 8);
            lens[i] = rng.pick(&[-1, 1]);
            format!("`{}` holds", names[i])
        }
    };
    let l = [shape.q_len(), shape.kv_len(), shape.kv_len(), shape.q_len(), shape.lse_len(), shape.q_len(), shape.q_len(), shape.kv_len(), shape.kv_len()];
    let one = T::of(1.0);
    let ins: Vec<Guarded<T>> = [0, 1, 2, 3, 5].iter().map(|&i| Guarded::new(&dev, rng, names[i], &vec![one; bump(l[i], lens[i])])).collect();
    let lse = Guarded::new(&dev, rng, "lse", &vec![0f32; bump(l[4], lens[4])]);
    let mut outs: Vec<Guarded<T>> = (6..9).map(|i| Guarded::out(&dev, rng, names[i], bump(l[i], lens[i]), T::of(SEVEN))).collect();
    note.add(format!("{shape:?}, lengths {lens:?} off: refused, \"{rule}\""));
    let [dq, dk, dv] = &mut outs[..] else { unreachable!() };
    refused(attention_backward(&dev, &ops, ins[0].buf(), ins[1].buf(), ins[2].buf(), ins[3].buf(), lse.buf(), ins[4].buf(), dq.buf_mut(), dk.buf_mut(), dv.buf_mut(), shape, opts), &rule)?;
    let all: Vec<&dyn harness::Guard> = ins.iter().chain(&outs).map(|g| g as &dyn harness::Guard).chain([&lse as &dyn harness::Guard]).collect();
    guards_after_refusal(&all)
}

// ---------------------------------------------------------------- varlen

/// Offsets from lengths.
fn offsets(lens: &[usize]) -> Vec<u32> {
    std::iter::once(0).chain(lens.iter().scan(0u32, |s, &l| {
        *s += l as u32;
        Some(*s)
    }))
    .collect()
}

/// A sequence length in `0..=hi`: empty, one token, a block edge or one
/// past it, a prime, any.
fn seq_len(rng: &mut Rng, hi: usize) -> usize {
    let any = rng.size(1, hi, 1, &[64, 80, 128]);
    rng.pick(&[0, 1, any, any])
}

/// The buffers of a varlen call: `o` and `lse` are the forward's outputs
/// and the backward's inputs.
struct VarlenBufs<T: Canary> {
    q: Guarded<T>,
    k: Guarded<T>,
    v: Guarded<T>,
    cq: Guarded<u32>,
    ck: Guarded<u32>,
    o: Guarded<T>,
    lse: Guarded<f32>,
    d_o: Guarded<T>,
    dq: Guarded<T>,
    dk: Guarded<T>,
    dv: Guarded<T>,
}

impl<T: Half + kernel_ops::attention::varlen::VarlenType> VarlenBufs<T> {
    /// Guarded buffers for `shape`: inputs from `data` (q, k, v, d_o),
    /// outputs filled with `fill`, each length changed by `lens` (in
    /// [`VARLEN_NAMES`] order).
    #[allow(clippy::too_many_arguments)]
    fn new(dev: &Device, rng: &mut Rng, shape: kernel_ops::attention::VarlenShape, data: [&[T]; 4], (cu_q, cu_k): (&[u32], &[u32]), fill: T, lens: [isize; 11]) -> Self {
        let sized = |x: &[T], d: isize| -> Vec<T> { (0..bump(x.len(), d)).map(|i| x.get(i).copied().unwrap_or(fill)).collect() };
        let cu = |x: &[u32], d: isize| -> Vec<u32> { (0..bump(x.len(), d)).map(|i| x.get(i).copied().unwrap_or(0)).collect() };
        let (ql, kl) = (shape.q_len(), shape.kv_len());
        VarlenBufs {
            q: Guarded::new(dev, rng, "q", &sized(data[0], lens[0])),
            k: Guarded::new(dev, rng, "k", &sized(data[1], lens[1])),
            v: Guarded::new(dev, rng, "v", &sized(data[2], lens[2])),
            cq: Guarded::new(dev, rng, "cu_seqlens_q", &cu(cu_q, lens[3])),
            ck: Guarded::new(dev, rng, "cu_seqlens_k", &cu(cu_k, lens[4])),
            o: Guarded::out(dev, rng, "o", bump(ql, lens[5]), fill),
            lse: Guarded::out(dev, rng, "lse", bump(shape.lse_len(), lens[6]), f32::NAN),
            d_o: Guarded::new(dev, rng, "d_o", &sized(data[3], lens[7])),
            dq: Guarded::out(dev, rng, "dq", bump(ql, lens[8]), fill),
            dk: Guarded::out(dev, rng, "dk", bump(kl, lens[9]), fill),
            dv: Guarded::out(dev, rng, "dv", bump(kl, lens[10]), fill),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call(&mut self, dev: &Device, ops: &kernel_host::Program, backward: bool, shape: kernel_ops::attention::VarlenShape, opts: kernel_ops::attention::Options, errors: &mut kernel_ops::attention::VarlenErrors) -> Result<(), kernel_ops::Error> {
        use kernel_ops::attention::{attention_varlen, attention_varlen_backward};
        let b = self;
        if backward {
            attention_varlen_backward(dev, ops, b.q.buf(), b.k.buf(), b.v.buf(), b.o.buf(), b.lse.buf(), b.d_o.buf(), b.cq.buf(), b.ck.buf(), b.dq.buf_mut(), b.dk.buf_mut(), b.dv.buf_mut(), shape, opts, errors)
        } else {
            attention_varlen(dev, ops, b.q.buf(), b.k.buf(), b.v.buf(), b.cq.buf(), b.ck.buf(), b.o.buf_mut(), b.lse.buf_mut(), shape, opts, errors)
        }
    }

    /// The inputs and the outputs of the pass.
    fn roles(&self, backward: bool) -> (Vec<&dyn harness::Guard>, Vec<&dyn harness::Guard>) {
        let mut ins: Vec<&dyn harness::Guard> = vec![&self.q, &self.k, &self.v, &self.cq, &self.ck];
        let outs: Vec<&dyn harness::Guard> = if backward {
            ins.extend([&self.o as &dyn harness::Guard, &self.lse, &self.d_o]);
            vec![&self.dq, &self.dk, &self.dv]
        } else {
            vec![&self.o, &self.lse]
        };
        (ins, outs)
    }
}

/// The buffers of [`VarlenBufs`], in its length order.
const VARLEN_NAMES: [&str; 11] = ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "o", "lse", "d_o", "dq", "dk", "dv"];

#[test]
fn fuzz_attention_varlen() {
    fuzz("attention_varlen", 5, |rng, note| either_type!(rng, varlen_case(rng, note)));
}

fn varlen_case<T: Half + kernel_ops::attention::varlen::VarlenType>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::attention::varlen::{reference_varlen, reference_varlen_backward, VarlenErrors, VarlenShape};
    use kernel_ops::attention::{BWD_HEAD_DIMS, HEAD_DIMS};
    let backward = rng.cycle(&[false, true, false]);
    let head_dim = rng.pick(if backward { &BWD_HEAD_DIMS[..] } else { &HEAD_DIMS[..] });
    let batch = rng.range(1, 3);
    let (mut lq, mut lk): (Vec<usize>, Vec<usize>) = ((0..batch).map(|_| seq_len(rng, 150)).collect(), (0..batch).map(|_| seq_len(rng, 150)).collect());
    // The longest sequence has a query and a key (max_seqlen_* >= 1).
    let b = rng.below(batch);
    (lq[b], lk[b]) = (lq[b].max(1), lk[b].max(1));
    let (max_q, max_k) = (*lq.iter().max().unwrap(), *lk.iter().max().unwrap());
    // Rows after the last sequence, in no sequence.
    let (pad_q, pad_k) = (rng.range(0, 3), rng.range(0, 2));
    let most = (4 / (batch * max_q.div_ceil(128))).clamp(1, 3);
    let heads = rng.range(1, most);
    let kv_heads = rng.pick(&(1..=heads).filter(|d| heads % d == 0).collect::<Vec<_>>());
    let shape = VarlenShape { batch, total_q: lq.iter().sum::<usize>() + pad_q, total_k: lk.iter().sum::<usize>() + pad_k, heads, kv_heads, head_dim, max_seqlen_q: max_q, max_seqlen_k: max_k };
    let opts = attention_options(rng);
    let (cu_q, cu_k) = (offsets(&lq), offsets(&lk));
    let dev = emulator(rng, 8);
    let ops = ops(&dev)?;
    note.set(format!("{} {} lq {lq:?} lk {lk:?}, {shape:?} {opts:?}", T::TY, if backward { "backward" } else { "forward" }));
    let gen = |rng: &mut Rng, len| randn::<T>(len, rng.seed(), 1.0);
    let (qh, kh, vh, doh) = (gen(rng, shape.q_len()), gen(rng, shape.kv_len()), gen(rng, shape.kv_len()), gen(rng, shape.q_len()));
    let nan = T::of(f32::NAN);
    let mut bufs = VarlenBufs::new(&dev, rng, shape, [&qh, &kh, &vh, &doh], (&cu_q, &cu_k), nan, [0; 11]);
    let mut errors = VarlenErrors::new(&dev).map_err(|e| e.to_string())?;
    ran(bufs.call(&dev, &ops, false, shape, opts, &mut errors))?;
    let (qf, kf, vf) = (f32s(&qh), f32s(&kh), f32s(&vh));
    let (end_q, end_k) = (*cu_q.last().unwrap() as usize, *cu_k.last().unwrap() as usize);
    let (row_q, row_k) = (heads * head_dim, kv_heads * head_dim);
    // Rows outside every sequence are never written (the module's docs).
    let untouched = |name: &str, got: &[T], from: usize| -> Result<(), String> {
        if same_bits(&got[from..], &vec![nan; got.len() - from]) { Ok(()) } else { Err(format!("{name}: a row outside every sequence was written")) }
    };
    if !backward {
        ran(errors.check(&dev))?;
        let (ins, outs) = bufs.roles(false);
        guards_after_run(&ins, &outs)?;
        let (want_o, want_lse) = reference_varlen(&qf, &kf, &vf, &cu_q, &cu_k, shape, opts);
        let o = bufs.o.get();
        untouched("o", &o, end_q * row_q)?;
        within("O", rel_err(&f32s(&o[..end_q * row_q]), &want_o[..end_q * row_q]), T::ATTN)?;
        let lse = bufs.lse.get();
        for h in 0..heads {
            let rows = h * shape.total_q..(h + 1) * shape.total_q;
            let (got, want) = (&lse[rows.clone()], &want_lse[rows]);
            within(&format!("lse of head {h}"), lse_err(&got[..end_q], &want[..end_q])?, LSE_BOUND)?;
            if !same_bits(&got[end_q..], &vec![f32::NAN; shape.total_q - end_q]) {
                return Err(format!("lse of head {h}: a row outside every sequence was written"));
            }
        }
    } else {
        // The forward's o and lse, as the backward's inputs.
        let (o, lse) = (bufs.o.get(), bufs.lse.get());
        bufs.o = Guarded::new(&dev, rng, "o", &o);
        bufs.lse = Guarded::new(&dev, rng, "lse", &lse);
        ran(bufs.call(&dev, &ops, true, shape, opts, &mut errors))?;
        ran(errors.check(&dev))?;
        let (ins, outs) = bufs.roles(true);
        guards_after_run(&ins, &outs)?;
        let (want_dq, want_dk, want_dv) = reference_varlen_backward(&qf, &kf, &vf, &f32s(&doh), &cu_q, &cu_k, shape, opts);
        let dq = bufs.dq.get();
        untouched("dq", &dq, end_q * row_q)?;
        within("dQ", grad_err(&f32s(&dq[..end_q * row_q]), &want_dq[..end_q * row_q]), T::ATTN_BWD)?;
        within("dK", grad_err(&f32s(&bufs.dk.get()[..end_k * row_k]), &want_dk[..end_k * row_k]), T::ATTN_BWD)?;
        within("dV", grad_err(&f32s(&bufs.dv.get()[..end_k * row_k]), &want_dv[..end_k * row_k]), T::ATTN_BWD)?;
    }

    if rng.chance(0.4) {
        // Offsets only the device sees, broken: clamped, nothing written
        // outside the outputs, reported by `VarlenErrors::check`.
        let (mut cu_q, mut cu_k, mut shape) = (cu_q, cu_k, shape);
        // Any offset: past the total, or swapped with the next one (a
        // decrease midway: `varlen_offsets` keeps the sequences apart; see
        // `found_varlen_offsets_that_decrease_midway_make_sequences_race`).
        let broken = |rng: &mut Rng, cu: &mut Vec<u32>, total: usize| {
            let b = rng.range(1, batch);
            if b < batch && cu[b] < cu[b + 1] && rng.chance(0.5) {
                cu.swap(b, b + 1);
            } else {
                cu[b] = (total + rng.range(1, 40)) as u32;
            }
        };
        let rule = match rng.below(4) {
            0 => {
                broken(rng, &mut cu_q, shape.total_q);
                "cu_seqlens_q"
            }
            1 => {
                broken(rng, &mut cu_k, shape.total_k);
                "cu_seqlens_k"
            }
            2 if max_q > 1 => {
                shape.max_seqlen_q = max_q - 1;
                "more queries than max_seqlen_q"
            }
            _ if max_k > 1 => {
                shape.max_seqlen_k = max_k - 1;
                "more keys than max_seqlen_k"
            }
            _ if !backward => {
                let b = rng.below(batch);
                (cu_k[b], cu_k[b + 1]) = (cu_k[b + 1] + 1, cu_k[b]);
                "cu_seqlens_k"
            }
            _ => {
                cu_q[batch] = (shape.total_q + rng.range(1, 40)) as u32;
                "cu_seqlens_q"
            }
        };
        note.add(format!("cu_seqlens_q {cu_q:?}, cu_seqlens_k {cu_k:?}, max_seqlen {}/{}: flagged, \"{rule}\"", shape.max_seqlen_q, shape.max_seqlen_k));
        let mut bad = VarlenBufs::new(&dev, rng, shape, [&qh, &kh, &vh, &doh], (&cu_q, &cu_k), nan, [0; 11]);
        bad.o = Guarded::new(&dev, rng, "o", &bufs.o.get());
        bad.lse = Guarded::new(&dev, rng, "lse", &bufs.lse.get());
        errors.clear(&dev).map_err(|e| e.to_string())?;
        ran(bad.call(&dev, &ops, backward, shape, opts, &mut errors))?;
        refused(errors.check(&dev), rule)?;
        let (ins, outs) = bad.roles(backward);
        return guards_after_run(&ins, &outs);
    }
    let (mut shape, mut lens) = (shape, [0isize; 11]);
    let out = if backward { rng.range(8, 10) } else { rng.range(5, 6) };
    let rule = match rng.below(7) {
        0 => {
            lens[3 + rng.below(2)] = rng.pick(&[-1, 1]);
            "holds".to_string()
        }
        6 => {
            rng.misalign = Some(rng.pick(if backward { &VARLEN_NAMES[..] } else { &VARLEN_NAMES[..7] }));
            "multiple of 16".into()
        }
        1 => {
            shape.max_seqlen_q = 0;
            "max_seqlen_q must be at least 1 and at most total_q".into()
        }
        2 => {
            shape.max_seqlen_k = shape.total_k + 1;
            "max_seqlen_k must be at least 1 and at most total_k".into()
        }
        3 => {
            shape.head_dim = if backward { 256 } else { 96 };
            format!("head_dim = {}: this pass is built for head_dim in", shape.head_dim)
        }
        4 => {
            (shape.heads, shape.kv_heads) = (4, 3);
            "kv_heads must divide heads".into()
        }
        _ => {
            lens[out] = rng.pick(&[-1, 1]);
            format!("`{}` holds", VARLEN_NAMES[out])
        }
    };
    let rule = if rule == "holds" { format!("`{}` holds", VARLEN_NAMES[if lens[3] != 0 { 3 } else { 4 }]) } else { rule };
    let (q, k) = (vec![T::of(1.0); shape.q_len()], vec![T::of(1.0); shape.kv_len()]);
    let mut bad = VarlenBufs::new(&dev, rng, shape, [&q, &k, &k, &q], (&cu_q, &cu_k), T::of(SEVEN), lens);
    note.add(format!("{shape:?}, lengths {lens:?} off: refused, \"{rule}\""));
    refused(bad.call(&dev, &ops, backward, shape, opts, &mut errors), &rule)?;
    let (ins, outs) = bad.roles(backward);
    guards_after_refusal(&[ins, outs].concat())
}

/// Found by `fuzz_attention_varlen` (seed 0x5a5062697453af2c of base seed
/// 5): offsets that decrease in the middle of `cu_seqlens_q` (or
/// `cu_seqlens_k`) make two sequences overlap after the clamp. With
/// `cu_seqlens_q = [0, 50, 30, 80]`, sequence 1 (`50..30`) is clamped to
/// empty and flagged, but sequences 0 (`0..50`) and 2 (`30..80`, neither
/// flagged) both write rows 30..50 of `o` and `lse` (the backward: of
/// `dq`; with `cu_seqlens_k = [0, 10, 5, 30]`, keys 5..10 of `dk`, `dv`)
/// from different CTAs: a write-write race, which the emulator reports as
/// an error instead of the documented clamp and flag (on a GPU: unordered
/// stores, so those rows hold either sequence's values, while
/// `VarlenErrors::check` names only sequence 1). Nothing outside the
/// outputs is written. Fixed: `varlen_offsets` makes the offsets
/// non-decreasing (a running maximum, clamped to the total) before the
/// kernels read them, so sequences cannot overlap; this is its regression
/// test, and the fuzz cases now break offsets anywhere.
#[test]
fn found_varlen_offsets_that_decrease_midway_make_sequences_race() {
    use kernel_ops::attention::{attention_varlen, attention_varlen_backward, Options, VarlenErrors, VarlenShape};
    let dev = Device::emulator_with(kernel_host::emulate::Emulator::new(1));
    let ops = ops(&dev).unwrap();
    let shape = VarlenShape { batch: 3, total_q: 80, total_k: 30, heads: 1, kv_heads: 1, head_dim: 64, max_seqlen_q: 50, max_seqlen_k: 10 };
    let q = dev.upload(&randn::<f16>(shape.q_len(), 1, 1.0)).unwrap();
    let k = dev.upload(&randn::<f16>(shape.kv_len(), 2, 1.0)).unwrap();
    let mut failures = Vec::new();
    let (good_q, good_k) = ([0u32, 10, 20, 30], [0u32, 10, 20, 30]);
    for (backward, cu_q, cu_k, rule) in [(false, [0u32, 50, 30, 80], good_k, "cu_seqlens_q[1..=2] decreases"), (true, [0, 50, 30, 80], good_k, "cu_seqlens_q[1..=2] decreases"), (true, good_q, [0, 10, 5, 30], "cu_seqlens_k[1..=2] decreases")] {
        let (cq, ck) = (dev.upload(&cu_q).unwrap(), dev.upload(&cu_k).unwrap());
        let mut o = dev.zeros::<f16>(shape.q_len()).unwrap();
        let mut lse = dev.zeros::<f32>(shape.lse_len()).unwrap();
        let (mut dq, mut dk, mut dv) = (dev.zeros::<f16>(shape.q_len()).unwrap(), dev.zeros::<f16>(shape.kv_len()).unwrap(), dev.zeros::<f16>(shape.kv_len()).unwrap());
        let mut errors = VarlenErrors::new(&dev).unwrap();
        let r = if backward {
            attention_varlen_backward(&dev, &ops, &q, &k, &k, &o, &lse, &q, &cq, &ck, &mut dq, &mut dk, &mut dv, shape, Options::default(), &mut errors)
        } else {
            attention_varlen(&dev, &ops, &q, &k, &k, &cq, &ck, &mut o, &mut lse, shape, Options::default(), &mut errors)
        };
        let what = format!("{} with cu_seqlens_q {cu_q:?}, cu_seqlens_k {cu_k:?}", if backward { "backward" } else { "forward" });
        match r.map_err(|e| e.to_string()).and_then(|()| refused(errors.check(&dev), rule)) {
            Ok(()) => {}
            Err(e) => failures.push(format!("{what}: {}", e.lines().next().unwrap_or_default())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------- decode

/// An element of a decode cache: how a value is stored (divided by its
/// scale for FP8) and what the stored element is worth.
trait CacheVal: Canary {
    fn store(x: f32) -> Self;
    fn value(self) -> f32;
    const NAN: Self;
}
impl CacheVal for f16 {
    fn store(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn value(self) -> f32 {
        self.to_f32()
    }
    const NAN: Self = f16::NAN;
}
impl CacheVal for bf16 {
    fn store(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn value(self) -> f32 {
        self.to_f32()
    }
    const NAN: Self = bf16::NAN;
}
impl CacheVal for E4M3 {
    fn store(x: f32) -> Self {
        E4M3::from_f32(x)
    }
    fn value(self) -> f32 {
        self.to_f32()
    }
    const NAN: Self = E4M3::NAN;
}

#[test]
fn fuzz_decode() {
    fuzz("decode", 8, |rng, note| {
        let per_head = rng.chance(0.5);
        match rng.cycle(&[0, 3, 1, 2]) {
            0 => decode_case::<f16, f16>(rng, note, false),
            1 => decode_case::<bf16, bf16>(rng, note, false),
            2 => decode_case::<f16, E4M3>(rng, note, per_head),
            _ => decode_case::<bf16, E4M3>(rng, note, per_head),
        }
    });
}

/// A decode step with queries of `T` against a cache of `C` (FP8 with
/// one scale per KV head when `per_head`).
fn decode_case<T, C>(rng: &mut Rng, note: &Note, per_head: bool) -> Result<(), String>
where
    T: Half + kernel_ops::attention::decode::DecodeType,
    C: CacheVal + kernel_ops::attention::decode::CacheElem<T>,
{
    use kernel_ops::attention::decode::{reference, CacheLayout, Decode, DecodeErrors, DecodeKernel, DecodeOptions, DecodeShape, KvCache, DECODE_HEAD_DIMS, PAGE_SIZES};
    let fp8 = std::mem::size_of::<C>() == 1;
    let (head_dim, tokens, group): (usize, usize, usize) = (rng.pick(&DECODE_HEAD_DIMS), rng.pick(&[1, 1, 2, 3, 5, 8]), rng.pick(&[1, 2, 4, 8, 16]));
    // A 16-bit cache on any kernel (the 8-warp one at head dim 128); the
    // warp-MMA kernels (every FP8 cache) take 16 query rows per CTA, the
    // wgmma kernel 64.
    let kernel = rng.pick(&[DecodeKernel::Auto, DecodeKernel::Wgmma, DecodeKernel::WarpMma, DecodeKernel::WarpMma8]);
    let kernel = if kernel == DecodeKernel::WarpMma8 && (fp8 || head_dim != 128) { DecodeKernel::WarpMma } else { kernel };
    let warp = fp8 || matches!(kernel, DecodeKernel::WarpMma | DecodeKernel::WarpMma8) || (kernel == DecodeKernel::Auto && group * tokens <= 16);
    let row_groups = (group * tokens).div_ceil(if warp { 16 } else { 64 });
    let (batch, kv_heads) = (rng.range(1, 3), rng.range(1, 2));
    let (batch, kv_heads) = if batch * kv_heads * row_groups > 6 { (1, 1) } else { (batch, kv_heads) };
    let shape = DecodeShape { batch, heads: group * kv_heads, kv_heads, head_dim, tokens };
    let layout = if rng.chance(0.5) {
        CacheLayout::Contiguous { max_len: rng.size(1, 300, 1, &[16, 64, 128, 256]) }
    } else {
        let page_size = rng.pick(&PAGE_SIZES);
        let max_pages = rng.range(1, (320 / page_size).max(1));
        CacheLayout::Paged { num_pages: rng.range(1, batch * max_pages + 1), page_size, max_pages }
    };
    let max_len = layout.max_len();
    let blocks = max_len.div_ceil(64);
    // At most 12 CTAs (each split of each sequence, KV head and row group).
    let splits = rng.chance(0.5).then(|| rng.range(1, blocks.min((12 / (batch * kv_heads * row_groups)).max(1))));
    let opts = DecodeOptions { scale: rng.chance(0.3).then(|| rng.uniform(0.05, 0.3)), splits, kernel };
    let mut lens: Vec<u32> = (0..batch)
        .map(|_| {
            let any = rng.size(1, max_len, 1, &[16, 64, 128]);
            rng.pick(&[0, 1, max_len, any, any]) as u32
        })
        .collect();
    // Device values out of range, flagged: a length past max_len (the
    // largest is reported; clamped), a page outside the cache for a key
    // below the length (page 0 read instead).
    let mut want_flags = DecodeErrors::default();
    if rng.chance(0.25) {
        let b = rng.below(batch);
        lens[b] = (max_len + rng.range(1, 100)) as u32;
        want_flags.length_over_max = lens.iter().copied().filter(|&l| l as usize > max_len).max();
    }
    let (table, bad_page) = match layout {
        CacheLayout::Paged { num_pages, page_size, max_pages } => {
            let mut t = vec![0i32; batch * max_pages];
            for b in 0..batch {
                let used = (lens[b] as usize).min(max_len).div_ceil(page_size);
                for p in 0..max_pages {
                    // Entries past a sequence's length are never read: junk.
                    t[b * max_pages + p] = if p < used { rng.below(num_pages) as i32 } else { rng.pick(&[-1, num_pages as i32 + 3, i32::MAX]) };
                }
            }
            let with_keys: Vec<usize> = (0..batch).filter(|&b| lens[b] > 0).collect();
            let bad = (!with_keys.is_empty() && rng.chance(0.3)).then(|| {
                let b = rng.pick(&with_keys);
                let p = rng.below((lens[b] as usize).min(max_len).div_ceil(page_size));
                let v = rng.pick(&[-1, -7, num_pages as i32, num_pages as i32 + 100]);
                t[b * max_pages + p] = v;
                v
            });
            want_flags.bad_page = bad;
            (Some(t), bad)
        }
        CacheLayout::Contiguous { .. } => (None, None),
    };
    let dev = emulator(rng, 8);
    let ops = ops(&dev)?;
    note.set(format!("{} queries, {} cache{}, {shape:?}, {layout:?}, lens {lens:?}, {opts:?}{}", T::TY, if fp8 { "FP8" } else { T::TY }, if per_head { " (scales per KV head)" } else { "" }, bad_page.map_or(String::new(), |p| format!(", bad page {p}"))));
    let n = layout.cache_len(&shape);
    let scale_heads = if per_head { kv_heads } else { 1 };
    let scales: Vec<f32> = if fp8 { (0..2 * scale_heads).map(|_| rng.uniform(0.01, 0.03)).collect() } else { vec![] };
    let quant = |x: Vec<f32>, first: usize| -> Vec<C> {
        x.iter().enumerate().map(|(i, &v)| C::store(if fp8 { v / scales[first + (i / head_dim) % kv_heads % scale_heads] } else { v })).collect()
    };
    let (mut kc, mut vc) = (quant(kernel_host::randn_f32(n, rng.seed()), 0), quant(kernel_host::randn_f32(n, rng.seed()), scale_heads));
    // Every row no sequence reads is NaN: it must not reach O (page 0
    // stays: a bad entry reads it).
    let row_len = kv_heads * head_dim;
    let mut read = vec![false; n / row_len];
    for (b, &len) in lens.iter().enumerate() {
        for j in 0..(len as usize).min(max_len) {
            let row = match (layout, &table) {
                (CacheLayout::Paged { num_pages, page_size, max_pages }, Some(t)) => {
                    let e = t[b * max_pages + j / page_size];
                    (if e < 0 || e as usize >= num_pages { 0 } else { e as usize }) * page_size + j % page_size
                }
                _ => b * max_len + j,
            };
            read[row] = true;
        }
    }
    let page0 = if let CacheLayout::Paged { page_size, .. } = layout { page_size } else { 0 };
    for (r, _) in read.iter().enumerate().filter(|(r, used)| !**used && *r >= page0) {
        kc[r * row_len..][..row_len].fill(C::NAN);
        vc[r * row_len..][..row_len].fill(C::NAN);
    }
    let qh = randn::<T>(shape.q_len(), rng.seed(), 1.0);
    let (q, k, v) = (Guarded::new(&dev, rng, "q", &qh), Guarded::new(&dev, rng, "k", &kc), Guarded::new(&dev, rng, "v", &vc));
    let (gl, gs) = (Guarded::new(&dev, rng, "lens", &lens), Guarded::new(&dev, rng, "scales", &scales));
    let gt = Guarded::new(&dev, rng, "block_table", table.as_deref().unwrap_or(&[]));
    let mut out = Guarded::out(&dev, rng, "out", shape.q_len(), T::of(f32::NAN));
    let mut lse = Guarded::out(&dev, rng, "lse", shape.lse_len(), f32::NAN);
    let cache = KvCache { k: k.buf(), v: v.buf(), block_table: table.is_some().then(|| gt.buf()), scales: fp8.then(|| gs.buf()) };
    let mut plan = Decode::new::<T, C>(&dev, &ops, shape, layout, opts).map_err(|e| format!("refused a valid plan: {e}"))?;
    ran(plan.run(&dev, &ops, q.buf(), &cache, gl.buf(), out.buf_mut(), lse.buf_mut()))?;
    guards_after_run(&[&q, &k, &v, &gl, &gs, &gt], &[&out, &lse])?;
    let flags = plan.errors(&dev).map_err(|e| e.to_string())?;
    if flags != want_flags {
        return Err(format!("flags {flags:?}, {want_flags:?} expected"));
    }
    if (want_flags == DecodeErrors::default()) != plan.check(&dev).is_ok() {
        return Err("Decode::check disagrees with the flags".into());
    }
    let value = |c: &[C]| c.iter().map(|&x| x.value()).collect::<Vec<f32>>();
    let (want_o, want_lse) = reference(&f32s(&qh), &value(&kc), &value(&vc), &lens, table.as_deref(), fp8.then_some(&scales[..]), shape, layout, opts.scale);
    within("O", rel_err(&f32s(&out.get()), &want_o), T::DECODE)?;
    // tests/decode.rs's bound.
    within("lse", lse_err(&lse.get(), &want_lse)?, 5e-3)?;

    // One rule broken: of the plan (nothing allocated or launched) or of
    // the call (nothing written).
    let plan_rule = |s: DecodeShape, l: CacheLayout, o: DecodeOptions, rule: &str| {
        note.add(format!("the plan {s:?}, {l:?}, {o:?}: refused, \"{rule}\""));
        refused(Decode::new::<T, C>(&dev, &ops, s, l, o).map(drop), rule)
    };
    let which = rng.below(12);
    match which {
        0 => return plan_rule(DecodeShape { head_dim: 96, ..shape }, layout, opts, "head_dim = 96"),
        1 => return plan_rule(DecodeShape { heads: 3, kv_heads: 2, ..shape }, layout, opts, "kv_heads must divide heads"),
        2 => return plan_rule(DecodeShape { heads: 32 * kv_heads, ..shape }, layout, opts, "at most 16 query heads per KV head"),
        3 => return plan_rule(DecodeShape { tokens: 9, ..shape }, layout, opts, "at most 8 query tokens"),
        4 => return plan_rule(shape, CacheLayout::Paged { num_pages: 4, page_size: 48, max_pages: 2 }, opts, "page_size = 48"),
        5 => return plan_rule(shape, layout, DecodeOptions { splits: Some(blocks + 1), ..opts }, "splits = "),
        6 => return plan_rule(shape, layout, DecodeOptions { scale: Some(rng.pick(&[f32::NAN, 0.0, -1.0])), ..opts }, "finite and positive"),
        _ => {}
    }
    let mut lens_off = [0isize; 4];
    let rule = match which {
        8 if rng.chance(0.5) => {
            rng.misalign = Some(rng.pick(&["q", "lens", "out", "lse"]));
            "multiple of 16".into()
        }
        7 | 8 => {
            let i = rng.below(4);
            lens_off[i] = rng.pick(&[-1, 1]);
            format!("`{}` holds", ["q", "out", "lse", "lens"][i])
        }
        9 if fp8 => "needs its scales".into(),
        9 => "only an FP8".into(),
        10 if fp8 => "`scales` holds 3 elements".into(),
        _ if table.is_some() => "a paged cache needs its block table".into(),
        _ => "a block table was passed for a contiguous cache".into(),
    };
    let q = Guarded::new(&dev, rng, "q", &vec![T::of(1.0); bump(shape.q_len(), lens_off[0])]);
    let gl = Guarded::new(&dev, rng, "lens", &vec![1u32; bump(batch, lens_off[3])]);
    let mut out = Guarded::out(&dev, rng, "out", bump(shape.q_len(), lens_off[1]), T::of(SEVEN));
    let mut lse = Guarded::out(&dev, rng, "lse", bump(shape.lse_len(), lens_off[2]), SEVEN);
    let three = Guarded::new(&dev, rng, "scales", &[1f32; 3]);
    let other_table = Guarded::new(&dev, rng, "block_table", &[0i32]);
    let cache = match which {
        9 => KvCache { scales: (!fp8).then(|| three.buf()), ..cache },
        10 if fp8 => KvCache { scales: Some(three.buf()), ..cache },
        10 | 11 => KvCache { block_table: if table.is_some() { None } else { Some(other_table.buf()) }, ..cache },
        _ => cache,
    };
    note.add(format!("lengths of q, out, lse, lens {lens_off:?} off: refused, \"{rule}\""));
    refused(plan.run(&dev, &ops, q.buf(), &cache, gl.buf(), out.buf_mut(), lse.buf_mut()), &rule)?;
    guards_after_refusal(&[&q, &k, &v, &gl, &gs, &gt, &out, &lse, &three, &other_table])
}
