//! Warp-level operations (PTX ISA §9.7.13 "Parallel Synchronization and
//! Communication Instructions", §9.7.9.6 `shfl.sync`).
//!
//! | op | PTX | result in every lane |
//! |---|---|---|
//! | [`shfl_idx`], [`shfl_up`], [`shfl_down`], [`shfl_xor`] | `shfl.sync.{idx,up,down,bfly}.b32` | another lane's value |
//! | [`ballot`], [`vote_all`], [`vote_any`], [`vote_uni`] | `vote.sync` | the lanes' predicates |
//! | [`ReduxInt::redux_sum`] / `_min` / `_max` | `redux.sync` (u32, i32) | the warp's reduction |
//! | [`match_any`], [`match_all`] | `match.sync` | lanes holding equal values |
//!
//! Every one is a *warp collective* over the full mask: all 32 lanes of the
//! warp execute the same call (no divergent branch around it), and the
//! block size is a multiple of 32. On the CPU emulator each lane deposits its
//! operand and meets the others at the warp barrier; lanes at different call
//! sites ("warp collective not converged") or an exited lane ("warp
//! collective with an exited lane") are reported with the kernel's line.
//! [`Lanes`] has each of them (and `bar.warp.sync`) over a partial member
//! mask: only the mask's lanes meet, and the emulator checks the mask's
//! rules (its type docs); `raw` has the PTX forms with a register
//! `membermask` (`*_mask`).
//! Reductions and scans built on them (f32/i32 sum, max, min; warp and
//! block) are in [`crate::reduce`].
pub use crate::index::lane_id;

/// `elect.sync _|p, 0xffffffff;` (PTX ISA §9.7.13.8, sm_90): true in exactly
/// one lane of the warp, the same lane every time for the same mask.
///
/// Use it to let one lane issue an operation that the hardware wants from a
/// single thread (a TMA copy, an `mbarrier.arrive.expect_tx`, a tcgen05 MMA).
///
/// Collective: all 32 lanes of the warp must call it together (converged);
/// calling it from a diverged warp is undefined behaviour in PTX.
#[inline(always)]
pub fn elect_one() -> bool {
    device!("elect.sync", {
        let r: u32;
        // SAFETY: reads no memory; convergence is the documented contract.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 {0}, 1, 0, p; }}",
                out(reg32) r,
                options(nomem, nostack, preserves_flags)
            )
        };
        r != 0
    }, host: { kernel_emu::elect_one() })
}

