//! Warp collectives with a member mask (PTX ISA §9.7.13: `bar.warp.sync`,
//! `vote.sync`, `match.sync`, `redux.sync`, `elect.sync`; §9.7.9.6
//! `shfl.sync`): the rendezvous of the lanes of one mask, the values they
//! exchange, and the convergence and membership checks.
//!
//! # Model
//!
//! A collective names its lanes with a 32-bit member mask. Only the lanes
//! of the mask meet: a lane waits at the collective until every lane of
//! the mask has reached it (a collective with the same mask), then each
//! takes the values the others deposited. Lanes outside the mask run on
//! (they may be at a collective of their own mask at the same time: two
//! half-warps shuffling separately). The meeting is a happens-before edge
//! among the mask's lanes only (their clocks are joined), so a warp barrier
//! of half a warp orders nothing with the other half.
//!
//! A lane joins the open collective of its warp with the same mask that it
//! has not joined yet, or opens one. Reported (the misuse names the rule,
//! the lane and the kernel's line; "checked" collectives are the data
//! collectives, `shfl`/`vote`/`redux`/`match`, `ldmatrix`/`stmatrix` and
//! user ones through `warp_exchange`):
//!
//! - a lane outside the mask it passes ("warp collective from a lane
//!   outside its member mask": undefined in PTX);
//! - a mask naming lanes the warp does not have (a block size that is not a
//!   multiple of 32: "warp collective over lanes that do not exist");
//! - lanes of one mask at different operations or call sites ("warp
//!   collective not converged", listing where each lane is, once every
//!   lane of the mask has arrived somewhere: or when the run stalls);
//! - a lane that reaches a collective whose call site other lanes reached
//!   with another mask naming it ("warp collective with different member
//!   masks": every lane must pass the same mask);
//! - a lane of the mask that exited ("warp collective with an exited
//!   lane"), when it exits while the others wait or when a lane arrives
//!   after it exited;
//! - a lane of the mask that never arrives because it waits elsewhere (a
//!   barrier, another collective): the run's deadlock report names the
//!   collective, its mask and the lanes that did not arrive.
//!
//! `bar.warp.sync` and `elect.sync` of the whole warp, and the
//! `.sync.aligned` tcgen05 waits, take part unchecked (lanes may reach them
//! at different sites; an exited lane deadlocks them).
use super::*;
use crate::race::Clk;

