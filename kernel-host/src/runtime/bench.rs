//! Benchmark helpers (see DESIGN.md, "Performance method"): seeded iid
//! N(0, 1) inputs of every element type ([`randn`], [`randn_f16`],
//! [`randn_bf16`], [`randn_f32`]), CPU reference products, the relative
//! Frobenius error, CUDA-event timing of each iteration on a [`Gpu`] or a
//! [`Device`](crate::Device) ([`time_kernel`]), and TFLOP/s.
//!
//! ```no_run
//! # use kernel_host::*;
//! # use kernel_device::f16;
//! # fn main() -> Result<()> {
//! # let (m, n, k) = (256usize, 256usize, 256usize);
//! # let gpu = Gpu::new(0)?;
//! let (a, b) = (randn_f16(m * k, 1), randn_f16(n * k, 2));
//! let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
//! let mut dc = gpu.zeros::<f16>(m * n)?;
//! let blas = Blas::new(&gpu)?;
//! blas.gemm_nt(m, n, k, &da, &db, &mut dc)?;
//! let err = rel_frobenius_error(&gpu.download(&dc)?, &reference_gemm_nt(m, n, k, &a, &b));
//! let t = time_kernel(&gpu, 10, 50, || blas.gemm_nt(m, n, k, &da, &db, &mut dc))?;
//! println!("{:.0} TFLOP/s", tflops(m, n, k, t.median_ms));
//! # Ok(()) }
//! ```

use super::error::{Error, Result};
use super::gpu::Gpu;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use half::{bf16, f16};
use kernel_device::{E4M3, E5M2};
use std::fmt;

/// splitmix64 (Steele, Lea, Flood 2014): a 64-bit state advanced by a
/// constant, then mixed; every seed, 0 included, gives a full-period stream.
/// The generator of [`randn_f16`] and [`randn_f32`], and of the shapes the
/// fuzz tests of `kernel-ops` draw (the same stream on every machine).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// `n` iid N(0, 1) samples in f64 from `seed` (Box–Muller on splitmix64).
fn randn_into(n: usize, seed: u64, mut sink: impl FnMut(f64)) {
    let mut rng = SplitMix64::new(seed);
    let mut produced = 0;
    while produced < n {
        // u1 in (0, 1] so that ln(u1) is finite.
        let u1 = 1.0 - rng.next_f64();
        let u2 = rng.next_f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        sink(r * c);
        produced += 1;
        if produced < n {
            sink(r * s);
            produced += 1;
        }
    }
}

/// An element type [`randn`] makes samples of: an f64 rounded to it (to
/// nearest, as `half` and `float8` round; FP8 saturates at its largest
/// finite value, which N(0, 1) samples of E4M3 (448) never reach).
pub trait Randn: Copy {
    /// `x` rounded to this type.
    fn from_f64(x: f64) -> Self;
}

macro_rules! randn_elems {
    ($($t:ty => |$x:ident| $e:expr),* $(,)?) => {$(
        impl Randn for $t {
            fn from_f64($x: f64) -> Self {
                $e
            }
        }
    )*};
}
randn_elems!(
    f64 => |x| x,
    f32 => |x| x as f32,
    f16 => |x| f16::from_f64(x),
    bf16 => |x| bf16::from_f64(x),
    E4M3 => |x| E4M3::from_f64(x),
    E5M2 => |x| E5M2::from_f64(x),
);

/// `n` iid N(0, 1) samples rounded to `T` (f16, bf16, f32, f64, E4M3,
/// E5M2), the same for the same `seed` on every machine (splitmix64 +
/// Box–Muller in f64): every element type rounds the same f64 stream, so
/// `randn::<bf16>(n, s)` is `randn::<f64>(n, s)` rounded to bf16.
/// Different seeds give independent-looking streams; use one seed per
/// operand.
pub fn randn<T: Randn>(n: usize, seed: u64) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    randn_into(n, seed, |x| out.push(T::from_f64(x)));
    out
}

/// `n` iid N(0, 1) samples rounded to f16: [`randn`]`::<f16>`.
pub fn randn_f16(n: usize, seed: u64) -> Vec<f16> {
    randn(n, seed)
}

