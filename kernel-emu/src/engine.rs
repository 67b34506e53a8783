//! The scheduler and the synchronization objects (see the crate docs for the
//! execution model and the rules checked here).
//!
//! Everything mutable lives in one [`State`] behind one mutex. The baton is
//! `State::current`: the id of the one emulated thread allowed to run. Each
//! emulated thread is a coroutine on the run's OS thread (module `coro`); one
//! that hands the baton on suspends, and the run's loop resumes the new
//! holder (or, once the run is aborted, each thread in turn, to unwind). All
//! kernel code of a run executes on one OS thread, one turn after another,
//! so plain (non-atomic) accesses to shared memory and to host buffers from
//! different emulated threads are ordered, and there are no data races at
//! the Rust level.
use crate::error::{fmt3, EmuError};
use crate::race::{Clk, RaceState};
use crate::LaunchConfig;
use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::panic::Location;
use std::sync::{Mutex, MutexGuard};

mod asyncop;
mod regs;
mod warp;

use warp::WarpBar;

/// A source location (of the kernel call that reached the emulator).
pub(crate) type Loc = &'static Location<'static>;

const NONE: usize = usize::MAX;
/// Named CTA barriers per CTA (`bar.sync` ids 0..16).
pub(crate) use kernel_spec::limits::NUM_NAMED_BARRIERS;
/// Lanes per warp.
pub(crate) const WARP: usize = 32;
/// Largest mbarrier arrival count (2^20 - 1).
pub(crate) use kernel_spec::limits::MAX_MBARRIER_ARRIVALS as MAX_MBAR_COUNT;
/// Largest magnitude of an mbarrier transaction count (2^20 - 1), signed
/// as the engine counts it.
const MAX_TX: i64 = kernel_spec::limits::MAX_MBARRIER_TX as i64;
/// Bit 31 marks a `.shared::cluster` address made by `map_rank_addr`.
pub(crate) const CLUSTER_BIT: u32 = 1 << 31;
/// The CTA rank sits in bits 24..31 of a `.shared::cluster` address.
pub(crate) const RANK_SHIFT: u32 = 24;
/// Offsets of `.shared::cta` addresses are below 2^24.
pub(crate) const OFFSET_MASK: u32 = (1 << RANK_SHIFT) - 1;
/// The rule of a TMA phase nobody waited on.
pub(crate) const UNWAITED_RULE: &str = "a phase that carried TMA bytes was never waited on by a thread of its CTA: \
     the bytes may land after the SMEM is read or reused; wait on every phase a copy completes on \
     (barrier.wait(parity)) before using or reusing the SMEM";
/// How many not-arrived threads a deadlock line names.
const NAMED_MISSING: usize = 8;

/// Payload of the private panic that unwinds emulated threads when the run
/// stops (it is caught by the thread's wrapper and never reported).
pub(crate) struct Abort;

/// Unwinds the calling emulated thread without invoking the panic hook.
pub(crate) fn unwind_abort() -> ! {
    std::panic::resume_unwind(Box::new(Abort))
}

