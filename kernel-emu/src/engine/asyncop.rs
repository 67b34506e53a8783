//! The engine side of race detection: ordinary accesses, asynchronous
//! operations (issue, run at a scheduler-chosen point, completion), bulk
//! async-groups, release/acquire atomics, and the race reports. See
//! `crate::race` for the model.
use super::*;
use crate::race::{Accessor, AsyncOp, Completion, Finding, OpDone, OpRec, Space};

/// One in how many scheduling points runs a pending asynchronous operation.
const RUN_ONE_IN: u64 = 3;

/// The slot of `RaceState::atomics` that system-scope releases join.
const SYS_SLOT: u32 = u32::MAX;

/// Whether the calling thread's async-proxy accesses need an explicit
/// fence (only shared memory has two proxies here).
fn proxy_space(space: Space) -> bool {
    matches!(space, Space::Smem { .. })
}

impl Emu {
    /// The CTA and offset of a pointer into some CTA's shared memory.
    pub(crate) fn smem_locate(&self, ptr: usize) -> Option<(usize, u64)> {
        self.ctas.iter().enumerate().find_map(|(c, info)| {
            let base = info.smem.ptr as usize;
            (ptr >= base && ptr < base + self.smem_bytes).then(|| (c, (ptr - base) as u64))
        })
    }

    /// The space and start address of `len` bytes at host pointer `ptr`.
    fn classify(&self, ptr: usize) -> (Space, u64) {
        match self.smem_locate(ptr) {
            Some((cta, off)) => (Space::Smem { cta }, off),
            None => (Space::Gmem, ptr as u64),
        }
    }

    pub(crate) fn fmt_addr(&self, space: Space, lo: u64, hi: u64) -> String {
        match space {
            Space::Smem { cta } => format!("smem+{lo:#x}..{hi:#x} of cta {}", fmt3(self.ctas[cta].idx)),
            Space::Gmem => format!("global memory {lo:#x}..{hi:#x} ({} bytes)", hi - lo),
            Space::Tmem { cta } => format!("tensor memory {lo:#x}..{hi:#x} of cta {}", fmt3(self.ctas[cta].idx)),
        }
    }

    /// `"cta (x,y,z) thread (x,y,z) [warp w, lane l]"` (`"device d cta .."`
    /// on a run of several devices).
    fn who_lane(&self, t: usize) -> String {
        let th = &self.threads[t];
        let device = if self.devices > 1 { format!("device {} ", self.ctas[th.cta].device) } else { String::new() };
        format!(
            "{device}cta {} thread {} [warp {}, lane {}]",
            fmt3(self.ctas[th.cta].idx),
            fmt3(th.tidx),
            th.warp,
            th.lane
        )
    }

    fn acc_desc(&self, g: &State, slot: usize, write: bool, loc: Loc) -> String {
        self.acc_desc_as(g, slot, write, loc, false)
    }

    fn acc_desc_as(&self, g: &State, slot: usize, write: bool, loc: Loc, inflight: bool) -> String {
        let what = if write { "write" } else { "read" };
        if slot < self.threads.len() {
            let until = if inflight { " (a load in flight until its wait, tcgen05.wait::ld)" } else { "" };
            format!("{what} by {} at {loc}{until}", self.who_lane(slot))
        } else {
            let op = &g.race.ops[slot - self.threads.len()];
            format!(
                "{what} by the asynchronous `{}` issued by {} at {}",
                op.kind,
                self.who_lane(op.issuer),
                op.loc
            )
        }
    }

