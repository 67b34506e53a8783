//! The harness of `tests/fuzz.rs`: a seeded generator of shapes, the case
//! loop (counts, seeds, replay, a watchdog against hangs) and guarded
//! buffers (canary bytes around a view that an entry point gets as an
//! ordinary [`Buffer`]).
//!
//! Environment:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `KERNEL_FUZZ_SEED` | the base seed of every op's case stream | [`DEFAULT_SEED`] |
//! | `KERNEL_FUZZ_CASES` | cases per op | each op's CI count |
//! | `KERNEL_FUZZ_REPLAY` | `op:case:seed`: run that one case of that op (printed by a failing case) | none |
//! | `KERNEL_FUZZ_TIMEOUT` | seconds a case may run before the process is stopped as hung | 300 |
use kernel_device::{bf16, f16, E4M3};
use kernel_host::{Buffer, Device, SplitMix64};
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The base seed of the CI run.
pub const DEFAULT_SEED: u64 = 20261201;

/// The choices of one case, from its seed.
pub struct Rng {
    g: SplitMix64,
    /// The case's index in its op's stream ([`Rng::cycle`]).
    case: usize,
    /// The next [`Guarded`] buffer of this name starts one element past a
    /// 16-byte boundary (a refusal's broken rule), once.
    pub misalign: Option<&'static str>,
}

/// Primes up to 300: sizes that divide no tile.
const PRIMES: [usize; 62] = [
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181,
    191, 193, 197, 199, 211, 223, 227, 229, 233, 239, 241, 251, 257, 263, 269, 271, 277, 281, 283, 293,
];

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self::case(0, seed)
    }
    /// Case `case`'s choices, from `seed`.
    pub fn case(case: usize, seed: u64) -> Self {
        Rng { g: SplitMix64::new(seed), case, misalign: None }
    }
    /// `xs[case % xs.len()]`: the main variant of a case goes round its
    /// values with the case index, so that a short run covers each.
    pub fn cycle<T: Copy>(&self, xs: &[T]) -> T {
        xs[self.case % xs.len()]
    }
    /// A seed for test data.
    pub fn seed(&mut self) -> u64 {
        self.g.next_u64()
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.g.next_u64() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.g.next_f64() < p
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.g.next_f64() as f32
    }
    /// A size in `lo..=hi` that is a multiple of `unit` (`lo`, `hi`
    /// multiples of it): one of the edges, a prime number of units, a
    /// `tiles` edge or one unit either side of it (a tail of one element
    /// or row), or any.
    pub fn size(&mut self, lo: usize, hi: usize, unit: usize, tiles: &[usize]) -> usize {
        let fits = |v: &usize| (lo..=hi).contains(v) && v % unit == 0;
        let pool: Vec<usize> = match self.below(6) {
            0 => vec![lo],
            1 => vec![hi],
            2 => PRIMES.iter().map(|p| p * unit).filter(fits).collect(),
            3 => tiles.iter().flat_map(|&t| [t - unit.min(t), t, t + unit]).filter(fits).collect(),
            _ => vec![],
        };
        if pool.is_empty() {
            unit * self.range(lo / unit, hi / unit)
        } else {
            self.pick(&pool)
        }
    }
}

/// What a case is (its shape, types and parameters), for the report of a
/// failure or a hang.
#[derive(Clone, Default)]
pub struct Note(Arc<Mutex<String>>);

