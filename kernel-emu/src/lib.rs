//! A CPU emulator for GPU kernels: the core that runs a grid of emulated GPU
//! threads and checks their synchronization protocol.
//!
//! Kernels are Rust functions compiled for `nvptx64`; on the host the same
//! source is compiled against host bodies of the device operations (crate
//! `kernel-device`), which call the free functions of this crate. Each free
//! function acts on the calling emulated thread (its context lives in a
//! thread-local); called from any other thread it panics, naming the function.
//!
//! # Execution model
//!
//! [`run`] makes one coroutine per emulated GPU thread (every thread of every
//! CTA of the grid: all CTAs are resident at once, so grids are small: at most
//! 64 CTAs and 4096 threads) and runs the kernel closure once in each. Only
//! **one** emulated thread runs at a time: it holds the *baton*. It runs until
//! it reaches a *scheduling point*, that is any call of this crate that
//! synchronizes ([`bar_sync`], [`warp_sync`], [`cluster_wait`], the mbarrier
//! operations, ...) or an explicit [`yield_point`] (the host bodies of atomics,
//! fences, `nanosleep` and spin-loads call it). There the scheduler chooses the
//! next thread uniformly at random among the runnable ones (possibly the same
//! one) and hands it the baton. A thread that waits (on a barrier phase, an
//! mbarrier phase, ...) is *blocked*: it is not runnable until the operation
//! that releases it runs in another thread.
//!
//! Code between two scheduling points runs atomically with respect to the
//! other emulated threads. The hand-over goes through a mutex, so every stretch
//! of kernel code happens-after the previous one: plain reads and writes of
//! shared memory and host buffers by different emulated threads never race at
//! the Rust level. *GPU-level* races are found by the happens-before detector
//! (module [`race`], "Races" below), whatever the interleaving; accesses it
//! cannot see (raw pointer dereferences) show up at best as schedule-dependent
//! results, which running several seeds exposes. Kernel code must not hold a host lock
//! (e.g. a `std::sync::Mutex` guard) across a scheduling point: the next
//! thread would block on it at the OS level while holding the baton, and the
//! run would hang.
//!
//! # Determinism
//!
//! The scheduler's only source of choice is a splitmix64 generator seeded with
//! [`LaunchConfig::seed`]; the runnable set is kept in an order that depends
//! only on the sequence of scheduling events. So a kernel whose own behaviour
//! depends only on its inputs and on what it reads (not on wall-clock time,
//! addresses, or a `HashMap`'s random iteration order) runs the same
//! interleaving, and gets the same result and the same error, for the same
//! seed. Different seeds give different interleavings: run a kernel under
//! several seeds to explore schedules.
//!
//! # Memory
//!
//! Each CTA gets a zeroed dynamic shared memory buffer of
//! [`LaunchConfig::smem_bytes`], 1024-byte aligned. A `.shared::cta` address is
//! a byte offset into the calling CTA's buffer ([`smem_addr`], [`smem_ptr`]);
//! a `.shared::cluster` address (from [`map_rank_addr`]) is
//! `(1 << 31) | (rank << 24) | offset` and names the buffer of CTA `rank` of
//! the calling thread's cluster. [`map_rank_ptr`] maps a pointer into the
//! buffer of another CTA of the cluster (distributed shared memory).
//!
//! # Checks
//!
//! The first broken rule stops the run; every blocked or waiting thread is
//! woken and unwinds with a private marker panic (not reported, and not shown
//! by the panic hook), and [`run`] returns the error:
//!
//! - **Panics** of kernel code become [`EmuError::Panic`] with the message, the
//!   thread and (from a chained panic hook) the source location.
//! - **Deadlock**: no thread is runnable and some are blocked. Every blocked
//!   thread is listed with what it waits for and the barrier's counts, e.g.
//!   `bar.sync 0: 63 of 64 threads arrived; not arrived: cta (0,0,0) thread
//!   (5,0,0) [warp 0] (exited)` or `mbarrier.try_wait.parity 0 at smem+0x40
//!   (phase 0 incomplete: 3 of 128 arrivals pending, tx 0; arrival count 128,
//!   125 arrival(s) seen)`. A thread that
//!   exits is never counted as arriving anywhere. A `setmaxnreg.inc` that
//!   the CTA's register pool cannot serve ([`wgmma::setmaxnreg_inc`]) is
//!   listed with the pool, each warpgroup's count and the rule (the counts
//!   of all warpgroups must sum to at most the pool).
//! - **No progress**: more than [`LaunchConfig::max_steps`] scheduling points
//!   (0 = unlimited) without the run finishing, e.g. a spin loop on a flag
//!   nobody sets: [`EmuError::NoProgress`] lists what each live thread last
//!   yielded on.
//! - **Misuse** ([`EmuError::Misuse`], `rule` names it):
//!   - named barriers: id 16 or more; a thread count larger than the CTA or not
//!     a multiple of 32 (unless it is the whole CTA); different counts in one
//!     phase;
//!   - cluster barrier: `cluster_arrive` twice without `cluster_wait`, or a
//!     wait without an arrive;
//!   - addresses: a pointer that is not in this CTA's shared memory
//!     ("not a shared-memory address"), an access past the end
//!     ("out-of-bounds shared-memory access"), a CTA rank outside the cluster;
//!   - mbarriers: use before `mbarrier.init` (or after `inval`); init with a
//!     count outside 1..2^20, at an address that is not 8-byte aligned or not
//!     inside the buffer, on another CTA, or while a phase is in progress;
//!     "more arrivals than the count in one phase" (an arrival when the phase
//!     has all its arrivals and only waits for transaction bytes; or a phase
//!     that completes with several arriving threads, one of which arrived more
//!     than once: only a thread that makes all of a phase's arrivals may arrive
//!     several times); "transaction bytes over the expected count" (a phase
//!     would complete with more bytes completed than announced; a negative
//!     count is fine while arrivals are pending); "a thread skipped a phase"
//!     (a thread's wait observes a phase two or more after the one its previous
//!     wait on that barrier observed: its parity is out of step); waits on
//!     another CTA's barrier; `inval` while threads wait or a phase is in
//!     progress; for a barrier whose arriving threads library code declared
//!     ([`mbarrier_expect_arrivals`], e.g. a pipeline's `consumed`
//!     barrier): "mbarrier arrival count larger than its arriving threads"
//!     (at once: no phase could complete) and "mbarrier arrival count
//!     smaller than its arriving threads" (when a phase completes early,
//!     with the count, the expected arrivals and the arrivals seen);
//!   - async proxy: per CTA the run keeps a copy of shared memory as the
//!     async proxy sees it (refreshed by [`fence_proxy_async`], written by
//!     [`async_proxy_write`]); an async read ([`async_proxy_read`],
//!     [`wgmma_operand_reads`]) of bytes that differ is "SMEM written by
//!     ordinary stores and read by the async proxy ... without commit_smem";
//!     an [`async_proxy_write`] over SMEM read by a wgmma group of a thread
//!     of the destination CTA that no [`wgmma_wait_group`] retired is "TMA
//!     overwrites SMEM still read by an in-flight wgmma";
//!   - `setmaxnreg` ([`wgmma::setmaxnreg_inc`], [`wgmma::setmaxnreg_dec`]):
//!     an `.inc` below or a `.dec` above the warpgroup's register count,
//!     threads of one warpgroup at different `setmaxnreg`s, a count that is
//!     not a multiple of 8 in 24..=256, a CTA that is not whole warpgroups;
//!   - warp collectives (`shfl`, `vote`, `redux`, `match` through
//!     [`warp_exchange`] / [`warp_exchange_mask`], with a member mask: only
//!     the mask's lanes meet, and only their clocks are joined): lanes of the
//!     mask at different operations or call sites ("warp collective not
//!     converged", listing where each lane is), a lane that exited while the
//!     mask's lanes wait at one ("warp collective with an exited lane"), a
//!     lane outside the mask it passes, different masks at one call site, a
//!     mask naming lanes the warp does not have, a shuffle reading a lane
//!     outside its mask; a lane of the mask that never arrives ends the run
//!     as a deadlock naming the collective and its mask;
//!   - at the end of a run that finished: an mbarrier whose current phase has
//!     some but not all arrivals ("arrivals pending when the kernel ended") or
//!     announced bytes not completed;
//!   - asynchronous operations: a phase that carried TMA bytes and that no
//!     thread of its CTA waited on before the next phase completed (or the
//!     kernel ended); a thread that returns with bulk async-groups still
//!     reading SMEM (TMA stores not waited with `wait_group_read`/`wait_group`);
//!     an asynchronous read (or overwrite) of SMEM bytes last written by an
//!     ordinary store with no `fence_proxy_async` of the writer, or one
//!     ordered after the write, before the operation's issue (by clocks, not
//!     values).
//! - **Races** ([`EmuError::Race`]): two accesses to the same bytes, one a
//!   write, not ordered by happens-before: ordinary accesses that reach the
//!   emulator ([`smem_access`], [`gmem_access`], [`tmem_access`]: the
//!   `Smem`/`Tile`/`Gmem` accessors of `kernel-device`) and the accesses of
//!   asynchronous operations ([`async_issue`]: TMA loads, multicast loads
//!   (one operation per destination CTA), stores, wgmma operand reads). The
//!   report names both accesses (thread, warp, lane, source line, or the
//!   operation and its issuer), the range and the fix. Asynchronous
//!   operations run (move their bytes, complete their `complete_tx`) at a
//!   seeded scheduling point between their issue and the first wait that
//!   needs them, so a kernel that reads too early also gets seed-dependent
//!   values. The happens-before edges and the shadow state are described in
//!   [`race`]. A `tcgen05.ld` reads its tensor memory until its
//!   `tcgen05.wait::ld` ([`tmem`]): its read counts at both. Not seen: plain
//!   dereferences of bare pointers (`*ptr` of an `#[unchecked]` kernel
//!   parameter or of `kernel_device::ptr::Ptr::as_raw_unchecked`; the
//!   pointers the device API's handles give, `Gmem::ptr`, `Smem::elem_ptr`,
//!   ..., report themselves) and host code.
//!
//! # Threads
//!
//! Each emulated thread is a stackful coroutine on the OS thread that called
//! [`run`] (module `coro`): handing the baton to another thread is a stack
//! switch, not an OS context switch, and a run uses one CPU. The coroutines
//! get small stacks, 256 KiB by default (with a guard page; kept between
//! runs); set the environment variable `KERNEL_EMU_STACK_KIB` to change it
//! (e.g. for debug builds of kernels with large register arrays).
//!
//! Entry points are `#[track_caller]`: errors and deadlock lines name the
//! source location of the call (which is in the kernel when the host bodies
//! are `#[track_caller]` too). Library code that issues operations for the
//! user (a pipeline) is `#[track_caller]` too, and enters a [`scope`]: its
//! reports name the user's call and add "(inside `emit_pipeline` called at
//! ...)".
//!
//! # Warnings
//!
//! A run that finishes may still carry warnings ([`warn_once`]): each is
//! printed to stderr once when the run ends and returned in
//! [`RunReport::warnings`], e.g. a pipeline whose run never reused a slot
//! (its test shape has no more steps than stages).
#![forbid(unsafe_op_in_unsafe_fn)]