/// One open collective of a warp: the lanes of `mask` meet here.
struct Group {
    mask: u32,
    /// The first arrival's operation and site (what the others must match).
    op: &'static str,
    loc: Loc,
    checked: bool,
    arrived: u32,
    values: [u64; WARP],
    /// Per lane: where it arrived from (for the "not converged" report).
    sites: [Option<(&'static str, Loc)>; WARP],
    /// A lane arrived at another operation or call site: the collective is
    /// reported once every lane of the mask arrived (or the run stalls).
    diverged: bool,
    clk: Clk,
}

/// The collectives of one warp.
#[derive(Default)]
pub(super) struct WarpBar {
    open: Vec<Group>,
    /// Per lane: the values of the collective it completed, for it to take
    /// when it runs again.
    results: Vec<[u64; WARP]>,
    exited: u32,
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

/// `"lane 7"`, `"lanes 7-9"`.
fn lanes_phrase(mask: u32) -> String {
    let ls = lanes_of(mask);
    format!("{} {}", if ls.len() == 1 { "lane" } else { "lanes" }, lane_list(&ls))
}

fn lanes_of(mask: u32) -> Vec<usize> {
    (0..WARP).filter(|&l| mask & (1 << l) != 0).collect()
}

const NOT_CONVERGED: &str = "warp collective not converged: every lane of the mask must reach the same warp operation \
     at the same call site (no divergent branches around shfl/vote/redux/match)";

fn site(op: &str, loc: Loc) -> String {
    format!("{op} (at {loc})")
}

impl Emu {
    pub(super) fn lanes_in_warp(&self, w: usize) -> usize {
        (self.tpc - w * WARP).min(WARP)
    }

    /// The mask of the lanes warp `w` has.
    fn existing(&self, w: usize) -> u32 {
        let n = self.lanes_in_warp(w);
        if n == WARP { !0 } else { (1u32 << n) - 1 }
    }

    fn warp_slot(&self, tid: usize) -> usize {
        let t = &self.threads[tid];
        t.cta * self.warps_per_cta + t.warp
    }

    /// A barrier among the existing lanes of the calling warp (unchecked:
    /// `bar.warp.sync 0xffffffff`, the tcgen05 `.sync.aligned` waits).
    pub(crate) fn warp_sync(&self, tid: usize, loc: Loc, op: &'static str) {
        self.warp_collective(tid, loc, op, false, !0, 0);
    }

    /// One warp collective of lane `tid` over the lanes of `mask` (module
    /// docs): deposits `value`, waits for the mask's lanes, and returns
    /// every lane's value (index = lane; 0 outside the mask). `checked`:
    /// a data collective (convergence and membership checked); unchecked
    /// ones clip `mask` to the lanes the warp has. A scheduling point.
    pub(crate) fn warp_collective(
        &self,
        tid: usize,
        loc: Loc,
        op: &'static str,
        checked: bool,
        mask: u32,
        value: u64,
    ) -> [u64; WARP] {
        let mut g = self.begin();
        g.note(tid, op, loc);
        let t = &self.threads[tid];
        let (w, lane) = (t.warp, t.lane as usize);
        let bit = 1u32 << lane;
        let existing = self.existing(w);
        let mask = if checked { mask } else { mask & existing };
        let slot = self.warp_slot(tid);
        if checked {
            if mask & bit == 0 {
                let detail = format!(
                    "lane {lane} calls {op} with member mask {mask:#010x}, which does not name it (lanes {}): a lane \
                     must be in the mask it passes (PTX: undefined otherwise); compute the mask of the lanes that \
                     take this branch (e.g. `ballot` before it) and pass that",
                    lane_list(&lanes_of(mask))
                );
                self.misuse(g, tid, loc, "warp collective from a lane outside its member mask", detail);
            }
            if mask & !existing != 0 {
                let n = self.lanes_in_warp(w);
                let detail = format!(
                    "{op} with member mask {mask:#010x} in warp {w} of a {}-thread CTA, which has {n} lanes \
                     (lanes {}..31 do not exist): make the block size a multiple of 32, or leave them out of the mask",
                    self.tpc, n
                );
                self.misuse(g, tid, loc, "warp collective over lanes that do not exist", detail);
            }
            let gone = g.warps[slot].exited & mask;
            if gone != 0 {
                let detail = format!(
                    "{} of this warp exited before reaching {op} (member mask {mask:#010x}); every lane of the \
                     membermask must execute it (an exited lane makes shfl/vote/redux/match undefined)",
                    lanes_phrase(gone)
                );
                self.misuse(g, tid, loc, "warp collective with an exited lane", detail);
            }
        }
        let found = g.warps[slot].open.iter().position(|x| x.mask == mask && x.arrived & bit == 0);
        let gi = match found {
            Some(i) => {
                let x = &mut g.warps[slot].open[i];
                if (x.checked || checked) && !(x.op == op && std::ptr::eq(x.loc, loc)) {
                    x.diverged = true;
                }
                i
            }
            None => {
                if checked {
                    let other = g.warps[slot].open.iter().find(|x| {
                        x.checked && x.mask != mask && x.mask & bit != 0 && x.op == op && std::ptr::eq(x.loc, loc)
                    });
                    if let Some(x) = other {
                        let detail = format!(
                            "lane {lane} reaches {} with member mask {mask:#010x}, where lanes {} wait with member mask \
                             {:#010x}, which names lane {lane}: every lane of a collective passes the same mask",
                            site(op, loc),
                            lane_list(&lanes_of(x.arrived)),
                            x.mask
                        );
                        self.misuse(g, tid, loc, "warp collective with different member masks", detail);
                    }
                }
                g.warps[slot].open.push(Group {
                    mask,
                    op,
                    loc,
                    checked,
                    arrived: 0,
                    values: [0; WARP],
                    sites: [None; WARP],
                    diverged: false,
                    clk: Clk::default(),
                });
                g.warps[slot].open.len() - 1
            }
        };
        let st = &mut *g;
        st.race.release(tid, &mut st.warps[slot].open[gi].clk);
        let x = &mut st.warps[slot].open[gi];
        x.arrived |= bit;
        x.values[lane] = value;
        x.sites[lane] = Some((op, loc));
        if x.arrived == mask && x.diverged {
            let detail = self.where_lanes(&g, slot, gi);
            self.misuse(g, tid, loc, NOT_CONVERGED, detail);
        }
        if x.arrived == mask {
            let x = st.warps[slot].open.remove(gi);
            let base = tid - lane;
            let wb = &mut st.warps[slot];
            if wb.results.is_empty() {
                wb.results = vec![[0; WARP]; WARP];
            }
            for l in lanes_of(mask) {
                if l != lane {
                    st.warps[slot].results[l] = x.values;
                    st.race.clk[base + l].join(&x.clk);
                    st.wake(base + l);
                }
            }
            st.race.clk[tid].join(&x.clk);
            drop(self.switch(g, tid));
            x.values
        } else {
            let g = self.block(g, tid, Wait::Warp(op), loc);
            g.warps[slot].results[lane]
        }
    }

    /// Where each lane of collective `gi`'s mask is, for a "not converged"
    /// report: grouped by call site.
    fn where_lanes(&self, g: &State, slot: usize, gi: usize) -> String {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let base = slot / self.warps_per_cta * self.tpc + slot % self.warps_per_cta * WARP;
        let x = &g.warps[slot].open[gi];
        for l in lanes_of(x.mask) {
            let at = match x.sites[l] {
                Some((op, loc)) => site(op, loc),
                None => match g.status.get(base + l) {
                    Some(Status::Done) => "(exited)".to_string(),
                    Some(Status::Blocked(w, loc)) => site(&self.short(*w), loc),
                    _ => "(running)".to_string(),
                },
            };
            match groups.iter_mut().find(|(a, _)| *a == at) {
                Some((_, v)) => v.push(l),
                None => groups.push((at, vec![l])),
            }
        }
        groups.iter().map(|(at, ls)| format!("lanes {} at {at}", lane_list(ls))).collect::<Vec<_>>().join("; ")
    }

    /// The report of a collective whose lanes diverged, when the run
    /// stalls before all of them arrived (some wait elsewhere).
    pub(super) fn diverged_collective(&self, g: &State) -> Option<EmuError> {
        for (slot, wb) in g.warps.iter().enumerate() {
            if let Some(gi) = wb.open.iter().position(|x| x.diverged) {
                let x = &wb.open[gi];
                let first = x.arrived.trailing_zeros() as usize;
                let tid = slot / self.warps_per_cta * self.tpc + slot % self.warps_per_cta * WARP + first;
                return Some(EmuError::Misuse {
                    kernel: self.kernel.clone(),
                    rule: NOT_CONVERGED.to_string(),
                    where_: self.where_(g, tid, x.loc),
                    detail: self.where_lanes(g, slot, gi),
                });
            }
        }
        None
    }

    /// Lane `tid` returns from the kernel: a checked collective of its warp
    /// whose mask names it and that waits for it can never complete.
    pub(crate) fn warp_exiting(&self, tid: usize) {
        let mut g = self.begin();
        let slot = self.warp_slot(tid);
        let lane = self.threads[tid].lane as usize;
        let bit = 1u32 << lane;
        g.warps[slot].exited |= bit;
        let waiting = g.warps[slot].open.iter().find(|x| x.checked && x.mask & bit != 0 && x.arrived & bit == 0);
        if let Some(x) = waiting {
            let first = x.arrived.trailing_zeros() as usize;
            let (op, loc, mask) = (x.op, x.loc, x.mask);
            let detail = format!(
                "lane {lane} exited without reaching {} (member mask {mask:#010x}); every lane of the membermask must \
                 execute it",
                site(op, loc)
            );
            self.misuse(g, tid - lane + first, loc, "warp collective with an exited lane", detail);
        }
    }

    /// The deadlock line of lane `t`, blocked at a collective.
    pub(super) fn describe_warp(&self, g: &State, t: usize, op: &'static str) -> String {
        let cta = self.threads[t].cta;
        let w = self.threads[t].warp;
        let slot = self.warp_slot(t);
        let bit = 1u32 << self.threads[t].lane;
        let base = self.cta_threads(cta).start + w * WARP;
        match g.warps[slot].open.iter().find(|x| x.arrived & bit != 0) {
            Some(x) => {
                let members: Vec<usize> = lanes_of(x.mask).into_iter().map(|l| base + l).collect();
                let arrived: Vec<usize> = lanes_of(x.arrived).into_iter().map(|l| base + l).collect();
                let what = if x.mask == self.existing(w) {
                    "(warp barrier)".to_string()
                } else {
                    format!("(warp collective of member mask {:#010x})", x.mask)
                };
                format!(
                    "{op} {what} of warp {w}: {} of {} lanes arrived{}",
                    arrived.len(),
                    members.len(),
                    self.missing(g, members.into_iter(), &arrived, false)
                )
            }
            None => format!("{op} (warp barrier) of warp {w}"),
        }
    }
}
