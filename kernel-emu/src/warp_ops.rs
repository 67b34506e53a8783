//! Warp collectives with data: `shfl.sync`, `vote.sync`, `redux.sync`,
//! `match.sync` (PTX ISA §9.7.9.6, §9.7.13.5-9.7.13.7, §9.7.13.10), with
//! a member mask: the results as pure functions of the lanes' operands.
//!
//! # How a collective runs
//!
//! Each lane of the member mask deposits its operand and meets the mask's
//! other lanes at the engine's warp rendezvous (`engine::warp`: the
//! membership, convergence and exited-lane checks and the happens-before
//! edge among the mask's lanes live there); then every lane computes its
//! own result from the operands of the mask's lanes (the others read as
//! 0). The full-mask forms are the masked ones with `0xffffffff`.
//!
//! Results, per the ISA, for a member mask `m`:
//!
//! - `shfl.sync`: the source lane is computed as without a mask; a source
//!   lane outside `m` (while in range) is reported ("shfl.sync reads a lane
//!   outside its member mask": undefined on the GPU);
//! - `vote.sync.ballot`: the predicates of `m`'s lanes (0 elsewhere);
//!   `.all`/`.any`/`.uni` over `m`'s lanes;
//! - `redux.sync`: the reduction over `m`'s lanes;
//! - `match.any.sync`: the lanes of `m` holding the calling lane's value;
//!   `match.all.sync`: `(m, true)` when every lane of `m` holds the same
//!   value, else `(0, false)`.
use crate::engine::{Emu, Loc, WARP};

/// Runs one warp collective of lane `tid` over the lanes of `mask` (see the
/// module docs of `engine::warp`) and returns the lanes' values (index =
/// lane; 0 outside the mask).
pub(crate) fn collective(e: &Emu, tid: usize, loc: Loc, op: &'static str, checked: bool, mask: u32, value: u64) -> [u64; WARP] {
    e.warp_collective(tid, loc, op, checked, mask, value)
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
    let (j, p) = shfl_source(mode, lane, b, c);
    (values[j as usize] as u32, p)
}

/// The lane `lane`'s `shfl.sync` reads (its own when out of range) and
/// whether it is in range (`p`), PTX ISA §9.7.9.6.
pub fn shfl_source(mode: ShflMode, lane: u32, b: u32, c: u32) -> (u32, bool) {
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
    (if p { j } else { lane } as u32, p)
}

/// `vote.sync.ballot.b32`: bit `l` set when lane `l`'s predicate is true.
pub fn ballot_result(values: &[u64; WARP]) -> u32 {
    (0..WARP).filter(|&l| values[l] != 0).fold(0, |m, l| m | (1 << l))
}

/// The values of the lanes of `mask`.
fn members(values: &[u64; WARP], mask: u32) -> impl Iterator<Item = u64> + '_ {
    (0..WARP).filter(move |&l| mask & (1 << l) != 0).map(move |l| values[l])
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
    redux_result_mask(op, values, !0)
}

/// `redux.sync.op d, a, membermask` over the `a` of the lanes of `mask`.
pub fn redux_result_mask(op: ReduxOp, values: &[u64; WARP], mask: u32) -> u32 {
    let v = members(values, mask).map(|x| x as u32);
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
    match_any_result_mask(values, lane, !0)
}

/// `match.any.sync.b64 d, a, membermask`: the lanes of `mask` whose value
/// equals lane `lane`'s.
pub fn match_any_result_mask(values: &[u64; WARP], lane: u32, mask: u32) -> u32 {
    let mine = values[(lane & 31) as usize];
    (0..WARP).filter(|&l| mask & (1 << l) != 0 && values[l] == mine).fold(0, |m, l| m | (1 << l))
}

/// `match.all.sync.b64 d|p`: `(0xffffffff, true)` when every lane holds
/// the same value, `(0, false)` otherwise.
pub fn match_all_result(values: &[u64; WARP]) -> (u32, bool) {
    match_all_result_mask(values, !0)
}