/// `n` iid N(0, 1) samples rounded to bf16: [`randn`]`::<bf16>`.
pub fn randn_bf16(n: usize, seed: u64) -> Vec<bf16> {
    randn(n, seed)
}

/// As [`randn_f16`], in f32 (not rounded to f16): [`randn`]`::<f32>`.
pub fn randn_f32(n: usize, seed: u64) -> Vec<f32> {
    randn(n, seed)
}

/// `n` deterministic pseudo-random floats in [-4, 4) (xorshift64*, 24
/// bits each), the same for the same `seed` on every machine: test data
/// with no zeros pattern and a different value in every element, cheaper
/// than [`randn_f32`] for large bandwidth-bound problems.
pub fn uniform_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40; // 24 bits
            (r as f32 / (1u32 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

/// `‖got − reference‖_F / ‖reference‖_F` in f64 over `(got, reference)`
/// pairs. Any NaN or infinity in `got` gives `f64::INFINITY` (NaN never
/// passes a tolerance). A zero reference gives 0 if `got` is zero too, else
/// infinity.
fn rel_error(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut diff2, mut ref2) = (0.0f64, 0.0f64);
    for (g, r) in pairs {
        if !g.is_finite() {
            return f64::INFINITY;
        }
        diff2 += (g - r) * (g - r);
        ref2 += r * r;
    }
    if diff2 == 0.0 {
        0.0
    } else if ref2 == 0.0 {
        f64::INFINITY
    } else {
        (diff2 / ref2).sqrt()
    }
}

fn check_lengths(function: &str, got: usize, reference: usize) {
    assert_eq!(
        got, reference,
        "{function}: `got` has {got} elements but `reference` has {reference}"
    );
}

/// The relative Frobenius error `‖got − reference‖_F / ‖reference‖_F`,
/// computed in f64. Returns `f64::INFINITY` when `got` holds a NaN or an
/// infinity, or when the reference is all zeros and `got` is not (0 when
/// both are).
///
/// For an f16-output product with f32 accumulation expect a few 1e-4 (f16
/// rounding of the output is 2^-11 relative); 1e-2 is a loose bound.
///
/// # Panics
/// When the slices differ in length.
pub fn rel_frobenius_error(got: &[f16], reference: &[f32]) -> f64 {
    check_lengths("rel_frobenius_error", got.len(), reference.len());
    rel_error(
        got.iter()
            .zip(reference)
            .map(|(g, r)| (g.to_f64(), f64::from(*r))),
    )
}

/// [`rel_frobenius_error`] for f32 results.
///
/// # Panics
/// When the slices differ in length.
pub fn rel_frobenius_error_f32(got: &[f32], reference: &[f32]) -> f64 {
    check_lengths("rel_frobenius_error_f32", got.len(), reference.len());
    rel_error(
        got.iter()
            .zip(reference)
            .map(|(g, r)| (f64::from(*g), f64::from(*r))),
    )
}

/// `[f32; R]` dot products of `R` rows of A with one row of B (all length
/// `k`): 8 f32 lanes per row (vectorizable), the lanes summed in f64.
#[inline(always)]
fn dots<const R: usize>(a: [&[f32]; R], b: &[f32]) -> [f32; R] {
    const L: usize = 8;
    let k = b.len();
    let body = k / L * L;
    let mut acc = [[0.0f32; L]; R];
    let mut kk = 0;
    while kk < body {
        let bv: &[f32; L] = b[kk..kk + L].try_into().unwrap();
        for r in 0..R {
            let av: &[f32; L] = a[r][kk..kk + L].try_into().unwrap();
            for l in 0..L {
                acc[r][l] += av[l] * bv[l];
            }
        }
        kk += L;
    }
    let mut out = [0.0f32; R];
    for r in 0..R {
        let mut s: f64 = acc[r].iter().map(|&x| f64::from(x)).sum();
        for kk in body..k {
            s += f64::from(a[r][kk]) * f64::from(b[kk]);
        }
        out[r] = s as f32;
    }
    out
}

/// Rows of A handled together (each B element loaded once per group).
const ROW_GROUP: usize = 4;
/// Rows of B per tile (kept in cache while a thread's rows of A stream by).
const B_TILE: usize = 64;

/// `C = A · Bᵀ` in f32: `a` `m x k`, `bt` `n x k`, row-major; rows of C split
/// across threads.
fn gemm_nt_f32(m: usize, n: usize, k: usize, a: &[f32], bt: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    if m == 0 || n == 0 {
        return c;
    }
    let threads = std::thread::available_parallelism()
        .map(|t| t.get())
        .unwrap_or(1)
        .min(m.div_ceil(ROW_GROUP))
        .max(1);
    let rows_per_thread = m.div_ceil(threads).div_ceil(ROW_GROUP) * ROW_GROUP;
    std::thread::scope(|s| {
        for (t, c_rows) in c.chunks_mut(rows_per_thread * n).enumerate() {
            let row0 = t * rows_per_thread;
            s.spawn(move || {
                let rows = c_rows.len() / n;
                let a_row = |i: usize| &a[(row0 + i) * k..(row0 + i + 1) * k];
                for j0 in (0..n).step_by(B_TILE) {
                    let j1 = (j0 + B_TILE).min(n);
                    let mut i = 0;
                    while i + ROW_GROUP <= rows {
                        let group = [a_row(i), a_row(i + 1), a_row(i + 2), a_row(i + 3)];
                        for j in j0..j1 {
                            let d = dots(group, &bt[j * k..(j + 1) * k]);
                            for (r, v) in d.into_iter().enumerate() {
                                c_rows[(i + r) * n + j] = v;
                            }
                        }
                        i += ROW_GROUP;
                    }
                    for i in i..rows {
                        for j in j0..j1 {
                            c_rows[i * n + j] = dots([a_row(i)], &bt[j * k..(j + 1) * k])[0];
                        }
                    }
                }
            });
        }
    });
    c
}

fn to_f32<T: Copy + Into<f32>>(x: &[T]) -> Vec<f32> {
    x.iter().map(|&v| v.into()).collect()
}

fn check_operands(function: &str, (m, n, k): (usize, usize, usize), a: usize, b: usize) {
    assert_eq!(
        a,
        m * k,
        "{function}: `a` must be m x k = {m} x {k} = {} elements, has {a}",
        m * k
    );
    assert_eq!(
        b,
        n * k,
        "{function}: `b` must hold n * k = {n} * {k} = {} elements, has {b}",
        n * k
    );
}

/// CPU reference for `C = A · Bᵀ` (row-major `a` `m x k`, `b` `n x k`; the
/// layout of [`Blas::gemm_nt`](super::Blas::gemm_nt)), in f32: inputs widened
/// exactly from f16 or bf16 (any `T` that widens to f32), products summed in 8 f32 lanes whose totals are added in
/// f64 (relative error ~1e-6 for N(0, 1) data at k ≤ a few thousand, far
/// below f16 output rounding).
///
/// Multithreaded over rows of C (`std::thread::scope`, one thread per core),
/// cache-blocked, `m·n·k` multiply-adds: meant for `m·n·k` up to ~1e10, e.g.
/// 16896 x 512 x 640 (5.5e9) takes a few seconds on a few cores. 4096³
/// (6.9e10) works but takes minutes on a small machine; check a large GPU
/// product on a subset of rows instead (reference the rows of A you sample).
///
/// # Panics
/// When `a` or `b` does not hold exactly its shape's elements.
pub fn reference_gemm_nt<T: Copy + Into<f32>>(m: usize, n: usize, k: usize, a: &[T], b: &[T]) -> Vec<f32> {
    check_operands("reference_gemm_nt", (m, n, k), a.len(), b.len());
    gemm_nt_f32(m, n, k, &to_f32(a), &to_f32(b))
}

/// CPU reference for `C = A · B` (row-major `a` `m x k`, `b` `k x n`; the
/// layout of [`Blas::gemm_nn`](super::Blas::gemm_nn)); `b` is transposed once,
/// then as [`reference_gemm_nt`] (same precision and size limits).
///
/// # Panics
/// When `a` or `b` does not hold exactly its shape's elements.
pub fn reference_gemm_nn<T: Copy + Into<f32>>(m: usize, n: usize, k: usize, a: &[T], b: &[T]) -> Vec<f32> {
    check_operands("reference_gemm_nn", (m, n, k), a.len(), b.len());
    let mut bt = vec![0.0f32; n * k];
    for (kk, row) in b.chunks_exact(n.max(1)).enumerate().take(k) {
        for (j, v) in row.iter().enumerate() {
            bt[j * k + kk] = (*v).into();
        }
    }
    gemm_nt_f32(m, n, k, &to_f32(a), &bt)
}

/// Times of one operation over `iters` runs, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// The median (mean of the two middle runs for an even count).
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Number of timed runs.
    pub iters: usize,
}

