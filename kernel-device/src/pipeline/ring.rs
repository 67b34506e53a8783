//! [`Ring`]: a ring of `S` stage slots with their full and empty
//! mbarriers, and the producer and consumer state that walks it (CUTLASS's
//! `PipelineState` with its producer/consumer verbs, Pallas's pipeline
//! slots).
//!
//! ```text
//!             full[i] (1 arrival + the slot's bytes)
//!   Producer ────────────────────────────────────────▶ Consumer(s)
//!   acquire / acquire_tx                               wait
//!            ◀────────────────────────────────────────
//!             empty[i] (one arrival per consumer thread)
//!                                                      release / release_after_wgmma
//! ```
//!
//! A ring is a view of two [`Barriers<S>`] that a kernel declares as
//! scratch (`#[scratch] loaded: Barriers<S>`,
//! `#[scratch(arrivals = 256)] consumed: Barriers<S>`) plus the number of
//! arrivals each phase of `empty` takes. Each role makes its own state
//! from it, once, and keeps it for the whole kernel (across the tiles of a
//! persistent loop):
//!
//! | state | holds | verbs |
//! |---|---|---|
//! | [`Producer`] | the steps filled | [`acquire`](Producer::acquire) (wait until the slot is empty), [`acquire_tx`](Producer::acquire_tx) (and announce the bytes the TMA copies into it deliver) |
//! | [`Consumer`] | the steps waited for and the steps released | [`wait`](Consumer::wait), [`release`](Consumer::release), [`release_to_peer`](Consumer::release_to_peer) (a cluster multicast slot), [`release_after_wgmma`](Consumer::release_after_wgmma) (after the MMAs that read it finished), [`skip`](Consumer::skip) (steps another consumer takes: ping-pong) |
//!
//! A step count is the state ([`Step`]): step `t` uses slot `t % S`, and
//! is the phase `t / S` of that slot's barriers, so its parity `(t / S) &
//! 1` is what a wait waits for; the kernel writes no `step % STAGES` and no
//! parity. How the parity is kept is the [`Parity`] parameter: one bit per
//! slot flipped by each wait ([`PhaseBits`], the consumer's default,
//! measured the faster on an H100), or derived from the count
//! ([`FromStep`], the producer's default: it runs on few registers).
//!
//! Who issues what:
//!
//! | verb | issued by |
//! |---|---|
//! | `Producer::acquire*` | one thread (the TMA issuer) |
//! | `Consumer::wait` | every consumer thread |
//! | `Consumer::release*` | every consumer thread (the empty barrier counts them all) |
//!
//! Three schedules use it: one consumer (a warpgroup computing every step),
//! cooperative consumers (several warpgroups wait for every step and each
//! of their threads releases it: `empty` counts all of them), and
//! alternating consumers (ping-pong: each takes every other tile's steps
//! and [`skip`](Consumer::skip)s the others').
//!
//! # Zero cost
//!
//! On the GPU a [`Producer`] is a `u32` step and its phase bits, a
//! [`Consumer`] two `u32`s (the steps waited for, and how many of them are
//! not released yet; the second is dropped by the compiler when every
//! release names its slot, [`Consumer::release_slot`]) and its phase bits; every verb is
//! `#[inline(always)]` and no closure is taken. The library's kernels
//! rebuilt on it were compared with their hand-written rings instruction by
//! instruction (`tools/sass-loops.py`) and on an H100 (RESULTS.md).
//!
//! # Misuse on the emulator
//!
//! Every verb is `#[track_caller]`: a report names the user's line and
//! that it is inside the ring's verb. The emulator stops the run on
//! - a release without an acquire (a consumer releasing a step it never
//!   waited for, or releasing twice);
//! - a wait on a stale phase (a state made anew inside a loop, or steps
//!   taken on the barriers outside it) or on a phase ahead of the barrier;
//! - an `empty` barrier whose arrival count differs from the consumers the
//!   ring was told of (a slot refilled before every consumer released it,
//!   or never refilled).
use crate::mbarrier::{raw, BarrierRef, Barriers};

/// A step of a ring of `S` slots: slot `index() = count % S`, phase
/// `count / S` of that slot's barriers. The whole state of a ring's
/// role; a `u32` on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step<const S: usize> {
    count: u32,
}

impl<const S: usize> Step<S> {
    const CHECK: () = assert!(S >= 1 && S <= 64, "Ring<S>: S (the stages) must be in 1..=64");

