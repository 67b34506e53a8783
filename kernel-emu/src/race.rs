//! Happens-before race detection: vector clocks, shadow memory and the
//! records of asynchronous operations.
//!
//! # Clocks
//!
//! Every emulated thread owns one *slot* of a vector clock (`Vc`): slot
//! `t` for thread `t`. Every asynchronous operation (a TMA load into one
//! CTA, a TMA store, a `tcgen05` operation, ...) gets its own slot too,
//! `threads + op_id`, allocated when it is issued; clocks grow as slots are
//! added (missing entries read as 0). A thread's own entry starts at 1 and
//! is incremented after every release it takes part in (an arrival, a barrier,
//! an operation it issues), so an access made at clock `c` by slot `s`
//! happens-before a point whose clock has `vc[s] >= c`.
//!
//! The engine joins clocks at every synchronization edge it models:
//! `bar.sync`/`bar.arrive` (named barriers), `bar.warp.sync`/`elect.sync`,
//! `barrier.cluster.arrive` -> `.wait`, mbarrier arrivals (local and remote)
//! and transaction completions -> phase completion -> the waits that observe
//! that phase, release/acquire atomics on one global address (semaphores;
//! between emulated devices only when both are system scope),
//! and the completion of asynchronous operations (their mbarrier phase, or
//! `cp.async.bulk.wait_group(.read)` for bulk groups). `wgmma.wait_group` is a
//! warpgroup barrier in the emulator, hence an edge as well.
//!
//! A second clock per thread, the *proxy clock*, holds what the async proxy
//! may see: `fence.proxy.async` sets it to the thread's clock, and it is
//! joined along the same edges. An asynchronous operation that reads (or
//! overwrites) shared-memory bytes last written by an ordinary store at
//! epoch `(s, c)` requires `proxy[s] >= c` at its issue: a `commit_smem` by
//! the writer, or one ordered after the write, before the issue. Values play
//! no part: rewriting the same value does not hide the missing fence.
//!
//! # Shadow memory
//!
//! `Shadow` keeps, per 4-byte word of a [`Space`] (the shared memory of one
//! CTA, global memory by host address, the tensor memory of one CTA), the
//! accesses that later accesses must be ordered after (FastTrack-style): the
//! last writes (one per byte, usually one per word) and the reads since,
//! each with its epoch, byte mask and source location. Pages of 1024 words
//! are allocated on first touch, so global memory costs only what the kernel
//! touches. A write must happen-after every earlier write and read of its
//! bytes, a read after every earlier write; otherwise the run stops with
//! [`EmuError::Race`](crate::EmuError::Race), naming both accesses.
//!
//! # Asynchronous operations (and how tensor memory plugs in)
//!
//! [`AsyncOp`] is the generic record: what it moves ([`AsyncCopy`]: byte
//! copies, or zero fills, whose ends may be shared or global memory), other
//! ranges it reads or writes (any [`Space`], e.g. MMA operands in SMEM and
//! the accumulator in TMEM), an optional `effect` closure (the computation,
//! e.g. an MMA into tensor memory), and its [`Completion`]. [`async_issue`](crate::async_issue)
//! (crate root) registers it: its clock is the issuer's clock at the issue.
//! The emulator runs it at a seeded, scheduler-chosen scheduling point
//! between the issue and the latest point its completion allows (a wait on
//! its mbarrier phase forces the phase's operations, a `wait_group` forces
//! the group's), so a kernel that reads too early also gets seed-dependent
//! values. When it runs, its reads are checked and recorded at its epoch
//! `(slot, 1)` and its writes at `(slot, 2)`; its completion then joins its
//! clock into the mbarrier phase (`MBarrierTx`, `Arrive`) or marks the
//! group (`BulkGroup`: `wait_group_read` gives the waiter `(slot, 1)`, the
//! reads; `wait_group` gives `(slot, 2)`, the writes).
//!
//! A Blackwell backend adds `tcgen05` this way:
//! - tensor memory is `Space::Tmem { cta }` with addresses of its choosing
//!   (e.g. `lane << 16 | column` times 4 bytes); a `tcgen05.ld`/`st` by a
//!   thread is an ordinary access, recorded with [`tmem_access`](crate::tmem_access)
//!   (each warp touching its quarter of the lanes);
//! - `tcgen05.mma`/`tcgen05.cp` are [`AsyncOp`]s with `reads` (SMEM
//!   operands, TMEM A), `writes` (the TMEM accumulator), the MMA as `effect`,
//!   and `Completion::Tracked`; a thread's tracked operations depend on its
//!   previous one, and an MMA that the tcgen05 fences order after other
//!   threads' MMAs (`crate::tmem`) also on theirs (`deps`: they run first and
//!   their clocks are joined into its own);
//! - `tcgen05.commit` is [`async_commit_arrive`](crate::async_commit_arrive):
//!   one arrival on the mbarrier once every earlier tracked operation of the
//!   thread has run, carrying their clocks to the threads that wait on it.
use crate::engine::Loc;
use std::collections::HashMap;