    /// The report of a finding of an access (`slot`, `write`, `loc`) to
    /// `space` `lo..hi`.
    #[allow(clippy::too_many_arguments)]
    fn finding_error(
        &self,
        g: &State,
        f: Finding,
        space: Space,
        lo: u64,
        hi: u64,
        slot: usize,
        write: bool,
        loc: Loc,
        inflight: bool,
    ) -> EmuError {
        let n = self.threads.len();
        let second = self.acc_desc_as(g, slot, write, loc, inflight);
        match f {
            Finding::Proxy { prev, addr } => EmuError::Misuse {
                kernel: self.kernel.clone(),
                rule: "SMEM written by ordinary stores and read by the async proxy (TMA store or wgmma) without \
                       commit_smem (fence.proxy.async) in between: every writing thread calls commit_smem() after \
                       its stores, before the barrier that hands the SMEM over"
                    .to_string(),
                where_: second.clone(),
                detail: format!(
                    "{}: the {} was not followed by a commit_smem ordered before the operation's issue (first \
                     word {})",
                    self.fmt_addr(space, lo, hi),
                    self.acc_desc(g, prev.slot as usize, true, prev.loc),
                    self.fmt_addr(space, addr, addr + 4)
                ),
            },
            Finding::Race { prev, addr } => {
                let p_op = (prev.slot as usize >= n).then(|| &g.race.ops[prev.slot as usize - n]);
                let c_op = (slot >= n).then(|| &g.race.ops[slot - n]);
                let kind = match (prev.write, write) {
                    (true, true) => "write-write",
                    (true, false) => "write-read",
                    (false, _) => "read-write",
                };
                let fix = match (p_op.map(|o| o.done), c_op.map(|o| o.done)) {
                    _ if prev.inflight || inflight => {
                        "a tcgen05.ld reads its tensor-memory cells until its thread's tcgen05.wait::ld (the load's \
                         `.wait()`, `wait_load_tmem`), not until its issue: wait for the load before the \
                         synchronization that hands the cells to a writer (the arrival, the barrier), then \
                         tcgen05.fence::before_thread_sync (a `Barrier<TensorCore>`'s arrive issues it)"
                    }
                    (Some(OpDone::MBarTx { .. }), None) if !prev.write => {
                        "the TMA load (or bulk copy) may still be reading its source: it reads it until its \
                         mbarrier phase completes, so the issuing thread waits on that phase before it hands the \
                         source over (an arrival, a barrier) to whoever rewrites it"
                    }
                    (Some(OpDone::MBarTx { .. }), None) => {
                        "the TMA load may still be in flight: wait on its mbarrier phase (or synchronize with a \
                         thread that waited) before touching its destination"
                    }
                    (Some(OpDone::Bulk), None) if !prev.write => {
                        "the TMA store may still be reading its SMEM source: the issuing thread calls \
                         wait_group_read::<N>() (then a barrier hands the SMEM over) before it is rewritten"
                    }
                    (Some(OpDone::Bulk), None) => {
                        "the TMA store may still be writing global memory: the issuing thread calls \
                         wait_group::<N>() (then a barrier or a release/acquire hands the data over) before it is \
                         read or written again"
                    }
                    (Some(_), None) => {
                        "the asynchronous operation may still be in flight: wait for its completion (its mbarrier \
                         phase or group) before touching its memory"
                    }
                    (Some(OpDone::Tracked), Some(OpDone::Tracked)) => {
                        "two tensor-core operations (of different threads) are unordered: wait for the first's \
                         tcgen05.commit before issuing the second, or have the tensor core pipeline them in issue \
                         order: tcgen05.fence::before_thread_sync in the first issuer after its issue, then a barrier \
                         (sync_threads, an mbarrier arrive/wait), then tcgen05.fence::after_thread_sync in the second \
                         issuer before its issue"
                    }
                    (Some(_), Some(_)) => {
                        "two asynchronous operations in flight at once touch the same bytes: wait for the first \
                         (its mbarrier phase or wait_group) before issuing the second"
                    }
                    (None, Some(OpDone::MBarTx { .. })) => {
                        "the access and the TMA load are unordered: an access meant to see the loaded bytes waits \
                         on the load's mbarrier phase first; one meant to come before the load is handed over (e.g. a \
                         consumer's arrive that the issuing thread waits on) before the load is issued"
                    }
                    (None, Some(OpDone::Bulk)) => {
                        "the access and the TMA store are unordered: the issuing thread waits for the store \
                         (wait_group_read::<N>() before its source is rewritten, wait_group::<N>() before its \
                         destination is read), and SMEM written for the store is handed over before the issue"
                    }
                    (None, Some(_)) => {
                        "an ordinary access is not ordered before the asynchronous operation's issue: put a barrier \
                         (or an mbarrier hand-over) between them, or wait for the operation before accessing"
                    }
                    (None, None) => {
                        "the two accesses are not ordered by any synchronization: put a barrier between them \
                         (sync_threads, a named barrier, an mbarrier arrive/wait, a cluster barrier)"
                    }
                };
                let region = match space {
                    Space::Smem { .. } => "shared memory",
                    Space::Gmem => "global memory",
                    Space::Tmem { .. } => "tensor memory",
                };
                // Accesses of two devices (peer memory): only a system-scope
                // release/acquire pair orders them.
                let device_of = |slot: usize| {
                    let t = if slot < n { slot } else { g.race.ops[slot - n].issuer };
                    self.ctas[self.threads[t].cta].device
                };
                let fix = if self.devices > 1 && device_of(prev.slot as usize) != device_of(slot) {
                    let across = format!(
                        "the accesses are on devices {} and {}: order them with a system-scope release on one \
                         and acquire on the other (PeerSemaphores::signal / wait; a .gpu-scope semaphore orders \
                         only its own device's threads; barriers do not cross devices)",
                        device_of(prev.slot as usize),
                        device_of(slot)
                    );
                    // Two ordinary accesses: the generic advice (a barrier)
                    // does not apply across devices.
                    if p_op.is_none() && c_op.is_none() { across } else { format!("{across}; {fix}") }
                } else {
                    fix.to_string()
                };
                EmuError::Race {
                    kernel: self.kernel.clone(),
                    rule: format!("{kind} race on {region}"),
                    first: self.acc_desc_as(g, prev.slot as usize, prev.write, prev.loc, prev.inflight),
                    second,
                    range: if hi - lo > 4 {
                        format!("{} (first conflicting word {:#x})", self.fmt_addr(space, lo, hi), addr)
                    } else {
                        self.fmt_addr(space, lo, hi)
                    },
                    fix,
                }
            }
        }
    }

