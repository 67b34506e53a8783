//! The register pool of each CTA and `setmaxnreg` (PTX ISA §9.7.19.6; the
//! entry count and the rule are `kernel_spec::registers`).
//!
//! Model:
//!
//! - every warpgroup of a CTA starts with the kernel's entry count per
//!   thread, [`entry_registers`] of the block size; the CTA's pool is that
//!   count per warpgroup ([`register_pool`]: 3 x 168 = 504 per thread slot
//!   for 384 threads);
//! - `setmaxnreg` is a collective of the warpgroup's 128 threads (the PTX
//!   requires all its warps to execute the same one): a thread that reaches
//!   it waits until the whole warpgroup has, then the warpgroup's count
//!   changes at once (the hardware moves registers per warp, so on the GPU
//!   part of a warpgroup may get its registers before the rest waits; the
//!   emulator reports the warpgroup). Threads of the warpgroup at different
//!   counts or actions are a misuse. The gathering is a scheduling
//!   constraint only: it joins no clocks (`setmaxnreg` orders no memory);
//! - `setmaxnreg.dec N` sets the count to `N` (a misuse if `N` is above the
//!   current count) and serves waiting `setmaxnreg.inc`s that now fit;
//! - `setmaxnreg.inc N` (a misuse if `N` is below the current count) takes
//!   the registers when the other warpgroups' counts plus `N` fit the pool;
//!   until then its 128 threads are blocked ([`Wait::Regs`]), and a run in
//!   which nothing else can run is a deadlock whose report states the pool,
//!   each warpgroup's count and the rule;
//! - registers return to the pool only through `setmaxnreg.dec`: a warp
//!   that exits keeps its count until the CTA ends (the conservative model:
//!   whether the hardware returns an exited warp's registers to the pool is
//!   not documented, and the counts of all roles must fit the pool anyway).
use super::*;
use kernel_spec::desc_wgmma::WARPGROUP_THREADS;
use kernel_spec::registers::{
    counts_fit, entry_registers, register_pool, setmaxnreg_count_ok, EntryCountReason,
    REGISTER_POOL_RULE,
};

/// Threads per warpgroup.
const WG: usize = WARPGROUP_THREADS as usize;

/// A `setmaxnreg` of one warpgroup in progress.
pub(super) struct RegRequest {
    inc: bool,
    n: u32,
    /// Where its first thread reached it.
    loc: Loc,
    /// The warpgroup's threads that reached it (all of them: it waits for
    /// registers).
    arrived: Vec<usize>,
}

/// One CTA's register pool.
pub(super) struct RegPool {
    /// Per warpgroup: registers per thread.
    counts: Vec<u32>,
    /// Per warpgroup: the `setmaxnreg` its threads gather at or wait in.
    pending: Vec<Option<RegRequest>>,
}

impl RegPool {
    /// A CTA of `tpc` threads at launch: every warpgroup at the entry count.
    pub(super) fn new(tpc: usize) -> RegPool {
        let wgs = tpc.div_ceil(WG);
        RegPool {
            counts: vec![entry_registers(tpc as u32); wgs],
            pending: (0..wgs).map(|_| None).collect(),
        }
    }
}

fn op_name(inc: bool) -> &'static str {
    if inc {
        "setmaxnreg.inc"
    } else {
        "setmaxnreg.dec"
    }
}

/// `"a + b + c"`.
fn plus(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(" + ")
}