/// A vector clock: slot -> clock; entries past the end are 0.
#[derive(Clone, Default, Debug)]
pub(crate) struct Vc(Vec<u32>);

impl Vc {
    pub(crate) fn get(&self, s: usize) -> u32 {
        self.0.get(s).copied().unwrap_or(0)
    }
    pub(crate) fn set(&mut self, s: usize, c: u32) {
        if self.0.len() <= s {
            self.0.resize(s + 1, 0);
        }
        self.0[s] = c;
    }
    /// Raises entry `s` to at least `c`.
    pub(crate) fn raise(&mut self, s: usize, c: u32) {
        if self.get(s) < c {
            self.set(s, c);
        }
    }
    pub(crate) fn join(&mut self, o: &Vc) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a = (*a).max(*b);
        }
    }
}

/// A thread's (or a barrier phase's, or an operation's) knowledge: its
/// vector clock and its proxy clock (module docs).
#[derive(Clone, Default, Debug)]
pub(crate) struct Clk {
    pub(crate) vc: Vc,
    pub(crate) pvc: Vc,
}

impl Clk {
    pub(crate) fn join(&mut self, o: &Clk) {
        self.vc.join(&o.vc);
        self.pvc.join(&o.pvc);
    }
}

/// How a registered operation completes (addresses decoded at issue).
#[derive(Clone, Copy, Debug)]
pub(crate) enum OpDone {
    MBarTx { cta: usize, off: u32, bytes: u32 },
    Bulk,
    Tracked,
    /// One arrival on the mbarrier after its dependencies ran.
    Arrive { cta: usize, off: u32 },
}

/// A registered asynchronous operation.
pub(crate) struct OpRec {
    pub(crate) kind: String,
    pub(crate) issuer: usize,
    pub(crate) loc: Loc,
    /// The issuer's clocks at the issue, plus the op's own slot.
    pub(crate) clk: Clk,
    pub(crate) copies: Vec<AsyncCopy>,
    pub(crate) reads: Vec<(Space, u64, u64)>,
    pub(crate) writes: Vec<(Space, u64, u64)>,
    pub(crate) effect: Option<Box<dyn FnOnce() + Send>>,
    pub(crate) done: OpDone,
    /// Operations that must run first (their clocks are joined in).
    pub(crate) deps: Vec<usize>,
    pub(crate) ran: bool,
}

/// One thread's bulk async-groups (TMA stores).
#[derive(Default)]
pub(crate) struct BulkGroups {
    pub(crate) open: Vec<usize>,
    /// Committed groups, oldest first, with whether their reads were waited.
    pub(crate) committed: std::collections::VecDeque<(Vec<usize>, bool)>,
}

/// The detector's state, inside the engine's `State`.
pub(crate) struct RaceState {
    /// Whether accesses are checked against the shadow state (environment
    /// variable `KERNEL_EMU_SHADOW=0` turns it off, to measure its cost).
    pub(crate) shadow_on: bool,
    pub(crate) clk: Vec<Clk>,
    pub(crate) shadow: Shadow,
    pub(crate) ops: Vec<OpRec>,
    /// Operations not yet run, in issue order.
    pub(crate) pending: Vec<usize>,
    pub(crate) bulk: Vec<BulkGroups>,
    /// Per thread: `Tracked` operations since its last commit-arrive.
    pub(crate) tracked: Vec<Vec<usize>>,
    /// Release/acquire synchronization through global addresses.
    /// Release clocks of global addresses: `(address, device)`, and
    /// `(address, SYS_SLOT)` for system-scope releases.
    pub(crate) atomics: HashMap<(u64, u32), Clk>,
}