impl Timing {
    /// Summarizes per-run times; `None` when there are none. NaNs sort last.
    pub fn from_samples(samples_ms: &[f64]) -> Option<Timing> {
        if samples_ms.is_empty() {
            return None;
        }
        let mut s = samples_ms.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median_ms = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Timing {
            median_ms,
            min_ms: s[0],
            max_ms: s[n - 1],
            iters: n,
        })
    }

    /// TFLOP/s of an `m x n x k` matrix product at the median time.
    pub fn tflops(&self, m: usize, n: usize, k: usize) -> f64 {
        tflops(m, n, k, self.median_ms)
    }
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "median {:.4} ms (min {:.4}, max {:.4}, {} runs)",
            self.median_ms, self.min_ms, self.max_ms, self.iters
        )
    }
}

/// `2·m·n·k` floating-point operations in `ms` milliseconds, in TFLOP/s.
pub fn tflops(m: usize, n: usize, k: usize, ms: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / (ms * 1e-3) / 1e12
}

/// What the timing functions ([`time_kernel`], [`warm_up`],
/// [`time_at_steady_clock`]) run on: a [`Gpu`], or a
/// [`Device`](crate::Device), which on the CPU emulator makes them return
/// [`Error::GpuOnly`] (it has no clock to time by), so a program written
/// for a `Device` times on a GPU with no `as_gpu` of its own.
pub trait Timed {
    /// The GPU whose stream the timed work is queued on.
    fn timed_gpu(&self) -> Result<&Gpu>;
}

