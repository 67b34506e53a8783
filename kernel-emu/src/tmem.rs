//! Tensor memory (TMEM) and the 5th-generation tensor core (`tcgen05`) of
//! Blackwell (sm_100a), as the emulator models them.
//!
//! # Model
//!
//! * **TMEM**: per CTA, 128 lanes x 512 columns of 32-bit cells, zeroed at
//!   launch. An address is `lane << 16 | column` (PTX ISA §9.7.16.1.1).
//!   Columns are allocated by one warp ([`alloc`]) in powers of two from 32
//!   to 512, and must be freed ([`dealloc`]) before the kernel ends.
//! * **Loads and stores** ([`ld`], [`st`]; [`ld_32x32b`], [`st_32x32b`]):
//!   every data-movement shape of the ISA ([`Shape`]: `.32x32b`,
//!   `.16x64b`, `.16x128b`, `.16x256b`, `.16x32bx2`), register `r` of warp
//!   lane `l` moving the cell [`Shape::cell`]`(l, r)` relative to the
//!   address (the ISA's "Matrix fragments for shape .." figures; checked
//!   against CUTLASS's copy traits in the tests). `.32x32b`: thread `l`
//!   reads/writes TMEM lane `base + l`. The 16-lane shapes spread one TMEM
//!   lane over several threads (`.16x256b` is the `mma.m16n8` accumulator
//!   pattern), so a thread's access is a set of regions (one per run of
//!   columns of one lane), each checked and recorded on its own. Warp `w`
//!   of its warpgroup may only touch lanes `32 (w % 4) .. 32 (w % 4) + 32`
//!   (the ISA's lane-access rule of `tcgen05.ld`/`st`): a 32-lane shape
//!   from lane `32 (w % 4)`, a 16-lane shape from lane `32 (w % 4)` or
//!   `32 (w % 4) + 16`. The data moves at issue. A load is *in flight*
//!   until its thread calls [`wait_ld`] (`tcgen05.wait::ld`): it reads its
//!   cells from the issue to the wait, so the race detector records its
//!   read at both (a write ordered after the issue but not after the wait,
//!   e.g. handed over by an arrival that comes before the wait, is a race
//!   on every schedule), and a store or MMA over the cells before the wait
//!   is reported at once (below). A store is in flight until
//!   [`wait_st`] (`tcgen05.wait::st`, Pallas's `commit_tmem`). Both waits
//!   are `.sync.aligned`, so the emulator makes each a warp barrier (after
//!   the thread's loads end, or its stores complete): a lane is then
//!   ordered after every lane's loads and stores of the warp, which the
//!   16-lane shapes need (a lane's cells in other threads' registers).
//! * **Store completion**: a store is complete for its own thread after its
//!   [`wait_st`], and for another thread once that wait happens-before it
//!   (the wait, then a barrier, an mbarrier arrive/wait or a longer chain:
//!   the race detector's vector clocks, the wait's clock recorded). A
//!   barrier *before* the wait orders nothing. Every later `tcgen05.ld`,
//!   `tcgen05.st` or MMA over the cells, by any thread, must come after that
//!   completion. (A store ordered after the completion, or an MMA, that
//!   covers the cells supersedes the record.)
//! * **Data paths** (the ISA's "Data path layout organization"): a
//!   cta_group::1 MMA of M = 128 writes row `i` of D to lane `i` (layout
//!   D); one of M = 64 (layout F, not `.ws`) writes rows `16 q .. 16 q + 16`
//!   to lanes `32 q + b .. 32 q + b + 16` of lane quarter `q`, with `b` the
//!   lane of its TMEM address, 0 or 16 (CUTLASS's `tmem_frg_1sm` atom for
//!   M = 64; `b = 16` places a second M = 64 accumulator in the same
//!   columns). So warp `w` reads its 16 rows of an M = 64 accumulator with
//!   a 16-lane shape at lane `32 (w % 4) + b`. A TMEM A operand uses the
//!   same layout as D. Column `j` of D is column `col + j` in both. A pair
//!   MMA (cta_group::2, [`mma_pair`]) of M = 256 puts 128 rows in each CTA,
//!   row `i` in lane `i` (layout A); one of M = 128 (dense, layout B) 64
//!   rows in each CTA, folded: row `i`, column `j < N/2` in lane `i`,
//!   column `col + j`; column `j >= N/2` in lane `64 + i`, column
//!   `col + j - N/2` (CUTLASS's 2-SM M = 64 atom).
//! * **MMA** ([`mma`]): issued by one thread; its SMEM operands are decoded
//!   at issue (the caller passes the values), its TMEM A operand is read at
//!   issue. It is registered with the race detector ([`crate::race`]) as an
//!   asynchronous operation (`Completion::Tracked`) whose reads are the SMEM
//!   operand ranges (and the TMEM A cells), whose write is the accumulator,
//!   and whose effect computes the accumulator: the detector runs it at a
//!   seeded point before the issuing thread's next [`commit`] arrives (a
//!   thread's tensor-core operations run in issue order: each depends on the
//!   previous one). So an accumulator read too early may see stale data, and
//!   is reported.
//! * **MMAs of several threads** ([`fence_before_thread_sync`],
//!   [`fence_after_thread_sync`]): the tensor core also runs in issue order
//!   an MMA of thread B after the MMAs of thread A when A called
//!   `tcgen05.fence::before_thread_sync` after them, then a thread sync
//!   (a barrier, an mbarrier arrive/wait: any happens-before edge) reached B,
//!   and B called `tcgen05.fence::after_thread_sync` after it, before the
//!   MMA (the PTX ISA's pipelined tcgen05 instructions and their fences
//!   across a thread sync). The emulator records, per MMA issuer, the clock
//!   of each such fence, and per thread what it knew of those clocks at its
//!   last `fence::after_thread_sync`; B's MMA then depends on A's last
//!   fenced MMA in the race detector (runs after it, its clock joined), so
//!   the two accumulator writes are ordered, and a commit covering B's MMA
//!   completes A's too (below).
//!   Without either fence or the sync, the two MMAs are unordered: a
//!   write-write race of the race detector on the accumulator, whose fix
//!   names the fences.
//! * **Copies** ([`cp`], `tcgen05.cp`): issued by one thread like an MMA;
//!   the caller decodes the SMEM rows; the copy is a tracked asynchronous
//!   operation of the race detector (reads: the SMEM rows; writes: its TMEM
//!   cells, one rectangle, or the four rows of `4x256b`) executed with the
//!   thread's MMAs in issue order and completed by its commit, so an MMA
//!   issued after it reads the copied data (the MMA's TMEM A operand is
//!   read when the MMA executes). At issue it is checked as a TMEM write:
//!   no in-flight load, unfinished store, or MMA/copy touching its cells
//!   that is not complete for the issuer (the tensor core orders a copy
//!   before a later MMA, not an MMA or a copy before a later copy). Loads
//!   and stores of its cells follow the MMA rules below with the copy's
//!   name in the rule.
//! * **Freeing** ([`dealloc`]): refused while an MMA or copy on the columns
//!   has not executed, or a load of them is in flight; then the free is a
//!   write of every cell for the race detector (an access of another thread
//!   not ordered before it races), the columns' history is forgotten and
//!   they are remembered as freed, so a later access is "TMEM used after
//!   tcgen05.dealloc" (a scoped allocation's tile used after its scope)
//!   until they are allocated again.
//! * **Loads and stores after an MMA's completion**: a thread learns that
//!   an MMA completed by waiting on the mbarrier its commit arrives on; its
//!   `tcgen05.ld`/`tcgen05.st` of the MMA's cells are ordered after the MMA
//!   only if it called `tcgen05.fence::after_thread_sync` after that wait
//!   (the emulator records, at each such fence, the thread's observations
//!   of the commit barriers). Otherwise: "TMEM read (written) after an
//!   MMA's completion without tcgen05.fence::after_thread_sync".
//!   `Barrier<TensorCore>::wait` issues the fence, so typed kernels have it
//!   by construction.
//! * **Loads and stores** are also ordinary accesses of the CTA's tensor
//!   memory for the race detector (cell `(lane, col)` is bytes
//!   `(lane * 512 + col) * 4 ..+ 4`), so every TMEM access is checked by
//!   happens-before against the MMAs' (and other threads') accesses, with
//!   the commit's mbarrier as the edge. An SMEM operand overwritten by a TMA
//!   load under an in-flight MMA is a race between the two operations.
//! * **Completion**, for this module's own checks (which name the TMEM rule
//!   before the race detector would report a bare race): an MMA is
//!   *complete for thread T* once T's wait on a barrier observed the phase a
//!   `tcgen05.commit` of the MMA's issuing thread, issued after the MMA,
//!   arrived in (a commit covers all earlier tcgen05 operations of its own
//!   thread, and only those), or once an MMA of another thread pipelined
//!   after it (above) is complete for T. This is the direct edge; longer
//!   chains are the race detector's.
//!
//! # Checks (each a [`crate::EmuError::Misuse`] naming the rule)
//!
//! * "TMEM read before the MMA that writes it completed" (a `tcgen05.ld` of
//!   accumulator cells of an MMA not complete for the reading thread: the
//!   commit-arrive was not awaited, a TMA barrier was mistaken for MMA
//!   completion, or the commit came from another thread);
//! * "TMEM accessed before the tcgen05.st that writes it completed" (a
//!   `tcgen05.ld` or `tcgen05.st` over cells of a store not complete for the
//!   accessing thread: its own store with no `tcgen05.wait::st` since, or
//!   another thread's store whose wait has not run or is not ordered before
//!   the access; the report names the store, the access and the fix);
//! * "TMEM store then MMA without commit_tmem" (the same for an MMA that
//!   reads or writes the cells, completion taken for its issuing thread);
//! * "TMEM overwritten while an in-flight tcgen05.ld reads it" (a store or an
//!   MMA over cells of a load not yet followed by `tcgen05.wait::ld`);
//! * "TMEM operand of an in-flight MMA overwritten" (a store over the
//!   accumulator or the TMEM A operand of an MMA not complete for the storing
//!   thread);
//! * (a TMA load over SMEM an in-flight MMA reads: a race report of
//!   [`crate::race`], naming both operations);
//! * "TMEM accessed outside the allocation", "TMEM lane quarter of another
//!   warp", "TMEM allocation over 512 columns", "TMEM allocation size",
//!   "tcgen05.dealloc of columns that are not an allocation", "TMEM freed
//!   while an MMA on it is pending", "TMEM allocation not freed when the
//!   kernel ended".
use crate::engine::{Emu, Range};
use crate::error::EmuError;
use crate::race::{AsyncOp, Completion, Space};
use crate::{ctx, enter};
use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard};