mod engine;
mod error;
pub mod clc;
pub mod race;
pub mod tmem;
mod operand;
mod coro;
pub mod tcgen05;
pub mod tma;
pub mod wgmma;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_tmem_shapes;
#[cfg(test)]
mod tests_setmaxnreg;
mod warp_ops;
pub mod ldst_matrix;
pub mod mma;
pub mod fmath;

pub use error::{EmuError, RunReport};
pub use race::{push_copy, AsyncCopy, AsyncOp, Completion, Space};

pub use engine::Range;
use engine::{Emu, Loc, CLUSTER_BIT, OFFSET_MASK, RANK_SHIFT};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::{Arc, Once};

/// Most CTAs the emulator runs in one grid.
pub const MAX_CTAS: usize = 64;
/// Most threads the emulator runs in one grid.
pub const MAX_THREADS: usize = 4096;
/// Default stack size of each emulated thread (its coroutine's stack).
pub const DEFAULT_STACK_BYTES: usize = 256 * 1024;

/// A launch: kernel name (for messages), grid, block and cluster shapes,
/// dynamic shared memory per CTA, scheduler seed and step budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Name used in every error message.
    pub kernel: String,
    /// CTAs per grid dimension.
    pub grid: [u32; 3],
    /// Threads per CTA dimension.
    pub block: [u32; 3],
    /// CTAs per cluster dimension (`[1, 1, 1]`: no clusters); divides `grid`.
    pub cluster: [u32; 3],
    /// Dynamic shared memory bytes per CTA.
    pub smem_bytes: usize,
    /// Seed of the scheduler: same seed, same interleaving.
    pub seed: u64,
    /// Scheduling points after which the run is reported as
    /// [`EmuError::NoProgress`]; 0 means no limit.
    pub max_steps: u64,
    /// Clusters resident at once (an emulated device's SM count divided by
    /// the cluster size): the others start only as running clusters finish,
    /// and may be canceled by cluster launch control ([`clc`]). 0: all.
    pub resident_clusters: u32,
    /// Whether the kernel opts in to non-portable cluster sizes (up to
    /// `kernel_spec::limits::MAX_NON_PORTABLE_CLUSTER_CTAS` CTAs instead of
    /// `MAX_CLUSTER_CTAS`), as `#[kernel(.., non_portable_cluster)]` does.
    pub non_portable_cluster: bool,
    /// Emulated devices, each running the whole grid with its own CTAs
    /// (1: one device). A thread's device is [`device_id`]; global memory is
    /// the host's, so a device reaches another's buffers through their
    /// addresses (peer memory), and the race detector checks accesses across
    /// devices as it does within one. Release/acquire atomics synchronize
    /// threads of different devices only at system scope ([`gmem_atomic_scoped`]).
    /// At most `kernel_spec::limits::MAX_PEER_DEVICES`.
    pub devices: u32,
}

impl LaunchConfig {
    /// A launch of `kernel` with no cluster, no shared memory, seed 0 and
    /// a budget of 10 million scheduling points.
    pub fn new(kernel: impl Into<String>, grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchConfig {
            kernel: kernel.into(),
            grid,
            block,
            cluster: [1, 1, 1],
            smem_bytes: 0,
            seed: 0,
            max_steps: 10_000_000,
            resident_clusters: 0,
            non_portable_cluster: false,
            devices: 1,
        }
    }
}

// ----- thread context ---------------------------------------------------------

struct Ctx {
    emu: Arc<Emu>,
    tid: usize,
    /// The thread's coroutine handle (on its own stack; see `suspend_thread`).
    suspender: *const coro::Suspender,
}