    /// Step `count` (0 is the first step of the kernel).
    #[inline(always)]
    pub const fn new(count: u32) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CHECK;
        Step { count }
    }
    /// Steps taken before this one.
    #[inline(always)]
    pub const fn count(self) -> u32 {
        self.count
    }
    /// The slot: `count % S`.
    #[inline(always)]
    pub const fn index(self) -> usize {
        (self.count % S as u32) as usize
    }
    /// The lap around the ring, which is the phase number of the slot's
    /// barriers this step uses: `count / S`.
    #[inline(always)]
    pub const fn lap(self) -> u32 {
        self.count / S as u32
    }
    /// The parity a wait for this step's phase waits for: `lap & 1`.
    #[inline(always)]
    pub const fn parity(self) -> u32 {
        self.lap() & 1
    }
    /// The step `n` after this one.
    #[inline(always)]
    pub const fn plus(self, n: u32) -> Self {
        Step { count: self.count + n }
    }
}

/// A slot handed out by [`Producer::acquire`] or [`Consumer::wait`]: its
/// index (for `bufs.at(slot.index())`) and its full barrier (what TMA
/// copies into it complete on).
#[derive(Clone, Copy, Debug)]
pub struct Slot<'a> {
    index: usize,
    full: BarrierRef<'a>,
    /// The step's count.
    step: u32,
}

impl<'a> Slot<'a> {
    /// The slot's index in `0..S`.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.index
    }
    /// The step this slot was handed out for ([`Step::count`]: 0 for the
    /// ring's first step): a loop driven by the ring reads its step index
    /// here instead of keeping a counter of its own.
    #[inline(always)]
    pub fn step(&self) -> u32 {
        self.step
    }
    /// The slot's full barrier: pass it to the TMA loads that fill it.
    #[inline(always)]
    pub fn barrier(&self) -> BarrierRef<'a> {
        self.full
    }
}

/// A ring of `S` slots: the full and empty barriers (module docs). `Copy`:
/// each role makes its state from it.
#[derive(Clone, Copy)]
pub struct Ring<'a, const S: usize> {
    full: &'a Barriers<S>,
    empty: &'a Barriers<S>,
    #[cfg(not(target_arch = "nvptx64"))]
    at: &'static core::panic::Location<'static>,
}

impl<'a, const S: usize> Ring<'a, S> {
    /// The ring over `full` (each phase: the producer's one arrival plus
    /// the bytes of the slot's copies) and `empty` (each phase:
    /// `empty_arrivals` arrivals, one per consumer thread, from every CTA
    /// that releases to this one: 256 for two consumer warpgroups, 512 when
    /// the peer of a CTA pair releases too). Called by every thread that
    /// takes a role. On the emulator it checks both barriers' arrival
    /// counts against these numbers.
    #[inline(always)]
    #[track_caller]
    pub fn new(full: &'a Barriers<S>, empty: &'a Barriers<S>, empty_arrivals: u32) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Step::<S>::CHECK;
        #[cfg(not(target_arch = "nvptx64"))]
        emu::declare(full, empty, empty_arrivals);
        let _ = empty_arrivals;
        Ring {
            full,
            empty,
            #[cfg(not(target_arch = "nvptx64"))]
            at: core::panic::Location::caller(),
        }
    }
    /// The producer's state, at step 0, its waits' parity derived from the
    /// step ([`FromStep`]: the producer runs on few registers). Make it once
    /// per kernel.
    #[inline(always)]
    pub fn producer(self) -> Producer<'a, S> {
        self.producer_with()
    }
    /// The producer's state, at step 0, with the parity encoding `P`.
    #[inline(always)]
    pub fn producer_with<P: Parity>(self) -> Producer<'a, S, P> {
        Producer { ring: self, next: Step::new(0), parity: P::default() }
    }
    /// A consumer's state, at step 0, its waits' parity kept as one bit per
    /// slot ([`PhaseBits`]). Make it once per kernel.
    #[inline(always)]
    pub fn consumer(self) -> Consumer<'a, S> {
        self.consumer_with()
    }
    /// A consumer's state, at step 0, with the parity encoding `P`
    /// ([`Parity`]: [`FromStep`] or [`PhaseBits`]).
    #[inline(always)]
    pub fn consumer_with<P: Parity>(self) -> Consumer<'a, S, P> {
        Consumer { ring: self, next: Step::new(0), pending: 0, parity: P::default() }
    }
    #[inline(always)]
    fn full_at(&self, i: usize) -> BarrierRef<'a> {
        self.full.at(i)
    }
    #[inline(always)]
    fn empty_at(&self, i: usize) -> BarrierRef<'a> {
        self.empty.at(i)
    }
}