/// TMEM lanes (rows) per CTA (`kernel_spec::limits::TMEM_LANES`).
pub const LANES: u32 = kernel_spec::limits::TMEM_LANES;
/// TMEM columns per CTA, 32-bit cells (`kernel_spec::limits::MAX_TMEM_COLS`).
pub const COLS: u32 = kernel_spec::limits::MAX_TMEM_COLS;

type Loc = &'static Location<'static>;

/// How the accumulator's elements are stored in TMEM cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// f32, one per cell.
    F32,
    /// f16, one per cell (low half; accumulators are unpacked).
    F16,
    /// s32, one per cell.
    S32,
}

/// The A operand of an MMA.
pub enum AOperand {
    /// From SMEM, decoded by the caller: `M x K` values, row-major.
    Smem(Vec<f32>),
    /// From TMEM at `taddr`: `M` lanes x `K / 2` columns of packed 16-bit
    /// pairs (element `k` in column `k / 2`, half `k % 2`).
    Tmem { taddr: u32, bf16: bool },
}

/// One `tcgen05.mma` (cta_group::1) as issued.
pub struct MmaIssue<'a> {
    /// Accumulator TMEM address (lane 0, first column).
    pub d: u32,
    pub a: AOperand,
    /// B as `N x K` values (`b[n * K + k]`), decoded by the caller.
    pub b: Vec<f32>,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// `enable-input-d`: add to the accumulator (else overwrite it).
    pub accumulate: bool,
    pub dtype: DType,
    /// The SMEM byte ranges (of the issuing CTA) the operands occupy.
    pub smem_reads: &'a [Range],
    /// The operation, for reports.
    pub op: &'static str,
}

/// A set of TMEM cells: columns `cols` of the lanes `lanes`, that lane
/// range repeated `reps` times `stride` lanes apart (`reps == 1`: a
/// rectangle; an M = 64 accumulator: 16 lanes in each lane quarter).
#[derive(Clone, Copy, Debug)]
struct Region {
    lanes: (u32, u32),
    cols: (u32, u32),
    reps: u32,
    stride: u32,
}

impl Region {
    /// Lanes `lanes`, columns `cols`.
    fn rect(lanes: (u32, u32), cols: (u32, u32)) -> Region {
        Region { lanes, cols, reps: 1, stride: 0 }
    }
    /// The lane ranges of the region.
    fn blocks(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.reps).map(|b| (self.lanes.0 + b * self.stride, self.lanes.1 + b * self.stride))
    }
    /// One past the last lane.
    fn lane_end(&self) -> u32 {
        self.lanes.1 + (self.reps - 1) * self.stride
    }
    /// The lane of the region's row `i` (rows numbered block by block).
    fn row_lane(&self, i: u32) -> u32 {
        let h = self.lanes.1 - self.lanes.0;
        self.lanes.0 + (i / h) * self.stride + i % h
    }
    fn overlaps(&self, o: &Region) -> bool {
        self.cols.0 < o.cols.1 && o.cols.0 < self.cols.1 && self.blocks().any(|(a, b)| o.blocks().any(|(c, d)| a < d && c < b))
    }
    /// Whether every cell of `o` is one of this region's.
    fn covers(&self, o: &Region) -> bool {
        self.cols.0 <= o.cols.0 && o.cols.1 <= self.cols.1 && o.blocks().all(|(c, d)| self.blocks().any(|(a, b)| a <= c && d <= b))
    }
    fn show(&self) -> String {
        let lanes: Vec<String> = self.blocks().map(|(a, b)| format!("{a}..{b}")).collect();
        format!("lanes {}, columns {}..{}", lanes.join(", "), self.cols.0, self.cols.1)
    }
}

struct Alloc {
    col: u32,
    ncols: u32,
    loc: Loc,
}

/// What a pending tensor-core operation does when it executes.
enum Work {
    /// An MMA's arithmetic (`a` empty when A is in TMEM: read from the
    /// op's `a_tmem` cells when the MMA executes, after the copies and MMAs
    /// before it; `a_tmem` says whether the pairs are bf16).
    Mma { a: Vec<f32>, a_tmem: Option<bool>, b: Vec<f32>, accumulate: bool, dtype: DType },
    /// A `tcgen05.cp`'s cells: `(lane, column, bits)`.
    Copy(Vec<(u32, u32, u32)>),
}

struct Op {
    seq: u64,
    issuer: usize,
    loc: Loc,
    op: &'static str,
    m: u32,
    n: u32,
    k: u32,
    /// The cells it writes: the accumulator, or a copy's destination.
    d: Region,
    /// Column `j` of D goes to lane block `j / (n / fold)` of `d`, column
    /// `j % (n / fold)` (the cta_group::2 M = 128 data path: `fold` 2);
    /// 1: all columns in the lanes of each row.
    fold: u32,
    a_tmem: Option<Region>,
    /// A `tcgen05.cp` (else an MMA).
    copy: bool,
    /// `None` once executed.
    work: Option<Work>,
    /// MMAs of other threads `(issuer, seq)` ordered before this one by
    /// `tcgen05.fence::before_thread_sync` (in their issuer), a thread sync
    /// and `tcgen05.fence::after_thread_sync` (in this one's): the tensor
    /// core runs them first (and this one's completion implies theirs).
    after: Vec<(usize, u64)>,
    /// The race detector's id of the operation, once registered.
    race_id: Option<usize>,
}

impl Op {
    /// Whether it writes any cell of `r`.
    fn writes_overlap(&self, r: &Region) -> bool {
        self.d.overlaps(r)
    }
    /// Whether it reads or writes any cell of `r` (its TMEM operands).
    fn touches(&self, r: &Region) -> bool {
        self.writes_overlap(r) || self.a_tmem.is_some_and(|a| a.overlaps(r))
    }
    /// The unit that writes its cells, for rules and reports.
    fn unit(&self) -> &'static str {
        if self.copy {
            "tcgen05.cp"
        } else {
            "MMA"
        }
    }
}

struct Access {
    tid: usize,
    region: Region,
    loc: Loc,
}

/// A `tcgen05.st`: in flight until its thread's `tcgen05.wait::st`.
struct Store {
    tid: usize,
    region: Region,
    loc: Loc,
    /// The storing thread's own clock and the location of its
    /// `tcgen05.wait::st`, once it waited: another thread's access is
    /// ordered after the completion iff its clock entry of `tid` is at least
    /// this (the wait, then a barrier or another happens-before edge).
    waited: Option<(u32, Loc)>,
}

struct Commit {
    issuer: usize,
    /// Covers the issuer's operations with `seq <= seq`.
    seq: u64,
    cta: usize,
    off: u32,
    epoch: u64,
    phase: u64,
}

#[derive(Default)]
struct Cta {
    /// 128 x 512 cells, allocated at the CTA's first tcgen05 operation.
    mem: Vec<u32>,
    allocs: Vec<Alloc>,
    /// Allocations freed by `tcgen05.dealloc`, with where they were freed
    /// (for the "used after tcgen05.dealloc" report).
    freed: Vec<Alloc>,
    relinquished: bool,
    ops: Vec<Op>,
    loads: Vec<Access>,
    /// Stores not yet known to be superseded (in flight, or waited for but
    /// maybe not ordered before another thread's access).
    stores: Vec<Store>,
    /// Loads ended by their thread's `tcgen05.wait::ld`, with the thread's
    /// clock at the wait: another thread's later tcgen05 write of the cells
    /// must be ordered after them by the fences (`fence::before_thread_sync`
    /// in the loading thread after the wait, a thread sync,
    /// `fence::after_thread_sync` in the writing thread).
    done_loads: Vec<(Access, u32)>,
}

#[derive(Default)]
struct Run {
    ctas: HashMap<usize, Cta>,
    commits: Vec<Commit>,
    next_seq: u64,
    /// Per thread: the `seq` of the last MMA it issued.
    last_mma: HashMap<usize, u64>,
    /// Per MMA-issuing thread: its `tcgen05.fence::before_thread_sync`s
    /// that follow an MMA, as (its own clock at the fence, the seq of its
    /// last MMA before it), oldest first.
    fenced: HashMap<usize, Vec<(u32, u64)>>,
    /// Per thread: at its last `tcgen05.fence::after_thread_sync`, its clock
    /// entries of the threads in `fenced` (what its later tcgen05 operations
    /// are ordered after).
    views: HashMap<usize, HashMap<usize, u32>>,
    /// Per thread: at its last `tcgen05.fence::after_thread_sync`, what it
    /// had observed of each mbarrier a tcgen05 commit arrives on (an MMA's
    /// completion orders this thread's later TMEM loads and stores only if
    /// observed before that fence).
    fence_seen: HashMap<usize, HashMap<(usize, u32), (u64, i64)>>,
    /// Per thread: its own clock at each `tcgen05.fence::before_thread_sync`,
    /// oldest first (the fences that order its finished loads and stores
    /// before a thread sync).
    before_fences: HashMap<usize, Vec<u32>>,
    /// Per thread: at its last `tcgen05.fence::after_thread_sync`, its clock
    /// entries of the threads in `before_fences`.
    after_views: HashMap<usize, HashMap<usize, u32>>,
}

/// The state of every live run, by the address of its `Emu`.
static RUNS: Mutex<Option<HashMap<usize, Run>>> = Mutex::new(None);

fn key(e: &Arc<Emu>) -> usize {
    Arc::as_ptr(e) as usize
}

fn runs() -> MutexGuard<'static, Option<HashMap<usize, Run>>> {
    RUNS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on this run's state and the calling thread's CTA state; `f`