/// One CTA's dynamic shared memory: zeroed, 1024-byte aligned.
pub(crate) struct SmemBuf {
    pub(crate) ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is plain memory owned by the run; the baton orders the
// emulated threads' accesses to it (one thread runs at a time, hand-over
// through a mutex).
unsafe impl Send for SmemBuf {}
// SAFETY: as for Send.
unsafe impl Sync for SmemBuf {}

impl SmemBuf {
    fn new(bytes: usize) -> Self {
        let layout =
            Layout::from_size_align(bytes.max(1), 1024).expect("shared memory size fits a Layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            handle_alloc_error(layout);
        }
        SmemBuf { ptr, layout }
    }
}

impl Drop for SmemBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Immutable facts about one emulated thread.
pub(crate) struct ThreadInfo {
    /// Index of its CTA in `Emu::ctas`.
    pub(crate) cta: usize,
    pub(crate) tidx: [u32; 3],
    /// Warp index in the CTA (linear thread index / 32).
    pub(crate) warp: usize,
    pub(crate) lane: u32,
}

/// Immutable facts about one CTA.
pub(crate) struct CtaInfo {
    pub(crate) idx: [u32; 3],
    /// The emulated device it runs on (`LaunchConfig::devices`).
    pub(crate) device: u32,
    /// Index of its cluster in `Emu::clusters`.
    pub(crate) cluster: usize,
    /// Rank in the cluster (x fastest).
    pub(crate) rank: u32,
    pub(crate) smem: SmemBuf,
}

/// Immutable facts about one cluster.
pub(crate) struct ClusterInfo {
    pub(crate) idx: [u32; 3],
    /// Its CTAs (indices into `Emu::ctas`), by rank.
    pub(crate) ctas: Vec<usize>,
}

/// What a blocked thread waits for.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// `bar.sync id` of its CTA.
    Bar(u32),
    /// The warp barrier of its warp, reached through the named operation.
    Warp(&'static str),
    /// `barrier.cluster.wait` of its cluster.
    Cluster,
    /// An mbarrier phase of its CTA.
    MBar { cta: usize, off: u32, parity: u32 },
    /// `setmaxnreg.inc`/`.dec n` of its warpgroup `wg`: the rest of the
    /// warpgroup, or (`.inc`) registers from the CTA's pool.
    Regs { wg: u32, inc: bool, n: u32 },
}

#[derive(Clone, Copy, Debug)]
enum Status {
    Runnable,
    Blocked(Wait, Loc),
    Done,
}

/// A named CTA barrier (`bar.sync` / `bar.arrive`).
#[derive(Default)]
struct NamedBar {
    /// Threads expected in the current phase (set by its first arrival).
    expected: usize,
    /// Threads arrived in the current phase.
    arrived: Vec<usize>,
    /// Arrived threads blocked in `bar.sync`.
    waiters: Vec<usize>,
    /// Join of the arrivals' clocks in the current phase.
    clk: Clk,
}

/// The cluster barrier (`barrier.cluster.arrive` / `.wait`).
#[derive(Default)]
struct ClusterBar {
    /// Completed phases.
    phase: u64,
    arrived: Vec<usize>,
    waiters: Vec<usize>,
    /// Join of the arrivals' clocks in the current phase, and of the last
    /// completed phase.
    clk: Clk,
    last: Clk,
}

/// One mbarrier.
struct MBar {
    count: u32,
    /// Arrivals still expected in the current phase.
    pending: u32,
    /// Transaction bytes expected minus bytes completed in the current phase.
    tx: i64,
    /// Completed phases (the current phase's parity is `phase & 1`).
    phase: u64,
    /// Distinguishes successive initializations at the same address.
    epoch: u64,
    /// Arrivals per thread in the current phase.
    arrivals: BTreeMap<usize, u32>,
    /// Multicast (collective) copies into this barrier in the current phase:
    /// issuing CTA rank -> the mask it used.
    multicast: BTreeMap<u32, u16>,
    waiters: Vec<usize>,
    init_loc: Loc,
    /// Join of the clocks of the current phase's arrivals and completed
    /// asynchronous operations, and of the last completed phase.
    pub(crate) clk: Clk,
    pub(crate) last: Clk,
    /// The same, of the arrivals by threads of the barrier's own CTA and the
    /// asynchronous operations only: what a CTA-scope acquire (a plain
    /// `mbarrier.try_wait`) synchronizes with. An arrival from another CTA
    /// of the cluster (a cluster-scope release) is seen only by a
    /// cluster-scope acquire (`.acquire.cluster`): the PTX memory model's
    /// morally-strong pairs need each side's scope to include the other.
    pub(crate) clk_local: Clk,
    pub(crate) last_local: Clk,
    /// Waiters that acquire at cluster scope.
    cluster_waiters: Vec<usize>,
    /// The first asynchronous operation (kind, issue location) that
    /// completed bytes in the current phase.
    pub(crate) tx_op: Option<(String, Loc)>,
    /// A completed phase that carried TMA bytes and that no thread has
    /// waited on yet: (phase, operation, issue location).
    pub(crate) unwaited: Option<(u64, String, Loc)>,
    /// Declared by library code (`mbarrier_expect_arrivals`): every phase
    /// takes one arrival from each of this many threads, described by the
    /// string, as declared at the location.
    expect: Option<(u32, String, Loc)>,
    /// The threads that arrived in the last completed phase.
    prev_arrivers: Vec<usize>,
    /// Evidence that a phase completed early (its count smaller than the
    /// threads that arrive on it): a note for later reports.
    early: Option<String>,
}

/// The mutable state of a run, behind `Emu::state`.
pub(crate) struct State {
    /// The thread holding the baton (`NONE` when all are done).
    current: usize,
    status: Vec<Status>,
    /// Runnable threads, in a deterministic order (the scheduler picks an
    /// index with the RNG); `pos[t]` is `t`'s index or `NONE`.
    runnable: Vec<usize>,
    pos: Vec<usize>,
    rng: u64,
    pub(crate) steps: u64,
    max_steps: u64,
    aborted: bool,
    pub(crate) error: Option<EmuError>,
    /// The operation and location of each thread's last scheduling point.
    last_op: Vec<(&'static str, Option<Loc>)>,
    named: Vec<NamedBar>,
    warps: Vec<WarpBar>,
    cluster_bars: Vec<ClusterBar>,
    /// For each thread that arrived on its cluster barrier and has not waited
    /// yet: the phase it arrived in.
    cluster_arrived: Vec<Option<u64>>,
    mbars: BTreeMap<(usize, u32), MBar>,
    /// (thread, cta, offset) -> (epoch, phase observed by its last wait).
    mbar_seen: HashMap<(usize, usize, u32), (u64, i64)>,
    /// Per thread: the library scopes it is inside (`kernel_emu::scope`),
    /// innermost last: what, and where the user called it.
    scopes: Vec<Vec<(&'static str, Loc)>>,
    /// Warnings of the run (`kernel_emu::warn_once`), each once, in order.
    pub(crate) warnings: Vec<String>,
    /// Conditional warnings (`kernel_emu::warn_unless`): per key, whether
    /// any call was fine, and the warning's text if none was.
    pub(crate) warn_unless: Vec<(String, bool, String)>,
    next_epoch: u64,
    /// Per CTA: its shared memory as the async proxy sees it (copied from
    /// the real buffer at every `fence.proxy.async` of the CTA, and written
    /// by emulated TMA loads).
    shadow: Vec<Vec<u8>>,
    /// Per thread: the SMEM its in-flight wgmma groups read.
    wgmma: Vec<WgmmaGroups>,
    /// Per CTA: how many of its threads have in-flight wgmma reads (the
    /// overlap check skips a CTA with none: every Blackwell kernel, most
    /// of a Hopper kernel's writes).
    wgmma_busy: Vec<u32>,
    /// Per CTA: its register pool (`setmaxnreg`).
    regs: Vec<regs::RegPool>,
    /// Clocks, shadow memory, asynchronous operations.
    pub(crate) race: RaceState,
}

/// A half-open range of SMEM byte offsets of one CTA.
pub type Range = (u32, u32);

/// The SMEM ranges read by one thread's in-flight wgmma groups.
#[derive(Default)]
struct WgmmaGroups {
    /// Read by MMAs issued since the last `wgmma.commit_group`.
    open: Vec<Range>,
    /// Committed groups not yet retired by a `wgmma.wait_group`, oldest first.
    committed: VecDeque<Vec<Range>>,
}

impl WgmmaGroups {
    /// Whether any group, open or committed, still reads SMEM.
    fn busy(&self) -> bool {
        !self.open.is_empty() || self.committed.iter().any(|g| !g.is_empty())
    }
}

/// Adds `more` to the sorted, disjoint ranges `set` (merging).
fn merge_ranges(set: &mut Vec<Range>, more: &[Range]) {
    set.extend_from_slice(more);
    set.sort_unstable();
    let mut out: Vec<Range> = Vec::with_capacity(set.len());
    for &(lo, hi) in set.iter() {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    *set = out;
}

impl State {
    /// splitmix64.
    fn next_rand(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next thread to run: a seeded uniform choice among the runnable.
    fn pick(&mut self) -> Option<usize> {
        if self.runnable.is_empty() {
            return None;
        }
        let r = self.next_rand();
        let i = ((r as u128 * self.runnable.len() as u128) >> 64) as usize;
        Some(self.runnable[i])
    }

    /// Keeps `wgmma_busy[cta]` in step after thread `t`'s wgmma groups
    /// changed (`was`: whether they read SMEM before).
    fn wgmma_count(&mut self, cta: usize, was: bool, t: usize) {
        match (was, self.wgmma[t].busy()) {
            (false, true) => self.wgmma_busy[cta] += 1,
            (true, false) => self.wgmma_busy[cta] -= 1,
            _ => {}
        }
    }

    pub(crate) fn remove_runnable(&mut self, t: usize) {
        let p = self.pos[t];
        if p == NONE {
            return;
        }
        let last = self.runnable.pop().expect("runnable list holds t");
        if last != t {
            self.runnable[p] = last;
            self.pos[last] = p;
        }
        self.pos[t] = NONE;
    }

    /// Makes a blocked thread runnable again.
    pub(crate) fn wake(&mut self, t: usize) {
        self.status[t] = Status::Runnable;
        if self.pos[t] == NONE {
            self.pos[t] = self.runnable.len();
            self.runnable.push(t);
        }
    }

    /// Whether thread `t` finished (for the cluster-residency hook).
    pub(crate) fn is_done(&self, t: usize) -> bool {
        matches!(self.status[t], Status::Done)
    }

    /// A draw of the seeded scheduler's generator (for `crate::clc`).
    pub(crate) fn next_rand_pub(&mut self) -> u64 {
        self.next_rand()
    }

    fn note(&mut self, tid: usize, op: &'static str, loc: Loc) {
        self.last_op[tid] = (op, Some(loc));
    }
}

/// One run: the launch shape, the threads' facts and the shared state.
pub(crate) struct Emu {
    pub(crate) kernel: String,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) cluster: [u32; 3],
    /// Threads per CTA.
    pub(crate) tpc: usize,
    warps_per_cta: usize,
    pub(crate) smem_bytes: usize,
    pub(crate) threads: Vec<ThreadInfo>,
    pub(crate) ctas: Vec<CtaInfo>,
    pub(crate) clusters: Vec<ClusterInfo>,
    /// Emulated devices (each runs the whole grid).
    pub(crate) devices: u32,
    state: Mutex<State>,
}

fn linear(i: [u32; 3], d: [u32; 3]) -> usize {
    i[0] as usize + d[0] as usize * (i[1] as usize + d[1] as usize * i[2] as usize)
}

fn unlinear(l: usize, d: [u32; 3]) -> [u32; 3] {
    let (x, y) = (d[0] as usize, d[1] as usize);
    [(l % x) as u32, ((l / x) % y) as u32, (l / (x * y)) as u32]
}

impl Emu {
    /// Lays out the launch (the config is validated by the caller).
    pub(crate) fn new(cfg: &LaunchConfig) -> Emu {
        // Each emulated device runs the whole grid: CTA `c` is CTA
        // `c % ctas_per_device` of device `c / ctas_per_device`, and its
        // cluster is one of that device's.
        let devices = cfg.devices.max(1) as usize;
        let ctas_per_device: usize = cfg.grid.iter().map(|&v| v as usize).product();
        let n_ctas = ctas_per_device * devices;
        let tpc: usize = cfg.block.iter().map(|&v| v as usize).product();
        let cluster_grid = [0, 1, 2].map(|d| cfg.grid[d] / cfg.cluster[d]);
        let clusters_per_device: usize = cluster_grid.iter().map(|&v| v as usize).product();
        let n_clusters = clusters_per_device * devices;
        let mut clusters: Vec<ClusterInfo> = (0..n_clusters)
            .map(|c| ClusterInfo {
                idx: unlinear(c % clusters_per_device, cluster_grid),
                ctas: Vec::new(),
            })
            .collect();
        let mut ctas = Vec::with_capacity(n_ctas);
        for c in 0..n_ctas {
            let device = c / ctas_per_device;
            let idx = unlinear(c % ctas_per_device, cfg.grid);
            let cl = device * clusters_per_device
                + linear([0, 1, 2].map(|d| idx[d] / cfg.cluster[d]), cluster_grid);
            let rank = linear([0, 1, 2].map(|d| idx[d] % cfg.cluster[d]), cfg.cluster) as u32;
            ctas.push(CtaInfo {
                idx,
                device: device as u32,
                cluster: cl,
                rank,
                smem: SmemBuf::new(cfg.smem_bytes),
            });
        }
        for (c, cluster) in clusters.iter_mut().enumerate() {
            let mut members: Vec<usize> = (0..n_ctas).filter(|&i| ctas[i].cluster == c).collect();
            members.sort_by_key(|&i| ctas[i].rank);
            cluster.ctas = members;
        }
        let mut threads = Vec::with_capacity(n_ctas * tpc);
        for cta in 0..n_ctas {
            for l in 0..tpc {
                threads.push(ThreadInfo {
                    cta,
                    tidx: unlinear(l, cfg.block),
                    warp: l / WARP,
                    lane: (l % WARP) as u32,
                });
            }
        }
        let n = threads.len();
        let warps_per_cta = tpc.div_ceil(WARP);
        let state = State {
            current: NONE,
            status: vec![Status::Runnable; n],
            runnable: (0..n).collect(),
            pos: (0..n).collect(),
            rng: cfg.seed,
            steps: 0,
            max_steps: cfg.max_steps,
            aborted: false,
            error: None,
            last_op: vec![("(nothing yet)", None); n],
            named: (0..n_ctas * NUM_NAMED_BARRIERS as usize)
                .map(|_| NamedBar::default())
                .collect(),
            warps: (0..n_ctas * warps_per_cta)
                .map(|_| WarpBar::default())
                .collect(),
            cluster_bars: (0..n_clusters).map(|_| ClusterBar::default()).collect(),
            cluster_arrived: vec![None; n],
            mbars: BTreeMap::new(),
            mbar_seen: HashMap::new(),
            scopes: vec![Vec::new(); n],
            warnings: Vec::new(),
            warn_unless: Vec::new(),
            next_epoch: 0,
            shadow: (0..n_ctas).map(|_| vec![0u8; cfg.smem_bytes]).collect(),
            wgmma: (0..n).map(|_| WgmmaGroups::default()).collect(),
            wgmma_busy: vec![0; n_ctas],
            regs: (0..n_ctas).map(|_| regs::RegPool::new(tpc)).collect(),
            race: RaceState::new(n),
        };
        Emu {
            kernel: cfg.kernel.clone(),
            grid: cfg.grid,
            block: cfg.block,
            cluster: cfg.cluster,
            tpc,
            warps_per_cta,
            smem_bytes: cfg.smem_bytes,
            threads,
            ctas,
            clusters,
            devices: devices as u32,
            state: Mutex::new(state),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the state for an operation of the running thread; unwinds it if
    /// the run has stopped.
    fn begin(&self) -> MutexGuard<'_, State> {
        let g = self.lock();
        if g.aborted {
            drop(g);
            unwind_abort();
        }
        g
    }

    /// `"cta (x,y,z) thread (x,y,z) [warp w]"`.
    /// On a run of several devices, `"device d cta ..."`.
    pub(crate) fn who(&self, tid: usize) -> String {
        let t = &self.threads[tid];
        let device = if self.devices > 1 {
            format!("device {} ", self.ctas[t.cta].device)
        } else {
            String::new()
        };
        format!(
            "{device}cta {} thread {} [warp {}]",
            fmt3(self.ctas[t.cta].idx),
            fmt3(t.tidx),
            t.warp
        )
    }

    fn where_(&self, g: &State, tid: usize, loc: Loc) -> String {
        format!("{} at {loc}{}", self.who(tid), scope_note(g, tid))
    }

    /// Records `err` (unless an earlier error stopped the run) and marks the
    /// run stopped: the run's loop then resumes every thread so that it
    /// unwinds.
    pub(crate) fn stop(&self, g: &mut State, mut err: EmuError) {
        if g.error.is_none() {
            add_early_phase_notes(g, &mut err);
            g.error = Some(err);
        }
        g.aborted = true;
    }

    fn fail(&self, mut g: MutexGuard<'_, State>, err: EmuError) -> ! {
        self.stop(&mut g, err);
        drop(g);
        unwind_abort()
    }

    /// Stops the run with a [`EmuError::Misuse`] by thread `tid` and unwinds it.
    pub(crate) fn misuse(
        &self,
        g: MutexGuard<'_, State>,
        tid: usize,
        loc: Loc,
        rule: &str,
        detail: String,
    ) -> ! {
        let err = EmuError::Misuse {
            kernel: self.kernel.clone(),
            rule: rule.to_string(),
            where_: self.where_(&g, tid, loc),
            detail,
        };
        self.fail(g, err)
    }

    /// A scheduling point of the running thread `tid` (runnable or just
    /// blocked): counts a step, picks the next thread and, if that is another
    /// one, hands it the baton and sleeps until the baton comes back.
    fn switch<'a>(&'a self, mut g: MutexGuard<'a, State>, tid: usize) -> MutexGuard<'a, State> {
        g.steps += 1;
        if g.max_steps != 0 && g.steps > g.max_steps {
            let err = EmuError::NoProgress {
                kernel: self.kernel.clone(),
                steps: g.steps,
                spinning: self.live_lines(&g),
            };
            self.fail(g, err);
        }
        if let Err(e) = self.maybe_run_op(&mut g) {
            self.fail(g, e);
        }
        let mut next = g.pick();
        if next.is_none() {
            // Nothing runnable: in-flight operations complete now.
            match self.drain_ops(&mut g) {
                Ok(true) => next = g.pick(),
                Ok(false) => {}
                Err(e) => self.fail(g, e),
            }
        }
        let Some(next) = next else {
            let err = self.deadlock(&g);
            self.fail(g, err)
        };
        g.current = next;
        if next != tid {
            g = self.wait_turn(g, tid);
        }
        g
    }

    /// Sleeps until `tid` holds the baton; unwinds if the run stops.
    fn wait_turn<'a>(&'a self, mut g: MutexGuard<'a, State>, tid: usize) -> MutexGuard<'a, State> {
        while g.current != tid && !g.aborted {
            drop(g);
            crate::suspend_thread();
            g = self.lock();
        }
        if g.aborted {
            drop(g);
            unwind_abort();
        }
        g
    }

    /// Blocks `tid` on `wait` and schedules another thread; returns once a
    /// waker made `tid` runnable and the scheduler picked it.
    fn block<'a>(
        &'a self,
        mut g: MutexGuard<'a, State>,
        tid: usize,
        wait: Wait,
        loc: Loc,
    ) -> MutexGuard<'a, State> {
        g.status[tid] = Status::Blocked(wait, loc);
        g.remove_runnable(tid);
        self.switch(g, tid)
    }

    /// The baton's holder (`None`: no thread) and whether the run stopped
    /// (read by the run's loop, `coro::drive`, between two threads' turns).
    pub(crate) fn baton(&self) -> (Option<usize>, bool) {
        let g = self.lock();
        ((g.current != NONE).then_some(g.current), g.aborted)
    }

    /// Picks the first thread to run (before any thread starts).
    pub(crate) fn start(&self) {
        let mut g = self.lock();
        g.current = g.pick().expect("a launch has at least one thread");
    }

    /// A new emulated thread starts here: it runs once it holds the baton.
    pub(crate) fn first_turn(&self, tid: usize) {
        let g = self.lock();
        drop(self.wait_turn(g, tid));
    }

    /// `tid` returned from the kernel: hand the baton on (or detect the end
    /// of the run, or a deadlock of the threads left).
    pub(crate) fn finish(&self, tid: usize) {
        let mut g = self.lock();
        g.status[tid] = Status::Done;
        g.remove_runnable(tid);
        if g.aborted {
            return;
        }
        // A cluster that finished lets the next pending one start.
        crate::clc::thread_done(self, &mut g, tid);
        let mut next = g.pick();
        if next.is_none() {
            match self.drain_ops(&mut g) {
                Ok(true) => next = g.pick(),
                Ok(false) => {}
                Err(e) => {
                    self.stop(&mut g, e);
                    return;
                }
            }
        }
        match next {
            Some(next) => g.current = next,
            None => {
                g.current = NONE;
                if g.status.iter().any(|s| matches!(s, Status::Blocked(..))) {
                    let err = self.deadlock(&g);
                    self.stop(&mut g, err);
                }
            }
        }
    }

    /// `tid` panicked: stop the run with the panic.
    pub(crate) fn panicked(&self, tid: usize, message: String, location: Option<String>) {
        let mut g = self.lock();
        g.status[tid] = Status::Done;
        g.remove_runnable(tid);
        let t = &self.threads[tid];
        let err = EmuError::Panic {
            kernel: self.kernel.clone(),
            cta: self.ctas[t.cta].idx,
            thread: t.tidx,
            message,
            location,
        };
        self.stop(&mut g, err);
    }

    // ----- reports -------------------------------------------------------

    fn deadlock(&self, g: &State) -> EmuError {
        // Lanes of a collective that diverged: the divergence is the bug.
        if let Some(e) = self.diverged_collective(g) {
            return e;
        }
        // Threads of one warp (and CTA) waiting on the same thing share a
        // description: computed once (a CTA of 1024 blocked threads would
        // otherwise cost a billion steps).
        let mut memo: HashMap<(usize, usize, String), String> = HashMap::new();
        let blocked = (0..self.threads.len())
            .filter_map(|t| match g.status[t] {
                Status::Blocked(w, loc) => {
                    let th = &self.threads[t];
                    let key = (th.cta, th.warp, format!("{w:?}"));
                    let what = memo.entry(key).or_insert_with(|| self.describe(g, t, w)).clone();
                    Some(format!("{}: waiting on {what} (at {loc}{})", self.who(t), scope_note(g, t)))
                }
                _ => None,
            })
            .collect();
        EmuError::Deadlock {
            kernel: self.kernel.clone(),
            blocked,
        }
    }

    fn live_lines(&self, g: &State) -> Vec<String> {
        (0..self.threads.len())
            .filter_map(|t| match g.status[t] {
                Status::Done => None,
                Status::Blocked(w, loc) => Some(format!(
                    "{}: blocked, waiting on {} (at {loc})",
                    self.who(t),
                    self.describe(g, t, w)
                )),
                Status::Runnable => {
                    let (op, loc) = g.last_op[t];
                    Some(match loc {
                        Some(loc) => format!("{}: last yielded on {op} (at {loc})", self.who(t)),
                        None => format!("{}: last yielded on {op}", self.who(t)),
                    })
                }
            })
            .collect()
    }

    /// A short name of what `wait` waits for (used in lists of threads).
    fn short(&self, wait: Wait) -> String {
        match wait {
            Wait::Bar(id) => format!("bar.sync {id}"),
            Wait::Warp(op) => op.to_string(),
            Wait::Cluster => "barrier.cluster.wait".to_string(),
            Wait::MBar { cta, off, parity } => {
                format!(
                    "mbarrier.try_wait.parity {parity} at smem+{off:#x} of cta {}",
                    fmt3(self.ctas[cta].idx)
                )
            }
            Wait::Regs { wg, inc, n } => {
                format!("{} {n} of warpgroup {wg}", if inc { "setmaxnreg.inc" } else { "setmaxnreg.dec" })
            }
        }
    }

    /// `"; not arrived: <thread> (<status>), ..."` over `candidates` minus
    /// `arrived` (only exited threads when `only_exited`), or `""`.
    fn missing(
        &self,
        g: &State,
        candidates: impl Iterator<Item = usize>,
        arrived: &[usize],
        only_exited: bool,
    ) -> String {
        let mut names = Vec::new();
        let mut total = 0;
        for t in candidates {
            if arrived.contains(&t) {
                continue;
            }
            let status = match g.status[t] {
                Status::Done => "exited".to_string(),
                Status::Blocked(w, _) => format!("waiting on {}", self.short(w)),
                Status::Runnable => "running".to_string(),
            };
            if only_exited && !matches!(g.status[t], Status::Done) {
                continue;
            }
            total += 1;
            if names.len() < NAMED_MISSING {
                names.push(format!("{} ({status})", self.who(t)));
            }
        }
        if total == 0 {
            return String::new();
        }
        let more = if total > names.len() {
            format!(" and {} more", total - names.len())
        } else {
            String::new()
        };
        let label = if only_exited {
            "exited without arriving"
        } else {
            "not arrived"
        };
        format!("; {label}: {}{more}", names.join(", "))
    }

    pub(crate) fn cta_threads(&self, cta: usize) -> std::ops::Range<usize> {
        cta * self.tpc..(cta + 1) * self.tpc
    }

    /// What blocked thread `t` waits for, with the barrier's counts.
    fn describe(&self, g: &State, t: usize, wait: Wait) -> String {
        let cta = self.threads[t].cta;
        match wait {
            Wait::Bar(id) => {
                let b = &g.named[cta * NUM_NAMED_BARRIERS as usize + id as usize];
                let whole = b.expected == self.tpc;
                format!(
                    "bar.sync {id}: {} of {} threads arrived{}",
                    b.arrived.len(),
                    b.expected,
                    self.missing(g, self.cta_threads(cta), &b.arrived, !whole)
                )
            }
            Wait::Warp(op) => self.describe_warp(g, t, op),
            Wait::Cluster => {
                let cl = self.ctas[cta].cluster;
                let b = &g.cluster_bars[cl];
                let members = self.clusters[cl]
                    .ctas
                    .iter()
                    .flat_map(|&c| self.cta_threads(c));
                format!(
                    "barrier.cluster.wait: {} of {} threads of cluster {} arrived{}",
                    b.arrived.len(),
                    self.clusters[cl].ctas.len() * self.tpc,
                    fmt3(self.clusters[cl].idx),
                    self.missing(g, members, &b.arrived, false)
                )
            }
            Wait::MBar {
                cta: bcta,
                off,
                parity,
            } => match g.mbars.get(&(bcta, off)) {
                Some(b) => {
                    let mut s = format!(
                        "mbarrier.try_wait.parity {parity} at smem+{off:#x} (phase {} incomplete: {} of {} arrivals pending, tx {}; \
                         arrival count {}, {} arrival(s) seen{})",
                        b.phase,
                        b.pending,
                        b.count,
                        b.tx,
                        b.count,
                        b.count - b.pending,
                        match &b.expect {
                            Some((n, who, _)) => format!(", {n} expected from {who}"),
                            None => String::new(),
                        }
                    );
                    if b.pending == 0 && b.tx > 0 {
                        s += &format!(
                            "; all arrivals are in, but {} transaction bytes announced with expect_tx were never completed",
                            b.tx
                        );
                    }
                    if b.tx > 0 && !b.multicast.is_empty() {
                        let mask = b.multicast.values().fold(0u16, |m, x| m | x);
                        let issued: Vec<u32> = b.multicast.keys().copied().collect();
                        let missing: Vec<u32> = (0..16).filter(|r| mask & (1 << r) != 0 && !b.multicast.contains_key(r)).collect();
                        if !missing.is_empty() {
                            s += &format!(
                                "; collective copy not issued by every CTA of the cluster: CTA rank(s) {issued:?} multicast into this barrier with mask {mask:#b}, rank(s) {missing:?} did not (each CTA of a collective copy issues its part)"
                            );
                        }
                    }
                    s
                }
                None => format!("mbarrier.try_wait.parity {parity} at smem+{off:#x} (invalidated)"),
            },
            Wait::Regs { wg, inc, n } => self.describe_regs(g, t, wg as usize, inc, n),
        }
    }

    /// Problems left at the end of a run that finished (mbarriers with a
    /// phase in progress), as one Misuse.
    pub(crate) fn end_checks(&self) -> Option<EmuError> {
        let g = self.lock();
        let mut rule: Option<&str> = None;
        let mut lines = Vec::new();
        for (&(cta, off), b) in &g.mbars {
            let at = format!(
                "mbarrier at smem+{off:#x} of cta {} (initialized at {})",
                fmt3(self.ctas[cta].idx),
                b.init_loc
            );
            if b.pending != b.count {
                rule.get_or_insert("arrivals pending when the kernel ended");
                lines.push(format!(
                    "{at}: phase {} got {} of {} arrivals ({} pending)",
                    b.phase,
                    b.count - b.pending,
                    b.count,
                    b.pending
                ));
            } else if let Some((p, kind, iloc)) = &b.unwaited {
                rule.get_or_insert(UNWAITED_RULE);
                lines.push(format!(
                    "{at}: phase {p} completed with the bytes of `{kind}` (issued at {iloc}) and no thread waited on it"
                ));
            } else if b.tx != 0 {
                rule.get_or_insert("transaction bytes pending when the kernel ended");
                lines.push(format!(
                    "{at}: phase {} has tx {} (bytes announced but not completed)",
                    b.phase, b.tx
                ));
            }
        }
        rule.map(|rule| EmuError::Misuse {
            kernel: self.kernel.clone(),
            rule: rule.to_string(),
            where_: "kernel end".to_string(),
            detail: lines.join("; "),
        })
    }

    // ----- addresses ------------------------------------------------------

    /// Decodes a shared-memory address (a `.shared::cta` offset, or a
    /// `.shared::cluster` address from `map_rank_addr`) into (CTA, offset).
    pub(crate) fn decode(
        &self,
        tid: usize,
        addr: u32,
    ) -> Result<(usize, u32), (&'static str, String)> {
        let t = &self.threads[tid];
        if addr & CLUSTER_BIT != 0 {
            let rank = (addr & !CLUSTER_BIT) >> RANK_SHIFT;
            let cl = &self.clusters[self.ctas[t.cta].cluster];
            match cl.ctas.get(rank as usize) {
                Some(&cta) => Ok((cta, addr & OFFSET_MASK)),
                None => Err((
                    "CTA rank outside the cluster",
                    format!("shared::cluster address {addr:#x} names rank {rank}; the cluster has {} CTAs", cl.ctas.len()),
                )),
            }
        } else if addr > OFFSET_MASK {
            Err((
                "not a shared-memory address",
                format!(
                    "{addr:#x} is neither a shared::cta offset (below 2^24) nor a shared::cluster address made by map_rank_addr"
                ),
            ))
        } else {
            Ok((t.cta, addr))
        }
    }

    /// Decodes `addr` or stops the run with the decoding rule.
    pub(crate) fn decode_or_misuse(&self, tid: usize, loc: Loc, addr: u32) -> (usize, u32) {
        match self.decode(tid, addr) {
            Ok(v) => v,
            Err((rule, detail)) => self.misuse(self.lock(), tid, loc, rule, detail),
        }
    }

    /// Decodes an mbarrier address that must be in the calling thread's CTA.
    fn own_mbar(&self, tid: usize, loc: Loc, addr: u32, op: &str) -> u32 {
        let (cta, off) = self.decode_or_misuse(tid, loc, addr);
        if cta != self.threads[tid].cta {
            self.misuse(
                self.lock(),
                tid,
                loc,
                "mbarrier operation on another CTA's barrier",
                format!(
                    "{op} at {addr:#x} targets cta {}; {op} works on the calling CTA's barriers (.shared::cta)",
                    fmt3(self.ctas[cta].idx)
                ),
            );
        }
        off
    }

    // ----- plain scheduling point ---------------------------------------------

    pub(crate) fn yield_point(&self, tid: usize, what: &'static str, loc: Loc) {
        let mut g = self.begin();
        g.note(tid, what, loc);
        drop(self.switch(g, tid));
    }

    // ----- named CTA barriers ---------------------------------------------

    /// `bar.sync id, count` (`wait`) or `bar.arrive id, count`.
    pub(crate) fn bar(&self, tid: usize, loc: Loc, id: u32, count: u32, wait: bool) {
        let op = if wait { "bar.sync" } else { "bar.arrive" };
        let mut g = self.begin();
        g.note(tid, op, loc);
        if id >= NUM_NAMED_BARRIERS {
            self.misuse(
                g,
                tid,
                loc,
                "named barrier id out of range",
                format!("{op} {id}: barrier ids are 0..16"),
            );
        }
        let expected = if count == 0 { self.tpc } else { count as usize };
        if expected > self.tpc {
            self.misuse(
                g,
                tid,
                loc,
                "barrier thread count larger than the CTA",
                format!("{op} {id}, {count}: the CTA has {} threads", self.tpc),
            );
        }
        if count % WARP as u32 != 0 && expected != self.tpc {
            self.misuse(
                g,
                tid,
                loc,
                "barrier thread count not a multiple of the warp size",
                format!("{op} {id}, {count}: the count must be a multiple of 32 (whole warps)"),
            );
        }
        let cta = self.threads[tid].cta;
        let slot = cta * NUM_NAMED_BARRIERS as usize + id as usize;
        let b = &mut g.named[slot];
        if !b.arrived.is_empty() && b.expected != expected {
            let detail = format!(
                "{op} {id}, {count}: this phase of barrier {id} was opened for {} threads ({} arrived so far); \
                 every participant must pass the same count",
                b.expected,
                b.arrived.len()
            );
            self.misuse(
                g,
                tid,
                loc,
                "different thread counts in one barrier phase",
                detail,
            );
        }
        b.expected = expected;
        b.arrived.push(tid);
        let st = &mut *g;
        st.race.release(tid, &mut st.named[slot].clk);
        let b = &mut st.named[slot];
        if b.arrived.len() == expected {
            b.arrived.clear();
            let rel = std::mem::take(&mut b.clk);
            let waiters = std::mem::take(&mut b.waiters);
            for w in waiters {
                g.race.clk[w].join(&rel);
                g.wake(w);
            }
            if wait {
                g.race.clk[tid].join(&rel);
            }
            drop(self.switch(g, tid));
        } else if wait {
            b.waiters.push(tid);
            drop(self.block(g, tid, Wait::Bar(id), loc));
        } else {
            drop(self.switch(g, tid));
        }
    }

    // ----- cluster barrier ------------------------------------------------

    /// `barrier.cluster.arrive` (`release`: `.release`, the default, or
    /// `.relaxed`).
    pub(crate) fn cluster_arrive_as(&self, tid: usize, loc: Loc, release: bool) {
        let mut g = self.begin();
        g.note(tid, "barrier.cluster.arrive", loc);
        let cl = self.ctas[self.threads[tid].cta].cluster;
        if let Some(p) = g.cluster_arrived[tid] {
            self.misuse(
                g,
                tid,
                loc,
                "barrier.cluster.arrive twice without a wait in between",
                format!("this thread arrived in cluster barrier phase {p} and has not called cluster_wait since"),
            );
        }
        let expected = self.clusters[cl].ctas.len() * self.tpc;
        let phase = g.cluster_bars[cl].phase;
        g.cluster_arrived[tid] = Some(phase);
        let st = &mut *g;
        if release {
            st.race.release(tid, &mut st.cluster_bars[cl].clk);
        }
        let b = &mut st.cluster_bars[cl];
        b.arrived.push(tid);
        if b.arrived.len() == expected {
            b.arrived.clear();
            b.phase += 1;
            b.last = std::mem::take(&mut b.clk);
            let waiters = std::mem::take(&mut b.waiters);
            for w in waiters {
                let st = &mut *g;
                st.race.clk[w].join(&st.cluster_bars[cl].last);
                g.wake(w);
            }
        }
        drop(self.switch(g, tid));
    }

    pub(crate) fn cluster_wait(&self, tid: usize, loc: Loc) {
        let mut g = self.begin();
        g.note(tid, "barrier.cluster.wait", loc);
        let cl = self.ctas[self.threads[tid].cta].cluster;
        let Some(p) = g.cluster_arrived[tid].take() else {
            self.misuse(
                g,
                tid,
                loc,
                "barrier.cluster.wait without a preceding arrive",
                "every thread calls cluster_arrive once before each cluster_wait".to_string(),
            );
        };
        if g.cluster_bars[cl].phase > p {
            // Phase p is the last completed one (p + 1 needs this thread).
            let st = &mut *g;
            st.race.clk[tid].join(&st.cluster_bars[cl].last);
            drop(self.switch(g, tid));
        } else {
            g.cluster_bars[cl].waiters.push(tid);
            drop(self.block(g, tid, Wait::Cluster, loc));
        }
    }

    // ----- mbarriers --------------------------------------------------------

    pub(crate) fn mbar_init(&self, tid: usize, loc: Loc, addr: u32, count: u32) {
        let op = "mbarrier.init";
        let off = self.own_mbar(tid, loc, addr, op);
        let cta = self.threads[tid].cta;
        let mut g = self.begin();
        g.note(tid, op, loc);
        if off % 8 != 0 {
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier address not 8-byte aligned",
                format!("{op} at smem+{off:#x}"),
            );
        }
        if off as usize + 8 > self.smem_bytes {
            let detail = format!(
                "{op} at smem+{off:#x}: the 8-byte barrier ends past the {} bytes of dynamic shared memory",
                self.smem_bytes
            );
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier outside the dynamic shared memory",
                detail,
            );
        }
        if count == 0 || count > MAX_MBAR_COUNT {
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier.init count out of range",
                format!("{op} at smem+{off:#x} with count {count}: the count must be in 1..2^20"),
            );
        }
        if let Some(b) = g.mbars.get(&(cta, off)) {
            if !b.waiters.is_empty() || b.pending != b.count || b.tx != 0 {
                let detail = format!(
                    "{op} at smem+{off:#x}: phase {} has {} of {} arrivals, tx {}, {} waiting threads (initialized at {})",
                    b.phase,
                    b.count - b.pending,
                    b.count,
                    b.tx,
                    b.waiters.len(),
                    b.init_loc
                );
                self.misuse(
                    g,
                    tid,
                    loc,
                    "mbarrier.init on a barrier whose phase is in progress",
                    detail,
                );
            }
        }
        let epoch = g.next_epoch;
        g.next_epoch += 1;
        let b = MBar {
            count,
            pending: count,
            tx: 0,
            phase: 0,
            epoch,
            arrivals: BTreeMap::new(),
            multicast: BTreeMap::new(),
            waiters: Vec::new(),
            init_loc: loc,
            clk: Clk::default(),
            last: Clk::default(),
            clk_local: Clk::default(),
            last_local: Clk::default(),
            cluster_waiters: Vec::new(),
            tx_op: None,
            unwaited: None,
            expect: None,
            prev_arrivers: Vec::new(),
            early: None,
        };
        g.mbars.insert((cta, off), b);
        drop(self.switch(g, tid));
    }