/// Blocks until the phase of `bar` with `step`'s parity completed (an
/// acquire at CTA scope). The barrier's own per-thread phase bits are not
/// used: the step is the state.
#[inline(always)]
#[track_caller]
fn wait_phase(bar: BarrierRef<'_>, parity: u32) {
    // SAFETY: the address is an initialized scratch barrier's.
    while !unsafe { raw::try_wait_parity(bar.smem_addr(), parity) } {}
}

/// Waits for `step`'s phase of its slot's barrier in `full` (with the
/// barrier's own per-thread phase bit, [`BarrierRef::wait`]), inside the
/// report scope `what`, the step's phase number checked on the emulator:
/// the plain pipeline's wait, which has no empty barriers (a CTA barrier
/// orders its refills).
#[inline(always)]
#[track_caller]
pub(crate) fn wait_step<'b, const S: usize>(full: &'b Barriers<S>, step: Step<S>, what: &'static str) -> BarrierRef<'b> {
    let bar = full.at(step.index());
    #[cfg(not(target_arch = "nvptx64"))]
    let _scope = emu::check(bar, step.lap() as u64, what, "consumer of the pipeline", step, core::panic::Location::caller());
    bar.wait();
    bar
}

/// The producer's side of a [`Ring`]: one thread fills the slots in step
/// order. `P` is how it knows its waits' parity ([`Parity`]).
pub struct Producer<'a, const S: usize, P: Parity = FromStep> {
    ring: Ring<'a, S>,
    next: Step<S>,
    parity: P,
}

impl<'a, const S: usize, P: Parity> Producer<'a, S, P> {
    /// The step the next [`Producer::acquire`] fills.
    #[inline(always)]
    pub fn step(&self) -> Step<S> {
        self.next
    }
    /// Waits until the next step's slot is empty (from the second lap on:
    /// every consumer released the step `S` before), and hands it out; the
    /// state moves to the following step. The caller fills the slot and
    /// arrives on [`Slot::barrier`] (or use [`Producer::acquire_tx`]).
    #[inline(always)]
    #[track_caller]
    pub fn acquire(&mut self) -> Slot<'a> {
        let step = self.next;
        let i = step.index();
        if step.count() >= S as u32 {
            let empty = self.ring.empty_at(i);
            #[cfg(not(target_arch = "nvptx64"))]
            let _scope = emu::check(empty, (step.lap() - 1) as u64, "Producer::acquire", "producer of the `Ring`", step, self.ring.at);
            // The phase the previous lap's step (`count - S`) completes
            // when its consumers release it.
            let prev = Step::<S>::new(step.count() - S as u32);
            wait_phase(empty, self.parity.parity(prev));
            self.parity.waited(prev);
        }
        self.next = step.plus(1);
        Slot {
            index: i,
            full: self.ring.full_at(i),
            step: step.count(),
        }
    }
    /// [`Producer::acquire`], then one arrival on the slot's full barrier
    /// announcing `bytes` (`mbarrier.arrive.expect_tx`): the bytes the TMA
    /// copies the caller issues into the slot (on [`Slot::barrier`])
    /// deliver.
    #[inline(always)]
    #[track_caller]
    pub fn acquire_tx(&mut self, bytes: u32) -> Slot<'a> {
        let slot = self.acquire();
        slot.full.arrive_expect_tx(bytes);
        slot
    }
    /// Waits until the copies of an earlier `step` have landed in its
    /// slot, and returns the slot's index: for a producer that also reads
    /// what it loaded (the all-gather matmul forwards each A tile it
    /// loaded to the next GPU with a TMA store from the slot). `step` must
    /// have been handed out and its slot not handed out again since:
    /// `step < self.step()` and `step + S >= self.step()`. Whatever reads
    /// the slot must be done before the slot's next [`Producer::acquire`]
    /// refills it (for a TMA store: `tma::wait_group_read`). On the
    /// emulator a step outside that window is a reported misuse, and the
    /// wait is checked against the barrier's phase like a consumer's.
    #[inline(always)]
    #[track_caller]
    pub fn wait_full(&self, step: Step<S>) -> usize {
        #[cfg(not(target_arch = "nvptx64"))]
        emu::check_landed(step, self.next, self.ring.at);
        let i = step.index();
        let full = self.ring.full_at(i);
        #[cfg(not(target_arch = "nvptx64"))]
        let _scope = emu::check(full, step.lap() as u64, "Producer::wait_full", "producer of the `Ring`", step, self.ring.at);
        wait_phase(full, step.parity());
        i
    }
}