/// returns `Err((rule, detail))` to stop the run with a misuse (reported
/// after the state lock is released).
fn with_cta<R>(e: &Arc<Emu>, tid: usize, loc: Loc, f: impl FnOnce(&mut Run, usize) -> Result<R, (&'static str, String)>) -> R {
    let res = {
        let mut g = runs();
        let run = g.get_or_insert_with(HashMap::new).entry(key(e)).or_default();
        let cta = e.threads[tid].cta;
        let c = run.ctas.entry(cta).or_default();
        if c.mem.is_empty() {
            c.mem = vec![0; (LANES * COLS) as usize];
        }
        f(run, cta)
    };
    match res {
        Ok(r) => r,
        Err((rule, detail)) => e.misuse(e.lock(), tid, loc, rule, detail),
    }
}

/// The race detector's byte range of `region`'s cells in lane `lane`:
/// cell `(lane, col)` is the 4 bytes at `(lane * 512 + col) * 4`.
fn lane_bytes(lane: u32, cols: (u32, u32)) -> (u64, u64) {
    (u64::from(lane * COLS + cols.0) * 4, u64::from(lane * COLS + cols.1) * 4)
}

/// One range per lane of `r`, in the CTA's TMEM space.
fn region_ranges(cta: usize, r: &Region) -> Vec<(Space, u64, u64)> {
    r.blocks()
        .flat_map(|(a, b)| a..b)
        .map(|l| {
            let (lo, hi) = lane_bytes(l, r.cols);
            (Space::Tmem { cta }, lo, hi)
        })
        .collect()
}

fn split(taddr: u32) -> (u32, u32) {
    (taddr >> 16, taddr & 0xFFFF)
}

fn inside_alloc(c: &Cta, r: &Region, what: &str) -> Result<(), (&'static str, String)> {
    if r.lane_end() <= LANES && c.allocs.iter().any(|a| r.cols.0 >= a.col && r.cols.1 <= a.col + a.ncols) {
        return Ok(());
    }
    if let Some(f) = c.freed.iter().rev().find(|f| r.cols.0 < f.col + f.ncols && f.col < r.cols.1) {
        return Err((
            "TMEM used after tcgen05.dealloc",
            format!(
                "{what} touches {}, in columns {}..{} that were freed at {} (a scoped TMEM allocation's handle used after its scope ended?); \
                 use the tile only inside the scope that allocated it",
                r.show(),
                f.col,
                f.col + f.ncols,
                f.loc
            ),
        ));
    }
    let live: Vec<String> = c.allocs.iter().map(|a| format!("columns {}..{} (allocated at {})", a.col, a.col + a.ncols, a.loc)).collect();
    Err((
        "TMEM accessed outside the allocation",
        format!(
            "{what} touches {}; this CTA's TMEM allocations: {}; allocate enough columns (the `Tmem` scratch type's COLS) or slice inside them",
            r.show(),
            if live.is_empty() { "none".to_string() } else { live.join(", ") }
        ),
    ))
}

impl Run {
    /// Whether operation `op` (one of its CTA's `ops`) is complete for
    /// thread `tid`: some commit by its issuer, issued after it, arrived in
    /// a phase that `tid`'s last wait on that barrier observed; or an MMA of
    /// another thread that the tensor core pipelines after it (`Op::after`)
    /// is complete for `tid`.
    fn complete_for(&self, e: &Emu, tid: usize, ops: &[Op], op: &Op) -> bool {
        self.complete_with(ops, op, &|cta, off| e.mbar_observed(tid, cta, off))
    }

    /// Whether `op` was complete for `tid` at its last
    /// `tcgen05.fence::after_thread_sync` (what orders its later TMEM loads
    /// and stores after the completion).
    fn complete_at_fence(&self, tid: usize, ops: &[Op], op: &Op) -> bool {
        let seen = self.fence_seen.get(&tid);
        self.complete_with(ops, op, &|cta, off| seen.and_then(|m| m.get(&(cta, off)).copied()))
    }

    /// Whether `op` is complete given `observed(cta, mbarrier offset)`, a
    /// thread's (epoch, phase) observation of a barrier: a commit covering
    /// it arrived on a phase observed, or an MMA pipelined after it is.
    fn complete_with(&self, ops: &[Op], op: &Op, observed: &dyn Fn(usize, u32) -> Option<(u64, i64)>) -> bool {
        self.commits.iter().any(|c| {
            c.issuer == op.issuer && c.seq >= op.seq && matches!(observed(c.cta, c.off), Some((ep, seen)) if ep == c.epoch && seen >= c.phase as i64)
        }) || ops.iter().any(|o| {
            o.issuer != op.issuer && o.after.iter().any(|&(i, s)| i == op.issuer && s >= op.seq) && self.complete_with(ops, o, observed)
        })
    }

    /// The MMAs of other threads that an MMA `tid` issues now is ordered
    /// after by the tcgen05 fences: per thread A with a
    /// `fence::before_thread_sync` after an MMA, A's last MMA before the
    /// latest such fence whose clock `tid` knew at its last
    /// `fence::after_thread_sync` (A's fence, then a release of A that `tid`
    /// acquired, then `tid`'s fence).
    fn fenced_before(&self, tid: usize) -> Vec<(usize, u64)> {
        let view = self.views.get(&tid);
        let mut after: Vec<(usize, u64)> = self
            .fenced
            .iter()
            .filter(|(&a, _)| a != tid)
            .filter_map(|(&a, fences)| {
                let seen = view.and_then(|v| v.get(&a)).copied().unwrap_or(0);
                fences.iter().rev().find(|(clock, _)| *clock <= seen).map(|&(_, seq)| (a, seq))
            })
            .collect();
        after.sort_unstable();
        after
    }

    /// The sequence number of a tensor-core operation (MMA or copy) that
    /// thread `tid` of CTA `cta` issues now, recorded as its last one, and
    /// the operations of other threads the tcgen05 fences order it after:
    /// `(issuer, seq)` pairs and their race-detector ids.
    fn next_op(&mut self, tid: usize, cta: usize) -> (u64, Vec<(usize, u64)>, Vec<usize>) {
        let c = &self.ctas[&cta];
        let (after, after_ids): (Vec<(usize, u64)>, Vec<usize>) = self
            .fenced_before(tid)
            .into_iter()
            .filter_map(|(a, s)| c.ops.iter().find(|o| o.seq == s && o.issuer == a).and_then(|o| o.race_id).map(|id| ((a, s), id)))
            .unzip();
        self.next_seq += 1;
        let seq = self.next_seq;
        self.last_mma.insert(tid, seq);
        (seq, after, after_ids)
    }

    fn committed(&self, op: &Op) -> bool {
        self.commits.iter().any(|c| c.issuer == op.issuer && c.seq >= op.seq)
    }

    /// Why `op` is not complete for a reader, for reports.
    fn why_incomplete(&self, e: &Emu, op: &Op) -> String {
        if self.committed(op) {
            format!(
                "its commit by {} arrived on an mbarrier whose phase this thread has not waited for \
                 (wait on the barrier the {} commits to, e.g. `mma_done.wait()`, not on a TMA barrier)",
                e.who(op.issuer),
                op.unit()
            )
        } else {
            format!(
                "no tcgen05.commit by its issuing thread {} covers it yet (a commit covers only the MMAs and copies of the thread that issues it)",
                e.who(op.issuer)
            )
        }
    }
}

/// The first store of `c` over `r` that an access by thread `tid` (now) is
/// not ordered after, and why: a store is complete once its thread called
/// `tcgen05.wait::st`, for that thread at once, for another thread once a
/// barrier (or another happens-before edge) after the wait reached it.
fn unfinished_store<'a>(e: &Emu, c: &'a Cta, tid: usize, r: &Region) -> Option<(&'a Store, String)> {
    for s in c.stores.iter().filter(|s| s.region.overlaps(r)) {
        match s.waited {
            None if s.tid == tid => return Some((s, "this thread has called no tcgen05.wait::st (commit_tmem) since".to_string())),
            None => return Some((s, "the storing thread has called no tcgen05.wait::st (commit_tmem) since, so the store may still be in flight".to_string())),
            Some(_) if s.tid == tid => {}
            Some((clock, wloc)) => {
                if e.clock_of(tid, s.tid) < clock {
                    return Some((s, format!("its tcgen05.wait::st (commit_tmem) at {wloc} is not ordered before this access by any barrier or other synchronization")));
                }
            }
        }
    }
    None
}

/// The fix of a missing `tcgen05.fence::after_thread_sync`.
const FENCE_AFTER_FIX: &str = "wait on a tensor-core barrier (`Barrier<TensorCore>::wait` issues the fence), or call \
     tcgen05::raw::fence_after_thread_sync() after the wait and before the TMEM access";

/// The fix of an [`unfinished_store`] report.
const STORE_FIX: &str = "the storing thread calls commit_tmem() (tcgen05.wait::st) after its stores and before touching the cells again; \
     another thread (or an MMA it issues) touches them only after a barrier (sync_threads, an mbarrier arrive/wait) that follows that commit_tmem";

/// Checks a write of `r` (by a `tcgen05.st` or `tcgen05.cp`, named by
/// `what`) that thread `tid` issues now against the MMAs and copies of `c`
/// that touch its cells: each must be complete for `tid` (its commit's
/// barrier phase observed) and observed before `tid`'s last
/// `tcgen05.fence::after_thread_sync`. (An MMA after a copy is ordered by
/// the tensor core; a copy or store after an MMA, or after another copy,
/// is not.)
fn write_after_ops(e: &Emu, run: &Run, c: &Cta, tid: usize, r: &Region, what: &str) -> Result<(), (&'static str, String)> {
    if let Some(op) = c.ops.iter().find(|o| o.touches(r) && !run.complete_for(e, tid, &c.ops, o)) {
        let (rule, role) = if op.copy {
            ("TMEM destination of an in-flight tcgen05.cp overwritten", "destination")
        } else {
            ("TMEM operand of an in-flight MMA overwritten", "accumulator")
        };
        return Err((
            rule,
            format!(
                "{what} of {} while {} issued at {} ({role} {}) is not complete for this thread: {}; wait on the barrier its commit arrives on first",
                r.show(),
                op.op,
                op.loc,
                op.d.show(),
                run.why_incomplete(e, op)
            ),
        ));
    }
    if let Some(op) = c.ops.iter().find(|o| o.touches(r) && !run.complete_at_fence(tid, &c.ops, o)) {
        return Err((
            if op.copy {
                "TMEM written after a tcgen05.cp's completion without tcgen05.fence::after_thread_sync"
            } else {
                "TMEM written after an MMA's completion without tcgen05.fence::after_thread_sync"
            },
            format!(
                "{what} of {} over the cells of {} issued at {} ({}): this thread saw the {unit}'s commit arrive, but issued \
                 no tcgen05.fence::after_thread_sync after that wait, so the write is not ordered after the {unit}; {FENCE_AFTER_FIX}",
                r.show(),
                op.op,
                op.loc,
                op.d.show(),
                unit = op.unit()
            ),
        ));
    }
    Ok(())
}