impl Note {
    /// Records what the case runs.
    pub fn set(&self, what: impl Into<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = what.into();
    }
    /// Adds what the case runs next (a refusal after a run).
    pub fn add(&self, what: impl Into<String>) {
        let mut n = self.0.lock().unwrap_or_else(|e| e.into_inner());
        n.push_str("; then ");
        n.push_str(&what.into());
    }
    fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A number (decimal or `0x` hex).
fn parse(v: &str) -> Option<u64> {
    let v = v.trim();
    v.strip_prefix("0x").map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
}

/// The number in environment variable `name`, if set.
fn env(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(parse(&v).unwrap_or_else(|| panic!("{name} = {v:?}: not a number")))
}

/// Case `i`'s seed in `op`'s stream from `base`.
fn case_seed(base: u64, op: &str, i: usize) -> u64 {
    // FNV-1a of the name: each op its own stream.
    let h = op.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut g = SplitMix64::new(base ^ h);
    (0..=i).map(|_| g.next_u64()).last().unwrap_or(0)
}

/// Runs `op`'s cases: `ci_cases` of them (or `KERNEL_FUZZ_CASES`), each
/// with its own seed, or the one `KERNEL_FUZZ_REPLAY` names. A case
/// returns `Err` (or panics) on a failure; every failure is reported with
/// its seed, its [`Note`] and the command that replays it, and the test
/// fails after the last case. A case running past `KERNEL_FUZZ_TIMEOUT`
/// stops the process, reporting it the same way.
pub fn fuzz(op: &str, ci_cases: usize, mut case: impl FnMut(&mut Rng, &Note) -> Result<(), String>) {
    let base = env("KERNEL_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let cases = env("KERNEL_FUZZ_CASES").map_or(ci_cases, |n| n as usize);
    let timeout = Duration::from_secs(env("KERNEL_FUZZ_TIMEOUT").unwrap_or(300));
    let seeds: Vec<(String, usize, u64)> = match std::env::var("KERNEL_FUZZ_REPLAY") {
        Ok(r) => {
            let parts: Vec<&str> = r.split(':').collect();
            let bad = || -> u64 { panic!("KERNEL_FUZZ_REPLAY = {r:?}: op:case:seed expected (as a failing case prints it)") };
            match parts[..] {
                [o, case, seed] if o == op => vec![("replayed".into(), parse(case).unwrap_or_else(bad) as usize, parse(seed).unwrap_or_else(bad))],
                [_, _, _] => vec![],
                _ => {
                    bad();
                    vec![]
                }
            }
        }
        Err(_) => (0..cases).map(|i| (format!("case {i} of base seed {base}"), i, case_seed(base, op, i))).collect(),
    };
    let replay = |i: usize, seed: u64| format!("replay: KERNEL_FUZZ_REPLAY={op}:{i}:{seed:#x} cargo test -p kernel-ops --test fuzz -- --nocapture");
    let (start, mut failures) = (Instant::now(), Vec::new());
    for (which, i, seed) in &seeds {
        let note = Note::default();
        // The watchdog: a case that hangs stops the process, saying which.
        let (done, wait) = mpsc::channel::<()>();
        let (n, w, r) = (note.clone(), format!("fuzz {op} {which}, seed {seed:#x}"), replay(*i, *seed));
        let dog = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(timeout) {
                eprintln!("{w}: no result after {timeout:?} (hung?): {}\n  {r}", n.get());
                std::process::exit(1);
            }
        });
        let t = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| case(&mut Rng::case(*i, *seed), &note)));
        let _ = done.send(());
        let _ = dog.join();
        let failure = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!("panicked: {}", p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())),
        };
        eprintln!("fuzz {op} {which}, seed {seed:#x}: {} ({:.1?}){}", note.get(), t.elapsed(), if failure.is_some() { ": FAILED" } else { "" });
        if let Some(f) = failure {
            failures.push(format!("fuzz {op} {which}, seed {seed:#x}: {}\n  {f}\n  {}", note.get(), replay(*i, *seed)));
        }
    }
    eprintln!("fuzz {op}: {} cases in {:.1?}", seeds.len(), start.elapsed());
    assert!(failures.is_empty(), "{} of {} {op} cases failed:\n{}", failures.len(), seeds.len(), failures.join("\n"));
}

/// The emulator of a case: a seeded schedule and `sms` SMs (the
/// persistent grids are sized from it: few SMs make them wrap).
pub fn emulator(rng: &mut Rng, sms: usize) -> Device {
    Device::emulator_with(kernel_host::emulate::Emulator::new(rng.seed()).sms(sms as u32))
}