impl Timed for Gpu {
    fn timed_gpu(&self) -> Result<&Gpu> {
        Ok(self)
    }
}

impl Timed for crate::Device {
    fn timed_gpu(&self) -> Result<&Gpu> {
        self.require_gpu("timing with CUDA events (time_kernel)")
    }
}

impl<T: Timed + ?Sized> Timed for &T {
    fn timed_gpu(&self) -> Result<&Gpu> {
        (**self).timed_gpu()
    }
}

/// Times `f`, which queues GPU work on `gpu`'s stream (a kernel launch, a
/// [`Blas`](super::Blas) call), with CUDA events. `gpu` is a [`Gpu`] or a
/// [`Device`](crate::Device) ([`Timed`]: [`Error::GpuOnly`] on the
/// emulator).
///
/// Calls `f` `warmup` times untimed (module load, handle creation and clock
/// ramp-up stay out), synchronizes, then `iters` times each between two
/// events recorded on the stream (`CU_EVENT_DEFAULT`, created beforehand), and
/// synchronizes again. Each sample is the GPU time from the start event to the
/// stop event: the work `f` queued, plus its launch latency when the GPU is
/// idle waiting for it. Host time between iterations is not counted.
///
/// If the inputs fit in L2 (50 MB on an H100) repeated runs measure the
/// cache; rotate among several input sets inside `f` when that matters.
///
/// Returns [`Error::InvalidArgument`] when `iters` is 0, the first error `f`
/// returns, and [`Error::Cuda`] when an event call or synchronization fails
/// (a kernel fault shows up there).
pub fn time_kernel<F: FnMut() -> Result<()>>(
    gpu: &impl Timed,
    warmup: usize,
    iters: usize,
    mut f: F,
) -> Result<Timing> {
    let gpu = gpu.timed_gpu()?;
    if iters == 0 {
        return Err(Error::InvalidArgument {
            function: "time_kernel",
            problem: "iters = 0: time at least one run (the median of many, e.g. 50, is \
                      what to report)"
                .into(),
        });
    }
    let ctx = gpu.context();
    let stream = gpu.stream();
    let new_event = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(Error::cuda_call("cuEventCreate (time_kernel)"))
    };
    let events = (0..iters)
        .map(|_| Ok((new_event()?, new_event()?)))
        .collect::<Result<Vec<(CudaEvent, CudaEvent)>>>()?;
    for _ in 0..warmup {
        f()?;
    }
    gpu.synchronize()?;
    for (start, stop) in &events {
        start
            .record(stream)
            .map_err(Error::cuda_call("cuEventRecord (time_kernel, start)"))?;
        f()?;
        stop.record(stream)
            .map_err(Error::cuda_call("cuEventRecord (time_kernel, stop)"))?;
    }
    gpu.synchronize()?;
    let samples = events
        .iter()
        .map(|(start, stop)| start.elapsed_ms(stop).map(f64::from))
        .collect::<std::result::Result<Vec<f64>, _>>()
        .map_err(Error::cuda_call("cuEventElapsedTime (time_kernel)"))?;
    Ok(Timing::from_samples(&samples).expect("iters > 0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16s(x: &[f32]) -> Vec<f16> {
        x.iter().map(|&v| f16::from_f32(v)).collect()
    }

    #[test]
    fn randn_is_standard_normal_and_seeded() {
        let n = 100_000;
        let x = randn_f16(n, 42);
        assert_eq!(x.len(), n);
        let mean = x.iter().map(|v| v.to_f64()).sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        // Standard errors: 1/sqrt(n) = 0.0032 for the mean, sqrt(2/n) = 0.0045
        // for the variance; allow ~5 of them.
        assert!(mean.abs() < 0.016, "mean {mean}");
        assert!((var - 1.0).abs() < 0.025, "variance {var}");
        // Tails: P(|z| > 3) = 0.0027.
        let tail = x.iter().filter(|v| v.to_f64().abs() > 3.0).count() as f64 / n as f64;
        assert!((0.0017..0.0037).contains(&tail), "tail {tail}");
        assert!(x.iter().all(|v| v.is_finite()));

        assert_eq!(randn_f16(1000, 42), x[..1000], "same seed, same prefix");
        let y = randn_f16(1000, 43);
        let same = x[..1000].iter().zip(&y).filter(|(a, b)| a == b).count();
        assert!(same < 50, "seeds 42 and 43 agree on {same} of 1000");
        assert_ne!(randn_f16(8, 0), randn_f16(8, 1));

        // Odd lengths, and f32 matching f16 after rounding.
        assert_eq!(randn_f16(7, 5).len(), 7);
        let z = randn_f32(7, 5);
        assert_eq!(f16s(&z), randn_f16(7, 5));
        assert!(randn_f16(0, 1).is_empty());
    }

    #[test]
    fn every_element_type_rounds_the_same_stream() {
        let x = randn::<f64>(9, 7);
        assert_eq!(randn_bf16(9, 7), x.iter().map(|&v| bf16::from_f64(v)).collect::<Vec<_>>());
        assert_eq!(randn::<E4M3>(9, 7), x.iter().map(|&v| E4M3::from_f64(v)).collect::<Vec<_>>());
        assert_eq!(randn::<E5M2>(9, 7), x.iter().map(|&v| E5M2::from_f64(v)).collect::<Vec<_>>());
        assert_eq!(randn_f32(9, 7), x.iter().map(|&v| v as f32).collect::<Vec<_>>());
    }

    #[test]
    fn timing_on_the_emulator_is_gpu_only() {
        let dev = crate::Device::emulator();
        let mut ran = false;
        let r = time_kernel(&dev, 1, 1, || {
            ran = true;
            Ok(())
        });
        assert!(matches!(r, Err(Error::GpuOnly { .. })), "{r:?}");
        assert!(!ran, "nothing runs when there is no GPU to time on");
        assert!(matches!(time_at_steady_clock(&&dev, 1.0, 1, || Ok(())), Err(Error::GpuOnly { .. })));
    }

    #[test]
    fn frobenius_error_exact_values() {
        // ‖(1, 2, 2) − (1, 2, 0)‖ / ‖(1, 2, 0)‖ = 2 / √5.
        let e = rel_frobenius_error(&f16s(&[1.0, 2.0, 2.0]), &[1.0, 2.0, 0.0]);
        assert!((e - 2.0 / 5f64.sqrt()).abs() < 1e-15, "{e}");
        // (3, 4) vs (0, 0)... reference (0, 4): ‖(3, 0)‖ / 4.
        let e = rel_frobenius_error(&f16s(&[3.0, 4.0]), &[0.0, 4.0]);
        assert_eq!(e, 0.75);
        assert_eq!(rel_frobenius_error(&f16s(&[0.5, -1.0]), &[0.5, -1.0]), 0.0);
        // Computed in f64 from the f16 values: 1 + 2^-10 is exact in f16.
        let e = rel_frobenius_error(&[f16::from_f32(1.0 + 1.0 / 1024.0)], &[1.0]);
        assert_eq!(e, 1.0 / 1024.0);

        for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
            let e = rel_frobenius_error(&[f16::ONE, bad], &[1.0, 1.0]);
            assert_eq!(e, f64::INFINITY);
        }
        assert_eq!(rel_frobenius_error(&f16s(&[0.0, 0.0]), &[0.0, 0.0]), 0.0);
        assert_eq!(
            rel_frobenius_error(&f16s(&[0.0, 1.0]), &[0.0, 0.0]),
            f64::INFINITY
        );
        assert_eq!(rel_frobenius_error(&[], &[]), 0.0);

        let e = rel_frobenius_error_f32(&[1.0, 2.0, 2.0], &[1.0, 2.0, 0.0]);
        assert!((e - 2.0 / 5f64.sqrt()).abs() < 1e-15, "{e}");
        assert_eq!(rel_frobenius_error_f32(&[6.0, 8.0], &[3.0, 4.0]), 1.0);
        assert_eq!(rel_frobenius_error_f32(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(
            rel_frobenius_error_f32(&[1.0, f32::INFINITY], &[1.0, 1.0]),
            f64::INFINITY
        );
    }

    #[test]
    #[should_panic(expected = "`got` has 2 elements but `reference` has 3")]
    fn frobenius_error_needs_equal_lengths() {
        rel_frobenius_error_f32(&[1.0, 2.0], &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn reference_gemm_by_hand() {
        // A (2x3) = [1 2 3; 4 5 6], B (3x2) = [7 8; 9 10; 11 12]:
        // A·B = [58 64; 139 154].
        let a = f16s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b_kn = f16s(&[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
        let b_nk = f16s(&[7.0, 9.0, 11.0, 8.0, 10.0, 12.0]); // Bᵀ, 2x3
        let want = vec![58.0, 64.0, 139.0, 154.0];
        assert_eq!(reference_gemm_nn(2, 2, 3, &a, &b_kn), want);
        assert_eq!(reference_gemm_nt(2, 2, 3, &a, &b_nk), want);
        // bf16 inputs (the same small integers, exact in bf16).
        let bf = |v: &[f16]| v.iter().map(|x| half::bf16::from_f32(x.to_f32())).collect::<Vec<_>>();
        assert_eq!(reference_gemm_nt(2, 2, 3, &bf(&a), &bf(&b_nk)), want);
        assert_eq!(reference_gemm_nn(2, 2, 3, &bf(&a), &bf(&b_kn)), want);
    }

    /// f64 triple loop, for checking the blocked, threaded version.
    fn naive_nt(m: usize, n: usize, k: usize, a: &[f16], b: &[f16]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| a[i * k + p].to_f64() * b[j * k + p].to_f64())
                    .sum();
            }
        }
        c
    }

    #[test]
    fn reference_gemm_matches_naive_on_ragged_shapes() {
        // m not a multiple of the row group, n over one B tile, k not a
        // multiple of the lane count.
        for (m, n, k) in [(1, 1, 1), (7, 70, 13), (13, 129, 40), (9, 3, 8)] {
            let a = randn_f16(m * k, 1);
            let b = randn_f16(n * k, 2);
            let want = naive_nt(m, n, k, &a, &b);
            let got = reference_gemm_nt(m, n, k, &a, &b);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (f64::from(*g) - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{m}x{n}x{k}: {g} vs {w}"
                );
            }
            // NN on the transpose of b gives the same.
            let mut b_kn = vec![f16::ZERO; k * n];
            for j in 0..n {
                for p in 0..k {
                    b_kn[p * n + j] = b[j * k + p];
                }
            }
            assert_eq!(reference_gemm_nn(m, n, k, &a, &b_kn), got, "{m}x{n}x{k}");
        }
    }

    #[test]
    #[should_panic(expected = "`a` must be m x k = 2 x 3 = 6 elements, has 5")]
    fn reference_gemm_checks_lengths() {
        reference_gemm_nt(2, 2, 3, &[f16::ONE; 5], &[f16::ONE; 6]);
    }

    #[test]
    fn tflops_arithmetic() {
        // 2 * 4096^3 = 1.374e11 flop in 0.25 ms = 549.76 TFLOP/s.
        let t = tflops(4096, 4096, 4096, 0.25);
        assert!((t - 2.0 * 4096f64.powi(3) / 0.25e-3 / 1e12).abs() < 1e-9);
        assert!((t - 549.755813888).abs() < 1e-6, "{t}");
        assert_eq!(tflops(1000, 1000, 500, 1.0), 1.0);
    }

    #[test]
    fn timing_summarizes_samples() {
        assert_eq!(Timing::from_samples(&[]), None);
        let t = Timing::from_samples(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(
            (t.median_ms, t.min_ms, t.max_ms, t.iters),
            (2.0, 1.0, 3.0, 3)
        );
        let t = Timing::from_samples(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(
            (t.median_ms, t.min_ms, t.max_ms, t.iters),
            (3.0, 1.0, 10.0, 4)
        );
        assert_eq!(t.tflops(1000, 1000, 1500), 1.0);
        assert_eq!(
            t.to_string(),
            "median 3.0000 ms (min 1.0000, max 10.0000, 4 runs)"
        );
    }
}

/// Tests that need a CUDA GPU and cuBLAS; they fail (not skip) without them:
///
/// ```text
/// cargo test -p kernel-host --lib runtime::bench -- --ignored --nocapture
/// ```
#[cfg(test)]
mod gpu_tests {
    use super::super::Blas;
    use super::*;

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn time_cublas() {
        let gpu = Gpu::new(0).unwrap();
        let blas = Blas::new(&gpu).unwrap();
        println!("{} ({} SMs)", gpu.describe(), gpu.sm_count());
        let e = time_kernel(&gpu, 0, 0, || Ok(())).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");

        println!(
            "{:>24} {:>6} {:>10} {:>10} {:>10} {:>8}",
            "M x N x K", "layout", "median ms", "min ms", "max ms", "TFLOP/s"
        );
        // 4096^3 twice (the spread between two timings of the same thing is
        // the noise floor), then the DESIGN.md anchors and a skinny shape.
        let shapes = [
            (4096, 4096, 4096, false),
            (4096, 4096, 4096, false),
            (4096, 4096, 4096, true),
            (4096, 8192, 4096, false),
            (8192, 8192, 8192, false),
            (2048, 2048, 2048, false),
            (16896, 512, 640, false),
        ];
        let mut seed = 100;
        for (m, n, k, nn) in shapes {
            let a = gpu.upload(&randn_f16(m * k, seed)).unwrap();
            let b = gpu.upload(&randn_f16(n * k, seed + 1)).unwrap();
            seed += 2;
            let mut c = gpu.zeros::<f16>(m * n).unwrap();
            let t = time_kernel(&gpu, 20, 100, || {
                if nn {
                    blas.gemm_nn(m, n, k, &a, &b, &mut c)
                } else {
                    blas.gemm_nt(m, n, k, &a, &b, &mut c)
                }
            })
            .unwrap();
            let tf = t.tflops(m, n, k);
            println!(
                "{:>24} {:>6} {:>10.4} {:>10.4} {:>10.4} {:>8.1}",
                format!("{m} x {n} x {k}"),
                if nn { "NN" } else { "NT" },
                t.median_ms,
                t.min_ms,
                t.max_ms,
                tf
            );
            assert_eq!(t.iters, 100);
            assert!(
                t.min_ms > 0.0 && t.min_ms <= t.median_ms && t.median_ms <= t.max_ms,
                "{t}"
            );
            // Above the H100/H200 dense f16 peak (989) means the timing is broken.
            assert!(tf < 1000.0, "{m}x{n}x{k}: {tf} TFLOP/s");
            let out = gpu.download(&c).unwrap();
            assert!(out.iter().all(|x| x.is_finite()));
        }
    }
}

/// Runs `f` repeatedly for at least `ms` milliseconds (synchronizing every
/// 8 runs), so that the GPU reaches the clock it holds under this load: an
/// H100 at its power cap settles near 1.3 GHz under tensor-core work, while
/// a launch right after idle runs at 1.55 GHz or more. Time after this.
pub fn warm_up<F: FnMut() -> Result<()>>(gpu: &impl Timed, ms: f64, mut f: F) -> Result<()> {
    let gpu = gpu.timed_gpu()?;
    let start = std::time::Instant::now();
    while start.elapsed().as_secs_f64() * 1e3 < ms {
        for _ in 0..8 {
            f()?;
        }
        gpu.synchronize()?;
    }
    Ok(())
}

/// Times `f` as the benchmarks do, at the clock the GPU holds under it:
/// [`warm_up`] for `warmup_ms` (the last 200 ms of it with a
/// [`ClockSampler`] running), then [`time_kernel`] over `iters` runs, still
/// sampled. Returns the timing and the clock and power sampled (`None`
/// without `nvidia-smi`).
pub fn time_at_steady_clock<F: FnMut() -> Result<()>>(gpu: &impl Timed, warmup_ms: f64, iters: usize, mut f: F) -> Result<(Timing, Option<ClockPower>)> {
    let gpu = gpu.timed_gpu()?;
    warm_up(gpu, (warmup_ms - 200.0).max(0.0), &mut f)?;
    let sampler = ClockSampler::start(gpu.ordinal());
    warm_up(gpu, warmup_ms.min(200.0), &mut f)?;
    let t = time_kernel(gpu, 0, iters, &mut f)?;
    Ok((t, sampler.stop()))
}

/// The SM clock and board power sampled while something ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockPower {
    /// Median SM clock, MHz.
    pub sm_mhz: f64,
    /// Median board power, W.
    pub power_w: f64,
    /// Samples taken.
    pub samples: usize,
}

impl std::fmt::Display for ClockPower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.0} MHz, {:.0} W ({} samples)", self.sm_mhz, self.power_w, self.samples)
    }
}