    fn uninit(
        &self,
        g: MutexGuard<'_, State>,
        tid: usize,
        loc: Loc,
        op: &str,
        cta: usize,
        off: u32,
    ) -> ! {
        let detail = format!(
            "{op} at smem+{off:#x} of cta {}: no initialized mbarrier there (never initialized, or invalidated)",
            fmt3(self.ctas[cta].idx)
        );
        self.misuse(g, tid, loc, "mbarrier used before mbarrier.init", detail)
    }

    /// One arrival, after announcing `tx` bytes (`mbarrier.arrive`,
    /// `mbarrier.arrive.expect_tx`); `addr` may name another CTA's barrier.
    /// An arrival (with `tx` bytes announced first) of `tid` on the mbarrier
    /// at `addr`, a release at cluster scope (`cluster_release`) or at CTA
    /// scope. What it publishes (see [`MBar::clk_local`]): an arrival from
    /// the barrier's own CTA, to every waiter; a cluster-scope release from
    /// another CTA, to cluster-scope waiters only. (A CTA-scope release on
    /// another CTA's barrier, CUTLASS's `ClusterBarrier::arrive(cta_id)`
    /// that our cluster matmuls use, still publishes to every waiter: the
    /// PTX memory model does not promise that ordering, the hardware gives
    /// it, and reporting it would first need those kernels on the
    /// cluster-scope forms, whose cost is not measured.)
    pub(crate) fn mbar_arrive(&self, tid: usize, loc: Loc, addr: u32, tx: u32, op: &'static str, cluster_release: bool) {
        let (cta, off) = self.decode_or_misuse(tid, loc, addr);
        let mut g = self.begin();
        g.note(tid, op, loc);
        let Some(b) = g.mbars.get_mut(&(cta, off)) else {
            self.uninit(g, tid, loc, op, cta, off)
        };
        b.tx += tx as i64;
        if b.tx > MAX_TX {
            let detail = format!("{op} at smem+{off:#x}: tx count {} exceeds 2^20 - 1", b.tx);
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier transaction count out of range",
                detail,
            );
        }
        if b.pending == 0 {
            let detail = format!(
                "{op} at smem+{off:#x}: all {} arrivals of phase {} are in (the phase is held open by {} \
                 transaction bytes) and this thread arrives once more",
                b.count, b.phase, b.tx
            );
            self.misuse(
                g,
                tid,
                loc,
                "more arrivals than the count in one phase",
                detail,
            );
        }
        b.pending -= 1;
        *b.arrivals.entry(tid).or_insert(0) += 1;
        if b.early.is_none() && b.phase > 0 && !b.prev_arrivers.contains(&tid) {
            // A warp-mate arrived in the last phase and this thread only now:
            // that phase most likely completed before its warp was done.
            let th = &self.threads[tid];
            let mate = b.prev_arrivers.iter().find(|&&u| self.threads[u].cta == th.cta && self.threads[u].warp == th.warp);
            if let Some(&u) = mate {
                b.early = Some(format!(
                    "note: phase {} of the mbarrier at smem+{off:#x} of cta {} (arrival count {}, initialized at {}) \
                     completed with the arrivals of {} thread(s), {} among them, and {}, of the same warp, arrived \
                     only in the next phase: if the threads of a phase arrive together, the count is smaller than the \
                     threads that arrive on it and its phases complete early (`#[scratch(arrivals = N)]` with N the \
                     arriving threads)",
                    b.phase - 1,
                    fmt3(self.ctas[cta].idx),
                    b.count,
                    b.init_loc,
                    b.prev_arrivers.len(),
                    self.who(u),
                    self.who(tid)
                ));
            }
        }
        let st = &mut *g;
        let b = st.mbars.get_mut(&(cta, off)).expect("found above");
        if self.threads[tid].cta != cta && cluster_release {
            // Only a cluster-scope acquire sees it.
            st.race.release(tid, &mut b.clk);
        } else {
            b.clk_local.join(&st.race.clk[tid]);
            st.race.release(tid, &mut b.clk);
        }
        let g = self.try_complete(g, tid, loc, cta, off, op);
        drop(self.switch(g, tid));
    }

    /// `expect_tx` (`delta > 0`) or `complete_tx` (`delta < 0`).
    pub(crate) fn mbar_tx(&self, tid: usize, loc: Loc, addr: u32, delta: i64, op: &'static str) {
        let (cta, off) = self.decode_or_misuse(tid, loc, addr);
        let mut g = self.begin();
        g.note(tid, op, loc);
        let Some(b) = g.mbars.get_mut(&(cta, off)) else {
            self.uninit(g, tid, loc, op, cta, off)
        };
        b.tx += delta;
        if b.tx.abs() > MAX_TX {
            let detail = format!(
                "{op} at smem+{off:#x}: tx count {} is outside -(2^20 - 1)..2^20",
                b.tx
            );
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier transaction count out of range",
                detail,
            );
        }
        let st = &mut *g;
        let b = st.mbars.get_mut(&(cta, off)).expect("found above");
        if self.threads[tid].cta == cta {
            b.clk_local.join(&st.race.clk[tid]);
        }
        st.race.release(tid, &mut b.clk);
        let g = self.try_complete(g, tid, loc, cta, off, op);
        drop(self.switch(g, tid));
    }

    /// Completes the barrier's phase if its arrivals and bytes are all in,
    /// checking the phase first.
    fn try_complete<'a>(
        &'a self,
        mut g: MutexGuard<'a, State>,
        tid: usize,
        loc: Loc,
        cta: usize,
        off: u32,
        op: &str,
    ) -> MutexGuard<'a, State> {
        if let Err((rule, detail)) = self.complete_phase(&mut g, cta, off, op) {
            self.misuse(g, tid, loc, rule, detail);
        }
        g
    }

    /// The body of [`Emu::try_complete`], without unwinding: `Err((rule,
    /// detail))` for a broken rule. On completion every waiter joins the
    /// phase's clock and observes the phase.
    pub(crate) fn complete_phase(
        &self,
        g: &mut State,
        cta: usize,
        off: u32,
        op: &str,
    ) -> Result<(), (&'static str, String)> {
        let b = g
            .mbars
            .get_mut(&(cta, off))
            .expect("the caller found the barrier");
        if b.pending != 0 {
            return Ok(());
        }
        if b.tx < 0 {
            let detail = format!(
                "{op} at smem+{off:#x}: phase {} has all {} arrivals and {} more transaction bytes completed than \
                 announced with expect_tx",
                b.phase, b.count, -b.tx
            );
            return Err(("transaction bytes over the expected count", detail));
        }
        if b.tx > 0 {
            return Ok(()); // waits for the announced bytes
        }
        if let Some((n, who, eloc)) = &b.expect {
            if b.count < *n {
                let seen: u32 = b.arrivals.values().sum();
                let from: Vec<String> = b.arrivals.keys().take(4).map(|&t| self.who(t)).collect();
                let more = if b.arrivals.len() > 4 { format!(" and {} more", b.arrivals.len() - 4) } else { String::new() };
                let detail = format!(
                    "phase {} of the mbarrier at smem+{off:#x} of cta {} completed after {seen} arrival(s) (from {}{more}): \
                     its arrival count is {} (initialized at {}), and {who} arrive on it, one arrival each per phase, \
                     as declared at {eloc}: {} arrivals were expected and {} of those threads had not arrived yet, so \
                     the phase completed early (whatever waits on it, e.g. a TMA refill of a slot, runs while they \
                     still use it); give the barrier an arrival count of {n}: `#[scratch(arrivals = {n})]`",
                    b.phase,
                    fmt3(self.ctas[cta].idx),
                    from.join(", "),
                    b.count,
                    b.init_loc,
                    n,
                    n - seen.min(*n),
                );
                return Err(("mbarrier arrival count smaller than its arriving threads", detail));
            }
        }
        if b.arrivals.len() > 1 {
            if let Some((&t, &n)) = b.arrivals.iter().find(|(_, &n)| n > 1) {
                let detail = format!(
                    "phase {} of the mbarrier at smem+{off:#x} of cta {} (count {}) took {n} arrivals from {} and \
                     arrivals from {} other threads: a thread that arrives again before the phase completed is \
                     counted in the same phase (an arrival meant for the next phase must wait for this one to \
                     complete; only a thread that makes all of a phase's arrivals may arrive several times)",
                    b.phase,
                    fmt3(self.ctas[cta].idx),
                    b.count,
                    self.who(t),
                    b.arrivals.len() - 1
                );
                return Err(("more arrivals than the count in one phase", detail));
            }
        }
        if let Some((p, kind, iloc)) = b.unwaited.take() {
            let detail = format!(
                "phase {p} of the mbarrier at smem+{off:#x} of cta {} (initialized at {}) completed with the bytes of \
                 `{kind}` (issued at {iloc}) and no thread of the CTA waited on it before phase {} completed too",
                fmt3(self.ctas[cta].idx),
                b.init_loc,
                b.phase
            );
            return Err((UNWAITED_RULE, detail));
        }
        let completed = b.phase;
        b.phase += 1;
        b.pending = b.count;
        b.prev_arrivers = b.arrivals.keys().copied().collect();
        b.arrivals.clear();
        b.multicast.clear();
        b.last = std::mem::take(&mut b.clk);
        b.last_local = std::mem::take(&mut b.clk_local);
        let tx_op = b.tx_op.take();
        let waiters = std::mem::take(&mut b.waiters);
        let cluster_waiters = std::mem::take(&mut b.cluster_waiters);
        if let Some((kind, iloc)) = tx_op {
            if waiters.is_empty() {
                b.unwaited = Some((completed, kind, iloc));
            }
        }
        for w in waiters {
            let st = &mut *g;
            let b = &st.mbars[&(cta, off)];
            st.race.clk[w].join(if cluster_waiters.contains(&w) { &b.last } else { &b.last_local });
            g.wake(w);
        }
        Ok(())
    }

    /// Records that the calling thread's CTA (cluster rank `rank`) issued a
    /// multicast copy with `mask` completing on the barrier at `(cta, off)`
    /// (a destination CTA), for the collective-copy report of a deadlock.
    pub(crate) fn mbar_note_multicast(&self, cta: usize, off: u32, rank: u32, mask: u16) {
        let mut g = self.lock();
        if let Some(b) = g.mbars.get_mut(&(cta, off)) {
            b.multicast.insert(rank, mask);
        }
    }

    /// Library code declares that every phase of the mbarrier at `addr` (of
    /// the calling thread's CTA) takes one arrival from each of `n` threads
    /// (`who`): a larger count is reported at once (its phases never
    /// complete), a smaller one when a phase completes early, with the
    /// arrivals seen.
    pub(crate) fn mbar_expect(&self, tid: usize, loc: Loc, addr: u32, n: u32, who: &str) {
        let op = "mbarrier (arrival count check)";
        let off = self.own_mbar(tid, loc, addr, op);
        let cta = self.threads[tid].cta;
        let mut g = self.lock();
        let Some(b) = g.mbars.get_mut(&(cta, off)) else {
            self.uninit(g, tid, loc, op, cta, off)
        };
        if b.count > n {
            let detail = format!(
                "the mbarrier at smem+{off:#x} of cta {} has an arrival count of {} (initialized at {}), and only {who} \
                 arrive on it, one arrival each per phase: {n} arrivals, so no phase ever completes; give the barrier \
                 an arrival count of {n}: `#[scratch(arrivals = {n})]`",
                fmt3(self.ctas[cta].idx),
                b.count,
                b.init_loc
            );
            self.misuse(g, tid, loc, "mbarrier arrival count larger than its arriving threads", detail);
        }
        if b.count < n && b.expect.is_none() {
            b.expect = Some((n, who.to_string(), loc));
        }
    }

    /// Enters (`Some`) or leaves (`None`) a library scope of thread `tid`.
    pub(crate) fn scope(&self, tid: usize, enter: Option<(&'static str, Loc)>) {
        let mut g = self.lock();
        match enter {
            Some(s) => g.scopes[tid].push(s),
            None => {
                g.scopes[tid].pop();
            }
        }
    }

    /// Records one call of the conditional warning `key` (see
    /// `kernel_emu::warn_unless`).
    pub(crate) fn warn_unless(&self, key: String, ok: bool, text: impl FnOnce() -> String) {
        let mut g = self.lock();
        match g.warn_unless.iter_mut().find(|(k, _, _)| *k == key) {
            Some(entry) => entry.1 |= ok,
            None => {
                let text = if ok { String::new() } else { text() };
                g.warn_unless.push((key, ok, text));
            }
        }
    }

    /// Records a warning of the run, once per text.
    pub(crate) fn warn_once(&self, text: String) {
        let mut g = self.lock();
        if !g.warnings.contains(&text) {
            g.warnings.push(text);
        }
    }

    /// A thread passes over the next phase of the mbarrier at `addr`
    /// without waiting on it (no instruction on the GPU: its parity bit
    /// flips): its next wait may observe one phase more than the
    /// skipped-phase rule of [`Emu::mbar_wait`] allows otherwise. Not an
    /// acquire.
    pub(crate) fn mbar_skip_phase(&self, tid: usize, loc: Loc, addr: u32) {
        let op = "mbarrier skip_phase";
        let off = self.own_mbar(tid, loc, addr, op);
        let cta = self.threads[tid].cta;
        let mut g = self.lock();
        if let Some((_, last)) = g.mbar_seen.get_mut(&(tid, cta, off)) {
            *last += 1;
        }
    }

    /// A pipeline's check before it waits on the mbarrier at `addr` for the
    /// phase numbered `phase` (0-based, counted from the barrier's init):
    /// that phase must be the barrier's current one or the one it just
    /// completed. A phase two or more behind is stale (its parity equals
    /// the current phase's, so the wait would block for the wrong phase, or
    /// pass on an older one); a phase ahead of the current one would pass at
    /// once on the previous phase's parity. `who` says whose state it is
    /// (e.g. "the consumer of `Ring` at src/k.rs:10, step 9 (slot 1)").
    pub(crate) fn mbar_check_phase(&self, tid: usize, loc: Loc, addr: u32, phase: u64, who: &dyn Fn() -> String) {
        let op = "mbarrier phase check";
        let off = self.own_mbar(tid, loc, addr, op);
        let cta = self.threads[tid].cta;
        let mut g = self.lock();
        let Some(b) = g.mbars.get(&(cta, off)) else {
            self.uninit(g, tid, loc, op, cta, off)
        };
        let (current, epoch) = (b.phase, b.epoch);
        if phase + 1 < current {
            let detail = format!(
                "{} waits for phase {phase} of the mbarrier at smem+{off:#x}, which has already completed phase {} \
                 (its current phase is {current}): the waiter's stage/phase state is behind the barrier (a pipeline \
                 state made anew, or steps taken on the barrier outside it); keep one state per role for the whole kernel",
                who(),
                current - 1
            );
            self.misuse(g, tid, loc, "a wait on a stale phase", detail);
        }
        if phase > current {
            let detail = format!(
                "{} waits for phase {phase} of the mbarrier at smem+{off:#x}, whose current phase is {current}: the \
                 wait would pass at once on phase {}'s parity; the waiter's stage/phase state is ahead of the barrier \
                 (steps skipped that were never filled, or a slot released before it was waited for)",
                who(),
                current.wrapping_sub(1)
            );
            self.misuse(g, tid, loc, "a wait on a phase ahead of the barrier", detail);
        }
        // The wait that follows is for phase `phase`, checked above by its
        // number: the "a thread skipped a phase" rule (for parity bits kept
        // per thread) measures it from here, so a state that waits on some
        // phases only (`Producer::wait_full`) is not a skip.
        g.mbar_seen.insert((tid, cta, off), (epoch, phase as i64 - 1));
    }

    /// `mbarrier.try_wait.parity` (`blocking`: waits until the phase with
    /// this parity completed, returns true) or `mbarrier.test_wait.parity`
    /// (returns whether it completed).
    pub(crate) fn mbar_wait(
        &self,
        tid: usize,
        loc: Loc,
        addr: u32,
        parity: u32,
        blocking: bool,
        cluster_scope: bool,
    ) -> bool {
        let op = match (blocking, cluster_scope) {
            (true, false) => "mbarrier.try_wait.parity",
            (true, true) => "mbarrier.try_wait.parity.acquire.cluster",
            (false, _) => "mbarrier.test_wait.parity",
        };
        let off = self.own_mbar(tid, loc, addr, op);
        let cta = self.threads[tid].cta;
        let mut g = self.begin();
        g.note(tid, op, loc);
        let Some(b) = g.mbars.get(&(cta, off)) else {
            self.uninit(g, tid, loc, op, cta, off)
        };
        let p = parity & 1;
        let done = (b.phase & 1) as u32 != p;
        if !done && !blocking {
            drop(self.switch(g, tid));
            return false;
        }
        // The phase this wait observes: the last completed one, or the
        // current one (which the thread then waits for).
        let observed = if done {
            b.phase as i64 - 1
        } else {
            b.phase as i64
        };
        let epoch = b.epoch;
        if let Some(&(e, last)) = g.mbar_seen.get(&(tid, cta, off)) {
            if e == epoch && observed > last + 1 {
                let b = &g.mbars[&(cta, off)];
                let detail = format!(
                    "{op} {p} at smem+{off:#x}: this thread's previous wait on the barrier saw phase {last} \
                     complete; this one {} phase {observed} (the barrier is in phase {}), so phase {} went by \
                     without this thread waiting for it: its parity is out of step with the barrier",
                    if done { "sees" } else { "would wait for" },
                    b.phase,
                    last + 1
                );
                self.misuse(g, tid, loc, "a thread skipped a phase", detail);
            }
        }
        g.mbar_seen.insert((tid, cta, off), (epoch, observed));
        if done {
            let st = &mut *g;
            let b = st.mbars.get_mut(&(cta, off)).expect("found above");
            if b.unwaited.as_ref().is_some_and(|u| u.0 as i64 == observed) {
                b.unwaited = None;
            }
            st.race.clk[tid].join(if cluster_scope { &b.last } else { &b.last_local });
            drop(self.switch(g, tid));
        } else {
            let b = g.mbars.get_mut(&(cta, off)).expect("found above");
            b.waiters.push(tid);
            if cluster_scope {
                b.cluster_waiters.push(tid);
            }
            drop(self.block(
                g,
                tid,
                Wait::MBar {
                    cta,
                    off,
                    parity: p,
                },
                loc,
            ));
        }
        true
    }

    pub(crate) fn mbar_inval(&self, tid: usize, loc: Loc, addr: u32) {
        let op = "mbarrier.inval";
        let off = self.own_mbar(tid, loc, addr, op);
        let cta = self.threads[tid].cta;
        let mut g = self.begin();
        g.note(tid, op, loc);
        let Some(b) = g.mbars.get(&(cta, off)) else {
            self.uninit(g, tid, loc, op, cta, off)
        };
        if !b.waiters.is_empty() {
            let detail = format!(
                "{op} at smem+{off:#x}: {} threads wait on it",
                b.waiters.len()
            );
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier.inval while threads wait on it",
                detail,
            );
        }
        if b.pending != b.count || b.tx != 0 {
            let detail = format!(
                "{op} at smem+{off:#x}: phase {} has {} of {} arrivals and tx {}",
                b.phase,
                b.count - b.pending,
                b.count,
                b.tx
            );
            self.misuse(
                g,
                tid,
                loc,
                "mbarrier.inval with a phase in progress",
                detail,
            );
        }
        g.mbars.remove(&(cta, off));
        drop(self.switch(g, tid));
    }

    // ----- async proxy ------------------------------------------------------

    /// CTA `cta`'s real shared memory.
    fn smem_slice(&self, cta: usize) -> &[u8] {
        // SAFETY: the buffer holds `smem_bytes` bytes (at least 1 allocated)
        // for the whole run; only the baton holder runs, so no emulated
        // thread writes it while this borrow (which ends before the next
        // scheduling point) lives.
        unsafe { std::slice::from_raw_parts(self.ctas[cta].smem.ptr, self.smem_bytes) }
    }

    /// Decodes `addr` and checks that `len` bytes there lie in the buffer.
    fn async_range(&self, tid: usize, loc: Loc, addr: u32, len: usize, op: &str) -> (usize, u32) {
        let (cta, off) = self.decode_or_misuse(tid, loc, addr);
        if off as usize + len > self.smem_bytes {
            let detail = format!(
                "{op}: {len} bytes at smem+{off:#x} of cta {}: the buffer has {} bytes",
                fmt3(self.ctas[cta].idx),
                self.smem_bytes
            );
            self.misuse(
                self.lock(),
                tid,
                loc,
                "out-of-bounds shared-memory access",
                detail,
            );
        }
        (cta, off)
    }

    /// `fence.proxy.async` by `tid`: the async proxy now sees the whole
    /// CTA's shared memory as it is. A scheduling point.
    pub(crate) fn fence_proxy_async(&self, tid: usize, loc: Loc) {
        let mut g = self.begin();
        g.note(tid, "fence.proxy.async", loc);
        let cta = self.threads[tid].cta;
        g.shadow[cta].copy_from_slice(self.smem_slice(cta));
        self.proxy_fence_clock(&mut g, tid);
        drop(self.switch(g, tid));
    }

    /// The async proxy (a TMA store, a wgmma operand) reads the CTA-local
    /// `ranges` of CTA `cta`: misuse if ordinary stores changed any byte
    /// there since the last `fence.proxy.async` (or TMA write) of the CTA.
    fn check_async_read<'a>(
        &'a self,
        g: MutexGuard<'a, State>,
        tid: usize,
        loc: Loc,
        cta: usize,
        ranges: &[Range],
        op: &str,
    ) -> MutexGuard<'a, State> {
        let real = self.smem_slice(cta);
        let shadow = &g.shadow[cta];
        for &(lo, hi) in ranges {
            let (lo, hi) = (lo as usize, hi as usize);
            // The common case, unchanged bytes, in one comparison.
            if real[lo..hi] == shadow[lo..hi] {
                continue;
            }
            let Some(first) = (lo..hi).find(|&i| real[i] != shadow[i]) else {
                continue;
            };
            let last = (lo..hi)
                .rev()
                .find(|&i| real[i] != shadow[i])
                .unwrap_or(first);
            let detail = format!(
                "{op} reads smem+{lo:#x}..{hi:#x} of cta {}; bytes smem+{first:#x}..{:#x} were changed by ordinary \
                 stores since the last fence.proxy.async (commit_smem) of the CTA, so the async proxy may not see them",
                fmt3(self.ctas[cta].idx),
                last + 1
            );
            self.misuse(
                g,
                tid,
                loc,
                "SMEM written by ordinary stores and read by the async proxy (TMA store or wgmma) without \
                 commit_smem (fence.proxy.async) in between: every writing thread calls commit_smem() after its \
                 stores, before the barrier that hands the SMEM over",
                detail,
            );
        }
        g
    }

    /// An async-proxy read (TMA store source) of `len` bytes at `addr`.
    pub(crate) fn async_read(&self, tid: usize, loc: Loc, addr: u32, len: usize, op: &str) {
        let (cta, off) = self.async_range(tid, loc, addr, len, op);
        let g = self.begin();
        drop(self.check_async_read(g, tid, loc, cta, &[(off, off + len as u32)], op));
    }

    /// Before an async-proxy write (TMA load) of `len` bytes at `addr`:
    /// misuse if it overlaps SMEM read by an in-flight wgmma group of a
    /// thread of the destination CTA. Returns the CTA and offset.
    pub(crate) fn async_write_check(
        &self,
        tid: usize,
        loc: Loc,
        addr: u32,
        len: usize,
        op: &str,
    ) -> (usize, u32) {
        let (cta, off) = self.async_range(tid, loc, addr, len, op);
        let (lo, hi) = (off, off + len as u32);
        let g = self.begin();
        if let Some((rule, detail)) = self.wgmma_overlap(&g, cta, lo, hi, op) {
            self.misuse(g, tid, loc, rule, detail);
        }
        (cta, off)
    }

    /// Whether an async write of `lo..hi` of CTA `cta` overlaps SMEM read by
    /// an in-flight wgmma group of a thread of that CTA: the rule and detail.
    pub(crate) fn wgmma_overlap(&self, g: &State, cta: usize, lo: u32, hi: u32, op: &str) -> Option<(&'static str, String)> {
        if g.wgmma_busy[cta] == 0 {
            return None;
        }
        let mut found = None;
        'threads: for t in cta * self.tpc..(cta + 1) * self.tpc {
            let w = &g.wgmma[t];
            let n = w.committed.len();
            let groups = w
                .committed
                .iter()
                .enumerate()
                .map(|(i, gr)| (Some(i), gr))
                .chain(std::iter::once((None, &w.open)));
            for (i, gr) in groups {
                if let Some(&(a, b)) = gr.iter().find(|&&(a, b)| a < hi && lo < b) {
                    let name = match i {
                        Some(i) => format!(
                            "committed group {} of {n} still pending (oldest first)",
                            i + 1
                        ),
                        None => "group not yet committed".to_string(),
                    };
                    found = Some((t, a, b, name));
                    break 'threads;
                }
            }
        }
        let (t, a, b, name) = found?;
        let detail = format!(
            "{op} writes smem+{lo:#x}..{hi:#x} of cta {}; {} reads smem+{a:#x}..{b:#x} as a wgmma \
             operand in its {name} (no wgmma_wait has retired it)",
            fmt3(self.ctas[cta].idx),
            self.who(t)
        );
        Some((
            "TMA overwrites SMEM still read by an in-flight wgmma: wait for the wgmma group \
             (wgmma_wait) before the SMEM is reused, e.g. release a pipeline slot one step later \
             (delay_release = 1 with wgmma_wait::<1>)",
            detail,
        ))
    }

    /// After an async-proxy write of `len` bytes at offset `off` of CTA
    /// `cta`: the async proxy sees those bytes.
    pub(crate) fn async_written(&self, cta: usize, off: u32, len: usize) {
        let mut g = self.begin();
        let (lo, hi) = (off as usize, off as usize + len);
        g.shadow[cta][lo..hi].copy_from_slice(&self.smem_slice(cta)[lo..hi]);
    }

    /// A wgmma of `tid` read the CTA-local `ranges` of its CTA: check them
    /// against the async proxy's view, then add them to the open group.
    pub(crate) fn wgmma_reads(&self, tid: usize, loc: Loc, ranges: &[Range], op: &str) {
        let cta = self.threads[tid].cta;
        if let Some(&(lo, hi)) = ranges.iter().find(|r| r.1 as usize > self.smem_bytes) {
            let detail = format!(
                "{op}: smem+{lo:#x}..{hi:#x}: the buffer has {} bytes",
                self.smem_bytes
            );
            self.misuse(
                self.lock(),
                tid,
                loc,
                "out-of-bounds shared-memory access",
                detail,
            );
        }
        let g = self.begin();
        let mut g = self.check_async_read(g, tid, loc, cta, ranges, op);
        let was = g.wgmma[tid].busy();
        merge_ranges(&mut g.wgmma[tid].open, ranges);
        g.wgmma_count(tid / self.tpc, was, tid);
        // The warpgroup's operands are the same for its 128 threads: its
        // first thread stands for it in the shadow state.
        if (tid % self.tpc) % 128 == 0 {
            self.wgmma_shadow_reads(g, tid, loc, ranges);
        }
    }

    /// `wgmma.commit_group` of `tid`: closes its open group.
    pub(crate) fn wgmma_commit(&self, tid: usize) {
        let mut g = self.begin();
        let w = &mut g.wgmma[tid];
        let open = std::mem::take(&mut w.open);
        w.committed.push_back(open);
        // (Busy before and after: the ranges only moved.)
    }

    /// `wgmma.wait_group n` of `tid`: retires all but its newest `n` groups.
    pub(crate) fn wgmma_wait(&self, tid: usize, n: u32) {
        let mut g = self.begin();
        let was = g.wgmma[tid].busy();
        let w = &mut g.wgmma[tid];
        while w.committed.len() > n as usize {
            w.committed.pop_front();
        }
        g.wgmma_count(tid / self.tpc, was, tid);
    }
}

