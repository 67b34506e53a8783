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
use harness::{emulator, fuzz, guards_after_refusal, guards_after_run, ran, refused, rel_err, within, Canary, Guarded, Note, Rng};
use kernel_device::{bf16, f16, E4M3};
use kernel_host::Device;

/// The 16-bit element types, from and to f32.
trait Half: Canary + Into<f32> + kernel_host::cudarc::driver::ValidAsZeroBits + Default {
    const TY: &'static str;
    fn of(x: f32) -> Self;
}
impl Half for f16 {
    const TY: &'static str = "f16";
    fn of(x: f32) -> Self {
        f16::from_f32(x)
    }
}
impl Half for bf16 {
    const TY: &'static str = "bf16";
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

// ---------------------------------------------------------------- matmul

#[test]
fn fuzz_matmul() {
    fuzz("matmul", 4, |rng, note| either_type!(rng, matmul_case(rng, note)));
}

fn matmul_case<E: Half + MatmulTestElem>(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::matmul::INSTANCES;
    use kernel_ops::Matmul;
    let (m, n, k) = (rng.size(1, 300, 1, &[128, 256]), rng.size(8, 272, 8, &[128, 256]), rng.size(8, 200, 8, &[64, 128]));
    let sms = rng.range(1, 8);
    let inst = rng.chance(0.5).then(|| &INSTANCES[rng.below(INSTANCES.len())]);
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
    let rule = match rng.below(6) {
        0 => {
            shape.1 += rng.range(1, 7);
            "N must be a multiple of 8"
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
enum Fp8 {
    Tensor { grid_w: u32, ctas: kernel_ops::Ctas },
    Rowwise,
    Block,
}

/// One call of variant `v`; `sa` is `[scale_a, scale_b]` for per-tensor
/// scales (`sb` unused), else A's scales and `sb` B's.
#[allow(clippy::too_many_arguments)]
fn fp8_call(dev: &Device, ops: &kernel_host::Program, v: Fp8, a: &Guarded<E4M3>, sa: &Guarded<f32>, b: &Guarded<E4M3>, sb: &Guarded<f32>, c: &mut Guarded<f16>, shape: (usize, usize, usize)) -> Result<(), kernel_ops::Error> {
    use kernel_ops::fp8::*;
    match v {
        Fp8::Tensor { grid_w, ctas } => matmul_fp8_with(dev, ops, a.buf(), b.buf(), sa.buf(), c.buf_mut(), shape, grid_w, ctas),
        Fp8::Rowwise => matmul_fp8_rowwise(dev, ops, a.buf(), sa.buf(), b.buf(), sb.buf(), c.buf_mut(), shape),
        Fp8::Block => matmul_fp8_blockscaled(dev, ops, a.buf(), sa.buf(), b.buf(), sb.buf(), c.buf_mut(), shape),
    }
}

/// The lengths of the scale buffers of variant `v` at `m x n x k`.
fn fp8_scale_lens(v: Fp8, (m, n, k): (usize, usize, usize)) -> (usize, usize) {
    match v {
        Fp8::Tensor { .. } => (2, 0),
        Fp8::Rowwise => (m, n),
        Fp8::Block => (k.div_ceil(128) * m, n.div_ceil(128) * k.div_ceil(128)),
    }
}

/// A `rows x cols` matrix of N(0, 1) samples scaled by 2^e, e varying by
/// row and by 128-column block within 2^-3..2^3 (so that a scale applied
/// to the wrong row or block is a large error), as f32.
fn ragged_magnitudes(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let (er, ec): (Vec<i32>, Vec<i32>) = ((0..5).map(|_| rng.range(0, 3) as i32 - 2).collect(), (0..3).map(|_| rng.range(0, 2) as i32 - 1).collect());
    let x = kernel_host::randn_f32(rows * cols, rng.seed());
    x.iter().enumerate().map(|(i, v)| v * 2f32.powi(er[(i / cols) % 5] + ec[(i % cols) / 128 % 3])).collect()
}

#[test]
fn fuzz_fp8() {
    fuzz("fp8", 4, fp8_case);
}

fn fp8_case(rng: &mut Rng, note: &Note) -> Result<(), String> {
    use kernel_ops::fp8::*;
    let v = match rng.below(4) {
        0 | 1 => Fp8::Tensor { grid_w: rng.pick(&GRID_WIDTHS), ctas: rng.pick(&[kernel_ops::Ctas::EvenWaves, kernel_ops::Ctas::EverySm]) },
        2 => Fp8::Rowwise,
        _ => Fp8::Block,
    };
    let (m, n, k) = (rng.size(1, 300, 1, &[128, 256]), rng.size(8, 272, 8, &[128, 256]), rng.size(16, 288, 16, &[128, 256]));
    let sms = rng.range(1, 4);
    let dev = emulator(rng, sms);
    let ops = ops(&dev)?;
    note.set(format!("{v:?} M x N x K = {m} x {n} x {k}, {sms} SMs"));
    let (af, bf) = (ragged_magnitudes(rng, m, k), ragged_magnitudes(rng, n, k));
    let (qa, qb, sa, sb, want) = match v {
        Fp8::Tensor { .. } => {
            let ((qa, sa), (qb, sb)) = (quantize(&af), quantize(&bf));
            let want = reference(&qa, &qb, (sa, sb), m, n, k);
            (qa, qb, vec![sa, sb], vec![], want)
        }
        Fp8::Rowwise => {
            let ((qa, sa), (qb, sb)) = (quantize_rowwise(&af, m, k), quantize_rowwise(&bf, n, k));
            let want = reference_rowwise(&qa, &sa, &qb, &sb, m, n, k);
            (qa, qb, sa, sb, want)
        }
        Fp8::Block => {
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
    let rule = match rng.below(6) {
        0 => {
            shape.2 += 8;
            "must be a multiple of 16"
        }
        1 => {
            shape.1 += rng.range(1, 7);
            "must be a multiple of 8"
        }
        2 => {
            shape.rng_zero(rng);
            "every dimension must be at least 1"
        }
        3 => {
            lens[2] = rng.pick(&[-1, 1]);
            "`c` holds"
        }
        4 => {
            lens[3] = rng.pick(&[-1, 1]);
            if let Fp8::Tensor { .. } = v { "`scales` holds" } else { "`a_scales` holds" }
        }
        _ => match v {
            Fp8::Tensor { ctas, .. } => {
                let v = Fp8::Tensor { grid_w: 12, ctas };
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

/// Sets one of three dimensions to 0.
trait ZeroOne {
    fn rng_zero(&mut self, rng: &mut Rng);
}
impl ZeroOne for (usize, usize, usize) {
    fn rng_zero(&mut self, rng: &mut Rng) {
        match rng.below(3) {
            0 => self.0 = 0,
            1 => self.1 = 0,
            _ => self.2 = 0,
        }
    }
}

/// Variant `v` at `shape` with the lengths of a, b, c, A's and B's scales
/// changed by `lens`: refused with `rule`, nothing written.
#[allow(clippy::too_many_arguments)]
fn fp8_refusal(dev: &Device, ops: &kernel_host::Program, rng: &mut Rng, note: &Note, v: Fp8, (m, n, k): (usize, usize, usize), lens: [isize; 5], rule: &str) -> Result<(), String> {
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
    fuzz("grouped", 4, |rng, note| match rng.below(3) {
        0 => grouped_case::<f16>(rng, note),
        1 => grouped_case::<bf16>(rng, note),
        _ => grouped_fp8_case(rng, note),
    });
}

/// `g` ragged group sizes (empty ones, one row, primes, a 128-row block
/// and one row either side, any) of at most `cap` rows in all; sometimes
/// all empty.
fn group_sizes(rng: &mut Rng, cap: usize) -> Vec<u32> {
    let g = rng.range(1, 5);
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
    let rule = match rng.below(if fp8 { 7 } else { 6 }) {
        0 => {
            g = 0;
            "N, K and the group count must be at least 1".to_string()
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
            lens[3] = rng.pick(&[-1, 1]);
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
    fuzz("swiglu", 3, swiglu_case);
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
    let rule = match rng.below(6) {
        0 => {
            grid_w = 12;
            "planar-snake widths"
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
            shape.rng_zero(rng);
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