/// Forgets the stores of `c` that `r`, a write ordered after their
/// completion, covers: an access ordered after `r`'s write is ordered after
/// them too.
fn supersede_stores(c: &mut Cta, r: &Region) {
    c.stores.retain(|s| !r.covers(&s.region));
}

/// Executes the MMA `seq` of `cta` (once; the race detector calls it when
/// the operation runs), and before it every earlier pending MMA of the CTA
/// (the tensor core runs them in issue order).
fn execute_one(c: &mut Cta, seq: u64) {
    for i in 0..c.ops.len() {
        if c.ops[i].work.is_none() {
            continue;
        }
        if c.ops[i].seq > seq {
            break;
        }
        let op = &mut c.ops[i];
        let (mut a, a_tmem, b, accumulate, dtype) = match op.work.take().expect("pending") {
            Work::Mma { a, a_tmem, b, accumulate, dtype } => (a, a_tmem, b, accumulate, dtype),
            Work::Copy(cells) => {
                for (lane, col, bits) in cells {
                    c.mem[(lane * COLS + col) as usize] = bits;
                }
                continue;
            }
        };
        let (m, n, k) = (op.m as usize, op.n as usize, op.k as usize);
        if let Some(bf16) = a_tmem {
            // A from TMEM, as it is now (after the copies and MMAs before
            // this one): packed 16-bit pairs, element `k` in column `k / 2`,
            // half `k % 2`, row `i` in the lane the data path puts it.
            let ar = op.a_tmem.expect("A in TMEM");
            a = (0..m * k)
                .map(|x| {
                    let (i, kk) = (x / k, x % k);
                    let cell = c.mem[ar.row_lane(i as u32) as usize * COLS as usize + ar.cols.0 as usize + kk / 2];
                    let bits = (cell >> (16 * (kk % 2))) as u16;
                    if bf16 {
                        half::bf16::from_bits(bits).to_f32()
                    } else {
                        half::f16::from_bits(bits).to_f32()
                    }
                })
                .collect();
        }
        let c0 = op.d.cols.0 as usize;
        // Columns per lane block (the data path layout of M: see
        // `d_region` and `pair_d_region`).
        let per = n / op.fold as usize;
        for i in 0..m {
            let lane = op.d.row_lane(i as u32) as usize;
            for j in 0..n {
                let mut s = 0f32;
                for kk in 0..k {
                    s += a[i * k + kk] * b[j * k + kk];
                }
                let (lane, col) = (lane + (j / per) * op.d.stride as usize, c0 + j % per);
                let cell = &mut c.mem[lane * COLS as usize + col];
                *cell = match dtype {
                    DType::F32 => {
                        let prev = if accumulate { f32::from_bits(*cell) } else { 0.0 };
                        (prev + s).to_bits()
                    }
                    DType::F16 => {
                        let prev = if accumulate { half::f16::from_bits(*cell as u16).to_f32() } else { 0.0 };
                        u32::from(half::f16::from_f32(prev + s).to_bits())
                    }
                    DType::S32 => {
                        let prev = if accumulate { *cell as i32 } else { 0 };
                        prev.wrapping_add(s as i32) as u32
                    }
                };
            }
        }
    }
}

/// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols`:
/// warp-collective (a warp barrier); lane 0 allocates `ncols` columns (a
/// power of two in 32..=512) and writes the TMEM address (lane 0, first
/// column) to the 4 bytes at `.shared::cta` address `dst`.
#[track_caller]
pub fn alloc(dst: u32, ncols: u32) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::alloc") else { return };
    e.warp_sync(tid, loc, "tcgen05.alloc");
    if e.threads[tid].lane == 0 {
        alloc_lane0(&e, tid, loc, dst, ncols);
    }
    // The whole warp leaves the collective after the allocation.
    e.warp_sync(tid, loc, "tcgen05.alloc");
}

fn alloc_lane0(e: &Arc<Emu>, tid: usize, loc: Loc, dst: u32, ncols: u32) {
    let col = with_cta(e, tid, loc, |run, cta| {
        let c = run.ctas.get_mut(&cta).expect("created");
        if !(32..=COLS).contains(&ncols) || !ncols.is_power_of_two() {
            return Err(("TMEM allocation size", format!("tcgen05.alloc of {ncols} columns: the count must be a power of two in 32..={COLS}")));
        }
        if c.relinquished {
            return Err(("tcgen05.alloc after relinquish_alloc_permit", "this CTA gave up its right to allocate TMEM; allocate everything first".to_string()));
        }
        let free = (0..COLS / ncols).map(|i| i * ncols).find(|&s| c.allocs.iter().all(|a| s + ncols <= a.col || a.col + a.ncols <= s));
        match free {
            Some(s) => {
                c.freed.retain(|f| !(f.col < s + ncols && s < f.col + f.ncols));
                c.allocs.push(Alloc { col: s, ncols, loc });
                Ok(s)
            }
            None => {
                let used: u32 = c.allocs.iter().map(|a| a.ncols).sum();
                Err((
                    "TMEM allocation over 512 columns",
                    format!("tcgen05.alloc of {ncols} columns with {used} of {COLS} already allocated in this CTA (on the GPU the allocation would block forever); allocate at most {COLS} columns per CTA"),
                ))
            }
        }
    });
    let p = crate::smem_ptr_range(dst, 4);
    // SAFETY: `smem_ptr_range` checked 4 bytes at `dst` in this CTA's buffer.
    unsafe { (p as *mut u32).write_unaligned(col) };
}

/// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned`: no more
/// allocations in this CTA.
#[track_caller]
pub fn relinquish_alloc_permit() {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::relinquish_alloc_permit") else { return };
    // Warp-collective (`.sync.aligned`): lane 0's alloc comes first.
    e.warp_sync(tid, loc, "tcgen05.relinquish_alloc_permit");
    with_cta(&e, tid, loc, |run, cta| {
        run.ctas.get_mut(&cta).expect("created").relinquished = true;
        Ok(())
    });
}

/// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols`:
/// warp-collective; lane 0 frees the allocation at `taddr`.
#[track_caller]
pub fn dealloc(taddr: u32, ncols: u32) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::dealloc") else { return };
    e.warp_sync(tid, loc, "tcgen05.dealloc");
    if e.threads[tid].lane != 0 {
        return;
    }
    with_cta(&e, tid, loc, |run, cta| {
        let c = run.ctas.get_mut(&cta).expect("created");
        let (_, col) = split(taddr);
        let Some(i) = c.allocs.iter().position(|a| a.col == col && a.ncols == ncols) else {
            return Err((
                "tcgen05.dealloc of columns that are not an allocation",
                format!("dealloc of {ncols} columns at column {col}; allocations: {:?}", c.allocs.iter().map(|a| (a.col, a.ncols)).collect::<Vec<_>>()),
            ));
        };
        let (lo, hi) = (c.allocs[i].col, c.allocs[i].col + c.allocs[i].ncols);
        let freed = Region::rect((0, LANES), (lo, hi));
        if let Some(op) = c.ops.iter().find(|o| o.work.is_some() && o.touches(&freed)) {
            return Err((
                if op.copy { "TMEM freed while a tcgen05.cp into it is pending" } else { "TMEM freed while an MMA on it is pending" },
                format!("{} issued at {} by {} writes {} and has not executed; wait for its commit before freeing", op.op, op.loc, e.who(op.issuer), op.d.show()),
            ));
        }
        if let Some(l) = c.loads.iter().find(|l| l.region.overlaps(&freed)) {
            return Err((
                "TMEM freed while a tcgen05.ld of it is in flight",
                format!("{} loaded at {} by {} with no tcgen05.wait::ld since; wait for the load before freeing", l.region.show(), l.loc, e.who(l.tid)),
            ));
        }
        // Forget what happened in the freed columns: the free is ordered
        // after it (the race detector checks that, below), and a new
        // allocation of them starts clean.
        c.ops.retain(|o| !o.touches(&freed));
        c.loads.retain(|l| !l.region.overlaps(&freed));
        c.done_loads.retain(|(l, _)| !l.region.overlaps(&freed));
        c.stores.retain(|s| !s.region.overlaps(&freed));
        let a = c.allocs.remove(i);
        c.freed.retain(|f| !(f.col < hi && lo < f.col + f.ncols));
        c.freed.push(Alloc { loc, ..a });
        Ok(())
    });
    // The free is a write of every cell for the race detector: an MMA, copy,
    // load or store of another thread not ordered before it (by its commit's
    // barrier and a thread sync, or a thread sync after its wait) races
    // with it.
    let (_, col) = split(taddr);
    let cta = e.threads[tid].cta;
    for lane in 0..LANES {
        let (lo, hi) = lane_bytes(lane, (col, col + ncols));
        e.ordinary_access(tid, loc, Space::Tmem { cta }, lo, hi, true);
    }
}

/// The `tcgen05.ld` / `tcgen05.st` data-movement shapes and their
/// fragment maps ([`Shape::cell`]), defined in `kernel-spec`.
pub use kernel_spec::tmem_frag::Shape;