/// `bar.warp.sync 0xffffffff;` (PTX ISA §9.7.13.3): reconverges the warp and
/// orders memory among its lanes.
///
/// Collective: all 32 lanes of the warp must call it.
#[inline(always)]
pub fn sync_warp() {
    device!("bar.warp.sync", {
        // SAFETY: a warp barrier; the memory clobber orders surrounding accesses.
        unsafe { core::arch::asm!("bar.warp.sync 0xffffffff;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::warp_sync() })
}

// ----- shuffles ------------------------------------------------------------

/// A 32-bit value a warp shuffle moves (`.b32`): `u32`, `i32`, `f32`.
pub trait Shfl32: Copy {
    /// The bits moved.
    fn to_b32(self) -> u32;
    /// Back from the bits.
    fn from_b32(b: u32) -> Self;
}
impl Shfl32 for u32 {
    #[inline(always)]
    fn to_b32(self) -> u32 {
        self
    }
    #[inline(always)]
    fn from_b32(b: u32) -> Self {
        b
    }
}
impl Shfl32 for i32 {
    #[inline(always)]
    fn to_b32(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn from_b32(b: u32) -> Self {
        b as i32
    }
}
impl Shfl32 for f32 {
    #[inline(always)]
    fn to_b32(self) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    fn from_b32(b: u32) -> Self {
        f32::from_bits(b)
    }
}

/// Raw warp collectives: one function per PTX form, full membermask.
///
/// Every function here is a warp collective: all 32 lanes of the warp must
/// execute it (the same instruction: the emulator reports lanes at different
/// call sites as "warp collective not converged", and an exited lane as
/// "warp collective with an exited lane"). They read no memory and order
/// none (`shfl`/`vote`/`redux`/`match` are not memory fences).
pub mod raw {
    macro_rules! shfl {
        ($(#[$doc:meta])* $name:ident, $mname:ident, $ptx:literal, $mode:ident) => {
            #[doc = concat!("`", $ptx, " d|p, a, b, c, membermask;`: [`", stringify!($name), "`] among the lanes of")]
            /// `membermask` only (the calling lane among them; see
            /// [`Lanes`](super::Lanes)). A source lane outside the mask is
            /// undefined on the GPU (reported by the emulator).
            #[inline(always)]
            #[track_caller]
            pub fn $mname(a: u32, b: u32, c: u32, membermask: u32) -> (u32, bool) {
                device!($ptx, {
                    let (d, p): (u32, u32);
                    // SAFETY: register-only warp exchange among the mask's
                    // lanes; membership is the documented contract.
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; ", $ptx, " {0}|p, {2}, {3}, {4}, {5}; selp.u32 {1}, 1, 0, p; }}"),
                            out(reg32) d, out(reg32) p, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) membermask,
                            options(nomem, nostack, preserves_flags)
                        )
                    };
                    (d, p != 0)
                }, host: { kernel_emu::shfl_sync_mask($ptx, kernel_emu::ShflMode::$mode, a, b, c, membermask) })
            }

            $(#[$doc])*
            ///
            /// Returns `(d, p)`: `p` is false when the source lane is out of
            /// range (then `d` is the calling lane's own `a`). `c` packs the
            /// clamp lane (bits 0..4) and the segment mask (bits 8..12):
            /// `0x1f` (idx, down, bfly) or `0` (up) for the whole warp.
            /// Collective over all 32 lanes (see the module docs).
            #[inline(always)]
            #[track_caller]
            pub fn $name(a: u32, b: u32, c: u32) -> (u32, bool) {
                device!($ptx, {
                    let (d, p): (u32, u32);
                    // SAFETY: register-only warp exchange; convergence is the
                    // documented contract (no memory is read or ordered).
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; ", $ptx, " {0}|p, {2}, {3}, {4}, 0xffffffff; selp.u32 {1}, 1, 0, p; }}"),
                            out(reg32) d, out(reg32) p, in(reg32) a, in(reg32) b, in(reg32) c,
                            options(nomem, nostack, preserves_flags)
                        )
                    };
                    (d, p != 0)
                }, host: { kernel_emu::shfl_sync($ptx, kernel_emu::ShflMode::$mode, a, b, c) })
            }
        };
    }
    shfl!(/// `shfl.sync.idx.b32 d|p, a, b, c, 0xffffffff;` (PTX ISA §9.7.9.6): `a` of lane `b`.
        shfl_sync_idx_b32, shfl_sync_idx_b32_mask, "shfl.sync.idx.b32", Idx);
    shfl!(/// `shfl.sync.up.b32 d|p, a, b, c, 0xffffffff;` (PTX ISA §9.7.9.6): `a` of lane `lane - b`.
        shfl_sync_up_b32, shfl_sync_up_b32_mask, "shfl.sync.up.b32", Up);
    shfl!(/// `shfl.sync.down.b32 d|p, a, b, c, 0xffffffff;` (PTX ISA §9.7.9.6): `a` of lane `lane + b`.
        shfl_sync_down_b32, shfl_sync_down_b32_mask, "shfl.sync.down.b32", Down);
    shfl!(/// `shfl.sync.bfly.b32 d|p, a, b, c, 0xffffffff;` (PTX ISA §9.7.9.6): `a` of lane `lane ^ b`.
        shfl_sync_bfly_b32, shfl_sync_bfly_b32_mask, "shfl.sync.bfly.b32", Bfly);

    /// `vote.sync.ballot.b32 d, p, 0xffffffff;` (PTX ISA §9.7.13.7): bit `l`
    /// of the result is lane `l`'s predicate. Collective over all 32 lanes.
    #[inline(always)]
    #[track_caller]
    pub fn vote_sync_ballot_b32(p: bool) -> u32 {
        device!("vote.sync.ballot.b32", {
            let d: u32;
            // SAFETY: register-only warp vote; convergence is the contract.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.ballot.b32 {0}, p, 0xffffffff; }}",
                    out(reg32) d, in(reg32) p as u32,
                    options(nomem, nostack, preserves_flags)
                )
            };
            d
        }, host: { kernel_emu::vote_ballot("vote.sync.ballot.b32", p) })
    }

    /// `vote.sync.ballot.b32 d, p, membermask;`: the predicates of the
    /// lanes of `membermask` (bits outside it are 0). Collective over the
    /// mask's lanes (the calling lane among them).
    #[inline(always)]
    #[track_caller]
    pub fn vote_sync_ballot_b32_mask(p: bool, membermask: u32) -> u32 {
        device!("vote.sync.ballot.b32", {
            let d: u32;
            // SAFETY: register-only warp vote among the mask's lanes.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.ballot.b32 {0}, p, {2}; }}",
                    out(reg32) d, in(reg32) p as u32, in(reg32) membermask,
                    options(nomem, nostack, preserves_flags)
                )
            };
            d
        }, host: { kernel_emu::vote_ballot_mask("vote.sync.ballot.b32", p, membermask) })
    }

    macro_rules! vote_pred {
        ($(#[$doc:meta])* $name:ident, $mname:ident, $ptx:literal, |$b:ident, $m:ident| $host:expr) => {
            #[doc = concat!("`", $ptx, " d, p, membermask;`: [`", stringify!($name), "`] over the lanes of `membermask`")]
            /// (the calling lane among them).
            #[inline(always)]
            #[track_caller]
            pub fn $mname(p: bool, membermask: u32) -> bool {
                device!($ptx, {
                    let d: u32;
                    // SAFETY: register-only warp vote among the mask's lanes.
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; ", $ptx, " q, p, {2}; selp.u32 {0}, 1, 0, q; }}"),
                            out(reg32) d, in(reg32) p as u32, in(reg32) membermask,
                            options(nomem, nostack, preserves_flags)
                        )
                    };
                    d != 0
                }, host: {
                    let $b = kernel_emu::vote_ballot_mask($ptx, p, membermask);
                    let $m = membermask;
                    let _ = $m;
                    $host
                })
            }

            $(#[$doc])*
            /// Collective over all 32 lanes.
            #[inline(always)]
            #[track_caller]
            pub fn $name(p: bool) -> bool {
                device!($ptx, {
                    let d: u32;
                    // SAFETY: register-only warp vote; convergence is the contract.
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; ", $ptx, " q, p, 0xffffffff; selp.u32 {0}, 1, 0, q; }}"),
                            out(reg32) d, in(reg32) p as u32,
                            options(nomem, nostack, preserves_flags)
                        )
                    };
                    d != 0
                }, host: {
                    let $b = kernel_emu::vote_ballot($ptx, p);
                    let $m = !0u32;
                    let _ = $m;
                    $host
                })
            }
        };
    }
    vote_pred!(/// `vote.sync.all.pred d, p, 0xffffffff;` (PTX ISA §9.7.13.7): every lane's `p`.
        vote_sync_all_pred, vote_sync_all_pred_mask, "vote.sync.all.pred", |b, m| b == m);
    vote_pred!(/// `vote.sync.any.pred d, p, 0xffffffff;` (PTX ISA §9.7.13.7): some lane's `p`.
        vote_sync_any_pred, vote_sync_any_pred_mask, "vote.sync.any.pred", |b, m| b != 0);
    vote_pred!(/// `vote.sync.uni.pred d, p, 0xffffffff;` (PTX ISA §9.7.13.7): `p` is the same in every lane.
        vote_sync_uni_pred, vote_sync_uni_pred_mask, "vote.sync.uni.pred", |b, m| b == 0 || b == m);

    macro_rules! redux {
        ($(#[$doc:meta])* $name:ident, $mname:ident, $ptx:literal, $op:ident) => {
            #[doc = concat!("`", $ptx, " d, a, membermask;`: [`", stringify!($name), "`] over the lanes of `membermask`")]
            /// (the calling lane among them); every lane of the mask gets
            /// the result.
            #[inline(always)]
            #[track_caller]
            pub fn $mname(a: u32, membermask: u32) -> u32 {
                device!($ptx, {
                    let d: u32;
                    // SAFETY: register-only warp reduction among the mask's lanes.
                    unsafe {
                        core::arch::asm!(concat!($ptx, " {0}, {1}, {2};"),
                            out(reg32) d, in(reg32) a, in(reg32) membermask, options(nomem, nostack, preserves_flags))
                    };
                    d
                }, host: { kernel_emu::redux_sync_mask($ptx, kernel_emu::ReduxOp::$op, a, membermask) })
            }

            $(#[$doc])*
            /// Collective over all 32 lanes; every lane gets the result.
            #[inline(always)]
            #[track_caller]
            pub fn $name(a: u32) -> u32 {
                device!($ptx, {
                    let d: u32;
                    // SAFETY: register-only warp reduction; convergence is the contract.
                    unsafe {
                        core::arch::asm!(concat!($ptx, " {0}, {1}, 0xffffffff;"),
                            out(reg32) d, in(reg32) a, options(nomem, nostack, preserves_flags))
                    };
                    d
                }, host: { kernel_emu::redux_sync($ptx, kernel_emu::ReduxOp::$op, a) })
            }
        };
    }
    redux!(/// `redux.sync.add.u32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80): wrapping sum.
        redux_sync_add_u32, redux_sync_add_u32_mask, "redux.sync.add.u32", Add);
    redux!(/// `redux.sync.add.s32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80): wrapping sum.
        redux_sync_add_s32, redux_sync_add_s32_mask, "redux.sync.add.s32", Add);
    redux!(/// `redux.sync.min.u32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_min_u32, redux_sync_min_u32_mask, "redux.sync.min.u32", MinU32);
    redux!(/// `redux.sync.max.u32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_max_u32, redux_sync_max_u32_mask, "redux.sync.max.u32", MaxU32);
    redux!(/// `redux.sync.min.s32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_min_s32, redux_sync_min_s32_mask, "redux.sync.min.s32", MinS32);
    redux!(/// `redux.sync.max.s32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_max_s32, redux_sync_max_s32_mask, "redux.sync.max.s32", MaxS32);
    redux!(/// `redux.sync.and.b32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_and_b32, redux_sync_and_b32_mask, "redux.sync.and.b32", And);
    redux!(/// `redux.sync.or.b32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_or_b32, redux_sync_or_b32_mask, "redux.sync.or.b32", Or);
    redux!(/// `redux.sync.xor.b32 d, a, 0xffffffff;` (PTX ISA §9.7.13.10, sm_80).
        redux_sync_xor_b32, redux_sync_xor_b32_mask, "redux.sync.xor.b32", Xor);

    /// `match.any.sync.b32 d, a, 0xffffffff;` (PTX ISA §9.7.13.8): the mask
    /// of lanes whose `a` equals the calling lane's. Collective over all 32 lanes.
    #[inline(always)]
    #[track_caller]
    pub fn match_any_sync_b32(a: u32) -> u32 {
        device!("match.any.sync.b32", {
            let d: u32;
            // SAFETY: register-only warp match; convergence is the contract.
            unsafe {
                core::arch::asm!("match.any.sync.b32 {0}, {1}, 0xffffffff;",
                    out(reg32) d, in(reg32) a, options(nomem, nostack, preserves_flags))
            };
            d
        }, host: { kernel_emu::match_any_sync("match.any.sync.b32", a as u64) })
    }

    /// `match.any.sync.b64 d, a, 0xffffffff;` (PTX ISA §9.7.13.8).
    /// Collective over all 32 lanes.
    #[inline(always)]
    #[track_caller]
    pub fn match_any_sync_b64(a: u64) -> u32 {
        device!("match.any.sync.b64", {
            let d: u32;
            // SAFETY: register-only warp match; convergence is the contract.
            unsafe {
                core::arch::asm!("match.any.sync.b64 {0}, {1}, 0xffffffff;",
                    out(reg32) d, in(reg64) a, options(nomem, nostack, preserves_flags))
            };
            d
        }, host: { kernel_emu::match_any_sync("match.any.sync.b64", a) })
    }

    /// `match.any.sync.b32 d, a, membermask;`: the lanes of `membermask`
    /// whose `a` equals the calling lane's (the calling lane among them).
    #[inline(always)]
    #[track_caller]
    pub fn match_any_sync_b32_mask(a: u32, membermask: u32) -> u32 {
        device!("match.any.sync.b32", {
            let d: u32;
            // SAFETY: register-only warp match among the mask's lanes.
            unsafe {
                core::arch::asm!("match.any.sync.b32 {0}, {1}, {2};",
                    out(reg32) d, in(reg32) a, in(reg32) membermask, options(nomem, nostack, preserves_flags))
            };
            d
        }, host: { kernel_emu::match_any_sync_mask("match.any.sync.b32", a as u64, membermask) })
    }

    /// `match.all.sync.b32 d|p, a, membermask;`: `(membermask, true)` when
    /// every lane of the mask holds the same `a`, else `(0, false)`.
    #[inline(always)]
    #[track_caller]
    pub fn match_all_sync_b32_mask(a: u32, membermask: u32) -> (u32, bool) {
        device!("match.all.sync.b32", {
            let (d, p): (u32, u32);
            // SAFETY: register-only warp match among the mask's lanes.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; match.all.sync.b32 {0}|p, {2}, {3}; selp.u32 {1}, 1, 0, p; }}",
                    out(reg32) d, out(reg32) p, in(reg32) a, in(reg32) membermask, options(nomem, nostack, preserves_flags))
            };
            (d, p != 0)
        }, host: { kernel_emu::match_all_sync_mask("match.all.sync.b32", a as u64, membermask) })
    }

    /// `bar.warp.sync membermask;` (PTX ISA §9.7.13.3): a barrier among the
    /// lanes of `membermask` (the calling lane among them), which orders
    /// memory among them only.
    #[inline(always)]
    #[track_caller]
    pub fn bar_warp_sync_mask(membermask: u32) {
        device!("bar.warp.sync", {
            // SAFETY: a warp barrier; the memory clobber orders surrounding accesses.
            unsafe { core::arch::asm!("bar.warp.sync {0};", in(reg32) membermask, options(nostack, preserves_flags)) }
        }, host: { kernel_emu::warp_sync_mask(membermask) })
    }

    /// `match.all.sync.b32 d|p, a, 0xffffffff;` (PTX ISA §9.7.13.8):
    /// `(0xffffffff, true)` when every lane's `a` is the same, else
    /// `(0, false)`. Collective over all 32 lanes.
    #[inline(always)]
    #[track_caller]
    pub fn match_all_sync_b32(a: u32) -> (u32, bool) {
        device!("match.all.sync.b32", {
            let (d, p): (u32, u32);
            // SAFETY: register-only warp match; convergence is the contract.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; match.all.sync.b32 {0}|p, {2}, 0xffffffff; selp.u32 {1}, 1, 0, p; }}",
                    out(reg32) d, out(reg32) p, in(reg32) a, options(nomem, nostack, preserves_flags))
            };
            (d, p != 0)
        }, host: { kernel_emu::match_all_sync("match.all.sync.b32", a as u64) })
    }
}

/// `v` of lane `src` (`shfl.sync.idx.b32`, whole warp). Collective.
#[inline(always)]
#[track_caller]
pub fn shfl_idx<T: Shfl32>(v: T, src: u32) -> T {
    T::from_b32(raw::shfl_sync_idx_b32(v.to_b32(), src, 0x1f).0)
}
/// `v` of lane `lane - delta`, or the lane's own `v` below `delta`
/// (`shfl.sync.up.b32`). Collective.
#[inline(always)]
#[track_caller]
pub fn shfl_up<T: Shfl32>(v: T, delta: u32) -> T {
    T::from_b32(raw::shfl_sync_up_b32(v.to_b32(), delta, 0).0)
}
/// `v` of lane `lane + delta`, or the lane's own `v` past lane 31
/// (`shfl.sync.down.b32`). Collective.
#[inline(always)]
#[track_caller]
pub fn shfl_down<T: Shfl32>(v: T, delta: u32) -> T {
    T::from_b32(raw::shfl_sync_down_b32(v.to_b32(), delta, 0x1f).0)
}
/// `v` of lane `lane ^ mask` (`shfl.sync.bfly.b32`). Collective.
#[inline(always)]
#[track_caller]
pub fn shfl_xor<T: Shfl32>(v: T, mask: u32) -> T {
    T::from_b32(raw::shfl_sync_bfly_b32(v.to_b32(), mask, 0x1f).0)
}
/// Bit `l` set when lane `l`'s `p` is true (`vote.sync.ballot.b32`). Collective.
#[inline(always)]
#[track_caller]
pub fn ballot(p: bool) -> u32 {
    raw::vote_sync_ballot_b32(p)
}
/// `p` in every lane (`vote.sync.all.pred`). Collective.
#[inline(always)]
#[track_caller]
pub fn vote_all(p: bool) -> bool {
    raw::vote_sync_all_pred(p)
}
/// `p` in some lane (`vote.sync.any.pred`). Collective.
#[inline(always)]
#[track_caller]
pub fn vote_any(p: bool) -> bool {
    raw::vote_sync_any_pred(p)
}
/// `p` the same in every lane (`vote.sync.uni.pred`). Collective.
#[inline(always)]
#[track_caller]
pub fn vote_uni(p: bool) -> bool {
    raw::vote_sync_uni_pred(p)
}

/// 32-bit integers `redux.sync` reduces (sm_80+): `u32`, `i32`.
pub trait ReduxInt: Shfl32 {
    /// `redux.sync.add`.
    fn redux_sum(self) -> Self;
    /// `redux.sync.min`.
    fn redux_min(self) -> Self;
    /// `redux.sync.max`.
    fn redux_max(self) -> Self;
    /// `redux.sync.add` over the lanes of `membermask` ([`Lanes::redux_sum`]).
    #[doc(hidden)]
    fn redux_sum_mask(self, membermask: u32) -> Self;
    /// `redux.sync.min` over the lanes of `membermask`.
    #[doc(hidden)]
    fn redux_min_mask(self, membermask: u32) -> Self;
    /// `redux.sync.max` over the lanes of `membermask`.
    #[doc(hidden)]
    fn redux_max_mask(self, membermask: u32) -> Self;
}
impl ReduxInt for u32 {
    #[inline(always)]
    #[track_caller]
    fn redux_sum(self) -> u32 {
        raw::redux_sync_add_u32(self)
    }
    #[inline(always)]
    #[track_caller]
    fn redux_min(self) -> u32 {
        raw::redux_sync_min_u32(self)
    }
    #[inline(always)]
    #[track_caller]
    fn redux_max(self) -> u32 {
        raw::redux_sync_max_u32(self)
    }
    #[inline(always)]
    #[track_caller]
    fn redux_sum_mask(self, m: u32) -> u32 {
        raw::redux_sync_add_u32_mask(self, m)
    }
    #[inline(always)]
    #[track_caller]
    fn redux_min_mask(self, m: u32) -> u32 {
        raw::redux_sync_min_u32_mask(self, m)
    }
    #[inline(always)]
    #[track_caller]
    fn redux_max_mask(self, m: u32) -> u32 {
        raw::redux_sync_max_u32_mask(self, m)
    }
}
impl ReduxInt for i32 {
    #[inline(always)]
    #[track_caller]
    fn redux_sum(self) -> i32 {
        raw::redux_sync_add_s32(self as u32) as i32
    }
    #[inline(always)]
    #[track_caller]
    fn redux_min(self) -> i32 {
        raw::redux_sync_min_s32(self as u32) as i32
    }
    #[inline(always)]
    #[track_caller]
    fn redux_max(self) -> i32 {
        raw::redux_sync_max_s32(self as u32) as i32
    }
    #[inline(always)]
    #[track_caller]
    fn redux_sum_mask(self, m: u32) -> i32 {
        raw::redux_sync_add_s32_mask(self as u32, m) as i32
    }
    #[inline(always)]
    #[track_caller]
    fn redux_min_mask(self, m: u32) -> i32 {
        raw::redux_sync_min_s32_mask(self as u32, m) as i32
    }
    #[inline(always)]
    #[track_caller]
    fn redux_max_mask(self, m: u32) -> i32 {
        raw::redux_sync_max_s32_mask(self as u32, m) as i32
    }
}

/// The lanes whose `v` equals this lane's (`match.any.sync.b32`). Collective.
#[inline(always)]
#[track_caller]
pub fn match_any(v: u32) -> u32 {
    raw::match_any_sync_b32(v)
}
/// `Some(0xffffffff)` when every lane holds the same `v`, else `None`
/// (`match.all.sync.b32`). Collective.
#[inline(always)]
#[track_caller]
pub fn match_all(v: u32) -> Option<u32> {
    match raw::match_all_sync_b32(v) {
        (m, true) => Some(m),
        _ => None,
    }
}

// ----- partial member masks -------------------------------------------------

/// A set of lanes of this warp that take part in warp collectives together:
/// a member mask (bit `l`: lane `l`), the `membermask` operand of
/// `shfl.sync`, `vote.sync`, `redux.sync`, `match.sync` and
/// `bar.warp.sync`.
///
/// Only the lanes of the mask meet: each waits until every lane of the
/// mask has reached the same collective (with the same mask), and lanes
/// outside it run on (two half-warps may shuffle at once, each with its own
/// mask). Rules (PTX ISA §9.7.13; the CPU emulator reports each, with the
/// kernel's line):
///
/// - the calling lane is in the mask ("warp collective from a lane outside
///   its member mask");
/// - every lane of the mask executes the collective, at the same call site,
///   with the same mask ("warp collective not converged", "warp collective
///   with different member masks"; one that exited: "warp collective with
///   an exited lane"; one that waits elsewhere: the run's deadlock report
///   names the collective, its mask and the missing lanes);
/// - a shuffle reads only lanes of the mask ("shfl.sync reads a lane outside
///   its member mask": undefined on the GPU; keep the source inside with a
///   segment width, [`Lanes::shfl_down_width`]);
/// - [`Lanes::sync`] orders memory among the mask's lanes only (the race
///   detector joins their clocks, no one else's).
///
/// The mask of the lanes that take a branch is `ballot` of its condition
/// before the branch: `let m = Lanes::new(ballot(t < n)); if t < n { m.shfl_xor(v, 1) }`.
/// [`Lanes::ALL`] is the whole warp: the module's free functions.
///
/// ```
/// use kernel_device::prelude::*;
/// use kernel_device::warp::{ballot, Lanes};
///
/// /// The sum of `x[t]` over the first `n` lanes (n <= 32), in lane 0.
/// #[kernel(block = threads(32))]
/// pub fn prefix_lanes_sum(x: GmemRef<u32>, y: Gmem<u32>, n: u32) {
///     let t = thread_idx().x;
///     let lanes = Lanes::new(ballot(t < n));
///     if t < n {
///         let s = lanes.redux_sum(x.read(t as usize));
///         if t == 0 {
///             y.write(0, s);
///         }
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lanes(u32);

impl Lanes {
    /// Every lane of the warp (`0xffffffff`).
    pub const ALL: Lanes = Lanes(!0);
    /// The lanes of `membermask` (bit `l`: lane `l`).
    #[inline(always)]
    pub const fn new(membermask: u32) -> Lanes {
        Lanes(membermask)
    }
    /// Lanes `lo .. hi` (`lo < hi <= 32`).
    #[inline(always)]
    pub const fn range(lo: u32, hi: u32) -> Lanes {
        assert!(lo < hi && hi <= 32, "Lanes::range: lo < hi <= 32");
        let upto = if hi == 32 { !0 } else { (1u32 << hi) - 1 };
        Lanes(upto & !((1u32 << lo) - 1))
    }
    /// The member mask.
    #[inline(always)]
    pub const fn mask(self) -> u32 {
        self.0
    }
    /// Whether lane `lane` is a member.
    #[inline(always)]
    pub const fn contains(self, lane: u32) -> bool {
        lane < 32 && self.0 & (1 << lane) != 0
    }

    /// `bar.warp.sync membermask`: the lanes of the mask meet, and their
    /// memory accesses before it are ordered before their accesses after it
    /// (theirs only: not other lanes').
    #[inline(always)]
    #[track_caller]
    pub fn sync(self) {
        raw::bar_warp_sync_mask(self.0)
    }
    /// `v` of lane `src` (`shfl.sync.idx.b32`, whole-warp segment).
    #[inline(always)]
    #[track_caller]
    pub fn shfl_idx<T: Shfl32>(self, v: T, src: u32) -> T {
        T::from_b32(raw::shfl_sync_idx_b32_mask(v.to_b32(), src, 0x1f, self.0).0)
    }
    /// `v` of lane `lane - delta`, or the lane's own below `delta`
    /// (`shfl.sync.up.b32`).
    #[inline(always)]
    #[track_caller]
    pub fn shfl_up<T: Shfl32>(self, v: T, delta: u32) -> T {
        T::from_b32(raw::shfl_sync_up_b32_mask(v.to_b32(), delta, 0, self.0).0)
    }
    /// `v` of lane `lane + delta`, or the lane's own past lane 31
    /// (`shfl.sync.down.b32`). Every source lane must be in the mask:
    /// for a mask of the first `w` lanes use [`Lanes::shfl_down_width`].
    #[inline(always)]
    #[track_caller]
    pub fn shfl_down<T: Shfl32>(self, v: T, delta: u32) -> T {
        T::from_b32(raw::shfl_sync_down_b32_mask(v.to_b32(), delta, 0x1f, self.0).0)
    }
    /// `v` of lane `lane + delta` within the lane's segment of `width`
    /// lanes (a power of two), or the lane's own past the segment's end
    /// (`shfl.sync.down.b32` with `c = ((32 - width) << 8) | 0x1f`).
    #[inline(always)]
    #[track_caller]
    pub fn shfl_down_width<T: Shfl32>(self, v: T, delta: u32, width: u32) -> T {
        let c = ((32 - width) << 8) | 0x1f;
        T::from_b32(raw::shfl_sync_down_b32_mask(v.to_b32(), delta, c, self.0).0)
    }
    /// `v` of lane `lane ^ lane_mask` (`shfl.sync.bfly.b32`).
    #[inline(always)]
    #[track_caller]
    pub fn shfl_xor<T: Shfl32>(self, v: T, lane_mask: u32) -> T {
        T::from_b32(raw::shfl_sync_bfly_b32_mask(v.to_b32(), lane_mask, 0x1f, self.0).0)
    }
    /// Bit `l` set when lane `l` of the mask has `p` (`vote.sync.ballot.b32`;
    /// 0 outside the mask).
    #[inline(always)]
    #[track_caller]
    pub fn ballot(self, p: bool) -> u32 {
        raw::vote_sync_ballot_b32_mask(p, self.0)
    }
    /// `p` in every lane of the mask (`vote.sync.all.pred`).
    #[inline(always)]
    #[track_caller]
    pub fn vote_all(self, p: bool) -> bool {
        raw::vote_sync_all_pred_mask(p, self.0)
    }
    /// `p` in some lane of the mask (`vote.sync.any.pred`).
    #[inline(always)]
    #[track_caller]
    pub fn vote_any(self, p: bool) -> bool {
        raw::vote_sync_any_pred_mask(p, self.0)
    }
    /// `p` the same in every lane of the mask (`vote.sync.uni.pred`).
    #[inline(always)]
    #[track_caller]
    pub fn vote_uni(self, p: bool) -> bool {
        raw::vote_sync_uni_pred_mask(p, self.0)
    }
    /// The sum over the mask's lanes (`redux.sync.add`, wrapping).
    #[inline(always)]
    #[track_caller]
    pub fn redux_sum<T: ReduxInt>(self, v: T) -> T {
        v.redux_sum_mask(self.0)
    }
    /// The minimum over the mask's lanes (`redux.sync.min`).
    #[inline(always)]
    #[track_caller]
    pub fn redux_min<T: ReduxInt>(self, v: T) -> T {
        v.redux_min_mask(self.0)
    }
    /// The maximum over the mask's lanes (`redux.sync.max`).
    #[inline(always)]
    #[track_caller]
    pub fn redux_max<T: ReduxInt>(self, v: T) -> T {
        v.redux_max_mask(self.0)
    }
    /// The lanes of the mask whose `v` equals this lane's (`match.any.sync.b32`).
    #[inline(always)]
    #[track_caller]
    pub fn match_any(self, v: u32) -> u32 {
        raw::match_any_sync_b32_mask(v, self.0)
    }
    /// `Some(mask)` when every lane of the mask holds the same `v`, else
    /// `None` (`match.all.sync.b32`).
    #[inline(always)]
    #[track_caller]
    pub fn match_all(self, v: u32) -> Option<u32> {
        match raw::match_all_sync_b32_mask(v, self.0) {
            (m, true) => Some(m),
            _ => None,
        }
    }
}
