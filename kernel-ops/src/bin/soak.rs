//! Soak: a random mix of the library's kernels for a set time, every
//! output checked.
//!
//! Each step picks an op (GEMM in f16/bf16, FP8 GEMM, attention forward
//! and backward in f16/bf16, softmax / layer norm / RMS norm in
//! f16/bf16/f32 at any width, the fused residual RMS norm, SwiGLU), a
//! random shape within the op's rules, fresh N(0, 1) inputs and a random
//! 16-byte offset of every output inside a larger allocation; runs the op
//! 1 to 4 times back to back; then checks
//! - **canaries**: the bytes before and after every output are what they
//!   were (nothing written outside an output);
//! - **values**: sampled rows (and, for small attention backward problems,
//!   everything) against the CPU references of `kernel_ops` in f64/f32, at
//!   the bounds the tests use; every `--check-every`th step;
//! - **memory**: GPU memory in use (`cuMemGetInfo`) and the process's
//!   resident memory, every 10 s: neither may grow by more than a bound
//!   after the first quarter of the run.
//!
//! A failure prints its step, seed, op and shape, and the run exits
//! non-zero at the end (it goes on to count further failures).
//!
//! ```text
//! soak [--seconds 600] [--seed 1] [--ops matmul,attention,...] [--small] [--check-every 1]
//! ```
//! On a GPU the default is 600 s at large shapes; without one, 20 s on the
//! CPU emulator at tiny shapes (saying so). `--small` picks small shapes
//! on a GPU too (for `compute-sanitizer`, which runs kernels ~100x slower).
use clap::Parser;
use kernel_device::{bf16, f16, E4M3};
use kernel_host::{rel_frobenius_error_f32 as rel_err, Buffer, Device, DeviceRepr, Program};
use kernel_ops::attention::{self, Options, Shape};
use kernel_ops::norms::{self, NormOut};
use kernel_ops::{fp8, Matmul};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Runs a random mix of kernel_ops kernels for a set time, checking canaries around every output, sampled outputs against CPU references, and memory use")]
struct Args {
    /// Seconds to run (default: 600 on a GPU, 20 on the emulator).
    #[arg(long)]
    seconds: Option<f64>,
    /// Seed of the mix (shapes, ops, inputs).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only these ops (comma list of: matmul, fp8, attention, attention_bwd, norm, add_rms_norm, swiglu).
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// Small shapes on a GPU too (for compute-sanitizer runs).
    #[arg(long)]
    small: bool,
    /// Compare values with the CPU reference every this many steps (canaries: every step).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    check_every: u64,
}

const OPS: [&str; 7] = ["matmul", "fp8", "attention", "attention_bwd", "norm", "add_rms_norm", "swiglu"];

/// splitmix64: the mix's shapes and choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo ..= hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.range(0, xs.len() - 1)]
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    /// A multiple of `unit` in `lo ..= hi`, log-uniform (as many small
    /// sizes as large ones).
    fn size(&mut self, lo: usize, hi: usize, unit: usize) -> usize {
        let (a, b) = ((lo.max(1) as f64).ln(), (hi as f64).ln());
        let v = (a + (b - a) * (self.next() >> 11) as f64 / (1u64 << 53) as f64).exp() as usize;
        (v / unit * unit).clamp(lo.next_multiple_of(unit), hi / unit * unit)
    }
}

/// An element type of an input or output: how it is made from f32 and
/// read back, and its bits (for canaries).
trait El: DeviceRepr + Copy + Default + 'static {
    const TY: &'static str;
    fn of(x: f32) -> Self;
    fn f(self) -> f32;
    fn bits(self) -> u32;
}
macro_rules! el {
    ($t:ty, $name:literal, $of:expr, $f:expr, $bits:expr) => {
        impl El for $t {
            const TY: &'static str = $name;
            fn of(x: f32) -> Self {
                $of(x)
            }
            fn f(self) -> f32 {
                $f(self)
            }
            fn bits(self) -> u32 {
                $bits(self) as u32
            }
        }
    };
}
el!(f16, "f16", f16::from_f32, f16::to_f32, f16::to_bits);
el!(bf16, "bf16", bf16::from_f32, bf16::to_f32, bf16::to_bits);
el!(f32, "f32", |x| x, |x| x, f32::to_bits);
el!(E4M3, "e4m3", E4M3::from_f32, |x: E4M3| x.to_f32(), |x: E4M3| x.to_bits());