/// Checks a `shape` load or store of `nregs` registers per thread at
/// `taddr` by the calling thread and returns its cells, register by
/// register (absolute lane, column). A warp reaches only its lane quarter
/// (warp `w` of its warpgroup: lanes `32 (w % 4) ..+ 32`, the PTX ISA's
/// tcgen05 chapter on which warp may access which TMEM lanes): a 32-lane
/// shape its whole quarter from its first lane, a 16-lane shape one half
/// of it (from lane `32 (w % 4)` or `32 (w % 4) + 16`: the emulator's
/// reading, CUTLASS's "half-subpartition" TMEM atoms; other offsets are
/// reported).
fn thread_cells(e: &Emu, tid: usize, shape: Shape, taddr: u32, nregs: u32, what: &str) -> Result<Vec<(u32, u32)>, (&'static str, String)> {
    let per = shape.regs_per_rep();
    let reps = nregs / per;
    assert!(
        nregs.is_multiple_of(per) && reps.is_power_of_two() && reps <= shape.max_reps(),
        "{what}: {nregs} registers is not a repetition count of .{} ({per} registers per repetition, .x1 to .x{})",
        shape.name(),
        shape.max_reps()
    );
    let (lane0, col) = split(taddr);
    let q = (e.threads[tid].warp % 4) as u32;
    let off = lane0.wrapping_sub(32 * q);
    let ok = if shape.lanes() == 32 { off == 0 } else { off == 0 || off == 16 };
    if !ok {
        let starts = if shape.lanes() == 32 { format!("lane {}", 32 * q) } else { format!("lane {} or {}", 32 * q, 32 * q + 16) };
        return Err((
            "TMEM lane quarter of another warp",
            format!(
                "{what} at lane {lane0} by warp {} (warp {q} of its warpgroup), which may access only lanes {}..{}; \
                 warp w of a warpgroup reads rows 32 (w % 4) .. 32 (w % 4) + 32 of a tile (a {}-lane .{} access starts at {starts})",
                e.threads[tid].warp,
                32 * q,
                32 * q + 32,
                shape.lanes(),
                shape.name()
            ),
        ));
    }
    let l = e.threads[tid].lane;
    Ok((0..nregs)
        .map(|r| {
            let (dl, dc) = shape.cell(l, r);
            (lane0 + dl, col + dc)
        })
        .collect())
}

/// The cells as regions: runs of consecutive columns of one lane.
fn cell_regions(cells: &[(u32, u32)]) -> Vec<Region> {
    let mut sorted = cells.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<Region> = Vec::new();
    for (lane, col) in sorted {
        match out.last_mut() {
            Some(r) if r.lanes.0 == lane && r.cols.1 == col => r.cols.1 += 1,
            _ => out.push(Region::rect((lane, lane + 1), (col, col + 1))),
        }
    }
    out
}

/// `tcgen05.ld.sync.aligned.32x32b.xN.b32`: thread `l` of the warp reads
/// `out.len()` consecutive cells of TMEM lane `(taddr >> 16) + l` from
/// column `taddr & 0xffff`. In flight until [`wait_ld`].
#[track_caller]
pub fn ld_32x32b(taddr: u32, out: &mut [u32]) {
    ld(Shape::S32x32b, taddr, out)
}

/// `tcgen05.st.sync.aligned.32x32b.xN.b32`: thread `l` of the warp writes
/// `vals` to TMEM lane `(taddr >> 16) + l` from column `taddr & 0xffff`. In
/// flight until [`wait_st`].
#[track_caller]
pub fn st_32x32b(taddr: u32, vals: &[u32]) {
    st(Shape::S32x32b, taddr, vals)
}

/// `tcgen05.ld.sync.aligned.{shape}.xN.b32` (`N` = `out.len()` / the
/// shape's registers per repetition): register `r` of the calling thread
/// reads the cell [`Shape::cell`] gives, relative to `taddr`. In flight
/// until [`wait_ld`]. Checked as the module docs say, cell by cell: every
/// region of the thread's fragment.
#[track_caller]
pub fn ld(shape: Shape, taddr: u32, out: &mut [u32]) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::ld") else { return };
    e.yield_point(tid, "tcgen05.ld", loc);
    let n = out.len() as u32;
    let what = format!("tcgen05.ld.{}", shape.name());
    let rs = with_cta(&e, tid, loc, |run, cta| {
        let cells = thread_cells(&e, tid, shape, taddr, n, &what)?;
        let rs = cell_regions(&cells);
        let c = &run.ctas[&cta];
        for r in &rs {
            inside_alloc(c, r, &what)?;
        }
        for r in &rs {
            if let Some(op) = c.ops.iter().find(|o| o.writes_overlap(r) && !run.complete_for(&e, tid, &c.ops, o)) {
                return Err((
                    if op.copy { "TMEM read before the tcgen05.cp that writes it completed" } else { "TMEM read before the MMA that writes it completed" },
                    format!(
                        "{what} of {} reads the {} of {} issued at {} ({}), which is not complete for this thread: {}",
                        r.show(),
                        if op.copy { "destination" } else { "accumulator" },
                        op.op,
                        op.loc,
                        op.d.show(),
                        run.why_incomplete(&e, op)
                    ),
                ));
            }
            if let Some(op) = c.ops.iter().find(|o| o.writes_overlap(r) && !run.complete_at_fence(tid, &c.ops, o)) {
                return Err((
                    if op.copy {
                        "TMEM read after a tcgen05.cp's completion without tcgen05.fence::after_thread_sync"
                    } else {
                        "TMEM read after an MMA's completion without tcgen05.fence::after_thread_sync"
                    },
                    format!(
                        "{what} of {} reads the cells of {} issued at {} ({}): this thread saw the {unit}'s commit arrive, but issued no \
                         tcgen05.fence::after_thread_sync after that wait, so the load is not ordered after the {unit}; {FENCE_AFTER_FIX}",
                        r.show(),
                        op.op,
                        op.loc,
                        op.d.show(),
                        unit = op.unit()
                    ),
                ));
            }
            if let Some((s, why)) = unfinished_store(&e, c, tid, r) {
                return Err((
                    "TMEM accessed before the tcgen05.st that writes it completed",
                    format!("{what} of {} reads {} stored at {} by {}, and {why}; {STORE_FIX}", r.show(), s.region.show(), s.loc, e.who(s.tid)),
                ));
            }
        }
        let c = run.ctas.get_mut(&cta).expect("created");
        for (v, &(lane, col)) in out.iter_mut().zip(&cells) {
            *v = c.mem[(lane * COLS + col) as usize];
        }
        c.loads.extend(rs.iter().map(|&region| Access { tid, region, loc }));
        Ok(rs)
    });
    for r in &rs {
        let (lo, hi) = lane_bytes(r.lanes.0, r.cols);
        e.ordinary_access(tid, loc, Space::Tmem { cta: e.threads[tid].cta }, lo, hi, false);
    }
}

/// `tcgen05.st.sync.aligned.{shape}.xN.b32`: register `r` of the calling
/// thread (`vals[r]`) is written to the cell [`Shape::cell`] gives,
/// relative to `taddr`. In flight until [`wait_st`]. Checked as the module
/// docs say, region by region of the thread's fragment.
#[track_caller]
pub fn st(shape: Shape, taddr: u32, vals: &[u32]) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::st") else { return };
    e.yield_point(tid, "tcgen05.st", loc);
    let what = format!("tcgen05.st.{}", shape.name());
    let rs = with_cta(&e, tid, loc, |run, cta| {
        let cells = thread_cells(&e, tid, shape, taddr, vals.len() as u32, &what)?;
        let rs = cell_regions(&cells);
        let c = &run.ctas[&cta];
        for r in &rs {
            inside_alloc(c, r, &what)?;
        }
        for r in &rs {
            if let Some(l) = c.loads.iter().find(|l| l.region.overlaps(r)) {
                return Err((
                    "TMEM overwritten while an in-flight tcgen05.ld reads it",
                    format!(
                        "{what} of {} over {} loaded at {} by {} with no tcgen05.wait::ld (the load's `.wait()`, or `wait_load_tmem`) since",
                        r.show(),
                        l.region.show(),
                        l.loc,
                        e.who(l.tid)
                    ),
                ));
            }
            write_after_ops(&e, run, c, tid, r, &what)?;
            if let Some((s, why)) = unfinished_store(&e, c, tid, r) {
                return Err((
                    "TMEM accessed before the tcgen05.st that writes it completed",
                    format!("{what} of {} overwrites {} stored at {} by {}, and {why}; {STORE_FIX}", r.show(), s.region.show(), s.loc, e.who(s.tid)),
                ));
            }
        }
        let Run { ctas, before_fences, after_views, .. } = &mut *run;
        let c = ctas.get_mut(&cta).expect("created");
        for r in &rs {
            fenced_after_other_threads(&e, before_fences, after_views, c, tid, r, &what, (true, false))?;
        }
        for (v, &(lane, col)) in vals.iter().zip(&cells) {
            c.mem[(lane * COLS + col) as usize] = *v;
        }
        for &region in &rs {
            supersede_stores(c, &region);
            c.stores.push(Store { tid, region, loc, waited: None });
        }
        Ok(rs)
    });
    for r in &rs {
        let (lo, hi) = lane_bytes(r.lanes.0, r.cols);
        e.ordinary_access(tid, loc, Space::Tmem { cta: e.threads[tid].cta }, lo, hi, true);
    }
}

/// `tcgen05.wait::ld.sync.aligned`: this thread's loads are done.
/// Warp-collective (`.sync.aligned`): a warp barrier after the thread's
/// loads end, so each lane leaves it with every lane's loads done (a
/// `.16x*` load reads one TMEM lane into several threads' registers).
#[track_caller]
pub fn wait_ld() {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::wait_ld") else { return };
    e.yield_point(tid, "tcgen05.wait::ld", loc);
    let clock = e.clock_of(tid, tid);
    let ended = with_cta(&e, tid, loc, |run, cta| {
        let c = run.ctas.get_mut(&cta).expect("created");
        let (mine, rest): (Vec<Access>, Vec<Access>) = c.loads.drain(..).partition(|l| l.tid == tid);
        c.loads = rest;
        let ended: Vec<(Region, Loc)> = mine.iter().map(|l| (l.region, l.loc)).collect();
        for l in mine {
            // A newer finished load of the same cells by the same thread
            // replaces the older one.
            c.done_loads.retain(|(d, _)| !(d.tid == tid && l.region.covers(&d.region)));
            c.done_loads.push((l, clock));
        }
        Ok(ended)
    });
    // Each load read its cells from its issue until now: its read counts
    // at this clock too, so a write handed over by a synchronization before
    // this wait (not after it) races with the load on every schedule
    // (module docs, "Loads and stores").
    let cta = e.threads[tid].cta;
    for (r, lloc) in ended {
        let (lo, hi) = lane_bytes(r.lanes.0, r.cols);
        e.inflight_read_end(tid, lloc, Space::Tmem { cta }, lo, hi);
    }
    e.warp_sync(tid, loc, "tcgen05.wait::ld");
}

