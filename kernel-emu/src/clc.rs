//! Clusters not yet started and cluster launch control
//! (`clusterlaunchcontrol.try_cancel` / `query_cancel`, sm_100), as the
//! emulator models them.
//!
//! # Model
//!
//! * **Residency**: with [`crate::LaunchConfig::resident_clusters`] `= R > 0`
//!   only the first `R` clusters (in linear cluster order) start; the others
//!   are *pending*: their threads exist but are not scheduled. When every
//!   thread of a running cluster finished, the lowest pending cluster starts
//!   (the hardware launches clusters in order as SMs free up). `R = 0`: every
//!   cluster starts at once (the default; no cancel can then succeed).
//! * **try_cancel** ([`try_cancel`]): decided at issue by the seeded
//!   scheduler: if some cluster is pending, with probability 3/4 a pending
//!   cluster **chosen at random** is canceled (it will never run: its
//!   threads exit without running the kernel) and the response says
//!   "canceled, first CTA = its first CTA's index"; otherwise (none pending,
//!   or the 1/4 draw) the response says "not canceled". So both paths run
//!   in tests. The 16-byte response is written to SMEM and completes
//!   16 bytes on the mbarrier asynchronously (an async operation of the race
//!   detector), in the issuing CTA or, multicast, in every CTA of its
//!   cluster.
//! * **query** ([`query`]): decodes a response (this emulator's own
//!   encoding: `[canceled, x, y, z]` as `u32`s; the hardware's is opaque and
//!   read only by `query_cancel`), checked as an ordinary SMEM read (a read
//!   before the mbarrier wait is a race with the response's write).
//!
//! Checks: a `try_cancel` by a CTA that already observed a failed response
//! is a misuse ("try_cancel after a failed response": undefined behaviour in
//! the PTX ISA).
use crate::engine::{Emu, State};
use crate::race::{AsyncCopy, AsyncOp, Completion};
use crate::{enter, map_rank_addr, push_copy, smem_ptr_range};
use std::collections::HashMap;
use std::panic::Location;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClusterState {
    Pending,
    Running,
    Canceled,
    Done,
}

#[derive(Default)]
struct Run {
    clusters: Vec<ClusterState>,
    /// Responses in flight or delivered (their bytes are the async copies'
    /// sources: boxed so they do not move).
    responses: Vec<Box<[u32; 4]>>,
    /// CTAs that observed a failed response.
    failed_seen: Vec<usize>,
    canceled: u32,
}

static RUNS: Mutex<Option<HashMap<usize, Run>>> = Mutex::new(None);

fn key(e: &Emu) -> usize {
    e as *const Emu as usize
}