thread_local! {
    static CTX: RefCell<Option<Ctx>> = const { RefCell::new(None) };
    static PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The calling emulated thread's run and id; panics outside one.
fn ctx(name: &str) -> (Arc<Emu>, usize) {
    CTX.with(|c| c.borrow().as_ref().map(|c| (c.emu.clone(), c.tid)))
        .unwrap_or_else(|| {
            panic!(
                "kernel-emu: `{name}` was called outside an emulated GPU thread; \
             device operations on the host work only inside a kernel run by `kernel_emu::run`"
            )
        })
}

/// As [`ctx`], for a scheduling point: `None` while the thread unwinds (a
/// destructor running during a panic or an abort must not block or panic
/// again), in which case the operation does nothing.
fn enter(name: &str) -> Option<(Arc<Emu>, usize)> {
    if std::thread::panicking() {
        return None;
    }
    Some(ctx(name))
}

/// True on an emulated GPU thread (inside [`run`]).
pub fn is_emulated_thread() -> bool {
    CTX.with(|c| c.borrow().is_some())
}

/// Chains a panic hook that remembers where an emulated thread panicked.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let emulated = CTX
                .try_with(|c| c.try_borrow().map(|c| c.is_some()).unwrap_or(false))
                .unwrap_or(false);
            if emulated {
                let loc = info.location().map(|l| l.to_string());
                let _ = PANIC_LOCATION.try_with(|p| p.replace(loc));
            }
            previous(info)
        }));
    });
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic payload that is not a string)".to_string()
    }
}

fn stack_bytes() -> usize {
    std::env::var("KERNEL_EMU_STACK_KIB")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&k| k > 0)
        .map(|k| k * 1024)
        .unwrap_or(DEFAULT_STACK_BYTES)
}

/// Checks the launch shape: the hardware's rules (`kernel_spec::launch`,
/// the same check the host runs before a GPU launch; as [`EmuError::Misuse`]
/// at `"launch"`), then the emulator's own size limits
/// ([`EmuError::TooLarge`]).
fn validate(cfg: &LaunchConfig) -> Result<(), EmuError> {
    let shape = kernel_spec::launch::LaunchShape {
        grid: cfg.grid.into(),
        block: cfg.block.into(),
        cluster: cfg.cluster.into(),
        non_portable_cluster: cfg.non_portable_cluster,
        smem_bytes: cfg.smem_bytes as u64,
    };
    if let Err(p) = kernel_spec::launch::check_launch(&shape) {
        return Err(EmuError::Misuse {
            kernel: cfg.kernel.clone(),
            rule: p.rule().to_string(),
            where_: "launch".to_string(),
            detail: p.to_string(),
        });
    }
    let max_devices = kernel_spec::limits::MAX_PEER_DEVICES;
    if cfg.devices == 0 || cfg.devices as usize > max_devices {
        return Err(EmuError::Misuse {
            kernel: cfg.kernel.clone(),
            rule: "device count".to_string(),
            where_: "launch".to_string(),
            detail: format!(
                "{} emulated devices: a run has 1 to {max_devices} (kernel_spec::limits::MAX_PEER_DEVICES)",
                cfg.devices
            ),
        });
    }
    if cfg.devices > 1 && cfg.resident_clusters != 0 {
        return Err(EmuError::Misuse {
            kernel: cfg.kernel.clone(),
            rule: "device count".to_string(),
            where_: "launch".to_string(),
            detail: format!(
                "a run of {} devices with {} resident clusters: limited residency and cluster launch control \
                 are modeled for one device; emulate several devices with every cluster resident \
                 (`resident_clusters` = 0)",
                cfg.devices, cfg.resident_clusters
            ),
        });
    }
    let count = |v: [u32; 3]| v.iter().map(|&x| x as usize).product::<usize>();
    let (ctas, tpc) = (count(cfg.grid) * cfg.devices as usize, count(cfg.block));
    if ctas > MAX_CTAS || ctas * tpc > MAX_THREADS {
        let devices = if cfg.devices > 1 { format!(" on {} devices", cfg.devices) } else { String::new() };
        return Err(EmuError::TooLarge {
            kernel: cfg.kernel.clone(),
            detail: format!(
                "grid {:?} x block {:?}{devices} is {ctas} CTAs and {} threads; the emulator runs at most {MAX_CTAS} CTAs \
                 and {MAX_THREADS} threads (one stack each): shrink the problem for emulation",
                cfg.grid,
                cfg.block,
                ctas * tpc
            ),
        });
    }
    Ok(())
}

/// Runs `thread_fn` once in every GPU thread of the grid (each with its
/// context set), one thread at a time under the seeded scheduler, and returns
/// when all have returned or the first error stopped the run.
///
/// Errors: an invalid launch ([`EmuError::Misuse`] at `"launch"`), a grid
/// larger than the emulator runs ([`EmuError::TooLarge`]), or the first
/// panic, deadlock, step-budget overrun or misuse of the run (see the crate
/// docs). `run` always returns: after an error every emulated thread unwinds.
pub fn run(cfg: &LaunchConfig, thread_fn: &(dyn Fn() + Sync)) -> Result<RunReport, EmuError> {
    validate(cfg)?;
    install_panic_hook();
    let emu = Arc::new(Emu::new(cfg));
    let n = emu.threads.len();
    clc::hold_back(&emu, cfg.resident_clusters);
    emu.start();
    let stack = stack_bytes();
    // One coroutine per emulated thread, all on this OS thread; the
    // scheduler's baton says which one runs.
    let mut threads: Vec<Option<coro::Thread>> = Vec::with_capacity(n);
    for tid in 0..n {
        let e = emu.clone();
        // SAFETY: `thread_fn` and `e` outlive the coroutine: `drive` below
        // runs every coroutine to its end, and `threads` (which a panic of
        // `drive` drops, unwinding the coroutines left) is dropped before
        // `run` returns.
        match unsafe { coro::spawn(stack, move |s| thread_main(e, tid, thread_fn, s)) } {
            Ok(t) => threads.push(Some(t)),
            Err(err) => {
                let mut g = emu.lock();
                let detail = format!(
                    "could not map the {} KiB stack of emulated thread {tid} of {n} (one per GPU thread): {err}",
                    stack / 1024
                );
                emu.stop(&mut g, EmuError::TooLarge { kernel: cfg.kernel.clone(), detail });
                break;
            }
        }
    }
    coro::drive(&mut threads, || emu.baton());
    drop(threads);
    let failed = emu.lock().error.is_some();
    let canceled_clusters = clc::end_run(&emu);
    // Forget the run's TMEM state; report allocations not freed.
    let tmem_end = tmem::end_run(&emu, !failed);
    let steps = {
        let g = emu.lock();
        if let Some(e) = &g.error {
            return Err(e.clone());
        }
        g.steps
    };
    if let Some(e) = emu.end_checks() {
        return Err(e);
    }
    if let Some(e) = tmem_end {
        return Err(e);
    }
    let warnings = {
        let mut g = emu.lock();
        let unless: Vec<String> = std::mem::take(&mut g.warn_unless).into_iter().filter(|(_, ok, _)| !ok).map(|(_, _, t)| t).collect();
        let mut w = std::mem::take(&mut g.warnings);
        for t in unless {
            if !w.contains(&t) {
                w.push(t);
            }
        }
        w
    };
    for w in &warnings {
        eprintln!("kernel-emu warning: {w}");
    }
    Ok(RunReport { steps, threads: n, canceled_clusters, warnings })
}

/// The body of each emulated thread's coroutine: wait for the baton, run the
/// kernel, report.
fn thread_main(emu: Arc<Emu>, tid: usize, thread_fn: &(dyn Fn() + Sync), suspender: &coro::Suspender) {
    CTX.with(|c| *c.borrow_mut() = Some(Ctx { emu: emu.clone(), tid, suspender }));
    let result = catch_unwind(AssertUnwindSafe(|| {
        emu.first_turn(tid);
        // A cluster canceled by cluster launch control never runs.
        if !clc::canceled(&emu, tid) {
            thread_fn();
            emu.warp_exiting(tid);
            emu.exit_checks(tid);
        }
    }));
    match result {
        Ok(()) => emu.finish(tid),
        Err(payload) if payload.is::<engine::Abort>() => {}
        Err(payload) => {
            let location = PANIC_LOCATION.with(|p| p.borrow_mut().take());
            emu.panicked(tid, panic_message(&*payload), location);
        }
    }
    CTX.with(|c| c.borrow_mut().take());
}