/// The canary value around outputs: exact in every output type (-28 =
/// -1.75 · 2^4), so a write of any other value there changes its bits.
const CANARY: f32 = -28.0;

/// Inputs: windows of one pool of N(0, 1) samples per type (made once:
/// generating fresh samples per step would leave the GPU idle).
struct Pool {
    f32s: Vec<f32>,
}
impl Pool {
    fn take<T: El>(&self, rng: &mut Rng, n: usize) -> Vec<T> {
        let len = self.f32s.len();
        let start = rng.range(0, len - 1);
        (0..n).map(|i| T::of(self.f32s[(start + i * 7) % len])).collect()
    }
}

/// An output inside a larger allocation whose other bytes hold
/// [`CANARY`]s: the view starts a random multiple of 16 bytes in.
struct Guarded<T: El> {
    all: Buffer<T>,
    pre: usize,
    len: usize,
}
impl<T: El> Guarded<T> {
    fn new(dev: &Device, rng: &mut Rng, len: usize) -> Result<Self, String> {
        let size = size_of::<T>();
        let pre = (256 + 16 * rng.range(0, 15)) / size;
        let post = (256 + 16 * rng.range(0, 3)) / size;
        let all = dev.upload(&vec![T::of(CANARY); pre + len + post]).map_err(|e| e.to_string())?;
        Ok(Guarded { all, pre, len })
    }
    /// The output's view (borrowing the allocation's memory).
    fn view(&self, dev: &Device) -> Result<Buffer<T>, String> {
        let at = self.all.address() + (self.pre * size_of::<T>()) as u64;
        // SAFETY: `pre .. pre + len` lies in `all`, which outlives every use
        // of the view (each step drops its views before its `Guarded`s);
        // work on it is ordered on the device's stream.
        let view = unsafe {
            if dev.is_gpu() {
                Buffer::borrow_gpu(dev, at, self.len)
            } else {
                Buffer::borrow_host(dev, at as *mut T, self.len)
            }
        };
        view.map_err(|e| e.to_string())
    }
    /// The output after checking the canaries on both sides.
    fn get(&self, dev: &Device, name: &str) -> Result<Vec<T>, String> {
        let all = dev.download(&self.all).map_err(|e| e.to_string())?;
        let canary = T::of(CANARY).bits();
        let outside = (0..self.pre).chain(self.pre + self.len..all.len());
        if let Some(i) = outside.into_iter().find(|&i| all[i].bits() != canary) {
            let at = i as isize - self.pre as isize;
            return Err(format!("`{name}`: a canary was overwritten at element {at} of the view (length {}): {} there", self.len, all[i].f()));
        }
        Ok(all[self.pre..self.pre + self.len].to_vec())
    }
}

/// One step's result: `Err` for a failure (its message).
type Step = Result<String, String>;

/// Bounds of a sampled comparison, per type (the tests' bounds).
fn bound<T: El>(f16_bound: f64, bf16_bound: f64) -> f64 {
    match T::TY {
        "bf16" => bf16_bound,
        "f32" => f16_bound / 4.0,
        _ => f16_bound,
    }
}

fn within(what: &str, err: f64, bound: f64) -> Result<(), String> {
    if err <= bound {
        Ok(())
    } else {
        Err(format!("{what}: relative error {err:.3e} above {bound:.1e}"))
    }
}

/// [`within`] for a row against its reference, saying on failure how many
/// values are not finite and the largest magnitudes of both.
fn row_within(what: &str, got: &[f32], want: &[f32], bound: f64) -> Result<(), String> {
    within(what, rel_err(got, want), bound).map_err(|e| {
        let big = |v: &[f32]| v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let bad = got.iter().filter(|v| !v.is_finite()).count();
        format!("{e} ({bad} of {} values not finite; largest magnitude {:e}, the reference's {:e})", got.len(), big(got), big(want))
    })
}