/// An element type with a canary: a bit pattern around every guarded
/// buffer (a NaN payload no kernel computes, where the type has NaNs).
pub trait Canary: Copy + kernel_host::DeviceRepr + 'static {
    const CANARY: Self;
}
impl Canary for f16 {
    const CANARY: Self = f16::from_bits(0x7FC1);
}
impl Canary for bf16 {
    const CANARY: Self = bf16::from_bits(0x7FC1);
}
impl Canary for f32 {
    const CANARY: Self = f32::from_bits(0xDEAD_BEEF);
}
impl Canary for u32 {
    const CANARY: Self = 0xDEAD_BEEF;
}
impl Canary for i32 {
    const CANARY: Self = 0xDEAD_BEEFu32 as i32;
}
impl Canary for E4M3 {
    const CANARY: Self = E4M3::from_bits(0xA5);
}

/// The bytes of plain data (the element types above have no padding).
fn bytes<T: Copy>(s: &[T]) -> &[u8] {
    // SAFETY: `s` is initialized memory of `size_of_val(s)` bytes; the
    // element types of this harness have no padding bytes.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// Whether `a` and `b` hold the same bits.
pub fn same_bits<T: Copy>(a: &[T], b: &[T]) -> bool {
    bytes(a) == bytes(b)
}

/// A buffer of the emulator that is a view into a larger host allocation
/// whose other bytes hold [`Canary::CANARY`]: at least 64 bytes before the
/// view (whose start is 256-byte aligned, as a device allocation, or only
/// 16-byte aligned, as a slice of one: a TMA map or a 16-byte access
/// needs no more), and 64 to 127 after it. The entry
/// points take it as any [`Buffer`] of its length: a write past either end
/// of it lands on a canary.
pub struct Guarded<T: Canary> {
    view: std::mem::ManuallyDrop<Buffer<T>>,
    base: NonNull<T>,
    total: usize,
    start: usize,
    /// The view's contents when made.
    init: Vec<T>,
    name: &'static str,
}

impl<T: Canary> Guarded<T> {
    /// A view holding `data`, named `name` in reports, on `dev` (the emulator).
    pub fn new(dev: &Device, rng: &mut Rng, name: &'static str, data: &[T]) -> Self {
        let size = std::mem::size_of::<T>();
        let skew = if rng.misalign == Some(name) {
            rng.misalign = None;
            16 * rng.range(0, 15) + size * rng.range(1, 16 / size - 1)
        } else if rng.chance(0.5) {
            0
        } else {
            16 * rng.range(1, 15)
        };
        Self::at(dev, rng, name, data, skew)
    }

    /// [`Guarded::new`] with the view's start `skew` bytes past a 256-byte
    /// boundary (a multiple of the element's size).
    pub fn at(dev: &Device, rng: &mut Rng, name: &'static str, data: &[T], skew: usize) -> Self {
        let size = std::mem::size_of::<T>();
        let (pre, align) = (64 / size, 256 / size);
        let post = (64 + 16 * rng.below(4)) / size;
        let total = pre + align + data.len() + post;
        let mut all = vec![T::CANARY; total].into_boxed_slice();
        let addr = all.as_ptr() as usize + pre * size;
        let shift = ((256 - addr % 256) % 256 + skew) % 256;
        assert_eq!(shift % size, 0, "an allocation aligned to its element");
        let start = pre + shift / size;
        all[start..start + data.len()].copy_from_slice(data);
        // SAFETY: `Box::into_raw` is non-null; freed once, in `drop`.
        let base = unsafe { NonNull::new_unchecked(Box::into_raw(all).cast::<T>()) };
        // SAFETY: the view addresses `data.len()` initialized elements of
        // the allocation this value owns, frees nothing, and is dropped
        // before the allocation (`drop`); nothing else writes them while it lives.
        let view = unsafe { Buffer::borrow_host(dev, base.as_ptr().add(start), data.len()) }.expect("a host view on the emulator");
        Guarded { view: std::mem::ManuallyDrop::new(view), base, total, start, init: data.to_vec(), name }
    }

    /// A guarded output of `len` elements of `fill`.
    pub fn out(dev: &Device, rng: &mut Rng, name: &'static str, len: usize, fill: T) -> Self {
        Self::new(dev, rng, name, &vec![fill; len])
    }

    pub fn buf(&self) -> &Buffer<T> {
        &self.view
    }
    pub fn buf_mut(&mut self) -> &mut Buffer<T> {
        &mut self.view
    }

    fn all(&self) -> &[T] {
        // SAFETY: `base` owns `total` initialized elements; the emulator's
        // launches have returned (they are synchronous), so no write is in
        // flight.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.total) }
    }

    /// The view's current contents.
    pub fn get(&self) -> Vec<T> {
        self.all()[self.start..][..self.init.len()].to_vec()
    }

    /// `Ok` when every canary byte is unchanged; else the first changed
    /// element on each side, named.
    pub fn intact(&self) -> Result<(), String> {
        let (all, len) = (self.all(), self.init.len());
        let canary_value = [T::CANARY];
        let canary = bytes(&canary_value);
        let changed = |r: std::ops::Range<usize>| r.clone().find(|&i| bytes(&all[i..i + 1]) != canary);
        let before = changed(0..self.start).map(|i| format!("{} elements before", self.start - i));
        let after = changed(self.start + len..self.total).map(|i| format!("{} elements after", i - self.start - len + 1));
        match (before, after) {
            (None, None) => Ok(()),
            (b, a) => Err(format!("`{}` ({len} elements): canary overwritten {}", self.name, [b, a].into_iter().flatten().collect::<Vec<_>>().join(" and "))),
        }
    }

    /// [`Guarded::intact`], and the view's contents as made (an input, or
    /// an output of a refused call).
    pub fn untouched(&self) -> Result<(), String> {
        self.intact()?;
        let now = self.get();
        match (0..now.len()).find(|&i| bytes(&now[i..i + 1]) != bytes(&self.init[i..i + 1])) {
            None => Ok(()),
            Some(i) => Err(format!("`{}` ({} elements): element {i} was written", self.name, now.len())),
        }
    }
}

impl<T: Canary> Drop for Guarded<T> {
    fn drop(&mut self) {
        // SAFETY: the view is dropped once, here, before its memory.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.view) };
        // SAFETY: `base`/`total` came from `Box::into_raw` of a `Box<[T]>`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.base.as_ptr(), self.total)) });
    }
}

/// Checks on a guarded buffer of any type, for lists of them.
pub trait Guard {
    fn intact(&self) -> Result<(), String>;
    fn untouched(&self) -> Result<(), String>;
}
impl<T: Canary> Guard for Guarded<T> {
    fn intact(&self) -> Result<(), String> {
        Guarded::intact(self)
    }
    fn untouched(&self) -> Result<(), String> {
        Guarded::untouched(self)
    }
}

/// After a call that computed: the `inputs` untouched, every canary of the
/// `outputs` intact.
pub fn guards_after_run(inputs: &[&dyn Guard], outputs: &[&dyn Guard]) -> Result<(), String> {
    inputs.iter().try_for_each(|g| g.untouched())?;
    outputs.iter().try_for_each(|g| g.intact())
}

/// After a refused call: every buffer untouched.
pub fn guards_after_refusal(all: &[&dyn Guard]) -> Result<(), String> {
    all.iter().try_for_each(|g| g.untouched())
}

/// `Ok` when `result` is an error whose message says `rule`.
pub fn refused<E: Display>(result: Result<(), E>, rule: &str) -> Result<(), String> {
    match result {
        Ok(()) => Err(format!("accepted; the refusal \"{rule}\" was expected")),
        Err(e) if e.to_string().contains(rule) => Ok(()),
        Err(e) => Err(format!("refused with \"{e}\"; \"{rule}\" was expected")),
    }
}

/// `Ok` when the call computed; its error otherwise.
pub fn ran<E: Display>(result: Result<(), E>) -> Result<(), String> {
    result.map_err(|e| format!("refused a valid call: {e}"))
}

/// `Ok` when `error` (of `what`) is below `bound`.
pub fn within(what: &str, error: f64, bound: f64) -> Result<(), String> {
    if error < bound {
        Ok(())
    } else {
        Err(format!("{what}: error {error:.3e}, over the bound {bound:.0e}"))
    }
}

/// `‖got − want‖_F / ‖want‖_F` (f64); any non-finite `got` is infinite.
pub fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    kernel_host::rel_frobenius_error_f32(got, want)
}