/// Suspends the calling emulated thread until the run's loop resumes it
/// (it has handed the baton on); its context is set again on return.
pub(crate) fn suspend_thread() {
    let ctx = CTX
        .with(|c| c.borrow_mut().take())
        .expect("kernel-emu bug: a thread without its context waited for the baton");
    // SAFETY: the suspender lives on this coroutine's stack (in `coro`'s
    // entry frame, below `thread_main`), which is the running stack.
    coro::suspend(unsafe { &*ctx.suspender });
    CTX.with(|c| *c.borrow_mut() = Some(ctx));
}

// ----- context ---------------------------------------------------------------

fn info<R>(name: &str, f: impl FnOnce(&Emu, usize) -> R) -> R {
    let (emu, tid) = ctx(name);
    f(&emu, tid)
}

/// `%tid`: this thread's index in its CTA.
pub fn thread_idx() -> [u32; 3] {
    info("thread_idx", |e, t| e.threads[t].tidx)
}
/// `%ntid`: the CTA shape.
pub fn block_dim() -> [u32; 3] {
    info("block_dim", |e, _| e.block)
}
/// `%ctaid`: this CTA's index in the grid.
pub fn block_idx() -> [u32; 3] {
    info("block_idx", |e, t| e.ctas[e.threads[t].cta].idx)
}
/// `%nctaid`: the grid shape in CTAs.
pub fn grid_dim() -> [u32; 3] {
    info("grid_dim", |e, _| e.grid)
}
/// `%cluster_nctaid`: the cluster shape in CTAs.
pub fn cluster_dim() -> [u32; 3] {
    info("cluster_dim", |e, _| e.cluster)
}
/// `%cluster_ctarank`: this CTA's rank in its cluster (x fastest).
pub fn cluster_ctarank() -> u32 {
    info("cluster_ctarank", |e, t| e.ctas[e.threads[t].cta].rank)
}
/// The calling thread's emulated device (`0..LaunchConfig::devices`). On
/// hardware a kernel learns its device from its parameters (a peer-memory
/// parameter carries it); the emulator uses this to give each device its
/// own parameter values.
pub fn device_id() -> u32 {
    info("device_id", |e, t| e.ctas[e.threads[t].cta].device)
}
/// The number of emulated devices of the run.
pub fn device_count() -> u32 {
    info("device_count", |e, _| e.devices)
}
/// `%clusterid`: this cluster's index in the grid of clusters.
pub fn cluster_idx() -> [u32; 3] {
    info("cluster_idx", |e, t| {
        e.clusters[e.ctas[e.threads[t].cta].cluster].idx
    })
}
/// `%laneid`: linear thread index in the CTA modulo 32.
pub fn lane_id() -> u32 {
    info("lane_id", |e, t| e.threads[t].lane)
}
/// This thread's warp in its CTA (linear thread index / 32).
pub fn warp_id() -> u32 {
    info("warp_id", |e, t| e.threads[t].warp as u32)
}

// ----- shared memory ----------------------------------------------------------

/// This CTA's dynamic shared memory buffer (zeroed at launch, 1024-byte
/// aligned, [`smem_size`] bytes).
pub fn smem_base() -> *mut u8 {
    info("smem_base", |e, t| e.ctas[e.threads[t].cta].smem.ptr)
}

/// Bytes of dynamic shared memory per CTA.
pub fn smem_size() -> usize {
    info("smem_size", |e, _| e.smem_bytes)
}

/// The dynamic shared memory buffer (start, bytes) of the CTA of this run
/// whose buffer holds `ptr` (any CTA: distributed shared memory), if any:
/// the bounds of a shared-memory pointer made from a bare one
/// (`kernel_device::ptr::SmemPtr::from_raw`).
pub fn smem_buffer_of(ptr: *const u8) -> Option<(*const u8, usize)> {
    info("smem_buffer_of", |e, _| {
        e.smem_locate(ptr as usize).map(|(cta, _)| (e.ctas[cta].smem.ptr as *const u8, e.smem_bytes))
    })
}

/// The `.shared::cta` address (byte offset) of a pointer into this CTA's
/// buffer (one past the end allowed). Misuse otherwise.
#[track_caller]
pub fn smem_addr(ptr: *const u8) -> u32 {
    let loc = Location::caller();
    let (e, tid) = ctx("smem_addr");
    let own = e.threads[tid].cta;
    let p = ptr as usize;
    let within = |c: usize| {
        let base = e.ctas[c].smem.ptr as usize;
        (p >= base && p <= base + e.smem_bytes).then(|| (p - base) as u32)
    };
    if let Some(off) = within(own) {
        return off;
    }
    if let Some((c, off)) = (0..e.ctas.len()).find_map(|c| within(c).map(|o| (c, o))) {
        let detail = format!(
            "{ptr:?} is offset {off:#x} in the shared memory of cta {}, not of this CTA; \
             reach another CTA's shared memory through map_rank_addr / map_rank_ptr",
            error::fmt3(e.ctas[c].idx)
        );
        e.misuse(
            e.lock(),
            tid,
            loc,
            "not a shared-memory address of this CTA",
            detail,
        );
    }
    let detail = format!(
        "{ptr:?} is not in this CTA's dynamic shared memory ({:p}, {} bytes)",
        e.ctas[own].smem.ptr, e.smem_bytes
    );
    e.misuse(e.lock(), tid, loc, "not a shared-memory address", detail)
}

/// The pointer for a shared-memory address: a `.shared::cta` offset in this
/// CTA, or a `.shared::cluster` address from [`map_rank_addr`]. The offset
/// may be the end of the buffer but not past it ("out-of-bounds
/// shared-memory access").
#[track_caller]
pub fn smem_ptr(addr: u32) -> *mut u8 {
    smem_range_at(Location::caller(), "smem_ptr", addr, 0)
}

/// Stops the run with [`EmuError::Misuse`] naming `rule` (what was broken
/// and how to fix it), the calling thread and the caller's source line: for
/// checks that live outside this crate (e.g. bounds-checked global memory
/// views in `kernel-device`).
#[track_caller]
pub fn misuse(rule: &str, detail: std::fmt::Arguments<'_>) -> ! {
    let (e, tid) = ctx("misuse");
    e.misuse(e.lock(), tid, Location::caller(), rule, detail.to_string())
}

/// As [`smem_ptr`] for an access of `len` bytes at `addr`: the whole range
/// must lie inside the buffer. Use it for emulated copies (TMA, ld/st).
#[track_caller]
pub fn smem_ptr_range(addr: u32, len: usize) -> *mut u8 {
    smem_range_at(Location::caller(), "smem_ptr_range", addr, len)
}

fn smem_range_at(loc: Loc, name: &str, addr: u32, len: usize) -> *mut u8 {
    let (e, tid) = ctx(name);
    let (cta, off) = match e.decode(tid, addr) {
        Ok(v) => v,
        Err((rule, detail)) => e.misuse(e.lock(), tid, loc, rule, detail),
    };
    if off as usize + len > e.smem_bytes {
        let detail = format!(
            "{len} bytes at smem+{off:#x} of cta {} (address {addr:#x}): the buffer has {} bytes",
            error::fmt3(e.ctas[cta].idx),
            e.smem_bytes
        );
        e.misuse(
            e.lock(),
            tid,
            loc,
            "out-of-bounds shared-memory access",
            detail,
        );
    }
    // SAFETY: off <= smem_bytes, inside (or one past) the allocation.
    unsafe { e.ctas[cta].smem.ptr.add(off as usize) }
}