// ----- read-only hooks for the TMEM / tcgen05 model (crate::tmem) ----------

impl Emu {
    /// `(epoch, completed phases)` of the mbarrier at `(cta, off)`, if
    /// initialized: the phase an arrival now lands in is `phase`.
    pub(crate) fn mbar_phase(&self, cta: usize, off: u32) -> Option<(u64, u64)> {
        let g = self.lock();
        g.mbars.get(&(cta, off)).map(|b| (b.epoch, b.phase))
    }

    /// `(epoch, phase)` that thread `tid`'s last wait on the mbarrier at
    /// `(cta, off)` observed complete (or waited for), if it ever waited.
    pub(crate) fn mbar_observed(&self, tid: usize, cta: usize, off: u32) -> Option<(u64, i64)> {
        let g = self.lock();
        g.mbar_seen.get(&(tid, cta, off)).copied()
    }
}

/// `" (inside `emit_pipeline` called at src/k.rs:10:5)"` for a thread inside
/// library scopes (`kernel_emu::scope`), innermost first; empty otherwise.
fn scope_note(g: &State, tid: usize) -> String {
    g.scopes[tid].iter().rev().map(|(what, at)| format!(" (inside `{what}` called at {at})")).collect()
}

/// Adds the notes of mbarriers whose phases completed early (see
/// `MBar::early`) to a report: a too-small arrival count shows up as
/// another error (a TMA overwrite, a race, a deadlock) first.
fn add_early_phase_notes(g: &State, err: &mut EmuError) {
    let notes: Vec<&String> = g.mbars.values().filter_map(|b| b.early.as_ref()).take(2).collect();
    if notes.is_empty() {
        return;
    }
    match err {
        EmuError::Misuse { rule, detail, .. } if !rule.starts_with("mbarrier arrival count") => {
            for n in notes {
                detail.push_str("\n  ");
                detail.push_str(n);
            }
        }
        EmuError::Race { fix, .. } => {
            for n in notes {
                fix.push_str("\n  ");
                fix.push_str(n);
            }
        }
        EmuError::Deadlock { blocked, .. } => blocked.extend(notes.into_iter().cloned()),
        _ => {}
    }
}