/// Checks that a tcgen05 write of `r` by thread `w` (an MMA's accumulator,
/// a copy's destination, a store) is ordered after other threads' finished
/// loads of those cells by the tcgen05 fences, and, for the cells other
/// threads stored (`reads_stores`: an MMA's operands), after their stores
/// by the writer's `fence::after_thread_sync`. A load or store not ordered
/// before the write at all is left to the race detector. Loads that pass
/// are forgotten.
#[allow(clippy::too_many_arguments)]
fn fenced_after_other_threads(
    e: &Emu,
    before_fences: &HashMap<usize, Vec<u32>>,
    after_views: &HashMap<usize, HashMap<usize, u32>>,
    c: &mut Cta,
    w: usize,
    r: &Region,
    what: &str,
    (writes, reads_stores): (bool, bool),
) -> Result<(), (&'static str, String)> {
    let view = after_views.get(&w);
    let seen_fence = |t: usize| view.and_then(|v| v.get(&t)).copied().unwrap_or(0);
    let mut passed = Vec::new();
    for (i, (l, waited)) in c.done_loads.iter().enumerate() {
        // A load of the writer's own warp is ordered by the warp-collective
        // `tcgen05.wait::ld` (a 16-lane shape reads lanes other threads of
        // the warp write).
        let same_warp = e.threads[l.tid].cta == e.threads[w].cta && e.threads[l.tid].warp == e.threads[w].warp;
        if !writes || same_warp || !l.region.overlaps(r) {
            continue;
        }
        let known = e.clock_of(w, l.tid);
        if known < *waited {
            continue;
        }
        let fence = before_fences.get(&l.tid).and_then(|f| f.iter().find(|&&f| f >= *waited && f <= known)).copied();
        match fence {
            None => {
                return Err((
                    "TMEM written after another thread's tcgen05.ld without tcgen05.fence::before_thread_sync",
                    format!(
                        "{what} of {} over {} loaded at {} by {}, which issued no tcgen05.fence::before_thread_sync between its tcgen05.wait::ld \
                         and the synchronization that orders it before this write, so the tensor core may write the cells before the load read them; \
                         arrive on a tensor-core barrier (`Barrier<TensorCore>::arrive` issues the fence), or call \
                         tcgen05::raw::fence_before_thread_sync() after the loads' wait and before the barrier",
                        r.show(),
                        l.region.show(),
                        l.loc,
                        e.who(l.tid)
                    ),
                ));
            }
            Some(f) if seen_fence(l.tid) < f => {
                return Err((
                    "TMEM written after another thread's tcgen05.ld without tcgen05.fence::after_thread_sync",
                    format!(
                        "{what} of {} over {} loaded at {} by {}: the loading thread fenced (tcgen05.fence::before_thread_sync) and synchronized with this \
                         thread, but this thread issued no tcgen05.fence::after_thread_sync after that synchronization and before the write; {FENCE_AFTER_FIX}",
                        r.show(),
                        l.region.show(),
                        l.loc,
                        e.who(l.tid)
                    ),
                ));
            }
            Some(_) => passed.push(i),
        }
    }
    if reads_stores {
        for s in c.stores.iter().filter(|s| !(e.threads[s.tid].cta == e.threads[w].cta && e.threads[s.tid].warp == e.threads[w].warp) && s.region.overlaps(r)) {
            let Some((waited, wloc)) = s.waited else { continue };
            if e.clock_of(w, s.tid) < waited {
                continue;
            }
            // `commit_tmem` fences right after its wait.
            let fence = before_fences.get(&s.tid).and_then(|f| f.iter().find(|&&f| f >= waited)).copied();
            if fence.is_some_and(|f| seen_fence(s.tid) < f) {
                return Err((
                    "TMEM read by an MMA after another thread's tcgen05.st without tcgen05.fence::after_thread_sync",
                    format!(
                        "{what} reads {} stored at {} by {} (committed at {wloc}) with no tcgen05.fence::after_thread_sync in this thread after the \
                         synchronization that orders the store before it; {FENCE_AFTER_FIX}",
                        s.region.show(),
                        s.loc,
                        e.who(s.tid)
                    ),
                ));
            }
        }
    }
    for i in passed.into_iter().rev() {
        let (l, _) = &c.done_loads[i];
        if r.covers(&l.region) {
            c.done_loads.remove(i);
        }
    }
    Ok(())
}

/// `tcgen05.wait::st.sync.aligned`: this thread's stores are done (and,
/// with the tcgen05 fences and a thread sync, visible to the tensor core).
/// Warp-collective (`.sync.aligned`): the stores complete at the thread's
/// clock before a warp barrier, so every lane of the warp leaves it
/// ordered after all the warp's stores (a `.16x*` store writes one TMEM
/// lane from several threads' registers).
#[track_caller]
pub fn wait_st() {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::wait_st") else { return };
    e.yield_point(tid, "tcgen05.wait::st", loc);
    let clock = e.clock_of(tid, tid);
    with_cta(&e, tid, loc, |run, cta| {
        for s in run.ctas.get_mut(&cta).expect("created").stores.iter_mut().filter(|s| s.tid == tid && s.waited.is_none()) {
            s.waited = Some((clock, loc));
        }
        Ok(())
    });
    e.warp_sync(tid, loc, "tcgen05.wait::st");
}

/// `tcgen05.fence::before_thread_sync`: orders this thread's earlier
/// tcgen05 operations before its following thread syncs (barrier arrivals,
/// `bar.sync`). Recorded when the thread issued MMAs: another thread that
/// syncs with it after this fence and then calls
/// [`fence_after_thread_sync`] issues MMAs that the tensor core runs after
/// them (module docs).
#[track_caller]
pub fn fence_before_thread_sync() {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::fence_before_thread_sync") else { return };
    e.yield_point(tid, "tcgen05.fence::before_thread_sync", loc);
    let clock = e.clock_of(tid, tid);
    let mut g = runs();
    let Some(run) = g.as_mut().and_then(|m| m.get_mut(&key(&e))) else { return };
    let fences = run.before_fences.entry(tid).or_default();
    if fences.last() != Some(&clock) {
        fences.push(clock);
    }
    if let Some(&seq) = run.last_mma.get(&tid) {
        let fences = run.fenced.entry(tid).or_default();
        if fences.last().is_none_or(|&(_, s)| s != seq) {
            fences.push((clock, seq));
        }
    }
}

/// `tcgen05.fence::after_thread_sync`: orders this thread's following
/// tcgen05 operations after its preceding thread syncs: records what the
/// thread knows of the MMA issuers' fences (module docs).
#[track_caller]
pub fn fence_after_thread_sync() {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::fence_after_thread_sync") else { return };
    e.yield_point(tid, "tcgen05.fence::after_thread_sync", loc);
    let (issuers, barriers, fencers): (Vec<usize>, Vec<(usize, u32)>, Vec<usize>) = {
        let g = runs();
        match g.as_ref().and_then(|m| m.get(&key(&e))) {
            Some(run) => (
                run.fenced.keys().copied().filter(|&a| a != tid).collect(),
                run.commits.iter().map(|c| (c.cta, c.off)).collect(),
                run.before_fences.keys().copied().filter(|&a| a != tid).collect(),
            ),
            None => return,
        }
    };
    let seen: HashMap<(usize, u32), (u64, i64)> = barriers.iter().filter_map(|&(cta, off)| e.mbar_observed(tid, cta, off).map(|o| ((cta, off), o))).collect();
    let view: HashMap<usize, u32> = issuers.iter().map(|&a| (a, e.clock_of(tid, a))).collect();
    let after_view: HashMap<usize, u32> = fencers.iter().map(|&a| (a, e.clock_of(tid, a))).collect();
    if let Some(run) = runs().as_mut().and_then(|m| m.get_mut(&key(&e))) {
        if !view.is_empty() {
            run.views.insert(tid, view);
        }
        run.fence_seen.insert(tid, seen);
        run.after_views.insert(tid, after_view);
    }
}

/// `tcgen05.mma.cta_group::1`: issued by the calling thread; see the
/// module docs for when it executes and completes.
#[track_caller]
pub fn mma(issue: MmaIssue<'_>) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::mma") else { return };
    e.yield_point(tid, "tcgen05.mma", loc);
    let MmaIssue { d, a, b, m, n, k, accumulate, dtype, smem_reads, op } = issue;
    let (seq, cta, dr, ar, after_ids) = with_cta(&e, tid, loc, |run, cta| {
        let dr = d_region(d, m, n, op)?;
        let ar = match &a {
            AOperand::Tmem { taddr, .. } => Some(d_region(*taddr, m, k / 2, op)?),
            AOperand::Smem(_) => None,
        };
        let c = &run.ctas[&cta];
        inside_alloc(c, &dr, op)?;
        if let Some(ar) = &ar {
            inside_alloc(c, ar, op)?;
        }
        for (what, r) in [("accumulator", Some(dr)), ("A operand", ar)] {
            let Some(r) = r else { continue };
            if let Some((s, why)) = unfinished_store(&e, c, tid, &r) {
                return Err((
                    "TMEM store then MMA without commit_tmem",
                    format!(
                        "{op} reads its {what} ({}), which {} stored at {}, and {why}; call commit_tmem() after the stores and sync before issuing the MMA",
                        r.show(),
                        e.who(s.tid),
                        s.loc
                    ),
                ));
            }
        }
        if let Some(l) = c.loads.iter().find(|l| l.region.overlaps(&dr)) {
            return Err((
                "TMEM overwritten while an in-flight tcgen05.ld reads it",
                format!("{op} writes {} over {} loaded at {} by {} with no tcgen05.wait::ld (the load's `.wait()`, or `wait_load_tmem`) since", dr.show(), l.region.show(), l.loc, e.who(l.tid)),
            ));
        }
        // A from TMEM is read when the MMA executes (after a copy into it
        // issued before, which the tensor core runs first).
        let (a_vals, a_tm) = match a {
            AOperand::Smem(v) => {
                assert_eq!(v.len(), (m * k) as usize, "{op}: A must hold M x K values");
                (v, None)
            }
            AOperand::Tmem { bf16, .. } => (Vec::new(), Some(bf16)),
        };
        assert_eq!(b.len(), (n * k) as usize, "{op}: B must hold N x K values");
        {
            // Other threads' loads of the accumulator, and their stores of
            // the operands, are ordered before this MMA by the fences.
            let Run { ctas, before_fences, after_views, .. } = &mut *run;
            let c = ctas.get_mut(&cta).expect("created");
            fenced_after_other_threads(&e, before_fences, after_views, c, tid, &dr, op, (true, accumulate))?;
            if let Some(ar) = &ar {
                fenced_after_other_threads(&e, before_fences, after_views, c, tid, ar, op, (false, true))?;
            }
        }
        // Only MMAs of this CTA (cta_group::1): the fences order the
        // issuing CTA's tensor core.
        let (seq, after, after_ids) = run.next_op(tid, cta);
        let c = run.ctas.get_mut(&cta).expect("created");
        supersede_stores(c, &dr);
        c.ops.push(Op {
            seq,
            issuer: tid,
            loc,
            op,
            m,
            n,
            k,
            d: dr,
            fold: 1,
            a_tmem: ar,
            copy: false,
            work: Some(Work::Mma { a: a_vals, a_tmem: a_tm, b, accumulate, dtype }),
            after,
            race_id: None,
        });
        Ok((seq, cta, dr, ar, after_ids))
    });
    // The race detector runs the MMA (the effect) at a seeded point before
    // the issuing thread's next commit arrives (after the MMAs of other
    // threads that the fences order before it); its SMEM and TMEM operands
    // are checked as reads, its accumulator as a write, at that point.
    let id = issue_tracked(&e, tid, loc, op, cta, seq, smem_reads, ar.as_ref(), &[dr], &after_ids);
    set_race_id(&e, cta, seq, id);
}