fn runs<R>(f: impl FnOnce(&mut HashMap<usize, Run>) -> R) -> R {
    let mut g = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

/// Before the run starts: holds back every cluster past the first
/// `resident` (0: none held back).
pub(crate) fn hold_back(e: &Emu, resident: u32) {
    let n = e.clusters.len();
    let mut states = vec![ClusterState::Running; n];
    if resident > 0 && (resident as usize) < n {
        let mut g = e.lock();
        for (c, s) in states.iter_mut().enumerate().skip(resident as usize) {
            *s = ClusterState::Pending;
            for &cta in &e.clusters[c].ctas {
                for t in e.cta_threads(cta) {
                    g.remove_runnable(t);
                }
            }
        }
    }
    runs(|m| m.insert(key(e), Run { clusters: states, ..Run::default() }));
}

/// Whether thread `tid` belongs to a canceled cluster (it exits without
/// running the kernel).
pub(crate) fn canceled(e: &Emu, tid: usize) -> bool {
    let c = e.ctas[e.threads[tid].cta].cluster;
    runs(|m| m.get(&key(e)).is_some_and(|r| r.clusters.get(c) == Some(&ClusterState::Canceled)))
}

/// The engine's hook when `tid` finished (state locked): once every thread
/// of a running cluster is done, the lowest pending cluster starts.
pub(crate) fn thread_done(e: &Emu, g: &mut State, tid: usize) {
    let c = e.ctas[e.threads[tid].cta].cluster;
    let all_done = e.clusters[c].ctas.iter().all(|&cta| e.cta_threads(cta).all(|t| g.is_done(t)));
    if !all_done {
        return;
    }
    let start = runs(|m| {
        let r = m.get_mut(&key(e))?;
        if r.clusters.get(c) != Some(&ClusterState::Running) {
            return None;
        }
        r.clusters[c] = ClusterState::Done;
        let next = r.clusters.iter().position(|s| *s == ClusterState::Pending)?;
        r.clusters[next] = ClusterState::Running;
        Some(next)
    });
    if let Some(next) = start {
        for &cta in &e.clusters[next].ctas {
            for t in e.cta_threads(cta) {
                g.wake(t);
            }
        }
    }
}

/// Forgets the run's state; returns how many clusters were canceled.
pub(crate) fn end_run(e: &Emu) -> u32 {
    runs(|m| m.remove(&key(e)).map(|r| r.canceled).unwrap_or(0))
}

/// `clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes{.multicast::cluster::all}.b128 [resp], [bar]`
/// by the calling thread: see the module docs. `resp` (16-byte aligned) and
/// `bar` are `.shared::cta` offsets; with `multicast` the response lands at
/// the same offsets in every CTA of the cluster.
#[track_caller]
pub fn try_cancel(resp: u32, bar: u32, multicast: bool) {
    let loc = Location::caller();
    let Some((e, tid)) = enter("clc::try_cancel") else { return };
    e.yield_point(tid, "clusterlaunchcontrol.try_cancel", loc);
    if resp % 16 != 0 {
        e.misuse(e.lock(), tid, loc, "try_cancel response not 16-byte aligned", format!("response at smem+{resp:#x}; align it to 16 bytes"));
    }
    let cta = e.threads[tid].cta;
    let decided = {
        let mut g = e.lock();
        let r = g.next_rand_pub();
        let out = runs(|m| {
            let run = m.entry(key(&e)).or_default();
            if run.failed_seen.contains(&cta) {
                return Err(());
            }
            let pending: Vec<usize> = (0..run.clusters.len()).filter(|&c| run.clusters[c] == ClusterState::Pending).collect();
            if pending.is_empty() || r % 4 == 0 {
                return Ok(None);
            }
            let c = pending[((r >> 2) % pending.len() as u64) as usize];
            run.clusters[c] = ClusterState::Canceled;
            run.canceled += 1;
            Ok(Some(c))
        });
        match out {
            Err(()) => e.misuse(
                g,
                tid,
                loc,
                "try_cancel after a failed response",
                "this CTA already observed a try_cancel response saying no cluster was canceled; issuing another is undefined behaviour (PTX ISA): leave the scheduling loop on the first failure".to_string(),
            ),
            Ok(Some(c)) => {
                for &cc in &e.clusters[c].ctas {
                    for t in e.cta_threads(cc) {
                        g.wake(t);
                    }
                }
                Some(c)
            }
            Ok(None) => None,
        }
    };
    let words = match decided {
        Some(c) => {
            let first = e.ctas[e.clusters[c].ctas[0]].idx;
            [1, first[0], first[1], first[2]]
        }
        None => [0; 4],
    };
    let src = runs(|m| {
        let run = m.entry(key(&e)).or_default();
        run.responses.push(Box::new(words));
        run.responses.last().expect("pushed").as_ptr() as *const u8
    });
    let ranks: Vec<u32> = if multicast { (0..e.clusters[e.ctas[cta].cluster].ctas.len() as u32).collect() } else { vec![e.ctas[cta].rank] };
    for rank in ranks {
        let dst = smem_ptr_range(map_rank_addr(resp, rank), 16);
        let mut copies = Vec::new();
        push_copy(&mut copies, AsyncCopy { dst, src: Some(src), len: 16 });
        crate::async_issue(AsyncOp::copies(
            "clusterlaunchcontrol.try_cancel",
            copies,
            Completion::MBarrierTx { bar: map_rank_addr(bar, rank), bytes: 16 },
        ));
    }
}

/// `clusterlaunchcontrol.query_cancel`: the response at `resp` (this CTA's
/// SMEM) decoded: `Some(first CTA index of the canceled cluster)` or `None`.
/// A `None` is remembered: a later `try_cancel` by this CTA is a misuse.
#[track_caller]
pub fn query(resp: u32) -> Option<[u32; 3]> {
    let p = smem_ptr_range(resp, 16);
    crate::smem_access(p, 16, false);
    // SAFETY: 16 bytes of this CTA's SMEM (checked above).
    let w = unsafe { (p as *const [u32; 4]).read_unaligned() };
    if w[0] == 0 {
        if let Some((e, tid)) = enter("clc::query") {
            let cta = e.threads[tid].cta;
            runs(|m| {
                let run = m.entry(key(&e)).or_default();
                if !run.failed_seen.contains(&cta) {
                    run.failed_seen.push(cta);
                }
            });
        }
        None
    } else {
        Some([w[1], w[2], w[3]])
    }
}

/// For tests: the calling run's canceled-cluster count so far.
pub fn canceled_so_far() -> u32 {
    let Some((e, _)) = enter("clc::canceled_so_far") else { return 0 };
    runs(|m| m.get(&key(&e)).map(|r| r.canceled).unwrap_or(0))
}
