//! Warp collectives with data: `shfl.sync`, `vote.sync`, `redux.sync`,
//! `match.sync` (PTX ISA §9.7.9.6, §9.7.13.5-9.7.13.7, §9.7.13.10), and the
//! convergence check every warp collective goes through.
//!
//! # How a collective runs
//!
//! Each lane deposits its operand in its warp's exchange buffer, then meets
//! the other lanes at the warp barrier of the engine (the one `bar.warp.sync`
//! uses); after it, every lane reads all 32 operands and computes its own
//! result. Buffers alternate between two generations, so a lane that goes on
//! to the next collective cannot overwrite operands a slower lane still
//! reads (it cannot pass the next barrier before every lane has read).
//!
//! # Convergence check
//!
//! The data collectives ([`exchange`]) name their operation and call site.
//! Every lane of the warp must reach the same operation at the same call
//! site (the kernel's line, through `#[track_caller]` wrappers):
//!
//! - lanes at different collectives (another call site, another operation,
//!   or `bar.warp.sync` / `elect.sync` while others shuffle) are reported as
//!   the misuse "warp collective not converged", listing where each lane is;
//! - a lane that exits while the others wait at a collective, or lanes that
//!   reach a collective after a lane of their warp exited, are reported as
//!   "warp collective with an exited lane";
//! - a lane blocked elsewhere (e.g. at `bar.sync`) leaves the warp barrier
//!   waiting: the run ends as a deadlock naming the collective and the lanes
//!   that did not arrive.
//!
//! The collectives use the full mask (`0xffffffff`): a warp with fewer than
//! 32 threads (a block size that is not a multiple of 32) is reported.
//! `bar.warp.sync` and `elect.sync` ([`crate::warp_sync`],
//! [`crate::elect_one`]) take part in the generation count but are not
//! checked among themselves (lanes may reach them at different sites).
use crate::engine::{Emu, Loc, WARP};
use std::panic::Location;
use std::sync::Mutex;

/// One lane's operand of one collective.
#[derive(Clone, Copy)]
struct Slot {
    /// Generation (collectives completed by this lane before this one, plus 1).
    gen: u64,
    op: &'static str,
    loc: Option<Loc>,
    /// Checked (a data collective) or not (`bar.warp.sync`, `elect.sync`).
    checked: bool,
    value: u64,
}

const EMPTY: Slot = Slot {
    gen: 0,
    op: "(none)",
    loc: None,
    checked: false,
    value: 0,
};

struct WarpSlots {
    gen: [u64; WARP],
    exited: [bool; WARP],
    slots: [[Slot; WARP]; 2],
}

/// The exchange buffers of every warp of a run.
pub(crate) struct Exchange {
    warps: Mutex<Vec<WarpSlots>>,
}