/// `mapa` on a generic pointer: the same offset in the buffer of CTA `rank`
/// of this cluster. `ptr` may point into the buffer of any CTA of the
/// cluster; `rank` must be below the cluster size.
#[track_caller]
pub fn map_rank_ptr(ptr: *mut u8, rank: u32) -> *mut u8 {
    let loc = Location::caller();
    let (e, tid) = ctx("map_rank_ptr");
    let cl = &e.clusters[e.ctas[e.threads[tid].cta].cluster];
    let p = ptr as usize;
    let off = cl.ctas.iter().find_map(|&c| {
        let base = e.ctas[c].smem.ptr as usize;
        (p >= base && p <= base + e.smem_bytes).then(|| p - base)
    });
    let Some(off) = off else {
        let detail = format!("map_rank_ptr({ptr:?}, {rank}): the pointer is not in the shared memory of this cluster");
        e.misuse(e.lock(), tid, loc, "not a shared-memory address", detail);
    };
    let Some(&target) = cl.ctas.get(rank as usize) else {
        let detail = format!(
            "map_rank_ptr(_, {rank}): the cluster has {} CTAs",
            cl.ctas.len()
        );
        e.misuse(e.lock(), tid, loc, "CTA rank outside the cluster", detail);
    };
    // SAFETY: off <= smem_bytes, inside (or one past) the target allocation.
    unsafe { e.ctas[target].smem.ptr.add(off) }
}

/// `mapa.shared::cluster`: the `.shared::cluster` address of offset `addr`
/// (a `.shared::cta` offset, or a `.shared::cluster` address whose offset is
/// taken) in CTA `rank` of this cluster: `(1 << 31) | (rank << 24) | offset`.
#[track_caller]
pub fn map_rank_addr(addr: u32, rank: u32) -> u32 {
    let loc = Location::caller();
    let (e, tid) = ctx("map_rank_addr");
    let size = e.clusters[e.ctas[e.threads[tid].cta].cluster].ctas.len();
    if addr & CLUSTER_BIT == 0 && addr > OFFSET_MASK {
        let detail =
            format!("map_rank_addr({addr:#x}, {rank}): not a shared::cta offset (below 2^24)");
        e.misuse(e.lock(), tid, loc, "not a shared-memory address", detail);
    }
    if rank as usize >= size {
        let detail = format!("map_rank_addr({addr:#x}, {rank}): the cluster has {size} CTAs");
        e.misuse(e.lock(), tid, loc, "CTA rank outside the cluster", detail);
    }
    CLUSTER_BIT | (rank << RANK_SHIFT) | (addr & OFFSET_MASK)
}

// ----- synchronization (scheduling points) ------------------------------------------

/// `barrier.sync id, count`: named CTA barrier `id` (0..16) for `count`
/// threads (0: the whole CTA; otherwise a multiple of 32). Blocks until
/// `count` threads arrived in this phase; the barrier is then reusable.
#[track_caller]
pub fn bar_sync(id: u32, count: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("bar_sync") {
        e.bar(tid, loc, id, count, true);
    }
}

/// `barrier.arrive id, count`: arrive on named barrier `id` without waiting.
#[track_caller]
pub fn bar_arrive(id: u32, count: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("bar_arrive") {
        e.bar(tid, loc, id, count, false);
    }
}

/// `bar.warp.sync 0xffffffff`: a barrier among the existing lanes of the
/// calling warp (all of them must call it; an exited lane deadlocks it).
#[track_caller]
pub fn warp_sync() {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("warp_sync") {
        e.warp_sync(tid, loc, "bar.warp.sync");
    }
}

/// `bar.warp.sync membermask`: a barrier among the lanes of `mask` (the
/// calling lane among them): only they meet, and only they are ordered
/// with each other (a happens-before edge among the mask's lanes). The
/// lanes of the mask must all call it, with the same mask; checked as the
/// data collectives are ([`warp_exchange_mask`]).
#[track_caller]
pub fn warp_sync_mask(mask: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("warp_sync_mask") {
        warp_ops::collective(&e, tid, loc, "bar.warp.sync", true, mask, 0);
    }
}

/// `elect.sync 0xffffffff`: a warp collective (a warp barrier) that returns
/// true in the lowest lane of the warp only.
#[track_caller]
pub fn elect_one() -> bool {
    let loc = Location::caller();
    match enter("elect_one") {
        Some((e, tid)) => {
            warp_ops::collective(&e, tid, loc, "elect.sync", false, !0, 0);
            e.threads[tid].lane == 0
        }
        None => false,
    }
}

/// `barrier.cluster.arrive`: every thread of every CTA of the cluster arrives
/// once per phase, then calls [`cluster_wait`].
#[track_caller]
pub fn cluster_arrive() {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("cluster_arrive") {
        e.cluster_arrive_as(tid, loc, true);
    }
}

/// `barrier.cluster.arrive.relaxed`: as [`cluster_arrive`] for the barrier,
/// without release semantics: the thread's earlier accesses are not ordered
/// before the other threads' waits (the race detector does not join its
/// clock).
#[track_caller]
pub fn cluster_arrive_relaxed() {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("cluster_arrive_relaxed") {
        e.cluster_arrive_as(tid, loc, false);
    }
}

/// `barrier.cluster.wait`: blocks until the phase this thread arrived in has
/// all the cluster's arrivals.
#[track_caller]
pub fn cluster_wait() {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("cluster_wait") {
        e.cluster_wait(tid, loc);
    }
}

/// A plain scheduling point: lets other threads run and counts a step (the
/// run stops with [`EmuError::NoProgress`] past `max_steps`). `what` names the
/// operation (e.g. `"atom.add"`, `"fence.acq_rel.gpu"`, `"spin on flag"`) for
/// that report.
#[track_caller]
pub fn yield_point(what: &'static str) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("yield_point") {
        e.yield_point(tid, what, loc);
    }
}

// ----- mbarriers -----------------------------------------------------------

/// `mbarrier.init`: the mbarrier at `.shared::cta` address `addr` (8-byte
/// aligned) expects `count` (1..2^20) arrivals per phase; phase 0, tx 0.
#[track_caller]
pub fn mbarrier_init(addr: u32, count: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_init") {
        e.mbar_init(tid, loc, addr, count);
    }
}

/// `mbarrier.arrive`: one arrival. `addr` may be a `.shared::cluster`
/// address (from [`map_rank_addr`]) of another CTA's barrier.
#[track_caller]
pub fn mbarrier_arrive(addr: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_arrive") {
        e.mbar_arrive(tid, loc, addr, 0, "mbarrier.arrive", false);
    }
}

/// `mbarrier.arrive.release.cluster`: one arrival, a release at cluster
/// scope, on an mbarrier of any CTA of the cluster (`addr` mapped there):
/// a waiter in another CTA acquires it only at cluster scope
/// ([`mbarrier_try_wait_parity_cluster`]). [`mbarrier_arrive`] is a
/// release at CTA scope, which a waiter in another CTA never acquires.
#[track_caller]
pub fn mbarrier_arrive_cluster(addr: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_arrive_cluster") {
        e.mbar_arrive(tid, loc, addr, 0, "mbarrier.arrive.release.cluster", true);
    }
}

/// `mbarrier.arrive.expect_tx`: announces `bytes`, then one arrival, as one
/// atomic operation.
#[track_caller]
pub fn mbarrier_arrive_expect_tx(addr: u32, bytes: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_arrive_expect_tx") {
        e.mbar_arrive(tid, loc, addr, bytes, "mbarrier.arrive.expect_tx", false);
    }
}

/// `mbarrier.expect_tx`: the current phase also waits for `bytes` more
/// transaction bytes.
#[track_caller]
pub fn mbarrier_expect_tx(addr: u32, bytes: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_expect_tx") {
        e.mbar_tx(tid, loc, addr, bytes as i64, "mbarrier.expect_tx");
    }
}