/// How a [`Producer`] or [`Consumer`] knows the parity its next wait
/// waits for: two encodings of the same state (sealed).
///
/// | encoding | state | per wait |
/// |---|---|---|
/// | [`PhaseBits`] (the consumer's default) | one bit per slot (a `u64`) | flip the slot's bit |
/// | [`FromStep`] (the producer's default) | none: the step's lap `count / S` | a shift (a division when `S` is not a power of two) |
///
/// Both wait for the same phases (the emulator checks each wait's phase
/// number against the barrier either way). Measured on an H100 at the
/// steady clock (RESULTS.md, 2026-11-28): the persistent f16 matmul ran
/// 2.3 % slower with [`FromStep`] than with [`PhaseBits`] (636.5 against
/// 659.7 TFLOP/s at 4096 x 8192 x 4096), though its K loop was 4 SASS
/// instructions shorter; in the attention backward [`FromStep`] also made
/// ptxas spill 40 bytes. [`FromStep`] keeps one register fewer, for a
/// kernel whose allocation needs it.
pub trait Parity: sealed::Sealed + Copy + Default {
    #[doc(hidden)]
    fn parity<const S: usize>(&self, step: Step<S>) -> u32;
    #[doc(hidden)]
    fn waited<const S: usize>(&mut self, step: Step<S>);
    #[doc(hidden)]
    fn skipped<const S: usize>(&mut self, from: Step<S>, n: u32);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::FromStep {}
    impl Sealed for super::PhaseBits {}
}

/// The parity is the step's lap's: `(count / S) & 1` (no state).
#[derive(Clone, Copy, Default, Debug)]
pub struct FromStep;

impl Parity for FromStep {
    #[inline(always)]
    fn parity<const S: usize>(&self, step: Step<S>) -> u32 {
        step.parity()
    }
    #[inline(always)]
    fn waited<const S: usize>(&mut self, _: Step<S>) {}
    #[inline(always)]
    fn skipped<const S: usize>(&mut self, _: Step<S>, _: u32) {}
}

/// One parity bit per slot, flipped by each wait on the slot (what
/// [`Barriers`]' own `wait` does).
#[derive(Clone, Copy, Default, Debug)]
pub struct PhaseBits {
    /// Bit `j`: slot `j`'s next phase parity. A `u32` would save the
    /// GEMMs' K loops 6-8 SASS instructions (a register pair and 64-bit
    /// shifts on every wait), but it made ptxas spill 48 bytes (not 4) in
    /// the attention backward at head dim 128 (measured 2026-11-28): kept
    /// `u64` until the backward has registers to spare.
    bits: u64,
}

impl Parity for PhaseBits {
    #[inline(always)]
    fn parity<const S: usize>(&self, step: Step<S>) -> u32 {
        ((self.bits >> step.index()) & 1) as u32
    }
    #[inline(always)]
    fn waited<const S: usize>(&mut self, step: Step<S>) {
        self.bits ^= 1 << step.index();
    }
    #[inline(always)]
    fn skipped<const S: usize>(&mut self, from: Step<S>, n: u32) {
        // Slot `j` is passed over by the skipped steps `t` with `t % S ==
        // j`: its bit flips that many times.
        let (laps, rest) = (n / S as u32, n % S as u32);
        let mut j = 0;
        while j < S as u32 {
            // Steps from..from + n with index j: `laps`, plus one if j is
            // among the `rest` slots after `from`'s.
            let extra = ((j + S as u32 - from.index() as u32) % S as u32) < rest;
            self.bits ^= (((laps + extra as u32) & 1) as u64) << j;
            j += 1;
        }
    }
}