impl Emu {
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 n` by thread `tid` (see the
    /// module docs).
    pub(crate) fn setmaxnreg(&self, tid: usize, loc: Loc, inc: bool, n: u32) {
        let op = op_name(inc);
        let mut g = self.begin();
        g.note(tid, op, loc);
        let cta = self.threads[tid].cta;
        let wg = (tid - cta * self.tpc) / WG;
        if !setmaxnreg_count_ok(n) {
            self.misuse(
                g,
                tid,
                loc,
                "setmaxnreg count not allowed",
                format!("{op} {n}: setmaxnreg takes a multiple of 8 in 24..=256"),
            );
        }
        if !self.tpc.is_multiple_of(WG) {
            let detail = format!(
                "{op} {n} in a CTA of {} threads: setmaxnreg is executed by all 4 warps of a warpgroup \
                 (128 threads), and the register pool is counted in warpgroups; launch whole warpgroups",
                self.tpc
            );
            self.misuse(
                g,
                tid,
                loc,
                "setmaxnreg in a CTA that is not whole warpgroups",
                detail,
            );
        }
        let cur = g.regs[cta].counts[wg];
        let at = g.regs[cta].pending[wg]
            .as_ref()
            .map(|r| (r.inc, r.n, r.loc, r.arrived.len()));
        match at {
            Some((other_inc, other_n, other_loc, k)) if other_inc != inc || other_n != n => {
                let detail = format!(
                    "{op} {n} here, while {k} other thread(s) of warpgroup {wg} are at {} {other_n} (reached at {other_loc}): \
                     all warps of a warpgroup execute the same setmaxnreg (.sync.aligned) and synchronize \
                     before the next one",
                    op_name(other_inc),
                );
                self.misuse(g, tid, loc, "different setmaxnreg in one warpgroup", detail);
            }
            Some(_) => g.regs[cta].pending[wg]
                .as_mut()
                .expect("pending")
                .arrived
                .push(tid),
            None => {
                if inc && n < cur {
                    let detail = format!(
                        "setmaxnreg.inc {n} in warpgroup {wg}, which has {cur} registers per thread: .inc raises \
                         the count from its current value and must not lower it; use setmaxnreg.dec {n} (or leave \
                         the count: a {}-thread kernel starts with {} per thread)",
                        self.tpc,
                        entry_registers(self.tpc as u32)
                    );
                    self.misuse(
                        g,
                        tid,
                        loc,
                        "setmaxnreg.inc below the warpgroup's register count",
                        detail,
                    );
                }
                if !inc && n > cur {
                    let detail = format!(
                        "setmaxnreg.dec {n} in warpgroup {wg}, which has {cur} registers per thread: .dec lowers \
                         the count and must not raise it; use setmaxnreg.inc {n}"
                    );
                    self.misuse(
                        g,
                        tid,
                        loc,
                        "setmaxnreg.dec above the warpgroup's register count",
                        detail,
                    );
                }
                g.regs[cta].pending[wg] = Some(RegRequest {
                    inc,
                    n,
                    loc,
                    arrived: vec![tid],
                });
            }
        }
        let wait = Wait::Regs {
            wg: wg as u32,
            inc,
            n,
        };
        let arrived = g.regs[cta].pending[wg]
            .as_ref()
            .map_or(0, |r| r.arrived.len());
        if arrived < WG {
            // The rest of the warpgroup has not reached it yet.
            drop(self.block(g, tid, wait, loc));
            return;
        }
        if !inc {
            let r = g.regs[cta].pending[wg]
                .take()
                .expect("the request is pending");
            g.regs[cta].counts[wg] = n;
            for t in r.arrived {
                if t != tid {
                    g.wake(t);
                }
            }
            self.grant_registers(&mut g, cta);
            drop(self.switch(g, tid));
        } else if self.grant_registers(&mut g, cta).contains(&wg) {
            drop(self.switch(g, tid));
        } else {
            drop(self.block(g, tid, wait, loc));
        }
    }

    /// Serves the `setmaxnreg.inc`s of `cta` whose whole warpgroup waits and
    /// that fit the pool now (lowest warpgroup first); returns the
    /// warpgroups served. Their threads are woken (the calling thread too
    /// when it is one of them: it is running).
    fn grant_registers(&self, g: &mut State, cta: usize) -> Vec<usize> {
        let mut served = Vec::new();
        for wg in 0..g.regs[cta].counts.len() {
            let p = &g.regs[cta];
            let Some(r) = &p.pending[wg] else { continue };
            if !r.inc || r.arrived.len() < WG {
                continue;
            }
            // The counts with this warpgroup's request granted.
            let mut asked = p.counts.clone();
            asked[wg] = r.n;
            if !counts_fit(&asked) {
                continue;
            }
            let r = g.regs[cta].pending[wg].take().expect("checked above");
            g.regs[cta].counts[wg] = r.n;
            for t in r.arrived {
                if matches!(g.status[t], Status::Blocked(..)) {
                    g.wake(t);
                }
            }
            served.push(wg);
        }
        served
    }

    /// What a thread blocked in `setmaxnreg` of warpgroup `wg` waits for:
    /// the rest of its warpgroup, or registers (the pool, each
    /// warpgroup's count and the rule).
    pub(super) fn describe_regs(
        &self,
        g: &State,
        t: usize,
        wg: usize,
        inc: bool,
        n: u32,
    ) -> String {
        let cta = self.threads[t].cta;
        let op = op_name(inc);
        let p = &g.regs[cta];
        let arrived: &[usize] = p.pending[wg].as_ref().map_or(&[], |r| &r.arrived);
        if arrived.len() < WG {
            let members = self.cta_threads(cta).skip(wg * WG).take(WG);
            return format!(
                "{op} {n} of warpgroup {wg} (executed by all 128 threads of the warpgroup together): {} of {WG} threads arrived{}",
                arrived.len(),
                self.missing(g, members, arrived, false)
            );
        }
        let wgs = p.counts.len();
        let entry = entry_registers(self.tpc as u32);
        let pool = register_pool(self.tpc as u32);
        let mut asked = p.counts.clone();
        asked[wg] = n;
        let need: u32 = asked.iter().sum();
        format!(
            "{op} {n} in warpgroup {wg}, for registers: the CTA's pool is {wgs} x {entry} = {pool} per thread slot, \
             warpgroups 0..{wgs} hold {} = {}, and warpgroup {wg} asks for {n}: {} = {need} > {pool}. {}. \
             Only a setmaxnreg.dec of another warpgroup returns registers to the pool (an exited warp's registers \
             stay counted until the CTA ends). {REGISTER_POOL_RULE}: lower the counts by {} in all",
            plus(&p.counts),
            p.counts.iter().sum::<u32>(),
            plus(&asked),
            EntryCountReason(self.tpc as u32),
            need - pool
        )
    }
}

#[cfg(test)]
impl Emu {
    /// Threads of CTA `cta` inside a `setmaxnreg.inc` (gathering or waiting
    /// for registers), for tests that force an order of the roles.
    pub(crate) fn threads_in_setmaxnreg_inc(&self, cta: usize) -> usize {
        let g = self.lock();
        g.regs[cta]
            .pending
            .iter()
            .flatten()
            .filter(|r| r.inc)
            .map(|r| r.arrived.len())
            .sum()
    }

    /// Each warpgroup's register count in CTA `cta`.
    pub(crate) fn register_counts(&self, cta: usize) -> Vec<u32> {
        self.lock().regs[cta].counts.clone()
    }
}