/// `complete_tx`: `bytes` of the current phase's transactions arrived (what
/// an emulated TMA copy does when it finishes; may target another CTA).
#[track_caller]
pub fn mbarrier_complete_tx(addr: u32, bytes: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_complete_tx") {
        e.mbar_tx(tid, loc, addr, -(bytes as i64), "mbarrier.complete_tx");
    }
}

/// Records a multicast (collective) copy issued by the calling CTA with
/// `mask`, completing on the barrier at `.shared::cta` offset `bar` in every
/// CTA of the mask: if a destination barrier then deadlocks with bytes
/// pending and some CTA of the mask never issued its part, the deadlock
/// report says "collective copy not issued by every CTA of the cluster".
#[track_caller]
pub fn mbarrier_note_multicast(bar: u32, mask: u16) {
    let loc = Location::caller();
    let (e, tid) = ctx("mbarrier_note_multicast");
    let cl = &e.clusters[e.ctas[e.threads[tid].cta].cluster];
    let rank = cl.ctas.iter().position(|&c| c == e.threads[tid].cta).unwrap_or(0) as u32;
    for r in 0..16u32 {
        if mask & (1 << r) == 0 || r as usize >= cl.ctas.len() {
            continue;
        }
        let (cta, off) = e.decode_or_misuse(tid, loc, CLUSTER_BIT | (r << RANK_SHIFT) | (bar & OFFSET_MASK));
        e.mbar_note_multicast(cta, off, rank, mask);
    }
}

/// Declares, for the emulator's checks, that every phase of the mbarrier at
/// `.shared::cta` address `addr` takes one arrival from each of `n` threads,
/// described by `who` (e.g. "the 256 compute threads (`consumed` of
/// `emit_pipeline_warp_specialized`)"). Library code that knows who arrives
/// (the pipelines of `kernel-device`) calls it after the barrier's init; the
/// run then stops with a misuse that names the barrier's count, `n` and the
/// arrivals seen: at once when the count is larger than `n` (no phase could
/// complete), and when a phase completes early when it is smaller.
/// Not a scheduling point.
#[track_caller]
pub fn mbarrier_expect_arrivals(addr: u32, n: u32, who: &str) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_expect_arrivals") {
        e.mbar_expect(tid, loc, addr, n, who);
    }
}

/// A library scope of the calling emulated thread, left when dropped: see
/// [`scope`].
#[must_use = "the scope ends when the guard is dropped"]
pub struct ScopeGuard {
    emu: Option<(Arc<Emu>, usize)>,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        if let Some((e, tid)) = self.emu.take() {
            if !std::thread::panicking() {
                e.scope(tid, None);
            }
        }
    }
}

/// Enters a library scope named `what` (e.g. `"emit_pipeline"`) at the
/// caller's location: until the guard drops, misuse reports and deadlock
/// lines of the calling emulated thread add "(inside `what` called at
/// the caller)". With `#[track_caller]` on the library function, the caller
/// is the user's line. Not a scheduling point.
#[track_caller]
pub fn scope(what: &'static str) -> ScopeGuard {
    let loc = Location::caller();
    match enter("scope") {
        Some((e, tid)) => {
            e.scope(tid, Some((what, loc)));
            ScopeGuard { emu: Some((e, tid)) }
        }
        None => ScopeGuard { emu: None },
    }
}

/// A warning of the run (not an error): printed to stderr once when the
/// run ends (prefixed with "kernel-emu warning: ") and returned in
/// [`RunReport::warnings`]; the same text given again (by other threads)
/// is kept once. Prefix it with the kernel's name: [`kernel_name`].
pub fn warn_once(text: String) {
    if let Some((e, _)) = enter("warn_once") {
        e.warn_once(text);
    }
}

/// A warning of the run unless some call of the same `key` was `ok`: each
/// call records whether its case was fine, and when the run ends, a key
/// none of whose calls was fine gives one warning, `text()` of its first
/// call (formatted only then), as [`warn_once`]'s. For checks that hold of
/// the launch as a whole, not of each CTA: a pipeline some of whose CTAs
/// run few steps (ragged work) warns only if no CTA reused a slot.
pub fn warn_unless(key: String, ok: bool, text: impl FnOnce() -> String) {
    if let Some((e, _)) = enter("warn_unless") {
        e.warn_unless(key, ok, text);
    }
}

/// The end-of-run note for a kernel with raw-pointer parameters (emitted by
/// `#[kernel]`'s host entry, once per run): their plain dereferences are
/// invisible to the race detector (it sees `Gmem`/`GmemRef`, tiles, TMA and
/// `kernel_device::gmem::raw`'s loads and stores), so a run with no report
/// says nothing about them.
pub fn warn_unchecked_pointers(kernel: &str, params: &str) {
    warn_once(format!(
        "kernel `{kernel}`: raw-pointer parameter(s) {params}: their dereferences were not race-checked (the detector sees `Gmem`/`GmemRef` and the pointers they hand out, tiles, TMA maps and `kernel_device::gmem::raw::{{load, load_nc, store}}`); use `Gmem<T>` (`GmemRef<T>` read-only) to have them bounds- and race-checked, or `gmem::raw` to have them race-checked"
    ));
}

/// The name of the kernel the calling emulated thread runs.
pub fn kernel_name() -> String {
    ctx("kernel_name").0.kernel.clone()
}

/// `mbarrier.try_wait.parity`: true at once if the phase with parity
/// `parity & 1` has completed (the current phase has the other parity);
/// otherwise blocks until the current phase completes, then returns true.
/// (The hardware may also return false after a time-out; the emulator always
/// waits.)
/// An acquire at CTA scope: it synchronizes with the arrivals of threads
/// of the barrier's CTA and with asynchronous completions, not with
/// arrivals from other CTAs of the cluster (for those, see
/// [`mbarrier_try_wait_parity_cluster`]): data they released is then not
/// ordered before this thread's next accesses, and a race report says so.
#[track_caller]
pub fn mbarrier_try_wait_parity(addr: u32, parity: u32) -> bool {
    let loc = Location::caller();
    match enter("mbarrier_try_wait_parity") {
        Some((e, tid)) => e.mbar_wait(tid, loc, addr, parity, true, false),
        None => true,
    }
}

/// `mbarrier.try_wait.parity.acquire.cluster`: as
/// [`mbarrier_try_wait_parity`], an acquire at cluster scope, which
/// synchronizes with the arrivals of every CTA of the cluster (their
/// `mbarrier.arrive.release.cluster`).
#[track_caller]
pub fn mbarrier_try_wait_parity_cluster(addr: u32, parity: u32) -> bool {
    let loc = Location::caller();
    match enter("mbarrier_try_wait_parity_cluster") {
        Some((e, tid)) => e.mbar_wait(tid, loc, addr, parity, true, true),
        None => true,
    }
}

/// A thread passes over the next phase of the mbarrier at `addr` without
/// waiting on it (`BarrierRef::skip_phase`: no instruction on the GPU, the
/// thread's parity bit flips), so the "a thread skipped a phase" rule
/// allows its next wait to observe one phase more. Acquires nothing.
#[track_caller]
pub fn mbarrier_skip_phase(addr: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_skip_phase") {
        e.mbar_skip_phase(tid, loc, addr)
    }
}

/// A pipeline's check before it waits for phase number `phase` (0-based,
/// counted from the init) of the mbarrier at `addr`: a phase two or more
/// behind the barrier (stale) or ahead of its current phase stops the run
/// with a misuse naming `who()` (the pipeline state's owner, formatted only
/// for a report) and the caller's line. Not a scheduling point. Used by
/// `kernel_device::pipeline`, whose states know the phase number, not only
/// its parity; the thread's next wait on the barrier is then measured from
/// `phase` by the "a thread skipped a phase" rule (a state may wait on some
/// phases only).
#[track_caller]
pub fn mbarrier_check_phase(addr: u32, phase: u64, who: &dyn Fn() -> String) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_check_phase") {
        e.mbar_check_phase(tid, loc, addr, phase, who);
    }
}