/// Rows to compare: a few spread at random.
fn sample_rows(rng: &mut Rng, rows: usize, n: usize) -> Vec<usize> {
    let mut r: Vec<usize> = (0..n.min(rows)).map(|_| rng.range(0, rows - 1)).collect();
    r.sort_unstable();
    r.dedup();
    r
}

struct Ctx<'a> {
    dev: &'a Device,
    ops: &'a Program,
    mm: &'a Matmul<'a>,
    pool: &'a Pool,
    small: bool,
    check: bool,
    reps: usize,
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn matmul<T: El + kernel_ops::matmul::MatmulElem>(c: &Ctx, rng: &mut Rng) -> Step {
    let hi = if c.small { 256 } else if c.dev.is_gpu() { 8192 } else { 192 };
    let (m, n, k) = (rng.size(1, hi, 1), rng.size(8, hi, 8), rng.size(8, hi, 8));
    let what = format!("matmul {} {m} x {n} x {k}", T::TY);
    let (ah, bh) = (c.pool.take::<T>(rng, m * k), c.pool.take::<T>(rng, n * k));
    let (a, b) = (c.dev.upload(&ah).map_err(s)?, c.dev.upload(&bh).map_err(s)?);
    let out = Guarded::<T>::new(c.dev, rng, m * n)?;
    {
        let mut view = out.view(c.dev)?;
        for _ in 0..c.reps {
            c.mm.matmul(&a, (m, k), &b, (n, k), &mut view).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let got = out.get(c.dev, "c").map_err(|e| format!("{what}: {e}"))?;
    if c.check {
        for r in sample_rows(rng, m, 2) {
            let want = kernel_ops::grouped::grouped_reference(&ah[r * k..][..k], &bh, &[1], n, k);
            let row: Vec<f32> = got[r * n..][..n].iter().map(|v| v.f()).collect();
            row_within(&format!("{what}: row {r}"), &row, &want, bound::<T>(5e-3, 2e-2))?;
        }
    }
    Ok(what)
}

fn matmul_fp8(c: &Ctx, rng: &mut Rng) -> Step {
    let hi = if c.small { 256 } else if c.dev.is_gpu() { 8192 } else { 192 };
    let (m, n, k) = (rng.size(1, hi, 1), rng.size(8, hi, 8), rng.size(16, hi, 16));
    let what = format!("matmul_fp8 e4m3 {m} x {n} x {k}");
    let (af, bf) = (c.pool.take::<f32>(rng, m * k), c.pool.take::<f32>(rng, n * k));
    let ((ah, sa), (bh, sb)) = (fp8::quantize(&af), fp8::quantize(&bf));
    let (a, b, scales) = (c.dev.upload(&ah).map_err(s)?, c.dev.upload(&bh).map_err(s)?, c.dev.upload(&[sa, sb]).map_err(s)?);
    let out = Guarded::<f16>::new(c.dev, rng, m * n)?;
    {
        let mut view = out.view(c.dev)?;
        for _ in 0..c.reps {
            fp8::matmul_fp8(c.dev, c.ops, &a, &b, &scales, &mut view, (m, n, k)).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let got = out.get(c.dev, "c").map_err(|e| format!("{what}: {e}"))?;
    if c.check {
        for r in sample_rows(rng, m, 2) {
            let want = fp8::reference(&ah[r * k..][..k], &bh, (sa, sb), 1, n, k);
            let row: Vec<f32> = got[r * n..][..n].iter().map(|v| v.to_f32()).collect();
            row_within(&format!("{what}: row {r}"), &row, &want, 5e-3)?;
        }
    }
    Ok(what)
}

fn attention_shape(c: &Ctx, rng: &mut Rng, head_dims: &[usize], budget: usize) -> (Shape, Options) {
    let head_dim = rng.pick(head_dims);
    let hi = if c.small { 256 } else if c.dev.is_gpu() { 8192 } else { 128 };
    let seq = rng.size(1, hi, 1);
    // The emulator runs at most 4096 threads: one or two CTAs of up to 512.
    let emu = !c.dev.is_gpu();
    let kv_heads = if emu { 1 } else { rng.pick(&[1, 2, 4]) };
    let heads = kv_heads * rng.pick(if emu { &[1, 2][..] } else { &[1, 2, 4] });
    // Batch: up to the element budget of Q.
    let most = if emu { 1 } else { (budget / (seq * heads * head_dim)).clamp(1, 8) };
    let batch = rng.range(1, most);
    let opts = Options { causal: rng.chance(0.5), scale: rng.chance(0.2).then(|| 0.05 + 0.2 * rng.range(0, 100) as f32 / 100.0) };
    (Shape { batch, seq, heads, kv_heads, head_dim }, opts)
}

fn attention_fwd<T: El + attention::AttnType>(c: &Ctx, rng: &mut Rng) -> Step {
    let budget = if c.dev.is_gpu() && !c.small { 1 << 24 } else { 1 << 15 };
    let (shape, opts) = attention_shape(c, rng, &attention::HEAD_DIMS, budget);
    let what = format!("attention {} {shape:?} {opts:?}", T::TY);
    let (qh, kh, vh) = (c.pool.take::<T>(rng, shape.q_len()), c.pool.take::<T>(rng, shape.kv_len()), c.pool.take::<T>(rng, shape.kv_len()));
    let (q, k, v) = (c.dev.upload(&qh).map_err(s)?, c.dev.upload(&kh).map_err(s)?, c.dev.upload(&vh).map_err(s)?);
    let (o, lse) = (Guarded::<T>::new(c.dev, rng, shape.q_len())?, Guarded::<f32>::new(c.dev, rng, shape.lse_len())?);
    {
        let (mut ov, mut lv) = (o.view(c.dev)?, lse.view(c.dev)?);
        for _ in 0..c.reps {
            attention::attention(c.dev, c.ops, &q, &k, &v, &mut ov, &mut lv, shape, opts).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let (got_o, got_lse) = (o.get(c.dev, "o").map_err(|e| format!("{what}: {e}"))?, lse.get(c.dev, "lse").map_err(|e| format!("{what}: {e}"))?);
    if c.check {
        let f = |x: &[T]| x.iter().map(|v| v.f()).collect::<Vec<f32>>();
        let (qf, kf, vf) = (f(&qh), f(&kh), f(&vh));
        let d = shape.head_dim;
        for i in sample_rows(rng, shape.batch * shape.heads * shape.seq, 4) {
            let (b, h, row) = (i / (shape.heads * shape.seq), i / shape.seq % shape.heads, i % shape.seq);
            let (want, want_lse) = attention::reference_row(&qf, &kf, &vf, shape, opts, (b, h, row));
            // O is `[batch, seq, heads, head_dim]`; lse `[batch, heads, seq]`.
            let at = ((b * shape.seq + row) * shape.heads + h) * d;
            let got = f(&got_o[at..][..d]);
            row_within(&format!("{what}: O row (b {b}, h {h}, i {row})"), &got, &want, bound::<T>(1e-2, 3e-2))?;
            let l = got_lse[(b * shape.heads + h) * shape.seq + row];
            if (l - want_lse).abs() > 2e-3 * want_lse.abs().max(1.0) {
                return Err(format!("{what}: lse (b {b}, h {h}, i {row}) {l}, {want_lse} expected"));
            }
        }
    }
    Ok(what)
}

/// A gradient's relative Frobenius error, its denominator floored (a
/// gradient can be all zero: dQ at one key); infinite if any is not finite.
fn grad_err(got: &[f32], want: &[f32]) -> f64 {
    if got.iter().any(|g| !g.is_finite()) {
        return f64::INFINITY;
    }
    let (num, den) = got.iter().zip(want).fold((0f64, 0f64), |(n, d), (&g, &w)| (n + f64::from(g - w).powi(2), d + f64::from(w).powi(2)));
    (num / den.max(1e-6 * want.len() as f64)).sqrt()
}

fn attention_bwd<T: El + attention::AttnType>(c: &Ctx, rng: &mut Rng) -> Step {
    // The reference is the whole backward on the CPU: checked steps stay
    // small (B H S² D up to 2^26).
    let budget = if c.dev.is_gpu() && !c.small && !c.check { 1 << 24 } else { 1 << 15 };
    let (mut shape, opts) = attention_shape(c, rng, &attention::BWD_HEAD_DIMS, budget);
    if c.check {
        while shape.batch * shape.heads * shape.seq * shape.seq * shape.head_dim > 1 << 26 {
            shape.seq /= 2;
        }
    }
    let what = format!("attention_backward {} {shape:?} {opts:?}", T::TY);
    let inputs = [shape.q_len(), shape.kv_len(), shape.kv_len(), shape.q_len()].map(|n| c.pool.take::<T>(rng, n));
    let [q, k, v, d_o] = [0, 1, 2, 3].map(|i| c.dev.upload(&inputs[i]));
    let (q, k, v, d_o) = (q.map_err(s)?, k.map_err(s)?, v.map_err(s)?, d_o.map_err(s)?);
    let mut o = c.dev.upload(&vec![T::default(); shape.q_len()]).map_err(s)?;
    let mut lse = c.dev.zeros::<f32>(shape.lse_len()).map_err(s)?;
    attention::attention(c.dev, c.ops, &q, &k, &v, &mut o, &mut lse, shape, opts).map_err(|e| format!("{what}: forward: {e}"))?;
    let grads = [Guarded::<T>::new(c.dev, rng, shape.q_len())?, Guarded::<T>::new(c.dev, rng, shape.kv_len())?, Guarded::<T>::new(c.dev, rng, shape.kv_len())?];
    {
        let [mut dq, mut dk, mut dv] = [0, 1, 2].map(|i| grads[i].view(c.dev));
        let (dq, dk, dv) = (dq.as_mut().map_err(|e| e.clone())?, dk.as_mut().map_err(|e| e.clone())?, dv.as_mut().map_err(|e| e.clone())?);
        for _ in 0..c.reps {
            attention::attention_backward(c.dev, c.ops, &q, &k, &v, &o, &lse, &d_o, dq, dk, dv, shape, opts).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let mut got = Vec::new();
    for (g, name) in grads.iter().zip(["dq", "dk", "dv"]) {
        got.push(g.get(c.dev, name).map_err(|e| format!("{what}: {e}"))?);
    }
    if c.check {
        let f = |x: &[T]| x.iter().map(|v| v.f()).collect::<Vec<f32>>();
        let (dq, dk, dv) = attention::reference_backward(&f(&inputs[0]), &f(&inputs[1]), &f(&inputs[2]), &f(&inputs[3]), shape, opts);
        for ((g, want), name) in got.iter().zip([dq, dk, dv]).zip(["dQ", "dK", "dV"]) {
            within(&format!("{what}: {name}"), grad_err(&f(g), &want), bound::<T>(1e-2, 4e-2))?;
        }
    }
    Ok(what)
}

fn norm<T: El + norms::NormElem>(c: &Ctx, rng: &mut Rng) -> Step {
    let hi_cols = if c.dev.is_gpu() { norms::MAX_COLS } else { 20000 };
    let cols = rng.size(1, hi_cols, 1);
    let rows = if c.dev.is_gpu() { rng.range(1, ((if c.small { 1 << 14 } else { 1 << 24 }) / cols).max(1)) } else { rng.range(1, 8) };
    let kind = rng.range(0, 2);
    let what = format!("{} {} {rows} x {cols}", ["softmax", "layer_norm", "rms_norm"][kind], T::TY);
    let (xh, gh, bh) = (c.pool.take::<T>(rng, rows * cols), c.pool.take::<T>(rng, cols), c.pool.take::<T>(rng, cols));
    let (x, g, b) = (c.dev.upload(&xh).map_err(s)?, c.dev.upload(&gh).map_err(s)?, c.dev.upload(&bh).map_err(s)?);
    let eps = 1e-5;
    let y = Guarded::<T>::new(c.dev, rng, rows * cols)?;
    {
        let mut yv = y.view(c.dev)?;
        for _ in 0..c.reps {
            match kind {
                0 => norms::softmax(c.ops, &x, &mut yv, rows, cols),
                1 => norms::layer_norm(c.ops, &x, &g, &b, &mut yv, eps, rows, cols),
                _ => norms::rms_norm(c.ops, &x, &g, &mut yv, eps, rows, cols),
            }
            .map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let got = y.get(c.dev, "y").map_err(|e| format!("{what}: {e}"))?;
    if c.check {
        let f = |x: &[T]| x.iter().map(|v| v.f()).collect::<Vec<f32>>();
        let (gf, bf) = (f(&gh), f(&bh));
        for r in sample_rows(rng, rows, 4) {
            let xr = f(&xh[r * cols..][..cols]);
            let want = match kind {
                0 => norms::softmax_reference(&xr, cols),
                1 => norms::layer_norm_reference(&xr, &gf, &bf, eps, cols),
                _ => norms::rms_norm_reference(&xr, &gf, eps, cols),
            };
            within(&format!("{what}: row {r}"), norms::max_rel_error(&got[r * cols..][..cols], &want), bound::<T>(4e-3, 2e-2))?;
        }
    }
    Ok(what)
}

fn add_rms_norm<T: El + norms::FusedNormElem>(c: &Ctx, rng: &mut Rng) -> Step {
    let cols = rng.size(8, if c.dev.is_gpu() { norms::FUSED_MAX_COLS } else { 4096 }, 8);
    let rows = if c.dev.is_gpu() { rng.range(1, ((if c.small { 1 << 14 } else { 1 << 24 }) / cols).max(1)) } else { rng.range(1, 8) };
    let fp8 = rng.chance(0.5);
    let what = format!("add_rms_norm {} {rows} x {cols}{}", T::TY, if fp8 { ", FP8 out per row" } else { "" });
    let n = rows * cols;
    let (xh, rh, gh) = (c.pool.take::<T>(rng, n), c.pool.take::<T>(rng, n), c.pool.take::<T>(rng, cols));
    let (x, r, g) = (c.dev.upload(&xh).map_err(s)?, c.dev.upload(&rh).map_err(s)?, c.dev.upload(&gh).map_err(s)?);
    let eps = 1e-5;
    let new_r = Guarded::<T>::new(c.dev, rng, n)?;
    let y = Guarded::<T>::new(c.dev, rng, n)?;
    let q = Guarded::<E4M3>::new(c.dev, rng, n)?;
    let scales = Guarded::<f32>::new(c.dev, rng, rows)?;
    {
        let (mut nv, mut yv, mut qv, mut sv) = (new_r.view(c.dev)?, y.view(c.dev)?, q.view(c.dev)?, scales.view(c.dev)?);
        for _ in 0..c.reps {
            let out = if fp8 { NormOut::Fp8 { q: &mut qv, scales: &mut sv, scale: norms::Fp8Scale::PerRow } } else { NormOut::Y(&mut yv) };
            norms::add_rms_norm(c.ops, &x, &r, &g, &mut nv, out, eps, rows, cols).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let err = |e: String| format!("{what}: {e}");
    let got_r = new_r.get(c.dev, "new_residual").map_err(err)?;
    // The outputs not written this step keep their canaries too.
    let (got_y, got_q, got_s) = (y.get(c.dev, "y").map_err(err)?, q.get(c.dev, "q").map_err(err)?, scales.get(c.dev, "scales").map_err(err)?);
    if fp8 == (got_y.iter().any(|v| v.bits() != T::of(CANARY).bits())) {
        return Err(format!("{what}: `y` was {} though the output was {}", if fp8 { "written" } else { "not written" }, if fp8 { "FP8" } else { "y" }));
    }
    if c.check {
        let f = |x: &[T]| x.iter().map(|v| v.f()).collect::<Vec<f32>>();
        let gf = f(&gh);
        for row in sample_rows(rng, rows, 4) {
            let (xr, rr) = (f(&xh[row * cols..][..cols]), f(&rh[row * cols..][..cols]));
            let (want_r, want_y) = norms::add_norm_reference(&xr, &rr, &gf, None, eps, cols, |v| T::of(v).f());
            if f(&got_r[row * cols..][..cols]) != want_r {
                return Err(format!("{what}: row {row} of new_residual is not round(x + residual)"));
            }
            let got: Vec<f32> = if fp8 { got_q[row * cols..][..cols].iter().map(|v| v.to_f32() * got_s[row]).collect() } else { f(&got_y[row * cols..][..cols]) };
            // e4m3 keeps 3 mantissa bits: 2^-4 relative of the row's amax.
            let b = if fp8 { 0.07 } else { bound::<T>(4e-3, 2e-2) };
            within(&format!("{what}: row {row} of y"), norms::max_rel_error(&got.iter().map(|&v| T::of(v)).collect::<Vec<T>>(), &want_y), b)?;
        }
    }
    Ok(what)
}

fn swiglu(c: &Ctx, rng: &mut Rng) -> Step {
    let hi = if c.small { 256 } else if c.dev.is_gpu() { 8192 } else { 192 };
    let (m, n, k) = (rng.size(8, hi, 8), rng.size(8, hi, 8), rng.size(8, hi, 8));
    let what = format!("swiglu f16 {m} x {n} x {k}");
    // Weights scaled by 1/sqrt(K), as models initialize them: with N(0, 1)
    // weights, silu(a)·b of a, b ~ N(0, K) passes f16's 65504 in about one
    // row in 60 at K = 7664 (the first soak's one failure: an infinity).
    let w = |rng: &mut Rng| -> Vec<f16> { c.pool.take::<f32>(rng, n * k).into_iter().map(|v| f16::from_f32(v / (k as f32).sqrt())).collect() };
    let (xh, w1h, w3h) = (c.pool.take::<f16>(rng, m * k), w(rng), w(rng));
    let (x, w1, w3) = (c.dev.upload(&xh).map_err(s)?, c.dev.upload(&w1h).map_err(s)?, c.dev.upload(&w3h).map_err(s)?);
    let out = Guarded::<f16>::new(c.dev, rng, m * n)?;
    {
        let mut view = out.view(c.dev)?;
        for _ in 0..c.reps {
            kernel_ops::swiglu::swiglu(c.dev, c.ops, &x, &w1, &w3, &mut view, (m, n, k)).map_err(|e| format!("{what}: {e}"))?;
        }
    }
    let got = out.get(c.dev, "out").map_err(|e| format!("{what}: {e}"))?;
    if c.check {
        for r in sample_rows(rng, m, 2) {
            let want = kernel_ops::swiglu::swiglu_reference(&xh[r * k..][..k], &w1h, &w3h, 1, n, k);
            let row: Vec<f32> = got[r * n..][..n].iter().map(|v| v.to_f32()).collect();
            row_within(&format!("{what}: row {r}"), &row, &want, 1e-2)?;
        }
    }
    Ok(what)
}

/// Bytes of GPU memory in use (`cuMemGetInfo`: total - free), or `None`
/// on the emulator.
fn gpu_used(dev: &Device) -> Option<u64> {
    dev.as_gpu()?;
    let (free, total) = kernel_host::cudarc::driver::result::mem_get_info().ok()?;
    Some((total - free) as u64)
}

/// The process's resident memory in bytes (Linux `/proc/self/statm`).
fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    Some(statm.split_whitespace().nth(1)?.parse::<u64>().ok()? * 4096)
}

fn main() -> ExitCode {
    let args = Args::parse();
    for op in &args.ops {
        if !OPS.contains(&op.as_str()) {
            eprintln!("error: --ops: unknown op `{op}`; the ops are {}", OPS.join(", "));
            return ExitCode::from(2);
        }
    }
    let dev = match Device::gpu_or_emulator() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&dev, &args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dev: &Device, args: &Args) -> Result<bool, String> {
    let gpu = dev.is_gpu();
    if !gpu {
        println!("no CUDA GPU found: the soak runs on the CPU emulator at tiny shapes (correctness, canaries; no memory figures)");
    }
    let seconds = args.seconds.unwrap_or(if gpu { 600.0 } else { 20.0 });
    let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).map_err(s)?;
    let mm = Matmul::with_cache(dev, std::env::temp_dir().join("kernel-ops-soak-no-cache.tsv")).map_err(s)?;
    let pool = Pool { f32s: kernel_host::randn::<f32>(if gpu { 1 << 22 } else { 1 << 14 }, args.seed ^ 0x5EED) };
    let chosen: Vec<&str> = if args.ops.is_empty() { OPS.to_vec() } else { OPS.iter().copied().filter(|o| args.ops.iter().any(|a| a == o)).collect() };
    println!("soak on {}: {seconds} s, seed {}, ops {}, values checked every {} step(s){}", dev.describe(), args.seed, chosen.join(","), args.check_every, if args.small { ", small shapes" } else { "" });

    let mut rng = Rng(args.seed);
    let (start, run_for) = (Instant::now(), Duration::from_secs_f64(seconds));
    // Per op: steps, launches, failures.
    let mut counts: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    let mut failures = Vec::new();
    let (mut samples, mut next_sample) = (Vec::<(f64, Option<u64>, Option<u64>)>::new(), Duration::ZERO);
    let mut step = 0u64;
    while start.elapsed() < run_for {
        if start.elapsed() >= next_sample {
            samples.push((start.elapsed().as_secs_f64(), gpu_used(dev), resident()));
            next_sample += Duration::from_secs(10);
        }
        let op = rng.pick(&chosen);
        let seed = rng.next();
        let mut r = Rng(seed);
        let c = Ctx { dev, ops: &ops, mm: &mm, pool: &pool, small: args.small || !gpu, check: step % args.check_every == 0, reps: if gpu { r.range(1, 4) } else { 1 } };
        let typed = r.range(0, 2);
        let res = match (op, typed) {
            ("matmul", 0) => matmul::<f16>(&c, &mut r),
            ("matmul", _) => matmul::<bf16>(&c, &mut r),
            ("fp8", _) => matmul_fp8(&c, &mut r),
            ("attention", 0) => attention_fwd::<f16>(&c, &mut r),
            ("attention", _) => attention_fwd::<bf16>(&c, &mut r),
            ("attention_bwd", 0) => attention_bwd::<f16>(&c, &mut r),
            ("attention_bwd", _) => attention_bwd::<bf16>(&c, &mut r),
            ("norm", 0) => norm::<f16>(&c, &mut r),
            ("norm", 1) => norm::<bf16>(&c, &mut r),
            ("norm", _) => norm::<f32>(&c, &mut r),
            ("add_rms_norm", 0) => add_rms_norm::<f16>(&c, &mut r),
            ("add_rms_norm", _) => add_rms_norm::<bf16>(&c, &mut r),
            _ => swiglu(&c, &mut r),
        };
        let e = counts.entry(op).or_default();
        e.0 += 1;
        e.1 += c.reps as u64;
        if let Err(msg) = res {
            e.2 += 1;
            eprintln!("FAIL step {step} (seed {seed:#x}, {op}): {msg}");
            failures.push(msg);
        }
        step += 1;
    }
    samples.push((start.elapsed().as_secs_f64(), gpu_used(dev), resident()));
    dev.synchronize().map_err(s)?;

    println!("{:<14} {:>7} {:>9} {:>8}", "op", "steps", "launches", "failed");
    for (op, (steps, launches, failed)) in &counts {
        println!("{op:<14} {steps:>7} {launches:>9} {failed:>8}");
    }
    // Memory: after the first quarter of the run (pools and caches
    // warmed), neither may grow beyond its bound.
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let mut mem_ok = true;
    let settled: Vec<_> = samples.iter().filter(|s| s.0 >= seconds / 4.0).collect();
    for (what, get, slack) in [("GPU memory in use", 1usize, 256u64 << 20), ("resident host memory", 2, 1 << 30)] {
        let vals: Vec<u64> = settled.iter().filter_map(|s| if get == 1 { s.1 } else { s.2 }).collect();
        if let (Some(first), Some(max)) = (vals.first(), vals.iter().max()) {
            let grew = max.saturating_sub(*first);
            let ok = grew <= slack;
            mem_ok &= ok;
            println!("{what}: {:.0} MiB after the first quarter, at most {:.0} MiB after it ({} samples, growth {:.0} MiB, bound {:.0} MiB): {}", mb(*first), mb(*max), vals.len(), mb(grew), mb(slack), if ok { "flat" } else { "GROWS" });
        }
    }
    let total: u64 = counts.values().map(|c| c.0).sum();
    println!("{} steps in {:.1} s, {} failed", total, start.elapsed().as_secs_f64(), failures.len());
    Ok(failures.is_empty() && mem_ok)
}