impl RaceState {
    pub(crate) fn new(threads: usize) -> Self {
        let clk = (0..threads)
            .map(|t| {
                let mut c = Clk::default();
                c.vc.set(t, 1);
                c
            })
            .collect();
        RaceState {
            shadow_on: std::env::var("KERNEL_EMU_SHADOW").map_or(true, |v| v.trim() != "0"),
            clk,
            shadow: Shadow::default(),
            ops: Vec::new(),
            pending: Vec::new(),
            bulk: (0..threads).map(|_| BulkGroups::default()).collect(),
            tracked: vec![Vec::new(); threads],
            atomics: HashMap::new(),
        }
    }
    /// Thread `t` released: later accesses are not ordered before what it
    /// published.
    pub(crate) fn tick(&mut self, t: usize) {
        let c = self.clk[t].vc.get(t);
        self.clk[t].vc.set(t, c + 1);
    }
    /// `t` publishes into `into` (an arrival), then ticks.
    pub(crate) fn release(&mut self, t: usize, into: &mut Clk) {
        into.join(&self.clk[t]);
        self.tick(t);
    }
}

/// An address space with shadow state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    /// The dynamic shared memory of CTA `cta` (index in launch order, x
    /// fastest); addresses are byte offsets.
    Smem { cta: usize },
    /// Global memory; addresses are host addresses.
    Gmem,
    /// The tensor memory of CTA `cta`; addresses are chosen by its backend.
    Tmem { cta: usize },
}

/// One recorded access to (some bytes of) a word.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Acc {
    pub(crate) slot: u32,
    pub(crate) clock: u32,
    pub(crate) loc: Loc,
    /// Bytes of the word (bit i: byte i).
    pub(crate) mask: u8,
    pub(crate) write: bool,
    /// A read of a load that was in flight until this epoch, its wait
    /// (`tcgen05.ld` until `tcgen05.wait::ld`): `loc` is the load's.
    pub(crate) inflight: bool,
}

const PAGE_WORDS: u64 = 1024;

/// Per-word access records of every space, by 4 KiB page.
#[derive(Default)]
pub(crate) struct Shadow {
    pages: HashMap<(Space, u64), Box<[Vec<Acc>]>>,
}

/// The accessor of a check: its slot and clock, what it knows, and (for the
/// async proxy) what ordinary stores it may see.
pub(crate) struct Accessor<'a> {
    pub(crate) slot: u32,
    pub(crate) clock: u32,
    pub(crate) vc: &'a Vc,
    pub(crate) loc: Loc,
    /// For accesses by the async proxy to shared memory: its proxy clock;
    /// slots below `threads` are ordinary threads.
    pub(crate) proxy: Option<(&'a Vc, u32)>,
    /// The read of a load in flight until now ([`Acc::inflight`]).
    pub(crate) inflight: bool,
}

/// A conflict found by [`Shadow::access`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Finding {
    /// `prev` is not ordered before the access.
    Race { prev: Acc, addr: u64 },
    /// `prev`, an ordinary store, is not fenced for the async proxy.
    Proxy { prev: Acc, addr: u64 },
}

impl Shadow {
    /// Checks and records an access of bytes `lo..hi` of `space`.
    pub(crate) fn access(
        &mut self,
        space: Space,
        lo: u64,
        hi: u64,
        write: bool,
        who: &Accessor<'_>,
    ) -> Result<(), Finding> {
        if hi <= lo {
            return Ok(());
        }
        let mut w = lo / 4;
        let last = (hi - 1) / 4;
        while w <= last {
            let page = w / PAGE_WORDS;
            let words = self
                .pages
                .entry((space, page))
                .or_insert_with(|| (0..PAGE_WORDS).map(|_| Vec::new()).collect());
            let end = last.min((page + 1) * PAGE_WORDS - 1);
            while w <= end {
                let base = w * 4;
                let b0 = lo.max(base) - base;
                let b1 = hi.min(base + 4) - base;
                let mask = (((1u32 << b1) - 1) & !((1u32 << b0) - 1)) as u8;
                let accs = &mut words[(w % PAGE_WORDS) as usize];
                check_word(accs, base, mask, write, who)?;
                w += 1;
            }
        }
        Ok(())
    }
}