/// `mbarrier.test_wait.parity`: whether the phase with parity `parity & 1`
/// has completed, without blocking (a scheduling point all the same).
#[track_caller]
pub fn mbarrier_test_wait_parity(addr: u32, parity: u32) -> bool {
    let loc = Location::caller();
    match enter("mbarrier_test_wait_parity") {
        Some((e, tid)) => e.mbar_wait(tid, loc, addr, parity, false, false),
        None => true,
    }
}

/// `mbarrier.inval`: the barrier may no longer be used (until re-init).
#[track_caller]
pub fn mbarrier_inval(addr: u32) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("mbarrier_inval") {
        e.mbar_inval(tid, loc, addr);
    }
}

// ----- async proxy -----------------------------------------------------------

/// `fence.proxy.async.shared::cta` (`commit_smem`): from now on the async
/// proxy (TMA stores, wgmma operand reads) sees this CTA's whole shared
/// memory as it is. A scheduling point.
#[track_caller]
pub fn fence_proxy_async() {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("fence_proxy_async") {
        e.fence_proxy_async(tid, loc);
    }
}

/// The async proxy reads `len` bytes at shared-memory address `addr` (the
/// source of an emulated TMA store): misuse ("SMEM written by ordinary
/// stores and read by the async proxy ...") if ordinary stores changed any of
/// them since the CTA's last [`fence_proxy_async`] or async write there.
#[track_caller]
pub fn async_proxy_read(addr: u32, len: usize, op: &str) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("async_proxy_read") {
        e.async_read(tid, loc, addr, len, op);
    }
}

/// The async proxy writes `len` bytes at shared-memory address `addr` (an
/// emulated TMA load; `.shared::cluster` addresses name another CTA):
/// misuse ("TMA overwrites SMEM still read by an in-flight wgmma") if the
/// range overlaps SMEM read by a wgmma group of a thread of the destination
/// CTA that no `wgmma.wait_group` retired. Then runs `write` (the copy) and
/// records the written bytes as seen by the async proxy.
#[track_caller]
pub fn async_proxy_write(addr: u32, len: usize, op: &str, write: impl FnOnce()) {
    let loc = Location::caller();
    match enter("async_proxy_write") {
        Some((e, tid)) => {
            let (cta, off) = e.async_write_check(tid, loc, addr, len, op);
            write();
            e.async_written(cta, off, len);
        }
        None => write(),
    }
}

/// A wgmma issued by the calling thread read the `.shared::cta` byte
/// `ranges` of its CTA (half-open): each is checked as by
/// [`async_proxy_read`], then recorded in the thread's open wgmma group
/// (for the in-flight check of [`async_proxy_write`]).
#[track_caller]
pub fn wgmma_operand_reads(ranges: &[Range], op: &str) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("wgmma_operand_reads") {
        e.wgmma_reads(tid, loc, ranges, op);
    }
}

/// `wgmma.commit_group` bookkeeping: closes the calling thread's open group
/// of wgmma operand reads. Not a scheduling point.
pub fn wgmma_commit_group() {
    if let Some((e, tid)) = enter("wgmma_commit_group") {
        e.wgmma_commit(tid);
    }
}

/// `wgmma.wait_group n` bookkeeping: retires all but the newest `n` of the
/// calling thread's committed groups. Not a scheduling point.
pub fn wgmma_wait_group(n: u32) {
    if let Some((e, tid)) = enter("wgmma_wait_group") {
        e.wgmma_wait(tid, n);
    }
}

// ----- race detection: ordinary accesses -------------------------------------

/// An ordinary (generic-proxy) access by the calling thread of `len` bytes
/// at `ptr` in shared memory (any CTA's buffer, distributed shared memory
/// included): checked against the shadow state and recorded
/// ([`EmuError::Race`] if an earlier conflicting access is not ordered
/// before it). A pointer outside every CTA's buffer is ignored. Not a
/// scheduling point. `Smem`/`Tile` accessors and `kernel_device::smem::raw`'s
/// loads and stores call it.
#[track_caller]
pub fn smem_access(ptr: *const u8, len: usize, write: bool) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("smem_access") {
        if let Some((cta, off)) = e.smem_locate(ptr as usize) {
            e.ordinary_access(tid, loc, Space::Smem { cta }, off, off + len as u64, write);
        }
    }
}

/// An ordinary access by the calling thread of `len` bytes of global memory
/// at host address `ptr` (`Gmem` accessors, vector loads and stores):
/// checked and recorded as by [`smem_access`]. Not a scheduling point.
/// `kernel_device::ptr::GmemPtr`'s accesses and `kernel_device::gmem::raw`'s
/// loads and stores call this; plain dereferences of bare pointers do not
/// reach the emulator.
#[track_caller]
pub fn gmem_access(ptr: *const u8, len: usize, write: bool) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("gmem_access") {
        let a = ptr as u64;
        e.ordinary_access(tid, loc, Space::Gmem, a, a + len as u64, write);
    }
}

/// An atomic on the global address `ptr` by the calling thread: with
/// `acquire` the thread joins what earlier releases on that address
/// published; with `release` it publishes what it knows (a semaphore's
/// signal -> wait edge). Atomics are not checked against each other. Not a
/// scheduling point (the atomic's host body yields separately).
pub fn gmem_atomic(ptr: *const u8, acquire: bool, release: bool) {
    gmem_atomic_scoped(ptr, acquire, release, AtomicScope::Gpu)
}

/// The scope of a release/acquire atomic (PTX `.cta`, `.gpu`, `.sys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicScope {
    /// `.cta`: modeled as `.gpu` (the detector does not narrow it further).
    Cta,
    /// `.gpu`: the threads of the issuing device.
    Gpu,
    /// `.sys`: every device and the host.
    Sys,
}

/// [`gmem_atomic`] at a scope. A release and an acquire on one address
/// synchronize when each is in the other's scope (PTX ISA, "morally
/// strong"): threads of one device at any scope, threads of two devices
/// only when both are `.sys`. So a `.gpu` release on device 0 does not
/// order device 1's reader, and the race detector reports its accesses.
pub fn gmem_atomic_scoped(ptr: *const u8, acquire: bool, release: bool, scope: AtomicScope) {
    if let Some((e, tid)) = enter("gmem_atomic") {
        e.atomic(tid, ptr as u64, acquire, release, scope == AtomicScope::Sys);
    }
}

/// An ordinary access by the calling thread to bytes `lo..hi` of its CTA's
/// tensor memory (`tcgen05.ld`/`st`; the address scheme is the backend's):
/// checked and recorded as by [`smem_access`].
#[track_caller]
pub fn tmem_access(lo: u64, hi: u64, write: bool) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("tmem_access") {
        let cta = e.threads[tid].cta;
        e.ordinary_access(tid, loc, Space::Tmem { cta }, lo, hi, write);
    }
}

// ----- race detection: asynchronous operations --------------------------------

/// Issues an asynchronous operation from the calling thread (see
/// [`race`]): it runs, moving its bytes and completing, at a seeded
/// scheduling point before its completion is observed. A scheduling point.
///
/// ```no_run
/// # use kernel_emu::{AsyncCopy, AsyncOp, Completion};
/// # fn issue(smem_ptr: *mut u8, gmem_ptr: *const u8, len: usize, bar: u32) {
/// // A TMA load of `len` bytes completing on the mbarrier at `bar`:
/// let mut copies = Vec::new();
/// kernel_emu::push_copy(&mut copies, AsyncCopy { dst: smem_ptr, src: Some(gmem_ptr), len });
/// kernel_emu::async_issue(AsyncOp::copies("cp.async.bulk.tensor (load)", copies,
///     Completion::MBarrierTx { bar, bytes: len as u32 }));
/// # }
/// ```
#[track_caller]
pub fn async_issue(op: AsyncOp) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("async_issue") {
        e.async_issue(tid, loc, op);
    }
}