    /// An ordinary access by `tid` of `lo..hi` of `space`: checked against
    /// the shadow state, then recorded. Not a scheduling point.
    pub(crate) fn ordinary_access(&self, tid: usize, loc: Loc, space: Space, lo: u64, hi: u64, write: bool) {
        self.access_as(tid, loc, space, lo, hi, write, false)
    }

    /// The end of a load of `tid` that read `lo..hi` of `space` from its
    /// issue (at `loc`) until now, its wait (`tcgen05.wait::ld`): the read
    /// is checked and recorded again at the thread's clock now, so an
    /// overwrite that is ordered after the issue but not after this wait
    /// (a hand-over that arrives before the wait) is a race on every
    /// schedule: before the wait it is checked against the read recorded
    /// here, after it this read is checked against the overwrite. (An
    /// overwrite while the load is in flight is the caller's own report.)
    pub(crate) fn inflight_read_end(&self, tid: usize, loc: Loc, space: Space, lo: u64, hi: u64) {
        self.access_as(tid, loc, space, lo, hi, false, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn access_as(&self, tid: usize, loc: Loc, space: Space, lo: u64, hi: u64, write: bool, inflight: bool) {
        let mut g = self.begin();
        if !g.race.shadow_on {
            return;
        }
        if let (Space::Smem { cta }, true) = (space, write) {
            if let Some((_, detail)) = self.wgmma_overlap(&g, cta, lo as u32, hi as u32, "an ordinary store") {
                self.misuse(
                    g,
                    tid,
                    loc,
                    "SMEM written while an in-flight wgmma reads it: wait for the wgmma group (wgmma_wait) \
                     before the SMEM is rewritten",
                    detail,
                );
            }
        }
        let st = &mut *g;
        let clk = &st.race.clk[tid];
        let who = Accessor {
            slot: tid as u32,
            clock: clk.vc.get(tid),
            vc: &clk.vc,
            loc,
            proxy: None,
            inflight,
        };
        if let Err(f) = st.race.shadow.access(space, lo, hi, write, &who) {
            let err = self.finding_error(&g, f, space, lo, hi, tid, write, loc, inflight);
            self.fail(g, err);
        }
    }

    /// wgmma operand reads of the representative thread of a warpgroup:
    /// reads by the thread, checked for the async proxy.
    pub(crate) fn wgmma_shadow_reads(&self, g: MutexGuard<'_, State>, tid: usize, loc: Loc, ranges: &[Range]) {
        let mut g = g;
        if !g.race.shadow_on {
            return;
        }
        let cta = self.threads[tid].cta;
        let st = &mut *g;
        let clk = &st.race.clk[tid];
        let who = Accessor {
            slot: tid as u32,
            clock: clk.vc.get(tid),
            vc: &clk.vc,
            loc,
            proxy: Some((&clk.pvc, self.threads.len() as u32)),
            inflight: false,
        };
        for &(lo, hi) in ranges {
            let space = Space::Smem { cta };
            if let Err(f) = st.race.shadow.access(space, lo as u64, hi as u64, false, &who) {
                let err = self.finding_error(&g, f, space, lo as u64, hi as u64, tid, false, loc, false);
                self.fail(g, err);
            }
        }
    }

    /// `fence.proxy.async` for the clocks: the async proxy may now see every
    /// write this thread knows of (so far: the thread's clock then ticks, and
    /// its stores after the fence are not covered by it).
    pub(crate) fn proxy_fence_clock(&self, g: &mut State, tid: usize) {
        let c = &mut g.race.clk[tid];
        let vc = c.vc.clone();
        c.pvc.join(&vc);
        // The fence covers this thread's stores before it, not after: its
        // later stores get a new epoch, which the proxy clock does not hold.
        g.race.tick(tid);
    }

    /// A release (`release`) and/or acquire (`acquire`) atomic of `tid` on
    /// the global address `addr`. Not a scheduling point.
    ///
    /// Scopes: each address keeps one clock per device (joined by every
    /// release of a thread of that device, at any scope) and one system
    /// clock (joined by `.sys` releases). An acquire joins its device's
    /// clock, and with `sys` the system clock too: a release and an acquire
    /// of two devices synchronize only when both are `.sys`.
    pub(crate) fn atomic(&self, tid: usize, addr: u64, acquire: bool, release: bool, sys: bool) {
        let mut g = self.begin();
        let st = &mut *g;
        let device = self.ctas[self.threads[tid].cta].device;
        if acquire {
            if let Some(sync) = st.race.atomics.get(&(addr, device)) {
                st.race.clk[tid].join(sync);
            }
            if sys {
                if let Some(sync) = st.race.atomics.get(&(addr, SYS_SLOT)) {
                    st.race.clk[tid].join(sync);
                }
            }
        }
        if release {
            st.race.atomics.entry((addr, device)).or_default().join(&st.race.clk[tid]);
            if sys {
                st.race.atomics.entry((addr, SYS_SLOT)).or_default().join(&st.race.clk[tid]);
            }
            st.race.tick(tid);
        }
    }

    /// Registers an asynchronous operation issued by `tid` (a scheduling
    /// point).
    pub(crate) fn async_issue(&self, tid: usize, loc: Loc, op: AsyncOp) {
        self.async_issue_after(tid, loc, op, &[]);
    }

    /// Entry `of` of thread `tid`'s vector clock: `tid` is ordered after
    /// what thread `of` did at its own clock `c` iff this is `>= c`.
    pub(crate) fn clock_of(&self, tid: usize, of: usize) -> u32 {
        self.lock().race.clk[tid].vc.get(of)
    }

    /// As [`Emu::async_issue`], the operation also running after the
    /// operations `after` (ids returned by earlier issues; their clocks are
    /// joined into its own when it runs): `tcgen05` operations of other
    /// threads that the tensor core pipelines before it. Returns its id.
    pub(crate) fn async_issue_after(&self, tid: usize, loc: Loc, op: AsyncOp, after: &[usize]) -> usize {
        let done = match op.completion {
            Completion::MBarrierTx { bar, bytes } => {
                let (cta, off) = self.decode_or_misuse(tid, loc, bar);
                OpDone::MBarTx { cta, off, bytes }
            }
            Completion::BulkGroup => OpDone::Bulk,
            Completion::Tracked => OpDone::Tracked,
        };
        let mut g = self.begin();
        g.note(tid, "async operation issue", loc);
        // TMA over SMEM that an in-flight wgmma reads: checked at the issue
        // (and again when the copy runs).
        for (cta, lo, hi) in self.smem_write_bounds(&op.copies) {
            if let Some((rule, detail)) = self.wgmma_overlap(&g, cta, lo, hi, &op.kind) {
                self.misuse(g, tid, loc, rule, detail);
            }
        }
        // Tracked (tensor-core) operations of one thread run in issue order:
        // each depends on the thread's previous one (hook for crate::tmem).
        let mut deps: Vec<usize> = if matches!(done, OpDone::Tracked) {
            g.race.ops.iter().rposition(|o| o.issuer == tid && matches!(o.done, OpDone::Tracked)).into_iter().collect()
        } else {
            Vec::new()
        };
        for &a in after {
            if !deps.contains(&a) {
                deps.push(a);
            }
        }
        let id = self.register_op(&mut g, tid, loc, op.kind, op.copies, op.reads, op.writes, op.effect, done, deps);
        drop(self.switch(g, tid));
        id
    }

    /// Per CTA, the bounding SMEM range the copies write.
    fn smem_write_bounds(&self, copies: &[crate::race::AsyncCopy]) -> Vec<(usize, u32, u32)> {
        let mut out: Vec<(usize, u32, u32)> = Vec::new();
        for c in copies {
            if let Some((cta, off)) = self.smem_locate(c.dst as usize) {
                let (lo, hi) = (off as u32, (off + c.len as u64) as u32);
                match out.iter_mut().find(|e| e.0 == cta) {
                    Some(e) => {
                        e.1 = e.1.min(lo);
                        e.2 = e.2.max(hi);
                    }
                    None => out.push((cta, lo, hi)),
                }
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn register_op(
        &self,
        g: &mut State,
        tid: usize,
        loc: Loc,
        kind: String,
        copies: Vec<crate::race::AsyncCopy>,
        reads: Vec<(Space, u64, u64)>,
        writes: Vec<(Space, u64, u64)>,
        effect: Option<Box<dyn FnOnce() + Send>>,
        done: OpDone,
        deps: Vec<usize>,
    ) -> usize {
        let id = g.race.ops.len();
        let slot = self.threads.len() + id;
        let mut clk = g.race.clk[tid].clone();
        clk.vc.set(slot, 2);
        g.race.tick(tid);
        g.race.ops.push(OpRec {
            kind,
            issuer: tid,
            loc,
            clk,
            copies,
            reads,
            writes,
            effect,
            done,
            deps,
            ran: false,
        });
        g.race.pending.push(id);
        match done {
            OpDone::Bulk => g.race.bulk[tid].open.push(id),
            OpDone::Tracked => g.race.tracked[tid].push(id),
            _ => {}
        }
        id
    }

    /// `tcgen05.commit`-like: one arrival on the mbarrier at `bar` once every
    /// `Tracked` operation the thread issued since its last commit has run.
    pub(crate) fn commit_arrive(&self, tid: usize, loc: Loc, bar: u32, kind: &str) {
        let (cta, off) = self.decode_or_misuse(tid, loc, bar);
        let mut g = self.begin();
        g.note(tid, "async commit-arrive", loc);
        let mut deps = std::mem::take(&mut g.race.tracked[tid]);
        // A commit covers every earlier tracked operation of the thread, also
        // those an earlier commit covered (tcgen05.commit): depend on the
        // last one, which depends on the ones before (hook for crate::tmem).
        if let Some(last) = g.race.ops.iter().rposition(|o| o.issuer == tid && matches!(o.done, OpDone::Tracked)) {
            if !deps.contains(&last) {
                deps.push(last);
            }
        }
        self.register_op(
            &mut g,
            tid,
            loc,
            kind.to_string(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
            None,
            OpDone::Arrive { cta, off },
            deps,
        );
        drop(self.switch(g, tid));
    }

    /// `cp.async.bulk.commit_group`.
    pub(crate) fn bulk_commit(&self, tid: usize, loc: Loc) {
        let mut g = self.begin();
        g.note(tid, "cp.async.bulk.commit_group", loc);
        let b = &mut g.race.bulk[tid];
        let open = std::mem::take(&mut b.open);
        b.committed.push_back((open, false));
        drop(self.switch(g, tid));
    }

    /// `cp.async.bulk.wait_group(.read) n`: runs the operations of all but
    /// the newest `n` committed groups; the thread then knows their reads
    /// (`read_only`) or their reads and writes.
    pub(crate) fn bulk_wait(&self, tid: usize, loc: Loc, n: u32, read_only: bool) {
        let op = if read_only { "cp.async.bulk.wait_group.read" } else { "cp.async.bulk.wait_group" };
        let mut g = self.begin();
        g.note(tid, op, loc);
        let k = g.race.bulk[tid].committed.len().saturating_sub(n as usize);
        let ids: Vec<usize> = g.race.bulk[tid].committed.iter().take(k).flat_map(|(v, _)| v.iter().copied()).collect();
        for &id in &ids {
            if let Err(e) = self.run_op(&mut g, id) {
                self.fail(g, e);
            }
        }
        let nt = self.threads.len();
        for &id in &ids {
            g.race.clk[tid].vc.raise(nt + id, if read_only { 1 } else { 2 });
        }
        let b = &mut g.race.bulk[tid];
        if read_only {
            for grp in b.committed.iter_mut().take(k) {
                grp.1 = true;
            }
        } else {
            b.committed.drain(..k);
        }
        drop(self.switch(g, tid));
    }

    /// Checks when `tid` returns from the kernel: bulk groups whose SMEM
    /// reads are outstanding.
    pub(crate) fn exit_checks(&self, tid: usize) {
        let mut g = self.begin();
        // Run what the thread left in flight first: a race of those
        // operations is the more precise report.
        let b = &g.race.bulk[tid];
        let ids: Vec<usize> = b.open.iter().chain(b.committed.iter().flat_map(|(v, _)| v.iter())).copied().collect();
        for id in ids {
            if let Err(e) = self.run_op(&mut g, id) {
                self.fail(g, e);
            }
        }
        let b = &g.race.bulk[tid];
        let uncommitted = b.open.len();
        // An empty group (a commit with nothing issued) holds nothing.
        let unread = b.committed.iter().filter(|(v, r)| !r && !v.is_empty()).count();
        if uncommitted + unread > 0 {
            let id = b.open.first().copied().or_else(|| {
                b.committed.iter().find(|(v, r)| !r && !v.is_empty()).map(|(v, _)| v[0])
            });
            let (kind, loc) = match id {
                Some(id) => (g.race.ops[id].kind.clone(), g.race.ops[id].loc.to_string()),
                None => ("(none)".to_string(), "?".to_string()),
            };
            let detail = format!(
                "{} returned with {unread} committed bulk async-group(s) still reading SMEM and {uncommitted} \
                 operation(s) never committed (e.g. `{kind}` issued at {loc})",
                self.who(tid)
            );
            let err = EmuError::Misuse {
                kernel: self.kernel.clone(),
                rule: "bulk async-groups outstanding when the thread exited: a TMA store may still read the CTA's \
                       SMEM; call commit_group() and wait_group_read::<0>() (or wait_group::<0>()) before the \
                       thread returns"
                    .to_string(),
                where_: format!("{} at kernel exit", self.who(tid)),
                detail,
            };
            self.fail(g, err);
        }
    }

    /// At a scheduling point: maybe run one pending operation (seeded).
    pub(crate) fn maybe_run_op(&self, g: &mut State) -> Result<(), EmuError> {
        if g.race.pending.is_empty() {
            return Ok(());
        }
        let r = g.next_rand();
        if r % RUN_ONE_IN != 0 {
            return Ok(());
        }
        let i = ((r / RUN_ONE_IN) % g.race.pending.len() as u64) as usize;
        let id = g.race.pending[i];
        self.run_op(g, id)
    }

    /// Runs every pending operation (in a seeded order); whether any ran.
    pub(crate) fn drain_ops(&self, g: &mut State) -> Result<bool, EmuError> {
        let any = !g.race.pending.is_empty();
        while !g.race.pending.is_empty() {
            let r = g.next_rand();
            let i = (r % g.race.pending.len() as u64) as usize;
            let id = g.race.pending[i];
            self.run_op(g, id)?;
        }
        Ok(any)
    }

    /// Runs operation `id` (after its dependencies): checks and records
    /// its accesses, moves its bytes, runs its effect, completes it.
    pub(crate) fn run_op(&self, g: &mut State, id: usize) -> Result<(), EmuError> {
        if g.race.ops[id].ran {
            return Ok(());
        }
        g.race.ops[id].ran = true;
        g.race.pending.retain(|&p| p != id);
        let deps = std::mem::take(&mut g.race.ops[id].deps);
        for &d in &deps {
            self.run_op(g, d)?;
            let c = g.race.ops[d].clk.clone();
            g.race.ops[id].clk.join(&c);
        }
        let nt = self.threads.len();
        let slot = nt + id;
        let (issuer, loc) = (g.race.ops[id].issuer, g.race.ops[id].loc);
        let copies = std::mem::take(&mut g.race.ops[id].copies);
        // Accesses: (space, lo, hi, write).
        let mut accesses: Vec<(Space, u64, u64, bool)> = Vec::new();
        for c in &copies {
            if let Some(src) = c.src {
                let (sp, a) = self.classify(src as usize);
                accesses.push((sp, a, a + c.len as u64, false));
            }
            let (sp, a) = self.classify(c.dst as usize);
            accesses.push((sp, a, a + c.len as u64, true));
        }
        accesses.extend(g.race.ops[id].reads.iter().map(|&(s, lo, hi)| (s, lo, hi, false)));
        accesses.extend(g.race.ops[id].writes.iter().map(|&(s, lo, hi)| (s, lo, hi, true)));
        let kind = g.race.ops[id].kind.clone();
        for (cta, lo, hi) in self.smem_write_bounds(&copies) {
            if let Some((rule, detail)) = self.wgmma_overlap(g, cta, lo, hi, &kind) {
                return Err(EmuError::Misuse {
                    kernel: self.kernel.clone(),
                    rule: rule.to_string(),
                    where_: format!("{} at {loc}", self.who(issuer)),
                    detail,
                });
            }
        }
        let checked = if g.race.shadow_on { &accesses[..] } else { &[] };
        for &(space, lo, hi, write) in checked {
            let st = &mut *g;
            let clk = &st.race.ops[id].clk;
            let who = Accessor {
                slot: slot as u32,
                clock: if write { 2 } else { 1 },
                vc: &clk.vc,
                loc,
                proxy: proxy_space(space).then_some((&clk.pvc, nt as u32)),
                inflight: false,
            };
            if let Err(f) = st.race.shadow.access(space, lo, hi, write, &who) {
                return Err(self.finding_error(g, f, space, lo, hi, slot, write, loc, false));
            }
        }
        for c in &copies {
            // SAFETY: the issuer resolved both ends inside the CTA's shared
            // memory (bounds-checked) or the host tensor the map was built
            // from; the baton holder is the only running thread.
            unsafe {
                match c.src {
                    Some(s) => std::ptr::copy(s, c.dst, c.len),
                    None => std::ptr::write_bytes(c.dst, 0, c.len),
                }
            }
        }
        for &(space, lo, hi, write) in &accesses {
            if let (Space::Smem { cta }, true) = (space, write) {
                let (lo, hi) = (lo as usize, hi as usize);
                let real = self.smem_slice(cta);
                g.shadow[cta][lo..hi].copy_from_slice(&real[lo..hi]);
            }
        }
        if let Some(effect) = g.race.ops[id].effect.take() {
            effect();
        }
        let done = g.race.ops[id].done;
        let fail = |rule: &str, detail: String| EmuError::Misuse {
            kernel: self.kernel.clone(),
            rule: rule.to_string(),
            where_: format!("{} at {loc} (completion of `{kind}`)", self.who(issuer)),
            detail,
        };
        match done {
            OpDone::MBarTx { cta, off, .. } | OpDone::Arrive { cta, off } if !g.mbars.contains_key(&(cta, off)) => {
                return Err(fail(
                    "mbarrier used before mbarrier.init",
                    format!(
                        "`{kind}` completes on smem+{off:#x} of cta {}: no initialized mbarrier there",
                        fmt3(self.ctas[cta].idx)
                    ),
                ));
            }
            OpDone::MBarTx { cta, off, bytes } => {
                let st = &mut *g;
                let b = st.mbars.get_mut(&(cta, off)).expect("checked above");
                b.clk.join(&st.race.ops[id].clk);
                b.clk_local.join(&st.race.ops[id].clk);
                b.tx -= bytes as i64;
                b.tx_op.get_or_insert((kind.clone(), loc));
                if b.tx.abs() > MAX_TX {
                    return Err(fail("mbarrier transaction count out of range", format!("tx {}", b.tx)));
                }
                self.complete_phase(g, cta, off, &kind).map_err(|(r, d)| fail(r, d))?;
            }
            OpDone::Arrive { cta, off } => {
                let st = &mut *g;
                let b = st.mbars.get_mut(&(cta, off)).expect("checked above");
                if b.pending == 0 {
                    return Err(fail(
                        "more arrivals than the count in one phase",
                        format!("`{kind}` arrives on smem+{off:#x} whose phase {} has all its arrivals", b.phase),
                    ));
                }
                b.pending -= 1;
                b.clk.join(&st.race.ops[id].clk);
                b.clk_local.join(&st.race.ops[id].clk);
                self.complete_phase(g, cta, off, &kind).map_err(|(r, d)| fail(r, d))?;
            }
            OpDone::Bulk | OpDone::Tracked => {}
        }
        Ok(())
    }
}