fn check_word(
    accs: &mut Vec<Acc>,
    addr: u64,
    mask: u8,
    write: bool,
    who: &Accessor<'_>,
) -> Result<(), Finding> {
    for a in accs.iter() {
        if a.mask & mask == 0 || (!write && !a.write) {
            continue;
        }
        if a.slot != who.slot && who.vc.get(a.slot as usize) < a.clock {
            return Err(Finding::Race { prev: *a, addr });
        }
        if let Some((proxy, threads)) = who.proxy {
            if a.write && a.slot < threads && proxy.get(a.slot as usize) < a.clock {
                return Err(Finding::Proxy { prev: *a, addr });
            }
        }
    }
    if write {
        accs.retain_mut(|a| {
            a.mask &= !mask;
            a.mask != 0
        });
    } else {
        accs.retain(|a| {
            a.write
                || a.mask & !mask != 0
                || !(a.slot == who.slot || who.vc.get(a.slot as usize) >= a.clock)
        });
    }
    accs.push(Acc {
        slot: who.slot,
        clock: who.clock,
        loc: who.loc,
        mask,
        write,
        inflight: who.inflight,
    });
    Ok(())
}

/// One byte move of an [`AsyncOp`]: `len` bytes from `src` (or zeros) to
/// `dst`. Shared-memory ends are pointers into a CTA's buffer; other
/// pointers are global memory.
#[derive(Clone, Copy, Debug)]
pub struct AsyncCopy {
    pub dst: *mut u8,
    /// `None`: zero fill (a TMA load's out-of-bounds elements).
    pub src: Option<*const u8>,
    pub len: usize,
}

// SAFETY: plain addresses of memory owned by the run (or by the host for its
// duration); the engine copies them only while holding the baton.
unsafe impl Send for AsyncCopy {}

/// How an [`AsyncOp`] completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// `complete_tx` of `bytes` on the mbarrier at `bar` (a `.shared::cta`
    /// address of the issuer, or a `.shared::cluster` address) when it runs
    /// (TMA loads, one op per destination CTA for multicast).
    MBarrierTx { bar: u32, bytes: u32 },
    /// A member of the issuer's open bulk async-group (TMA stores):
    /// `cp.async.bulk.commit_group` closes the group, `wait_group_read` /
    /// `wait_group` wait for it.
    BulkGroup,
    /// Tracked for the issuer's next [`async_commit_arrive`](crate::async_commit_arrive)
    /// (`tcgen05.commit`).
    Tracked,
}

/// A generic asynchronous operation (see the module docs).
pub struct AsyncOp {
    /// What it is, for reports (e.g. `"cp.async.bulk.tensor.2d (load)"`).
    pub kind: String,
    /// The bytes it moves (checked as reads of `src` and writes of `dst`).
    pub copies: Vec<AsyncCopy>,
    /// Other ranges it reads, half-open, per space.
    pub reads: Vec<(Space, u64, u64)>,
    /// Other ranges it writes.
    pub writes: Vec<(Space, u64, u64)>,
    /// Runs after the copies, when the operation runs (e.g. an MMA).
    pub effect: Option<Box<dyn FnOnce() + Send>>,
    pub completion: Completion,
}

impl AsyncOp {
    /// An operation that only moves `copies`.
    pub fn copies(kind: impl Into<String>, copies: Vec<AsyncCopy>, completion: Completion) -> Self {
        AsyncOp {
            kind: kind.into(),
            copies,
            reads: Vec::new(),
            writes: Vec::new(),
            effect: None,
            completion,
        }
    }
}