/// Samples the SM clock and power of one GPU every 50 ms with `nvidia-smi`
/// in the background, from [`ClockSampler::start`] to
/// [`ClockSampler::stop`]. Without `nvidia-smi` it samples nothing and
/// `stop` returns `None` (the figures are then reported without a clock).
pub struct ClockSampler {
    child: Option<std::process::Child>,
}

impl ClockSampler {
    /// Starts sampling GPU `ordinal`.
    pub fn start(ordinal: usize) -> ClockSampler {
        let child = std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "50", "-i"])
            .arg(ordinal.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok();
        ClockSampler { child }
    }

    /// Stops sampling and returns the medians, or `None` when nothing was
    /// sampled.
    pub fn stop(mut self) -> Option<ClockPower> {
        let mut child = self.child.take()?;
        let _ = child.kill();
        let out = child.wait_with_output().ok()?;
        parse_clock_power(&String::from_utf8_lossy(&out.stdout))
    }
}

impl Drop for ClockSampler {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Medians of `nvidia-smi --query-gpu=clocks.sm,power.draw
/// --format=csv,noheader,nounits` lines (`"1305, 697.52"`); malformed lines
/// are skipped.
pub fn parse_clock_power(text: &str) -> Option<ClockPower> {
    let (mut mhz, mut w): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let mut f = line.split(',').map(str::trim);
        if let (Some(Ok(c)), Some(Ok(p))) = (f.next().map(str::parse::<f64>), f.next().map(str::parse::<f64>)) {
            mhz.push(c);
            w.push(p);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    if mhz.is_empty() {
        return None;
    }
    Some(ClockPower { samples: mhz.len(), sm_mhz: median(&mut mhz), power_w: median(&mut w) })
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn clock_power_lines_give_medians_and_skip_junk() {
        let c = parse_clock_power("1305, 697.52\n1290, 699.10\n[N/A], 12\n1320, 690.0\n").unwrap();
        assert_eq!((c.sm_mhz, c.power_w, c.samples), (1305.0, 697.52, 3));
        assert!(parse_clock_power("").is_none());
    }
}