/// One `tcgen05.cp.cta_group::1` as issued: the source rows decoded by the
/// caller (`rows[r]` holds row `r`'s `shape.words()` 32-bit words).
pub struct CpIssue<'a> {
    /// Destination TMEM address (lane, first column).
    pub taddr: u32,
    pub shape: kernel_spec::desc_tcgen05::CpShape,
    pub rows: Vec<Vec<u32>>,
    /// The SMEM byte ranges (of the issuing CTA) the source occupies.
    pub smem_reads: &'a [Range],
    /// The operation, for reports.
    pub op: &'static str,
}

/// `tcgen05.cp.cta_group::1.<shape> [taddr], s_desc`: issued by the calling
/// thread, asynchronous like an MMA. Row `r` of the source goes to the
/// lanes `shape.lanes(r)` (from the destination's lane) at columns
/// `col .. col + words`. It is checked as a TMEM write at issue (inside the
/// allocation; no in-flight load, store, MMA or copy over its cells that is
/// not complete for the issuer) and registered with the race detector as a
/// tracked operation that reads its SMEM source and writes its cells,
/// executed in issue order with the thread's MMAs (so an MMA issued after
/// it reads the copied data: the tensor core pipelines a copy before an
/// MMA) and completed by the thread's next commit. Across threads it is
/// ordered by the tcgen05 fences and a thread sync like an MMA.
#[track_caller]
pub fn cp(issue: CpIssue<'_>) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::cp") else { return };
    e.yield_point(tid, "tcgen05.cp", loc);
    let CpIssue { taddr, shape, rows, smem_reads, op } = issue;
    let (seq, cta, regions, after_ids) = with_cta(&e, tid, loc, |run, cta| {
        let (lane0, col) = split(taddr);
        let words = shape.words();
        let lane_ok = if shape == kernel_spec::desc_tcgen05::CpShape::S4x256b { lane0 < 32 } else { lane0 == 0 };
        if !lane_ok {
            return Err((
                "tcgen05.cp destination lane",
                format!(
                    "{op} at TMEM lane {lane0}: the .{} shape writes {}; its address must be at lane 0 (the column part chooses where)",
                    shape.ptx(),
                    if shape == kernel_spec::desc_tcgen05::CpShape::S4x256b { "one lane in each lane quarter, so lane < 32" } else { "every lane quarter" }
                ),
            ));
        }
        assert_eq!(rows.len(), shape.rows() as usize, "{op}: the source must hold the shape's rows");
        let regions: Vec<Region> = if shape == kernel_spec::desc_tcgen05::CpShape::S4x256b {
            vec![Region { lanes: (lane0, lane0 + 1), cols: (col, col + words), reps: 4, stride: 32 }]
        } else {
            vec![Region::rect((0, LANES), (col, col + words))]
        };
        let c = &run.ctas[&cta];
        for r in &regions {
            inside_alloc(c, r, op)?;
            if let Some(l) = c.loads.iter().find(|l| l.region.overlaps(r)) {
                return Err((
                    "TMEM overwritten while an in-flight tcgen05.ld reads it",
                    format!("{op} writes {} over {} loaded at {} by {} with no tcgen05.wait::ld (the load's `.wait()`, or `wait_load_tmem`) since", r.show(), l.region.show(), l.loc, e.who(l.tid)),
                ));
            }
            write_after_ops(&e, run, c, tid, r, op)?;
            if let Some((s, why)) = unfinished_store(&e, c, tid, r) {
                return Err((
                    "TMEM accessed before the tcgen05.st that writes it completed",
                    format!("{op} overwrites {} stored at {} by {}, and {why}; {STORE_FIX}", s.region.show(), s.loc, e.who(s.tid)),
                ));
            }
        }
        {
            let Run { ctas, before_fences, after_views, .. } = &mut *run;
            let c = ctas.get_mut(&cta).expect("created");
            for r in &regions {
                fenced_after_other_threads(&e, before_fences, after_views, c, tid, r, op, (true, false))?;
            }
        }
        let mut cells = Vec::with_capacity(rows.len() * 4 * words as usize);
        for (r, vals) in rows.iter().enumerate() {
            assert_eq!(vals.len(), words as usize, "{op}: a source row holds the shape's words");
            let (lanes, n) = shape.lanes(r as u32);
            for &l in &lanes[..n] {
                for (w, &bits) in vals.iter().enumerate() {
                    cells.push((lane0 + l, col + w as u32, bits));
                }
            }
        }
        let (seq, after, after_ids) = run.next_op(tid, cta);
        let c = run.ctas.get_mut(&cta).expect("created");
        for r in &regions {
            supersede_stores(c, r);
        }
        c.ops.push(Op {
            seq,
            issuer: tid,
            loc,
            op,
            m: 0,
            n: 0,
            k: 0,
            d: regions[0],
            fold: 1,
            a_tmem: None,
            copy: true,
            work: Some(Work::Copy(cells)),
            after,
            race_id: None,
        });
        Ok((seq, cta, regions, after_ids))
    });
    let id = issue_tracked(&e, tid, loc, op, cta, seq, smem_reads, None, &regions, &after_ids);
    set_race_id(&e, cta, seq, id);
}

/// The TMEM cells of a cta_group::1 MMA operand of `m` rows and `ncols`
/// columns at `taddr` (the accumulator, or A from TMEM), by the PTX ISA's
/// data path layout organization (tcgen05 chapter, "Data path layout
/// organization"; the same as CUTLASS's `tmem_frg_1sm` atoms):
///
/// * M = 128 (layout D): row `i` in lane `i`, all 128 lanes from lane 0;
/// * M = 64 (layout F, not `.ws`): half of each lane quarter, row `i` in
///   lane `lane(taddr) + 32 (i / 16) + i % 16`, with `lane(taddr)` 0 (lanes
///   0..16 of each quarter) or 16 (lanes 16..32: a second M = 64
///   accumulator in the same columns, CUTLASS's interleaved allocation).
///
/// Column `j` of the operand is column `col(taddr) + j` in both.
fn d_region(taddr: u32, m: u32, ncols: u32, op: &str) -> Result<Region, (&'static str, String)> {
    let (lane, col) = split(taddr);
    let cols = (col, col + ncols);
    match (m, lane) {
        (128, 0) => Ok(Region::rect((0, 128), cols)),
        (64, 0 | 16) => Ok(Region { lanes: (lane, lane + 16), cols, reps: 4, stride: 32 }),
        _ => Err((
            "not emulated",
            format!(
                "{op}: M = {m} at TMEM lane {lane}; the emulator models the cta_group::1 data paths of M = 128 (row i in lane i, from lane 0) \
                 and M = 64 (16 rows per lane quarter, from lane 0 or 16)"
            ),
        )),
    }
}

/// Records the race detector's id of MMA `seq` of CTA `cta`.
fn set_race_id(e: &Arc<Emu>, cta: usize, seq: u64, id: usize) {
    if let Some(o) = runs().as_mut().and_then(|m| m.get_mut(&key(e))).and_then(|r| r.ctas.get_mut(&cta)).and_then(|c| c.ops.iter_mut().find(|o| o.seq == seq)) {
        o.race_id = Some(id);
    }
}

/// Registers operation `seq` of CTA `cta` (an MMA or copy pushed to its
/// `ops`) as a tracked asynchronous operation of `tid`: reads `smem_reads`
/// of that CTA's SMEM and the TMEM A operand `a`, writes the cells `d` (the
/// accumulator, or a copy's destination); its effect executes it; it runs
/// after the operations `after` (race detector ids). Returns its id.
#[allow(clippy::too_many_arguments)]
fn issue_tracked(e: &Arc<Emu>, tid: usize, loc: Loc, op: &str, cta: usize, seq: u64, smem_reads: &[Range], a: Option<&Region>, d: &[Region], after: &[usize]) -> usize {
    let mut reads: Vec<(Space, u64, u64)> = smem_reads.iter().map(|&(lo, hi)| (Space::Smem { cta }, u64::from(lo), u64::from(hi))).collect();
    if let Some(a) = a {
        reads.extend(region_ranges(cta, a));
    }
    let run_key = key(e);
    let effect = move || {
        let mut g = runs();
        if let Some(c) = g.as_mut().and_then(|m| m.get_mut(&run_key)).and_then(|r| r.ctas.get_mut(&cta)) {
            execute_one(c, seq);
        }
    };
    e.async_issue_after(
        tid,
        loc,
        AsyncOp { kind: op.to_string(), copies: Vec::new(), reads, writes: d.iter().flat_map(|r| region_ranges(cta, r)).collect(), effect: Some(Box::new(effect)), completion: Completion::Tracked },
        after,
    )
}

/// `tcgen05.commit.cta_group::1.mbarrier::arrive::one`: once every
/// tcgen05 operation the calling thread issued has executed, one arrival on
/// the mbarrier at `bar` (`.shared::cta` or `.shared::cluster` address).
#[track_caller]
pub fn commit(bar: u32) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::commit") else { return };
    e.yield_point(tid, "tcgen05.commit", loc);
    let (bcta, off) = e.decode_or_misuse(tid, loc, bar);
    let phase = e.mbar_phase(bcta, off);
    with_cta(&e, tid, loc, |run, _cta| {
        if let Some((epoch, phase)) = phase {
            run.next_seq += 1;
            let seq = run.next_seq;
            run.commits.push(Commit { issuer: tid, seq, cta: bcta, off, epoch, phase });
        }
        Ok(())
    });
    // Runs this thread's tracked MMAs, then arrives (an uninitialized
    // barrier is reported by the arrival).
    e.commit_arrive(tid, loc, bar, "tcgen05.commit");
}