/// `match.all.sync.b64 d|p, a, membermask`: `(mask, true)` when every lane
/// of `mask` holds the same value, `(0, false)` otherwise.
pub fn match_all_result_mask(values: &[u64; WARP], mask: u32) -> (u32, bool) {
    let mut m = members(values, mask);
    let first = m.next();
    if m.all(|v| Some(v) == first) {
        (mask, true)
    } else {
        (0, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run, EmuError, LaunchConfig, RunReport};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
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
    fn partial_masks_meet_only_their_lanes_and_compute_over_them() {
        // Two half-warps at once, each with its own mask and call site; then
        // lanes 0-19 with the mask of a branch.
        let out = Arc::new(Mutex::new(vec![[0u32; 7]; 32]));
        let o = out.clone();
        run_t(32, move || {
            let t = tid();
            let half = if t < 16 { 0x0000_ffff } else { 0xffff_0000 };
            let (sum, all, any, ballot, mall) = if t < 16 {
                (
                    crate::redux_sync_mask("redux.sync.add.u32", ReduxOp::Add, t, half),
                    crate::vote_ballot_mask("vote.sync.all.pred", t < 100, half) == half,
                    crate::vote_ballot_mask("vote.sync.any.pred", t == 3, half) != 0,
                    crate::vote_ballot_mask("vote.sync.ballot.b32", t % 2 == 0, half),
                    crate::match_all_sync_mask("match.all.sync.b32", 5, half).0,
                )
            } else {
                crate::yield_point("spin");
                (
                    crate::redux_sync_mask("redux.sync.add.u32", ReduxOp::Add, t, half),
                    crate::vote_ballot_mask("vote.sync.all.pred", t < 20, half) == half,
                    crate::vote_ballot_mask("vote.sync.any.pred", t == 3, half) != 0,
                    crate::vote_ballot_mask("vote.sync.ballot.b32", t % 2 == 0, half),
                    crate::match_all_sync_mask("match.all.sync.b32", t as u64, half).0,
                )
            };
            let same = crate::match_any_sync_mask("match.any.sync.b32", (t % 3) as u64, !0);
            o.lock().unwrap()[t as usize] = [sum, all as u32, any as u32, ballot, mall, 0, same];
            if t < 20 {
                let m = (1u32 << 20) - 1;
                let (v, p) = crate::shfl_sync_mask("shfl.sync.idx.b32", ShflMode::Idx, 100 + t, 19 - t, 0x1f, m);
                o.lock().unwrap()[t as usize][5] = v | (p as u32) << 31;
            }
        })
        .unwrap();
        let out = out.lock().unwrap();
        for t in 0..32u32 {
            let r = out[t as usize];
            let half: u32 = if t < 16 { 0xffff } else { 0xffff_0000 };
            let lanes = if t < 16 { 0..16u32 } else { 16..32 };
            assert_eq!(r[0], lanes.clone().sum::<u32>(), "redux t{t}");
            assert_eq!(r[1], (t < 16) as u32, "vote.all t{t}");
            assert_eq!(r[3], lanes.clone().filter(|l| l % 2 == 0).fold(0, |m, l| m | 1 << l) & half, "ballot t{t}");
            assert_eq!(r[4], if t < 16 { half } else { 0 }, "match.all t{t}");
            assert_eq!(r[2], (t < 16) as u32, "vote.any t{t}");
            assert_eq!(r[6], (0..32).filter(|&k| k % 3 == t % 3).fold(0u32, |m, k| m | 1 << k), "match.any t{t}");
            if t < 20 {
                assert_eq!(r[5], (100 + 19 - t) | 1 << 31, "shfl t{t}");
            }
        }
    }

    #[test]
    fn a_lane_outside_its_mask_or_a_source_outside_it_is_reported() {
        let e = run_t(32, || {
            let t = tid();
            if t < 20 {
                crate::redux_sync_mask("redux.sync.add.u32", ReduxOp::Add, t, 0xffff);
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("warp collective from a lane outside its member mask"), "{e}");
        let e = run_t(32, || {
            let t = tid();
            if t < 16 {
                crate::shfl_sync_mask("shfl.sync.down.b32", ShflMode::Down, t, 8, 0x1f, 0xffff);
            }
        })
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("shfl.sync reads a lane outside its member mask") && msg.contains("member mask 0x0000ffff"), "{msg}");
        // Lanes 0-15 pass one mask, lanes 16-31 another naming them all.
        let e = run_t(32, || {
            let t = tid();
            let m = if t < 16 { 0xffff } else { !0 };
            crate::redux_sync_mask("redux.sync.add.u32", ReduxOp::Add, t, m);
        })
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("different member masks") || msg.contains("not converged") || msg.contains("exited lane"), "{msg}");
        // A 48-thread block: a mask of the second warp's 16 lanes is fine.
        run_t(48, || {
            let t = tid();
            let m = if t < 32 { !0 } else { 0xffff };
            crate::redux_sync_mask("redux.sync.add.u32", ReduxOp::Add, t, m);
        })
        .unwrap();
    }

    #[test]
    fn a_half_warp_barrier_orders_its_half_only() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Lanes write a word of shared memory each, meet in halves, then
        // read the other half's words: a race, which the full barrier fixes.
        for (mask_of, racy) in [(None, false), (Some(()), true)] {
            let cell = Arc::new(AtomicUsize::new(0));
            let c = cell.clone();
            let r = {
                let (tx, rx) = mpsc::channel();
                std::thread::spawn(move || {
                    let mut cfg = LaunchConfig::new("warp_ops", [1, 1, 1], [32, 1, 1]);
                    cfg.smem_bytes = 128;
                    cfg.seed = 3;
                    let _ = tx.send(run(&cfg, &move || {
                        let t = tid() as usize;
                        let base = crate::smem_base();
                        crate::smem_access(base.wrapping_add(4 * t), 4, true);
                        match mask_of {
                            Some(()) => crate::warp_sync_mask(if t < 16 { 0xffff } else { 0xffff_0000 }),
                            None => crate::warp_sync(),
                        }
                        crate::smem_access(base.wrapping_add(4 * (31 - t)), 4, false);
                        c.fetch_add(1, Ordering::Relaxed);
                    }));
                });
                rx.recv_timeout(Duration::from_secs(30)).expect("run() returned")
            };
            match (r, racy) {
                (Ok(_), false) => assert_eq!(cell.load(Ordering::Relaxed), 32),
                (Err(e), true) => assert!(matches!(e, EmuError::Race { .. }), "{e}"),
                (r, racy) => panic!("racy {racy}: {:?}", r.map(|_| ()).map_err(|e| e.to_string())),
            }
        }
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