/// One arrival on the mbarrier at `bar` (`.shared::cta` or
/// `.shared::cluster`) once every [`Completion::Tracked`] operation the
/// calling thread issued since its last call has run (`tcgen05.commit`);
/// the threads that wait on that phase then know those operations' effects.
/// `kind` names it in reports. A scheduling point.
#[track_caller]
pub fn async_commit_arrive(bar: u32, kind: &str) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("async_commit_arrive") {
        e.commit_arrive(tid, loc, bar, kind);
    }
}

/// `cp.async.bulk.commit_group`: closes the calling thread's group of
/// [`Completion::BulkGroup`] operations. A scheduling point.
#[track_caller]
pub fn bulk_commit_group() {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("bulk_commit_group") {
        e.bulk_commit(tid, loc);
    }
}

/// `cp.async.bulk.wait_group(.read) n`: all but the newest `n` committed
/// groups of the calling thread have run; with `read_only` the thread may
/// reuse their sources, otherwise it also sees their writes. A scheduling
/// point.
#[track_caller]
pub fn bulk_wait_group(n: u32, read_only: bool) {
    let loc = Location::caller();
    if let Some((e, tid)) = enter("bulk_wait_group") {
        e.bulk_wait(tid, loc, n, read_only);
    }
}

// ----- warp collectives with data (warp_ops) ---------------------------------

pub use warp_ops::{
    ballot_result, match_all_result, match_all_result_mask, match_any_result, match_any_result_mask, redux_result,
    redux_result_mask, shfl_result, shfl_source, ReduxOp, ShflMode,
};

/// One warp collective of the calling lane: every lane of the warp (full
/// mask) deposits `value` and gets the 32 lanes' values (index = lane) once
/// all have arrived. `op` names the operation (`"shfl.sync.bfly.b32"`) for
/// the convergence check and its reports: every lane must reach the same
/// `op` at the same call site ("warp collective not converged", "warp
/// collective with an exited lane"). A scheduling point. The building block
/// of user-defined warp operations' emulator bodies.
#[track_caller]
pub fn warp_exchange(op: &'static str, value: u64) -> [u64; 32] {
    warp_exchange_mask(op, !0, value)
}

/// [`warp_exchange`] among the lanes of the member mask `mask` only (bit
/// `l`: lane `l`; the calling lane among them): they meet, each gets the
/// mask's lanes' values (0 for lanes outside it), and lanes outside the
/// mask do not take part. Reported: a calling lane outside its mask, a mask
/// naming lanes the warp does not have, lanes of the mask at different
/// operations or sites, or passing different masks at one site, a lane of
/// the mask that exited (and, as a deadlock, one that never arrives). A
/// scheduling point, and a happens-before edge among the mask's lanes.
#[track_caller]
pub fn warp_exchange_mask(op: &'static str, mask: u32, value: u64) -> [u64; 32] {
    let loc = Location::caller();
    match enter("warp_exchange") {
        Some((e, tid)) => warp_ops::collective(&e, tid, loc, op, true, mask, value),
        None => [value; 32],
    }
}

/// `shfl.sync.{mode}.b32 d|p, a, b, c, 0xffffffff` (PTX ISA §9.7.9.6) for the
/// calling lane: `(d, p)`.
#[track_caller]
pub fn shfl_sync(op: &'static str, mode: ShflMode, a: u32, b: u32, c: u32) -> (u32, bool) {
    shfl_sync_mask(op, mode, a, b, c, !0)
}

/// `shfl.sync.{mode}.b32 d|p, a, b, c, membermask`: as [`shfl_sync`] among
/// the lanes of `mask`; a source lane outside the mask (in range) is
/// reported ("shfl.sync reads a lane outside its member mask": undefined
/// on the GPU).
#[track_caller]
pub fn shfl_sync_mask(op: &'static str, mode: ShflMode, a: u32, b: u32, c: u32, mask: u32) -> (u32, bool) {
    let values = warp_exchange_mask(op, mask, a as u64);
    let lane = lane_id();
    let (j, p) = shfl_source(mode, lane, b, c);
    if p && mask & (1 << j) == 0 {
        misuse(
            "shfl.sync reads a lane outside its member mask (the value is undefined on the GPU)",
            format_args!(
                "lane {lane}'s {op} (b = {b}, c = {c:#x}) reads lane {j}, which member mask {mask:#010x} leaves out: keep \
                 the source lanes inside the mask (a segment width, `c = ((32 - width) << 8) | 0x1f`, clamps them), or \
                 widen the mask"
            ),
        );
    }
    (values[j as usize] as u32, p)
}

/// `vote.sync.ballot.b32 d, p, 0xffffffff` (PTX ISA §9.7.13.7): bit `l` of
/// the result is lane `l`'s predicate. `vote.all/any/uni` derive from it.
#[track_caller]
pub fn vote_ballot(op: &'static str, pred: bool) -> u32 {
    vote_ballot_mask(op, pred, !0)
}

/// `vote.sync.ballot.b32 d, p, membermask`: the predicates of the lanes of
/// `mask` (bits outside it are 0). `vote.all/any/uni` with a mask derive
/// from it (over the mask's lanes).
#[track_caller]
pub fn vote_ballot_mask(op: &'static str, pred: bool, mask: u32) -> u32 {
    ballot_result(&warp_exchange_mask(op, mask, pred as u64)) & mask
}

/// `redux.sync.{op} d, a, 0xffffffff` (PTX ISA §9.7.13.10).
#[track_caller]
pub fn redux_sync(name: &'static str, op: ReduxOp, a: u32) -> u32 {
    redux_sync_mask(name, op, a, !0)
}

/// `redux.sync.{op} d, a, membermask`: the reduction over the lanes of `mask`.
#[track_caller]
pub fn redux_sync_mask(name: &'static str, op: ReduxOp, a: u32, mask: u32) -> u32 {
    redux_result_mask(op, &warp_exchange_mask(name, mask, a as u64), mask)
}

/// `match.any.sync.b64 d, a, 0xffffffff` (PTX ISA §9.7.13.8; `.b32` values
/// are zero-extended): the mask of lanes holding the calling lane's value.
#[track_caller]
pub fn match_any_sync(op: &'static str, a: u64) -> u32 {
    match_any_sync_mask(op, a, !0)
}

/// `match.any.sync.b64 d, a, membermask`: the lanes of `mask` holding the
/// calling lane's value.
#[track_caller]
pub fn match_any_sync_mask(op: &'static str, a: u64, mask: u32) -> u32 {
    match_any_result_mask(&warp_exchange_mask(op, mask, a), lane_id(), mask)
}

/// `match.all.sync.b64 d|p, a, 0xffffffff`: `(0xffffffff, true)` when every
/// lane holds the same value, else `(0, false)`.
#[track_caller]
pub fn match_all_sync(op: &'static str, a: u64) -> (u32, bool) {
    match_all_sync_mask(op, a, !0)
}

/// `match.all.sync.b64 d|p, a, membermask`: `(mask, true)` when every lane
/// of `mask` holds the same value, else `(0, false)`.
#[track_caller]
pub fn match_all_sync_mask(op: &'static str, a: u64, mask: u32) -> (u32, bool) {
    match_all_result_mask(&warp_exchange_mask(op, mask, a), mask)
}