/// A consumer's side of a [`Ring`]: waits for the slots in step order and
/// releases them in the same order. `P` is how it knows its waits' parity
/// ([`Parity`]).
pub struct Consumer<'a, const S: usize, P: Parity = PhaseBits> {
    ring: Ring<'a, S>,
    /// The next step to wait for.
    next: Step<S>,
    /// Steps waited for and not yet released (the oldest unreleased step
    /// is `next - pending`). A count of the outstanding steps rather than
    /// a second step counter: after a tile's last release it is the
    /// constant 0 the compiler sees, and inside [`Consumer::mma_steps`] it
    /// is not kept at all (the loop's own `k` says which slot to release,
    /// as in a ring written by hand).
    pending: u32,
    parity: P,
}

impl<'a, const S: usize, P: Parity> Consumer<'a, S, P> {
    /// The step the next [`Consumer::wait`] waits for.
    #[inline(always)]
    pub fn step(&self) -> Step<S> {
        self.next
    }
    /// Waits until the next step's slot is full (its copies landed) and
    /// hands it out; the state moves to the following step.
    #[inline(always)]
    #[track_caller]
    pub fn wait(&mut self) -> Slot<'a> {
        let slot = self.wait_step("Consumer::wait");
        self.pending += 1;
        slot
    }
    /// Waits until the next step's slot is full, without taking it: the
    /// next [`Consumer::wait`] hands the same slot out (its phase has not
    /// moved: the slot is not released yet). For reading what the producer
    /// wrote along with a step (a tile's coordinates, say) before the loop
    /// that consumes its steps, so that loop stays one plain
    /// [`Consumer::wait`] per step. Its index and barrier, without a
    /// [`Slot`] token (a peeked step cannot be released).
    #[inline(always)]
    #[track_caller]
    pub fn peek(&self) -> usize {
        let step = self.next;
        let i = step.index();
        let full = self.ring.full_at(i);
        #[cfg(not(target_arch = "nvptx64"))]
        let _scope = emu::check(full, step.lap() as u64, "Consumer::peek", "consumer of the `Ring`", step, self.ring.at);
        wait_phase(full, self.parity.parity(step));
        i
    }
    /// [`Consumer::wait`] without the count of unreleased steps.
    #[inline(always)]
    #[track_caller]
    fn wait_step(&mut self, what: &'static str) -> Slot<'a> {
        let step = self.next;
        let i = step.index();
        let full = self.ring.full_at(i);
        #[cfg(not(target_arch = "nvptx64"))]
        let _scope = emu::check(full, step.lap() as u64, what, "consumer of the `Ring`", step, self.ring.at);
        let _ = what;
        wait_phase(full, self.parity.parity(step));
        self.parity.waited(step);
        self.next = step.plus(1);
        Slot {
            index: i,
            full,
            step: step.count(),
        }
    }
    /// Steps waited for and not yet released.
    #[inline(always)]
    pub fn unreleased(&self) -> u32 {
        self.pending
    }
    /// The oldest waited-for, unreleased step (the next to release).
    #[inline(always)]
    fn released(&self) -> Step<S> {
        Step::new(self.next.count().wrapping_sub(self.pending))
    }
    /// Releases every waited-for, unreleased slot ([`Consumer::release`]
    /// each): after the last step of a tile whose reads have all finished
    /// (its wgmmas waited for), before the consumer [`skip`](Consumer::skip)s
    /// or leaves.
    #[inline(always)]
    #[track_caller]
    pub fn release_all(&mut self) {
        while self.pending > 0 {
            self.release();
        }
    }
    /// Releases the oldest waited-for step's slot to the producer: one
    /// arrival (`mbarrier.arrive`, a release at CTA scope) on its empty
    /// barrier. The caller is done reading it (its wgmmas included:
    /// [`Consumer::release_after_wgmma`]).
    #[inline(always)]
    #[track_caller]
    pub fn release(&mut self) {
        let empty = self.take_release("Consumer::release");
        empty.arrive();
    }
    /// Releases `slot`, which must be the oldest waited-for, unreleased
    /// one (the emulator checks it): as [`Consumer::release`], but the
    /// slot's index is the token's, so a consumer that releases every slot
    /// it waited for by its token keeps no release count (one `u32` of
    /// state on the GPU: the count of [`Consumer::release`] is then never
    /// read, and not kept).
    #[inline(always)]
    #[track_caller]
    pub fn release_slot(&mut self, slot: Slot<'a>) {
        #[cfg(not(target_arch = "nvptx64"))]
        emu::check_slot_order("Consumer::release_slot", slot.step, self.released(), self.ring.at);
        let _ = self.take_release("Consumer::release_slot");
        self.ring.empty_at(slot.index).arrive();
    }
    /// As [`Consumer::release`], and one arrival on the same slot's empty
    /// barrier in CTA `peer` of the cluster (`mbarrier.arrive.shared::cluster`,
    /// a release at CTA scope): for a slot the peer's TMA multicast fills
    /// too, so its producer waits for both CTAs' consumers.
    #[inline(always)]
    #[track_caller]
    pub fn release_to_peer(&mut self, peer: u32) {
        let empty = self.take_release("Consumer::release_to_peer");
        empty.arrive();
        empty.arrive_cluster_cta(peer);
    }
    /// Waits until at most `PENDING` wgmma groups of this thread are in
    /// flight (`wgmma.wait_group`), then releases the oldest waited-for
    /// slots until at most `PENDING` steps are unreleased: their MMAs have
    /// finished reading them. Called once after each step's
    /// `wgmma_commit_group` with `PENDING = 1` (one step's MMAs overlap the
    /// next step's wait; at most one slot is released), and once after the
    /// last step with `PENDING = 0` (every slot is released).
    #[inline(always)]
    #[track_caller]
    pub fn release_after_wgmma<const PENDING: u32>(&mut self) {
        crate::wgmma::wgmma_wait::<PENDING>();
        self.release_down_to::<PENDING>(None);
    }
    /// A wgmma K loop of `n` steps on the ring: for `k` in `0..n`, waits
    /// for the step's slot, runs `body(k, slot)` (which issues the step's
    /// wgmmas on the slot's tiles), commits them (`wgmma_commit_group`),
    /// waits until at most `PENDING` groups are in flight and releases the
    /// slot of step `k - PENDING`, whose MMAs have finished. The last
    /// `min(n, PENDING)` steps stay unreleased for the caller
    /// ([`Consumer::release_after_wgmma`]`::<0>` after the loop, or
    /// [`Consumer::release`] once the tile's results are read). Every
    /// earlier step must be released first (the emulator checks it).
    ///
    /// The same ring protocol as [`Consumer::wait`] and
    /// [`Consumer::release_after_wgmma`]`::<PENDING>` once per step, with no
    /// state carried through the loop beyond the step count: the slot to
    /// release is the loop's `k - PENDING` and its condition `k >=
    /// PENDING`, the very predicate of a body's `k > 0` (`PENDING = 1`),
    /// so the loop assembles to the instructions of a ring written by hand.
    /// `body` is inlined (`#[inline(always)]` all the way), so the
    /// accumulators it updates stay in registers.
    #[inline(always)]
    #[track_caller]
    pub fn mma_steps<const PENDING: u32>(&mut self, n: u32, body: impl FnMut(u32, Slot<'a>)) {
        self.mma_steps_with::<PENDING>(n, None, body);
    }
    /// As [`Consumer::mma_steps`], releasing with
    /// [`Consumer::release_to_peer`] (a slot that CTA `peer`'s multicast
    /// fills too).
    #[inline(always)]
    #[track_caller]
    pub fn mma_steps_to_peer<const PENDING: u32>(&mut self, n: u32, peer: u32, body: impl FnMut(u32, Slot<'a>)) {
        self.mma_steps_with::<PENDING>(n, Some(peer), body);
    }
    #[inline(always)]
    #[track_caller]
    fn mma_steps_with<const PENDING: u32>(&mut self, n: u32, peer: Option<u32>, mut body: impl FnMut(u32, Slot<'a>)) {
        #[cfg(not(target_arch = "nvptx64"))]
        emu::check_mma_steps_entry(self.pending, self.next, self.ring.at);
        // The loop runs on the ring's own step count (one induction
        // variable, as a hand-written ring's); `k` is derived from it.
        let start = self.next.count();
        let end = start.wrapping_add(n);
        while self.next.count() != end {
            let k = self.next.count().wrapping_sub(start);
            // The step this iteration releases, `k - PENDING` of the loop.
            let old = Step::<S>::new(self.next.count().wrapping_sub(PENDING));
            let slot = self.wait_step("Consumer::mma_steps (its wait)");
            #[cfg(not(target_arch = "nvptx64"))]
            {
                self.pending += 1;
            }
            body(k, slot);
            crate::wgmma::wgmma_commit_group();
            crate::wgmma::wgmma_wait::<PENDING>();
            if k >= PENDING {
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let _ = self.take_release("Consumer::mma_steps (its release)");
                }
                let empty = self.ring.empty_at(old.index());
                empty.arrive();
                if let Some(peer) = peer {
                    empty.arrive_cluster_cta(peer);
                }
            }
        }
        #[cfg(target_arch = "nvptx64")]
        {
            self.pending += if n < PENDING { n } else { PENDING };
        }
    }
    /// As [`Consumer::release_after_wgmma`], releasing with
    /// [`Consumer::release_to_peer`].
    #[inline(always)]
    #[track_caller]
    pub fn release_to_peer_after_wgmma<const PENDING: u32>(&mut self, peer: u32) {
        crate::wgmma::wgmma_wait::<PENDING>();
        self.release_down_to::<PENDING>(Some(peer));
    }
    /// Releases ([`Consumer::release`], or [`Consumer::release_to_peer`]
    /// with a peer) until at most `PENDING` steps are unreleased. With `PENDING = 0` every step, so the count after it is
    /// the constant 0; otherwise one step at most: called once per step,
    /// the count never exceeds `PENDING + 1` (the emulator checks it).
    #[inline(always)]
    #[track_caller]
    fn release_down_to<const PENDING: u32>(&mut self, peer: Option<u32>) {
        if PENDING == 0 {
            while self.pending > 0 {
                self.release_one(peer);
            }
        } else {
            #[cfg(not(target_arch = "nvptx64"))]
            emu::check_pending(self.pending, PENDING, self.ring.at);
            if self.pending > PENDING {
                self.release_one(peer);
            }
        }
    }
    #[inline(always)]
    #[track_caller]
    fn release_one(&mut self, peer: Option<u32>) {
        match peer {
            None => self.release(),
            Some(p) => self.release_to_peer(p),
        }
    }
    /// Passes over the next `n` steps without waiting for or releasing
    /// them: steps another consumer takes (ping-pong consumers alternating
    /// tiles). Every waited-for step must be released first. No
    /// instruction on the GPU.
    #[inline(always)]
    #[track_caller]
    pub fn skip(&mut self, n: u32) {
        #[cfg(not(target_arch = "nvptx64"))]
        emu::skip(self.ring.full, self.next, self.released(), n, self.ring.at);
        self.parity.skipped(self.next, n);
        self.next = self.next.plus(n);
    }
    /// The empty barrier of the oldest unreleased step; the release state
    /// moves on.
    #[inline(always)]
    #[track_caller]
    fn take_release(&mut self, what: &'static str) -> BarrierRef<'a> {
        #[cfg(not(target_arch = "nvptx64"))]
        emu::check_release(what, self.next, self.released(), self.ring.at);
        let _ = what;
        let empty = self.ring.empty_at(self.released().index());
        self.pending -= 1;
        empty
    }
}

/// The emulator's side of the ring (host builds only).
#[cfg(not(target_arch = "nvptx64"))]
mod emu {
    extern crate std;
    use super::{Barriers, BarrierRef, Step};
    use core::panic::Location;
    use std::format;

    /// Every thread that makes a ring declares the arrivals of both
    /// barriers: `full` 1 per phase (the producer's `arrive_expect_tx`),
    /// `empty` `empty_arrivals`.
    #[track_caller]
    pub(super) fn declare<const S: usize>(full: &Barriers<S>, empty: &Barriers<S>, empty_arrivals: u32) {
        let at = Location::caller();
        for i in 0..S {
            kernel_emu::mbarrier_expect_arrivals(full.at(i).smem_addr(), 1, &format!("the ring's producer (`full` barrier {i} of the `Ring` made at {at})"));
            kernel_emu::mbarrier_expect_arrivals(
                empty.at(i).smem_addr(),
                empty_arrivals,
                &format!("the ring's {empty_arrivals} consumer releases (`empty` barrier {i} of the `Ring` made at {at})"),
            );
        }
    }

    /// The phase check before a wait, inside the verb's report scope
    /// `what`; `role` and `at` name the state's owner in a report.
    #[track_caller]
    pub(super) fn check<const S: usize>(
        bar: BarrierRef<'_>,
        phase: u64,
        what: &'static str,
        role: &str,
        step: Step<S>,
        at: &Location<'_>,
    ) -> kernel_emu::ScopeGuard {
        let scope = kernel_emu::scope(what);
        kernel_emu::mbarrier_check_phase(bar.smem_addr(), phase, &|| {
            format!("the {role} made at {at}, at step {} (slot {}),", step.count(), step.index())
        });
        scope
    }

    /// A release needs a waited-for, unreleased step.
    #[track_caller]
    pub(super) fn check_release<const S: usize>(what: &'static str, next: Step<S>, released: Step<S>, at: &Location<'_>) {
        let _scope = kernel_emu::scope(what);
        if released.count() >= next.count() {
            kernel_emu::misuse(
                "a release without an acquire",
                format_args!(
                    "the consumer of the `Ring` made at {at} releases step {} (slot {}), which it has not waited for \
                     (it waited for {} step(s) and released as many): release each slot once, after `wait` handed it out",
                    released.count(),
                    released.index(),
                    next.count()
                ),
            );
        }
    }

    /// `release_after_wgmma::<P>` (P > 0) is called once per step: more
    /// than `P + 1` unreleased steps means steps were waited for without it.
    #[track_caller]
    pub(super) fn check_pending(pending: u32, limit: u32, at: &Location<'_>) {
        let _scope = kernel_emu::scope("Consumer::release_after_wgmma");
        if pending > limit + 1 {
            kernel_emu::misuse(
                "slots held past their MMAs",
                format_args!(
                    "the consumer of the `Ring` made at {at} holds {pending} unreleased steps at a \
                     `release_after_wgmma::<{limit}>`, which releases one: call it once after each step's \
                     `wgmma_commit_group` (or `release_after_wgmma::<0>`/`release_all` to release every slot)"
                ),
            );
        }
    }

    /// [`super::Consumer::mma_steps`] starts with every earlier step released.
    #[track_caller]
    pub(super) fn check_mma_steps_entry<const S: usize>(pending: u32, next: Step<S>, at: &Location<'_>) {
        let _scope = kernel_emu::scope("Consumer::mma_steps");
        if pending > 0 {
            kernel_emu::misuse(
                "a K loop over unreleased steps",
                format_args!(
                    "the consumer of the `Ring` made at {at} starts `mma_steps` at step {} while {pending} earlier step(s) \
                     are waited for and not released: release them first (`release_after_wgmma::<0>` or `release_all` \
                     after the previous loop)",
                    next.count()
                ),
            );
        }
    }

    /// `Producer::wait_full` waits for a step handed out whose slot was
    /// not handed out again since.
    #[track_caller]
    pub(super) fn check_landed<const S: usize>(step: Step<S>, next: Step<S>, at: &Location<'_>) {
        let _scope = kernel_emu::scope("Producer::wait_full");
        if step.count() >= next.count() || step.count() + S as u32 <= next.count() - 1 {
            kernel_emu::misuse(
                "a wait for a slot's copies outside the ring's window",
                format_args!(
                    "the producer of the `Ring` made at {at} waits for the copies of step {} (slot {}) at step {}: \
                     wait only for a step already handed out whose slot was not handed out again \
                     (steps {}..{})",
                    step.count(),
                    step.index(),
                    next.count(),
                    next.count().saturating_sub(S as u32),
                    next.count()
                ),
            );
        }
    }

    /// A slot released by its token must be the oldest unreleased one.
    #[track_caller]
    pub(super) fn check_slot_order<const S: usize>(what: &'static str, step: u32, released: Step<S>, at: &Location<'_>) {
        let _scope = kernel_emu::scope(what);
        if step != released.count() {
            kernel_emu::misuse(
                "a release out of order",
                format_args!(
                    "the consumer of the `Ring` made at {at} releases the slot of step {step} while step {} (slot {}) is \
                     the oldest unreleased one: release slots in the order `wait` handed them out, once each",
                    released.count(),
                    released.index()
                ),
            );
        }
    }

    /// Skipping needs every waited-for step released; each skipped step's
    /// full barrier phase is passed over.
    #[track_caller]
    pub(super) fn skip<const S: usize>(full: &Barriers<S>, next: Step<S>, released: Step<S>, n: u32, at: &Location<'_>) {
        let _scope = kernel_emu::scope("Consumer::skip");
        if released != next {
            kernel_emu::misuse(
                "a skip over unreleased steps",
                format_args!(
                    "the consumer of the `Ring` made at {at} skips {n} step(s) from step {} while steps {}..{} are waited for \
                     and not released: release them first",
                    next.count(),
                    released.count(),
                    next.count()
                ),
            );
        }
        for t in 0..n {
            kernel_emu::mbarrier_skip_phase(full.at(next.plus(t).index()).smem_addr());
        }
    }
}