/// Appends a copy, merging it with the previous one when both ends continue it.
pub fn push_copy(copies: &mut Vec<AsyncCopy>, c: AsyncCopy) {
    if let Some(last) = copies.last_mut() {
        let dst_next = last.dst as usize + last.len == c.dst as usize;
        let src_next = match (last.src, c.src) {
            (Some(a), Some(b)) => a as usize + last.len == b as usize,
            (None, None) => true,
            _ => false,
        };
        if dst_next && src_next {
            last.len += c.len;
            return;
        }
    }
    copies.push(c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::Location;

    fn who<'a>(slot: u32, vc: &'a Vc) -> Accessor<'a> {
        Accessor { slot, clock: vc.get(slot as usize), vc, loc: Location::caller(), proxy: None, inflight: false }
    }

    #[test]
    fn unordered_write_then_read_is_a_race_ordered_is_not() {
        let mut s = Shadow::default();
        let mut a = Vc::default();
        a.set(0, 1);
        let mut b = Vc::default();
        b.set(1, 1);
        s.access(Space::Gmem, 0x100, 0x108, true, &who(0, &a)).unwrap();
        assert!(matches!(s.access(Space::Gmem, 0x104, 0x105, false, &who(1, &b)), Err(Finding::Race { addr: 0x104, .. })));
        b.join(&a);
        s.access(Space::Gmem, 0x104, 0x105, false, &who(1, &b)).unwrap();
    }

    #[test]
    fn disjoint_bytes_of_one_word_do_not_race() {
        let mut s = Shadow::default();
        let mut a = Vc::default();
        a.set(0, 1);
        let mut b = Vc::default();
        b.set(1, 1);
        s.access(Space::Smem { cta: 0 }, 0, 2, true, &who(0, &a)).unwrap();
        s.access(Space::Smem { cta: 0 }, 2, 4, true, &who(1, &b)).unwrap();
        assert!(s.access(Space::Smem { cta: 0 }, 0, 4, false, &who(1, &b)).is_err());
        s.access(Space::Smem { cta: 0 }, 2, 4, false, &who(1, &b)).unwrap();
        // Other spaces and CTAs are separate.
        s.access(Space::Smem { cta: 1 }, 0, 4, true, &who(1, &b)).unwrap();
    }

    #[test]
    fn concurrent_reads_then_a_write_ordered_after_one_only_races() {
        let mut s = Shadow::default();
        let vcs: Vec<Vc> = (0..3).map(|t| { let mut v = Vc::default(); v.set(t, 1); v }).collect();
        s.access(Space::Gmem, 0, 4, false, &who(0, &vcs[0])).unwrap();
        s.access(Space::Gmem, 0, 4, false, &who(1, &vcs[1])).unwrap();
        let mut w = vcs[2].clone();
        w.join(&vcs[0]);
        let e = s.access(Space::Gmem, 0, 4, true, &who(2, &w)).unwrap_err();
        assert!(matches!(e, Finding::Race { prev: Acc { slot: 1, write: false, .. }, .. }));
    }

    #[test]
    fn async_read_of_an_unfenced_ordinary_store_is_a_proxy_finding() {
        let mut s = Shadow::default();
        let mut t = Vc::default();
        t.set(0, 1);
        s.access(Space::Smem { cta: 0 }, 0, 16, true, &who(0, &t)).unwrap();
        let mut op = t.clone();
        op.set(5, 2);
        let unfenced = Vc::default();
        let acc = Accessor { slot: 5, clock: 1, vc: &op, loc: Location::caller(), proxy: Some((&unfenced, 4)), inflight: false };
        assert!(matches!(s.access(Space::Smem { cta: 0 }, 0, 16, false, &acc), Err(Finding::Proxy { .. })));
        let acc = Accessor { proxy: Some((&t, 4)), ..acc };
        s.access(Space::Smem { cta: 0 }, 0, 16, false, &acc).unwrap();
    }

    #[test]
    fn copies_merge_when_contiguous() {
        let mut v = Vec::new();
        let (d, s) = (0x1000 as *mut u8, 0x2000 as *const u8);
        push_copy(&mut v, AsyncCopy { dst: d, src: Some(s), len: 4 });
        push_copy(&mut v, AsyncCopy { dst: d.wrapping_add(4), src: Some(s.wrapping_add(4)), len: 4 });
        push_copy(&mut v, AsyncCopy { dst: d.wrapping_add(8), src: None, len: 4 });
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].len, 8);
    }
}