/// Ends the run's TMEM state: returns the "not freed" error of a run that
/// finished (`check`), and forgets the state either way.
pub(crate) fn end_run(e: &Arc<Emu>, check: bool) -> Option<EmuError> {
    let run = runs().as_mut().and_then(|m| m.remove(&key(e)))?;
    if !check {
        return None;
    }
    let mut lines = Vec::new();
    let mut ctas: Vec<_> = run.ctas.iter().collect();
    ctas.sort_by_key(|(c, _)| **c);
    for (&cta, c) in ctas {
        for a in &c.allocs {
            lines.push(format!(
                "cta {}: columns {}..{} allocated at {} were not freed",
                crate::error::fmt3(e.ctas[cta].idx),
                a.col,
                a.col + a.ncols,
                a.loc
            ));
        }
    }
    (!lines.is_empty()).then(|| EmuError::Misuse {
        kernel: e.kernel.clone(),
        rule: "TMEM allocation not freed when the kernel ended".to_string(),
        where_: "kernel end".to_string(),
        detail: format!("{} (tcgen05.dealloc every allocation before exit)", lines.join("; ")),
    })
}

/// For tests: the calling thread's TMEM cell (lane, column).
pub fn peek(lane: u32, col: u32) -> u32 {
    let (e, tid) = ctx("tmem::peek");
    let g = runs();
    g.as_ref()
        .and_then(|m| m.get(&key(&e)))
        .and_then(|r| r.ctas.get(&e.threads[tid].cta))
        .map(|c| c.mem[(lane * COLS + col) as usize])
        .unwrap_or(0)
}

// ----- collective (cta_group::2) MMA and multicast commit ----------------------

/// `tcgen05.mma.cta_group::2` (M = 256, or M = 128: `issue.m` is the rows
/// per CTA, 128 or 64) issued by the calling thread of the pair's leader:
/// `issue` is the leader's half (its `M / 2` rows of A, the whole `N x K` B
/// gathered from both CTAs, the accumulator at `issue.d` of its TMEM);
/// `peer_a` the peer's rows of A, whose accumulator rows go to the same
/// TMEM address of CTA `peer_rank` of the cluster. Each CTA's rows are laid
/// out by the data path of M (module docs, "Data paths"). Each half is
/// checked as [`mma`] checks its operation (allocation, TMEM stores and
/// loads not waited for, in that CTA) and becomes one tracked asynchronous
/// operation of the issuing thread, which its next commit (local or
/// multicast) completes; the race detector sees each half's SMEM operand
/// reads and accumulator write in its own CTA.
#[track_caller]
pub fn mma_pair(issue: MmaIssue<'_>, peer_rank: u32, peer_a: Vec<f32>, peer_smem_reads: &[Range]) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::mma_pair") else { return };
    e.yield_point(tid, "tcgen05.mma.cta_group::2", loc);
    let MmaIssue { d, a, b, m, n, k, accumulate, dtype, smem_reads, op } = issue;
    let AOperand::Smem(a_own) = a else { panic!("{op}: the pair MMA takes A from SMEM") };
    let own_cta = e.threads[tid].cta;
    if e.ctas[own_cta].rank % 2 != 0 {
        e.misuse(
            e.lock(),
            tid,
            loc,
            "collective MMA issued by the peer CTA",
            format!("{op} issued by a thread of cluster rank {} (odd): only the leader (even rank) of a CTA pair issues collective MMAs; predicate the MMA warp on `pair_rank() == 0`", e.ctas[own_cta].rank),
        );
    }
    let Some(&peer_cta) = e.clusters[e.ctas[own_cta].cluster].ctas.get(peer_rank as usize) else {
        e.misuse(e.lock(), tid, loc, "CTA rank outside the cluster", format!("{op}: the peer CTA (rank {peer_rank}) is not in this cluster"));
    };
    let (dr, seqs) = with_cta(&e, tid, loc, |run, _cta| {
        let (dr, fold) = pair_d_region(d, m, n, op)?;
        for (c, who) in [(own_cta, "this CTA"), (peer_cta, "the peer CTA")] {
            let Some(cs) = run.ctas.get(&c) else {
                return Err(("TMEM access outside an allocation", format!("{op} writes {} of {who}, which has allocated no tensor memory", dr.show())));
            };
            inside_alloc(cs, &dr, op).map_err(|(r, d)| (r, format!("{d} ({who})")))?;
            if let Some((s, why)) = unfinished_store(&e, cs, tid, &dr) {
                return Err((
                    "TMEM store then MMA without commit_tmem",
                    format!("{op} writes {} of {who}, which {} stored at {}, and {why}; {STORE_FIX}", dr.show(), e.who(s.tid), s.loc),
                ));
            }
            if let Some(l) = cs.loads.iter().find(|l| l.region.overlaps(&dr)) {
                return Err((
                    "TMEM overwritten while an in-flight tcgen05.ld reads it",
                    format!("{op} writes {} of {who} over {} loaded at {} by {} with no tcgen05.wait::ld (the load's `.wait()`, or `wait_load_tmem`) since", dr.show(), l.region.show(), l.loc, e.who(l.tid)),
                ));
            }
        }
        assert_eq!(b.len(), (n * k) as usize, "{op}: B must hold N x K values");
        {
            // Each CTA's threads' loads of its accumulator rows are ordered
            // before this MMA by the fences (and a cluster-wide sync).
            let Run { ctas, before_fences, after_views, .. } = &mut *run;
            for c in [own_cta, peer_cta] {
                let cs = ctas.get_mut(&c).expect("checked");
                fenced_after_other_threads(&e, before_fences, after_views, cs, tid, &dr, op, (true, accumulate))?;
            }
        }
        let mut seqs = [0u64; 2];
        for (i, (c, a_vals)) in [(own_cta, a_own), (peer_cta, peer_a)].into_iter().enumerate() {
            assert_eq!(a_vals.len(), (m * k) as usize, "{op}: A must hold M / 2 x K values per CTA");
            run.next_seq += 1;
            seqs[i] = run.next_seq;
            let cs = run.ctas.get_mut(&c).expect("checked");
            supersede_stores(cs, &dr);
            cs.ops.push(Op {
                seq: seqs[i],
                issuer: tid,
                loc,
                op,
                m,
                n,
                k,
                d: dr,
                    fold,
                a_tmem: None,
                copy: false,
                work: Some(Work::Mma { a: a_vals, a_tmem: None, b: b.clone(), accumulate, dtype }),
                after: Vec::new(),
                race_id: None,
            });
        }
        Ok((dr, seqs))
    });
    issue_tracked(&e, tid, loc, op, own_cta, seqs[0], smem_reads, None, &[dr], &[]);
    issue_tracked(&e, tid, loc, op, peer_cta, seqs[1], peer_smem_reads, None, &[dr], &[]);
}

/// The TMEM cells, in each CTA of the pair, of a cta_group::2 MMA's
/// accumulator of `m` rows per CTA and `n` columns at `taddr`, and its
/// column fold (`Op::fold`), by the PTX ISA's data path layout
/// organization (tcgen05 chapter; CUTLASS's `tmem_frg_2sm` atoms):
///
/// * M = 256 (layout A): 128 rows per CTA, row `i` in lane `i`, column `j`
///   in column `col + j`;
/// * M = 128, dense (layout B): 64 rows per CTA in lanes 0..64 for
///   columns `0 .. n/2` and again in lanes 64..128 for columns
///   `n/2 .. n`: row `i`, column `j` in lane `i + 64 (j / (n/2))`, column
///   `col + j % (n/2)`.
fn pair_d_region(taddr: u32, m: u32, n: u32, op: &str) -> Result<(Region, u32), (&'static str, String)> {
    let (lane, col) = split(taddr);
    match (m, lane) {
        (128, 0) => Ok((Region::rect((0, 128), (col, col + n)), 1)),
        (64, 0) if n.is_multiple_of(2) => Ok((Region { lanes: (0, 64), cols: (col, col + n / 2), reps: 2, stride: 64 }, 2)),
        _ => Err((
            "not emulated",
            format!(
                "{op}: {m} rows per CTA at TMEM lane {lane}; the emulator models M = 256 (128 rows per CTA) and M = 128 (64 rows per CTA, \
                 the columns' halves in lanes 0..64 and 64..128), from lane 0"
            ),
        )),
    }
}

/// `tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster`:
/// once every tcgen05 operation the calling thread issued (in any CTA of
/// its cluster) has executed, one arrival on the mbarrier at offset `bar`
/// of every CTA whose rank bit is set in `mask`.
#[track_caller]
pub fn commit_multicast(bar: u32, mask: u16) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("tmem::commit_multicast") else { return };
    e.yield_point(tid, "tcgen05.commit (multicast)", loc);
    let size = e.clusters[e.ctas[e.threads[tid].cta].cluster].ctas.len() as u32;
    if mask == 0 || (size < 16 && mask >> size != 0) {
        e.misuse(e.lock(), tid, loc, "CTA rank outside the cluster", format!("tcgen05.commit multicast mask {mask:#06b} for a cluster of {size} CTAs"));
    }
    let targets: Vec<u32> = (0..16).filter(|r| mask & (1 << r) != 0).map(|r| crate::map_rank_addr(bar & 0xFF_FFFF, r)).collect();
    for &a in &targets {
        let (bcta, off) = e.decode_or_misuse(tid, loc, a);
        let phase = e.mbar_phase(bcta, off);
        with_cta(&e, tid, loc, |run, _cta| {
            if let Some((epoch, phase)) = phase {
                run.next_seq += 1;
                let seq = run.next_seq;
                run.commits.push(Commit { issuer: tid, seq, cta: bcta, off, epoch, phase });
            }
            Ok(())
        });
        // Each arrival runs the thread's tracked MMAs first (both CTAs'
        // halves of a pair MMA), then arrives.
        e.commit_arrive(tid, loc, a, "tcgen05.commit (multicast)");
    }
}
