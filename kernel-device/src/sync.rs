//! CTA-wide and named barriers (PTX ISA §9.7.13.1 `barrier`), in the
//! non-`.aligned` forms (see [`sync_threads`] for why).
//!
//! A barrier orders ordinary memory accesses (global and shared) among the
//! threads that take part: a write before it is visible to every participant
//! after it. Shared memory written with ordinary stores and read next by the
//! async proxy (TMA, tensor cores) additionally needs
//! [`crate::fence::fence_proxy_async_shared_cta`] in each writing thread.

/// Barrier 0 is what [`sync_threads`] uses; named barriers take 1..16
/// (`kernel_spec::limits::NUM_NAMED_BARRIERS`).
pub use kernel_spec::limits::NUM_NAMED_BARRIERS as NUM_HW_BARRIERS;

/// `barrier.sync 0;` — `__syncthreads()`.
///
/// Collective: every thread of the CTA must reach it (a thread that skips it
/// deadlocks the others).
///
/// This is the non-`.aligned` form (`bar.sync` is `barrier.sync.aligned`):
/// LLVM does not treat inline asm as convergent, so it may duplicate a
/// barrier into both sides of a branch (seen: the prologue's barrier merged
/// into an `if thread == 0` that follows it); the aligned form then has the
/// lanes of one warp at different barrier instructions, which is undefined
/// and hung a kernel on the H100. The non-aligned form allows it.
#[inline(always)]
#[track_caller]
pub fn sync_threads() {
    device!("barrier.sync", {
        // SAFETY: barrier 0 with all threads; memory clobber (no `nomem`)
        // because it orders memory.
        unsafe { core::arch::asm!("barrier.sync 0;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::bar_sync(0, 0) })
}

pub mod raw {
    /// `barrier.sync id, count;` (PTX ISA §9.7.13.1; non-`.aligned`, see
    /// [`super::sync_threads`]).
    ///
    /// # Safety
    /// `id` < 16; `count` a non-zero multiple of 32; exactly `count` threads
    /// (whole warps) must arrive at barrier `id` for this phase, and no other
    /// use of barrier `id` may overlap (barrier 0 is `sync_threads`).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn bar_sync(id: u32, count: u32) {
        device!("barrier.sync", {
            // SAFETY: the caller guarantees the id/count contract.
            unsafe {
                core::arch::asm!("barrier.sync {0}, {1};", in(reg32) id, in(reg32) count,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::bar_sync(id, count) })
    }

    /// `barrier.arrive id, count;` (PTX ISA §9.7.13.1): arrive without waiting.
    ///
    /// # Safety
    /// As [`bar_sync`]; the arriving threads count toward `count`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn bar_arrive(id: u32, count: u32) {
        device!("barrier.arrive", {
            // SAFETY: the caller guarantees the id/count contract.
            unsafe {
                core::arch::asm!("barrier.arrive {0}, {1};", in(reg32) id, in(reg32) count,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::bar_arrive(id, count) })
    }
}

/// A named hardware barrier (1..16) for a subset of the CTA's warps, e.g. the
/// consumer warpgroups of a warp-specialized kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedBarrier {
    id: u32,
    threads: u32,
}

impl NamedBarrier {
    /// Barrier `id` (1..16; 0 belongs to [`sync_threads`]) for `threads`
    /// threads (a non-zero multiple of 32). Checked at compile time when the
    /// arguments are constants.
    pub const fn new(id: u32, threads: u32) -> Self {
        assert!(
            id >= 1 && id < super::sync::NUM_HW_BARRIERS,
            "NamedBarrier: id must be in 1..16 (0 is sync_threads)"
        );
        assert!(
            threads > 0 && threads % 32 == 0 && threads <= 1024,
            "NamedBarrier: threads must be a non-zero multiple of 32, at most 1024"
        );
        NamedBarrier { id, threads }
    }
    pub const fn id(self) -> u32 {
        self.id
    }
    pub const fn threads(self) -> u32 {
        self.threads
    }
    /// Wait until `threads` threads arrived (`barrier.sync id, threads`).
    /// Every participating warp must call this or [`NamedBarrier::arrive`].
    #[inline(always)]
    #[track_caller]
    pub fn sync(self) {
        // SAFETY: `new` checked id and count; participation is the documented contract.
        unsafe { raw::bar_sync(self.id, self.threads) }
    }
    /// Arrive without waiting (`barrier.arrive id, threads`): a producer signals.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(self) {
        // SAFETY: as `sync`.
        unsafe { raw::bar_arrive(self.id, self.threads) }
    }
}

/// Warpgroups taking turns on a shared unit (the tensor pipe): the
/// "ordered warpgroup barrier" of FlashAttention-3's and CUTLASS's
/// ping-pong schedules, for `N` warpgroups (0 .. N - 1, default 2) in
/// round robin, made of the `N` named barriers `FIRST .. FIRST + N` (256
/// threads each: the waiting warpgroup's `sync` plus the previous one's
/// `arrive`). Warpgroup `w` brackets its turn with
/// [`TurnOrder::wait_turn`] and [`TurnOrder::pass_turn`] (which hands the
/// turn to `w + 1`, and the last to 0); warpgroup 0 has the first turn once
/// warpgroup `N - 1` called [`TurnOrder::start`].
///
/// Rules: at least 2 warpgroups, and the ids are named barriers of the
/// kernel's own (`1 <= FIRST`, `FIRST + N - 1 <= 7`: 0 is
/// [`sync_threads`] and 8..=15 are the emulator's), checked at compile
/// time; turns go strictly round robin, so each warpgroup takes the same
/// number of turns, and warpgroup 0 ends with [`TurnOrder::finish`]
/// (consuming the last warpgroup's last pass) so no arrival is left
/// pending at exit.
#[derive(Clone, Copy, Debug)]
pub struct TurnOrder<const FIRST: u32, const N: u32 = 2>;

impl<const FIRST: u32, const N: u32> TurnOrder<FIRST, N> {
    const IDS_OK: () = assert!(
        N >= 2 && FIRST >= 1 && FIRST + N - 1 <= 7,
        "TurnOrder<FIRST, N>: at least 2 warpgroups, and their named barriers FIRST .. FIRST + N - 1 must be in 1..=7 (0 is sync_threads, 8..=15 are the emulator's)"
    );

    /// The barrier warpgroup `w` waits on.
    #[inline(always)]
    const fn bar(w: u32) -> NamedBarrier {
        #[allow(clippy::let_unit_value)]
        let _ = Self::IDS_OK;
        NamedBarrier::new(FIRST + w % N, 256)
    }

    /// Warpgroup `N - 1`, once before its first turn: gives warpgroup 0 the
    /// first turn (the others' calls do nothing).
    #[inline(always)]
    #[track_caller]
    pub fn start(self, w: u32) {
        if w == N - 1 {
            Self::bar(0).arrive();
        }
    }

    /// Blocks warpgroup `w` until the warpgroup before it passed it the turn.
    #[inline(always)]
    #[track_caller]
    pub fn wait_turn(self, w: u32) {
        Self::bar(w).sync();
    }

    /// Warpgroup `w` hands the turn to the next warpgroup (no wait).
    #[inline(always)]
    #[track_caller]
    pub fn pass_turn(self, w: u32) {
        Self::bar((w + 1) % N).arrive();
    }

    /// Warpgroup 0, after its last turn: consumes the last warpgroup's last
    /// pass (the others' calls do nothing).
    #[inline(always)]
    #[track_caller]
    pub fn finish(self, w: u32) {
        if w == 0 {
            Self::bar(0).sync();
        }
    }
}