impl Exchange {
    pub(crate) fn new(emu: &Emu) -> Exchange {
        let n = emu.ctas.len() * emu.tpc.div_ceil(WARP);
        Exchange {
            warps: Mutex::new(
                (0..n)
                    .map(|_| WarpSlots {
                        gen: [0; WARP],
                        exited: [false; WARP],
                        slots: [[EMPTY; WARP]; 2],
                    })
                    .collect(),
            ),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<WarpSlots>> {
        self.warps.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn warp_index(e: &Emu, tid: usize) -> usize {
    let t = &e.threads[tid];
    t.cta * e.tpc.div_ceil(WARP) + t.warp
}

fn lanes(e: &Emu, tid: usize) -> usize {
    (e.tpc - e.threads[tid].warp * WARP).min(WARP)
}

/// The thread id of lane `l` of `tid`'s warp.
fn lane_tid(e: &Emu, tid: usize, l: usize) -> usize {
    tid - e.threads[tid].lane as usize + l
}

fn site(s: &Slot) -> String {
    match s.loc {
        Some(l) => format!("{} (at {l})", s.op),
        None => s.op.to_string(),
    }
}

/// Runs one warp collective for the calling lane: deposits `value`, waits
/// for every lane of the warp, checks convergence (see the module docs) and
/// returns the 32 lanes' values (index = lane).
pub(crate) fn collective(
    e: &Emu,
    x: &Exchange,
    tid: usize,
    loc: Loc,
    op: &'static str,
    checked: bool,
    value: u64,
) -> [u64; WARP] {
    let w = warp_index(e, tid);
    let lane = e.threads[tid].lane as usize;
    let n = lanes(e, tid);
    if checked && n < WARP {
        let detail = format!(
            "{op} with membermask 0xffffffff in warp {} of a {}-thread CTA, which has {n} lanes \
             (lanes {n}..31 do not exist): make the block size a multiple of 32",
            e.threads[tid].warp, e.tpc
        );
        e.misuse(e.lock(), tid, loc, "warp collective over lanes that do not exist", detail);
    }
    let gen = {
        let mut g = x.lock();
        let ws = &mut g[w];
        if checked {
            if let Some(gone) = (0..n).find(|&l| ws.exited[l]) {
                drop(g);
                let detail = format!(
                    "lane {gone} of this warp exited before reaching {op}; every lane of the \
                     membermask must execute it (an exited lane makes shfl/vote/redux/match undefined)"
                );
                e.misuse(e.lock(), tid, loc, "warp collective with an exited lane", detail);
            }
        }
        ws.gen[lane] += 1;
        let gen = ws.gen[lane];
        ws.slots[(gen % 2) as usize][lane] = Slot {
            gen,
            op,
            loc: Some(loc),
            checked,
            value,
        };
        gen
    };
    e.warp_sync(tid, loc, op);
    let g = x.lock();
    let ws = &g[w];
    let row = ws.slots[(gen % 2) as usize];
    let any_checked = row[..n].iter().any(|s| s.checked);
    let converged = row[..n].iter().all(|s| {
        s.gen == gen && (!any_checked || (s.op == op && s.loc.map(|l| l as *const _) == Some(loc as *const _)))
    });
    if !converged {
        // Group lanes by where they are.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for l in 0..n {
            let s = if row[l].gen == gen { row[l] } else { ws.slots[(ws.gen[l] % 2) as usize][l] };
            let at = site(&s);
            match groups.iter_mut().find(|(a, _)| *a == at) {
                Some((_, v)) => v.push(l),
                None => groups.push((at, vec![l])),
            }
        }
        drop(g);
        let detail = groups
            .iter()
            .map(|(at, ls)| format!("lanes {} at {at}", lane_list(ls)))
            .collect::<Vec<_>>()
            .join("; ");
        e.misuse(
            e.lock(),
            tid,
            loc,
            "warp collective not converged: every lane of the mask must reach the same warp operation \
             at the same call site (no divergent branches around shfl/vote/redux/match)",
            detail,
        );
    }
    let mut out = [0u64; WARP];
    for l in 0..n {
        out[l] = row[l].value;
    }
    out
}

/// `"0-15, 17"`.
fn lane_list(ls: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ls.len() {
        let mut j = i;
        while j + 1 < ls.len() && ls[j + 1] == ls[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { format!("{}", ls[i]) } else { format!("{}-{}", ls[i], ls[j]) });
        i = j + 1;
    }
    parts.join(", ")
}

/// Called when lane `tid` finishes the kernel: a lane of its warp waiting
/// at a checked collective can never complete it.
pub(crate) fn exiting(e: &Emu, x: &Exchange, tid: usize) {
    let w = warp_index(e, tid);
    let lane = e.threads[tid].lane as usize;
    let n = lanes(e, tid);
    let mut g = x.lock();
    let ws = &mut g[w];
    ws.exited[lane] = true;
    // Lanes that deposited a collective this lane never reached wait forever.
    let waiter = (0..n).find(|&l| {
        l != lane && ws.gen[l] > ws.gen[lane] && ws.slots[(ws.gen[l] % 2) as usize][l].checked
    });
    if let Some(l) = waiter {
        let s = ws.slots[(ws.gen[l] % 2) as usize][l];
        drop(g);
        let detail = format!(
            "lane {lane} exited without reaching {}; every lane of the membermask must execute it",
            site(&s)
        );
        e.misuse(
            e.lock(),
            lane_tid(e, tid, l),
            s.loc.unwrap_or(Location::caller()),
            "warp collective with an exited lane",
            detail,
        );
    }
}

// ----- semantics (pure functions of the 32 operands) ------------------------

/// The mode of a `shfl.sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflMode {
    /// `shfl.sync.idx`: from lane `minLane | (b & ~segmask)`.
    Idx,
    /// `shfl.sync.up`: from lane `lane - b`.
    Up,
    /// `shfl.sync.down`: from lane `lane + b`.
    Down,
    /// `shfl.sync.bfly`: from lane `lane ^ b`.
    Bfly,
}

/// `shfl.sync.mode.b32 d|p, a, b, c, 0xffffffff` for lane `lane`, given
/// every lane's `a` (PTX ISA §9.7.9.6): returns `(d, p)`; `p` is false (and
/// `d` the lane's own value) when the source lane is out of range. `c`
/// packs the clamp value (bits 0..4) and the segment mask (bits 8..12).
pub fn shfl_result(mode: ShflMode, values: &[u64; WARP], lane: u32, b: u32, c: u32) -> (u32, bool) {
    let lane = (lane & 31) as i32;
    let bval = (b & 31) as i32;
    let cval = (c & 31) as i32;
    let segmask = ((c >> 8) & 31) as i32;
    let max_lane = (lane & segmask) | (cval & !segmask);
    let min_lane = lane & segmask;
    let (j, p) = match mode {
        ShflMode::Up => {
            let j = lane - bval;
            (j, j >= max_lane)
        }
        ShflMode::Down => {
            let j = lane + bval;
            (j, j <= max_lane)
        }
        ShflMode::Bfly => {
            let j = lane ^ bval;
            (j, j <= max_lane)
        }
        ShflMode::Idx => {
            let j = min_lane | (bval & !segmask);
            (j, j <= max_lane)
        }
    };
    let j = if p { j } else { lane };
    (values[j as usize] as u32, p)
}

/// `vote.sync.ballot.b32`: bit `l` set when lane `l`'s predicate is true.
pub fn ballot_result(values: &[u64; WARP]) -> u32 {
    (0..WARP).filter(|&l| values[l] != 0).fold(0, |m, l| m | (1 << l))
}

/// The operation of a `redux.sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduxOp {
    /// `.add` (wrapping), `.u32` or `.s32`.
    Add,
    /// `.min.u32`.
    MinU32,
    /// `.max.u32`.
    MaxU32,
    /// `.min.s32`.
    MinS32,
    /// `.max.s32`.
    MaxS32,
    /// `.and.b32`.
    And,
    /// `.or.b32`.
    Or,
    /// `.xor.b32`.
    Xor,
}

/// `redux.sync.op d, a, 0xffffffff` over every lane's `a` (PTX ISA §9.7.13.10).
pub fn redux_result(op: ReduxOp, values: &[u64; WARP]) -> u32 {
    let v = values.iter().map(|&x| x as u32);
    match op {
        ReduxOp::Add => v.fold(0u32, u32::wrapping_add),
        ReduxOp::MinU32 => v.min().unwrap_or(0),
        ReduxOp::MaxU32 => v.max().unwrap_or(0),
        ReduxOp::MinS32 => v.map(|x| x as i32).min().unwrap_or(0) as u32,
        ReduxOp::MaxS32 => v.map(|x| x as i32).max().unwrap_or(0) as u32,
        ReduxOp::And => v.fold(!0, |a, b| a & b),
        ReduxOp::Or => v.fold(0, |a, b| a | b),
        ReduxOp::Xor => v.fold(0, |a, b| a ^ b),
    }
}

/// `match.any.sync.b64`: the lanes whose value equals lane `lane`'s.
pub fn match_any_result(values: &[u64; WARP], lane: u32) -> u32 {
    let mine = values[(lane & 31) as usize];
    (0..WARP).filter(|&l| values[l] == mine).fold(0, |m, l| m | (1 << l))
}

/// `match.all.sync.b64 d|p`: `(0xffffffff, true)` when every lane holds
/// the same value, `(0, false)` otherwise.
pub fn match_all_result(values: &[u64; WARP]) -> (u32, bool) {
    if values.iter().all(|&v| v == values[0]) {
        (!0, true)
    } else {
        (0, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run, EmuError, LaunchConfig, RunReport};
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::time::Duration;

    fn run_t(block: u32, f: impl Fn() + Send + Sync + 'static) -> Result<RunReport, EmuError> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut cfg = LaunchConfig::new("warp_ops", [1, 1, 1], [block, 1, 1]);
            cfg.seed = 7;
            let _ = tx.send(run(&cfg, &f));
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("run() returned")
    }

    fn tid() -> u32 {
        crate::thread_idx()[0]
    }

    #[test]
    fn shuffles_votes_redux_and_match_compute_every_lane() {
        let out = Arc::new(Mutex::new(vec![[0u32; 10]; 64]));
        let o = out.clone();
        run_t(64, move || {
            let t = tid();
            let v = 100 + t;
            let (idx, _) = crate::shfl_sync("shfl.sync.idx.b32", ShflMode::Idx, v, 5, 0x1f);
            let (up, pu) = crate::shfl_sync("shfl.sync.up.b32", ShflMode::Up, v, 3, 0);
            let (down, pd) = crate::shfl_sync("shfl.sync.down.b32", ShflMode::Down, v, 3, 0x1f);
            let (bfly, _) = crate::shfl_sync("shfl.sync.bfly.b32", ShflMode::Bfly, v, 1, 0x1f);
            let ballot = crate::vote_ballot("vote.sync.ballot.b32", t % 3 == 0);
            let sum = crate::redux_sync("redux.sync.add.u32", ReduxOp::Add, t);
            let mx = crate::redux_sync("redux.sync.max.s32", ReduxOp::MaxS32, (t as i32 - 40) as u32);
            let any = crate::match_any_sync("match.any.sync.b32", (t % 4) as u64);
            let (all, p) = crate::match_all_sync("match.all.sync.b32", 9);
            o.lock().unwrap()[t as usize] =
                [idx, up | (pu as u32) << 31, down | (pd as u32) << 31, bfly, ballot, sum, mx, any, all, p as u32];
        })
        .unwrap();
        let out = out.lock().unwrap();
        for t in 0..64u32 {
            let (w, l) = (t / 32 * 32, t % 32);
            let r = out[t as usize];
            assert_eq!(r[0], 100 + w + 5, "idx t{t}");
            let want_up = if l >= 3 { (100 + t - 3) | 1 << 31 } else { 100 + t };
            assert_eq!(r[1], want_up, "up t{t}");
            let want_down = if l + 3 <= 31 { (100 + t + 3) | 1 << 31 } else { 100 + t };
            assert_eq!(r[2], want_down, "down t{t}");
            assert_eq!(r[3], 100 + (t ^ 1), "bfly t{t}");
            let ballot = (0..32).filter(|&k| (w + k) % 3 == 0).fold(0u32, |m, k| m | 1 << k);
            assert_eq!(r[4], ballot, "ballot t{t}");
            assert_eq!(r[5], (w..w + 32).sum::<u32>(), "redux t{t}");
            assert_eq!(r[6] as i32, (w + 31) as i32 - 40, "redux max t{t}");
            let any = (0..32).filter(|&k| k % 4 == l % 4).fold(0u32, |m, k| m | 1 << k);
            assert_eq!(r[7], any, "match.any t{t}");
            assert_eq!((r[8], r[9]), (!0, 1), "match.all t{t}");
        }
    }

    #[test]
    fn lanes_at_different_call_sites_are_not_converged() {
        let e = run_t(32, || {
            let t = tid();
            if t < 16 {
                crate::shfl_sync("shfl.sync.bfly.b32", ShflMode::Bfly, t, 1, 0x1f);
            } else {
                crate::shfl_sync("shfl.sync.bfly.b32", ShflMode::Bfly, t, 2, 0x1f);
            }
        })
        .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Misuse { .. }), "{msg}");
        assert!(msg.contains("warp collective not converged"), "{msg}");
        assert!(msg.contains("lanes 0-15 at shfl.sync.bfly.b32 (at kernel-emu/src/warp_ops.rs"), "{msg}");
        assert!(msg.contains("lanes 16-31 at"), "{msg}");
        // A shuffle meeting a plain warp barrier is not converged either.
        let e = run_t(32, || {
            if tid() == 0 {
                crate::warp_sync();
            } else {
                crate::vote_ballot("vote.sync.ballot.b32", true);
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("lanes 0 at bar.warp.sync"), "{e}");
    }

    #[test]
    fn an_exited_lane_is_a_misuse_not_a_hang() {
        for early in [false, true] {
            let e = run_t(32, move || {
                let t = tid();
                if t == 7 {
                    return;
                }
                if !early {
                    // Let lane 7 exit first in some schedules, wait in others.
                    crate::yield_point("spin");
                }
                crate::redux_sync("redux.sync.add.u32", ReduxOp::Add, t);
            })
            .unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, EmuError::Misuse { .. }), "{msg}");
            assert!(msg.contains("warp collective with an exited lane") && msg.contains("lane 7"), "{msg}");
        }
        // A block of 48 threads: the second warp has 16 lanes.
        let e = run_t(48, || {
            crate::vote_ballot("vote.sync.ballot.b32", true);
        })
        .unwrap_err();
        assert!(e.to_string().contains("warp collective over lanes that do not exist"), "{e}");
    }

    #[test]
    fn shfl_clamps_and_segments_like_the_isa() {
        let vals: [u64; 32] = core::array::from_fn(|l| l as u64);
        // width 8 segments: c = ((32 - 8) << 8) | 0x1f for down/bfly/idx, (32 - 8) << 8 for up.
        let c = (24 << 8) | 0x1f;
        assert_eq!(shfl_result(ShflMode::Idx, &vals, 13, 2, c), (10, true));
        assert_eq!(shfl_result(ShflMode::Down, &vals, 13, 2, c), (15, true));
        assert_eq!(shfl_result(ShflMode::Down, &vals, 14, 2, c), (14, false));
        assert_eq!(shfl_result(ShflMode::Up, &vals, 9, 2, 24 << 8), (9, false));
        assert_eq!(shfl_result(ShflMode::Up, &vals, 10, 2, 24 << 8), (8, true));
        assert_eq!(shfl_result(ShflMode::Bfly, &vals, 13, 4, c), (9, true));
    }
}
