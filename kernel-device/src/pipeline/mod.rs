//! Software pipelines over sequential steps (Pallas's `emit_pipeline`), and
//! the ring they are made of ([`Ring`]: a ring of stage slots with its full
//! and empty barriers, and the producer and consumer states that walk it).
//!
//! ```text
//! emit_pipeline(steps, (spec_a, spec_b), &loaded, delay_release, |step, (a, b)| body)
//! ```
//!
//! Each [`BlockSpec`] names a TMA source, an `S`-slot SMEM buffer and an
//! index map from a step to the block it reads: in tiles
//! ([`BlockSpec::new`]: `step -> (block row, block col)`), in elements
//! ([`BlockSpec::at_elements`]: `step -> (row, col)`, for blocks that
//! start anywhere, such as a decode step's K/V rows `b kv_len + split
//! chunk + step BN`), or as the TMA's own coordinates of any rank
//! ([`BlockSpec::at_coords`]: `step -> [c0, c1, c2]`, innermost first, for
//! rank-3 maps such as `[column, row, batch]`). The pipeline keeps `S -
//! delay_release` steps of copies in flight: one thread issues the TMA
//! loads of a step into its slot ([`Step`]: `step % S`), completing on
//! that slot's `loaded` barrier; every thread waits on that barrier, runs
//! the body on the slot's tiles, and, after a CTA barrier, the slot of
//! step `step - delay_release` is refilled with the step `S` after it.
//!
//! Three forms, all on the ring of [`Ring`]:
//!
//! | form | roles | a slot is refilled after |
//! |---|---|---|
//! | [`emit_pipeline`] | every thread computes; thread 0 issues the copies | a CTA barrier |
//! | [`emit_pipeline_warp_specialized`] | a memory warpgroup issues, the others compute every step (cooperative) | every compute thread released it (`consumed`) |
//! | [`emit_pipeline_ping_pong`] | a memory warpgroup issues; compute warpgroups 0 and 1 take alternate tiles | the tile's warpgroup released it (`consumed`, 128 arrivals) |
//!
//! `delay_release = 1` is for bodies that leave one asynchronous consumer in
//! flight (a `wgmma` awaited with `wgmma_wait::<1>()` in the next step):
//! the pipeline then reuses a slot only one step after the step that read
//! it. With `delay_release = 0` the body must be done with its tiles when it
//! returns. Omitting the delay with an in-flight wgmma is a data race.
//!
//! All threads of the CTA call `emit_pipeline` (it uses `bar.sync 0`).
//!
//! # Testing a pipelined kernel
//!
//! A test shape must run **more steps than stages** (`steps > S`, e.g. a K
//! of at least `(S + 1) x` the tile's K): with `steps <= S` every step has
//! its own slot, no slot is ever refilled, and the slot-reuse protocol
//! (`delay_release`, the `consumed` barrier, the CTA barrier before a
//! refill) is never exercised, so its bugs pass. The CPU emulator warns
//! when a launch's pipeline never reused a slot in any of its CTAs (once
//! per launch, on stderr and in `kernel_emu::RunReport::warnings`), naming
//! the kernel, the call, the stages and the steps.
//!
//! # Reports on the emulator
//!
//! The pipelines are `#[track_caller]`: an emulator report about an
//! operation they issue (a barrier wait, a TMA refill, an arrival) names the
//! line of the user's `emit_pipeline(..)` / `emit_pipeline_warp_specialized(..)`
//! (or `pipeline.run(..)`) call and says it is inside the pipeline. They
//! also check their barriers' arrival counts against the threads that
//! arrive: `loaded` takes 1 arrival per phase, `consumed` one per compute
//! thread (`#[scratch(arrivals = 256)]` for two compute warpgroups); a
//! `consumed` barrier declared with too small a count is reported when its
//! first phase completes early, with the count, the expected arrivals and
//! the arrivals seen.
mod ring;
pub use ring::{Consumer, FromStep, Parity, PhaseBits, Producer, Ring, Slot, Step};

use crate::layout::TileLayout;
use crate::mbarrier::{BarrierRef, Barriers};
use crate::smem::Smem;
use crate::tma::Tma;

/// How a [`BlockSpec`] finds the block a step reads: its TMA source and
/// index map (sealed; made by [`BlockSpec`]'s constructors).
pub trait BlockMap<Tl: TileLayout>: sealed::Sealed {
    /// Issue the TMA copy of `step`'s block into `dst`, completing on
    /// `bar` (one thread).
    #[track_caller]
    fn load(&self, dst: Smem<Tl>, step: u32, bar: BarrierRef<'_>);
}

mod sealed {
    pub trait Sealed {}
    impl<Tl: crate::layout::TileLayout, F> Sealed for super::InTiles<Tl, F> {}
    impl<Tl: crate::layout::TileLayout, F> Sealed for super::InElements<Tl, F> {}
    impl<Tl: crate::layout::TileLayout, const R: usize, F> Sealed for super::AtCoords<Tl, R, F> {}
}

/// A rank-2 source indexed in tiles: `step -> (block row, block col)`.
pub struct InTiles<Tl: TileLayout, F> {
    tma: Tma<Tl>,
    index: F,
}

/// A rank-2 source indexed in elements: `step -> (row, col)` of the
/// block's first element.
pub struct InElements<Tl: TileLayout, F> {
    tma: Tma<Tl>,
    at: F,
}

/// A source of any rank indexed by the TMA's coordinates: `step -> [c0,
/// .., c(R-1)]`, innermost (column) first, as [`Tma::load_at`] takes them.
pub struct AtCoords<Tl: TileLayout, const R: usize, F> {
    tma: Tma<Tl, R>,
    at: F,
}

impl<Tl: TileLayout, F: Fn(u32) -> (u32, u32)> BlockMap<Tl> for InTiles<Tl, F> {
    #[inline(always)]
    #[track_caller]
    fn load(&self, dst: Smem<Tl>, step: u32, bar: BarrierRef<'_>) {
        let (bi, bj) = (self.index)(step);
        self.tma.load(dst, bi * Tl::ROWS as u32, bj * Tl::COLS as u32, bar);
    }
}

impl<Tl: TileLayout, F: Fn(u32) -> (u32, u32)> BlockMap<Tl> for InElements<Tl, F> {
    #[inline(always)]
    #[track_caller]
    fn load(&self, dst: Smem<Tl>, step: u32, bar: BarrierRef<'_>) {
        let (row, col) = (self.at)(step);
        self.tma.load(dst, row, col, bar);
    }
}

impl<Tl: TileLayout, const R: usize, F: Fn(u32) -> [u32; R]> BlockMap<Tl> for AtCoords<Tl, R, F> {
    #[inline(always)]
    #[track_caller]
    fn load(&self, dst: Smem<Tl>, step: u32, bar: BarrierRef<'_>) {
        self.tma.load_at(dst, (self.at)(step), bar);
    }
}

/// One pipelined input: `S` SMEM slots and where each step's block comes
/// from (a TMA source and an index map, [`BlockMap`]).
pub struct BlockSpec<Tl: TileLayout, const S: usize, M: BlockMap<Tl>> {
    pub bufs: Smem<[Tl; S]>,
    map: M,
}

impl<Tl: TileLayout, const S: usize, F: Fn(u32) -> (u32, u32)> BlockSpec<Tl, S, InTiles<Tl, F>> {
    /// Step `step` reads the tile `index(step) = (block row, block col)`
    /// of `tma`'s rank-2 tensor (in tiles: rows `block row x Tl::ROWS ..`).
    pub fn new(tma: Tma<Tl>, bufs: Smem<[Tl; S]>, index: F) -> Self {
        BlockSpec { bufs, map: InTiles { tma, index } }
    }
}

impl<Tl: TileLayout, const S: usize, F: Fn(u32) -> (u32, u32)> BlockSpec<Tl, S, InElements<Tl, F>> {
    /// Step `step` reads the tile whose first element is `at(step) = (row,
    /// col)` of `tma`'s rank-2 tensor: a block at any element offset (rows
    /// past the tensor's edge are zero-filled, as every TMA load's).
    pub fn at_elements(tma: Tma<Tl>, bufs: Smem<[Tl; S]>, at: F) -> Self {
        BlockSpec { bufs, map: InElements { tma, at } }
    }
}

impl<Tl: TileLayout, const S: usize, const R: usize, F: Fn(u32) -> [u32; R]> BlockSpec<Tl, S, AtCoords<Tl, R, F>> {
    /// Step `step` reads the box at `at(step)`, the TMA coordinates of its
    /// first element (innermost first: `[column, row, ..]`) in `tma`'s
    /// rank-`R` tensor.
    pub fn at_coords(tma: Tma<Tl, R>, bufs: Smem<[Tl; S]>, at: F) -> Self {
        BlockSpec { bufs, map: AtCoords { tma, at } }
    }
}

/// A tuple of [`BlockSpec`]s with the same slot count.
pub trait PipelineInputs<const S: usize> {
    /// The tiles of one slot, as a tuple of `Smem<Tl>`.
    type Slot;
    /// Bytes all copies of one step deliver.
    const BYTES: u32;
    /// Issue the copies of `step` into `slot` (one thread).
    #[track_caller]
    fn issue(&self, step: u32, slot: usize, bar: BarrierRef<'_>);
    fn slot(&self, slot: usize) -> Self::Slot;
}

macro_rules! inputs_tuple {
    ($(($Tl:ident, $M:ident, $i:tt)),+) => {
        impl<const S: usize, $($Tl: TileLayout, $M: BlockMap<$Tl>),+> PipelineInputs<S> for ($(BlockSpec<$Tl, S, $M>,)+) {
            type Slot = ($(Smem<$Tl>,)+);
            const BYTES: u32 = 0 $(+ $Tl::BYTES as u32)+;
            #[inline(always)]
            #[track_caller]
            fn issue(&self, step: u32, slot: usize, bar: BarrierRef<'_>) {
                $( self.$i.map.load(self.$i.bufs.at(slot), step, bar); )+
            }
            #[inline(always)]
            fn slot(&self, slot: usize) -> Self::Slot {
                ($(self.$i.bufs.at(slot),)+)
            }
        }
    };
}
inputs_tuple!((T0, M0, 0));
inputs_tuple!((T0, M0, 0), (T1, M1, 1));
inputs_tuple!((T0, M0, 0), (T1, M1, 1), (T2, M2, 2));

/// Runs `body(step, slot_tiles)` for `step` in `0..steps`, with the inputs'
/// TMA copies pipelined `S - delay_release` steps ahead (module docs).
/// `loaded` has one barrier per slot, each initialized with 1 arrival.
///
/// Called by every thread of the CTA. `#[track_caller]`: emulator reports
/// name the caller's line (module docs).
#[inline(always)]
#[track_caller]
pub fn emit_pipeline<const S: usize, I: PipelineInputs<S>>(
    steps: u32,
    inputs: I,
    loaded: &Barriers<S>,
    delay_release: u32,
    mut body: impl FnMut(u32, I::Slot),
) {
    assert!(delay_release < S as u32, "emit_pipeline: delay_release must be below max_concurrent_steps (the slot count)");
    #[cfg(not(target_arch = "nvptx64"))]
    let _scope = emu::entry_checks::<S>("emit_pipeline", steps, loaded, None);
    let ahead = S as u32 - delay_release;
    let leader = crate::index::thread_linear() == 0;
    if leader {
        let mut s = 0;
        while s < ahead && s < steps {
            issue_step(&inputs, loaded, Step::new(s));
            s += 1;
        }
    }
    for step in 0..steps {
        let st = Step::<S>::new(step);
        ring::wait_step(loaded, st, "emit_pipeline");
        body(step, inputs.slot(st.index()));
        let next = step + ahead;
        if next < steps {
            // Every thread is done with the slot of step `step - delay_release`.
            crate::sync::sync_threads();
            if leader {
                issue_step(&inputs, loaded, Step::new(next));
            }
        }
    }
}

/// One thread: arm `loaded` for `step`'s slot and issue its copies.
#[inline(always)]
#[track_caller]
fn issue_step<const S: usize, I: PipelineInputs<S>>(inputs: &I, loaded: &Barriers<S>, step: Step<S>) {
    let bar = loaded.at(step.index());
    bar.arrive_expect_tx(I::BYTES);
    inputs.issue(step.count(), step.index(), bar);
}

/// The emulator's side of the pipelines (host builds only).
#[cfg(not(target_arch = "nvptx64"))]
mod emu {
    extern crate std;
    use super::Barriers;
    use std::{format, string::String};

    /// The checks at a pipeline's entry (every thread): enters the report
    /// scope `what` at the caller's line; declares the arrivals of `loaded`
    /// (1 per phase: the issuer's `arrive_expect_tx`) and of `consumed` (one
    /// per compute thread of a step: `consumers`); warns when `steps <= S`
    /// (no slot is ever reused).
    #[track_caller]
    pub(super) fn entry_checks<const S: usize>(what: &'static str, steps: u32, loaded: &Barriers<S>, consumed: Option<(&Barriers<S>, u32)>) -> kernel_emu::ScopeGuard {
        let at = core::panic::Location::caller();
        let scope = kernel_emu::scope(what);
        for i in 0..S {
            let who = barrier_who("the pipeline's TMA issuer", "loaded", what, i);
            kernel_emu::mbarrier_expect_arrivals(loaded.at(i).smem_addr(), 1, &who);
        }
        if let Some((consumed, consumers)) = consumed {
            for i in 0..S {
                let who = barrier_who(&format!("the {consumers} compute threads"), "consumed", what, i);
                kernel_emu::mbarrier_expect_arrivals(consumed.at(i).smem_addr(), consumers, &who);
            }
        }
        if crate::index::thread_linear() == 0 {
            // Per launch, not per CTA: a launch some of whose CTAs run few
            // steps (ragged lengths) exercised the protocol if any did.
            kernel_emu::warn_unless(format!("{what} at {at}"), steps > S as u32, || {
                format!(
                    "kernel `{}`: `{what}` (called at {at}) ran at most {steps} step(s) in every CTA with {S} stages, so no \
                     slot was ever reused: the slot-reuse protocol (refill after release: `delay_release`, the `consumed` \
                     barrier) was not exercised; test with more steps than stages (K > {S} x the tile's K)",
                    kernel_emu::kernel_name()
                )
            });
        }
        scope
    }

    /// "`who` (`param` barrier `i` of `what`)": who arrives on a pipeline barrier.
    fn barrier_who(who: &str, param: &str, what: &str, i: usize) -> String {
        format!("{who} (`{param}` barrier {i} of `{what}`)")
    }
}

/// The compute side of [`emit_pipeline_warp_specialized`], handed to the
/// compute context: a [`Consumer`] of the pipeline's ring.
pub struct ComputePipeline<'a, const S: usize, I: PipelineInputs<S>> {
    steps: u32,
    inputs: &'a I,
    ring: Ring<'a, S>,
    delay_release: u32,
}

impl<'a, const S: usize, I: PipelineInputs<S>> ComputePipeline<'a, S, I> {
    /// Runs `body(step, slot_tiles, carry) -> carry` for every step and
    /// returns the final carry. After step `s`'s body, each compute thread
    /// releases the slot of step `s - delay_release` (arrives on its
    /// `consumed` barrier), so the memory warpgroup may refill it.
    /// `#[track_caller]`: emulator reports name the caller's line.
    #[inline(always)]
    #[track_caller]
    pub fn run<C>(&self, init: C, body: impl FnMut(u32, I::Slot, C) -> C) -> C {
        #[cfg(not(target_arch = "nvptx64"))]
        let _scope = kernel_emu::scope("ComputePipeline::run");
        let mut consumer = self.ring.consumer();
        run_steps(&mut consumer, self.inputs, self.steps, self.delay_release, init, body)
    }
}

/// `steps` steps of a consumer: wait, `body`, release the slot of the step
/// `delay_release` before.
#[inline(always)]
#[track_caller]
fn run_steps<const S: usize, I: PipelineInputs<S>, C>(
    consumer: &mut Consumer<'_, S>,
    inputs: &I,
    steps: u32,
    delay_release: u32,
    init: C,
    mut body: impl FnMut(u32, I::Slot, C) -> C,
) -> C {
    let mut carry = init;
    for step in 0..steps {
        let slot = consumer.wait();
        carry = body(step, inputs.slot(slot.index()), carry);
        if consumer.unreleased() > delay_release {
            consumer.release();
        }
    }
    carry
}

/// The memory warpgroup's part of the warp-specialized forms: registers
/// down to `MEMORY_REGS`, then one thread issues every step's copies into
/// the ring (waiting for each slot's release from the second lap on).
#[inline(always)]
#[track_caller]
fn produce<const S: usize, const MEMORY_REGS: u32, I: PipelineInputs<S>>(ring: Ring<'_, S>, inputs: &I, steps: u32) {
    crate::wgmma::setmaxnreg_dec::<MEMORY_REGS>();
    if crate::index::thread_in_warpgroup() == 0 {
        let mut producer = ring.producer();
        for step in 0..steps {
            let slot = producer.acquire_tx(I::BYTES);
            inputs.issue(step, slot.index(), slot.barrier());
        }
    }
}

/// Warp-specialized pipeline (Pallas's `emit_pipeline_warp_specialized`).
///
/// Warpgroup `memory_wg` is the memory thread: it lowers its registers to
/// `MEMORY_REGS` (`setmaxnreg.dec`), and one of its threads issues every
/// step's TMA loads into the step's slot, first waiting (from step `S` on)
/// until the compute warpgroups released the slot (`consumed`): the ring's
/// [`Producer`]. Every other warpgroup of the CTA is a compute warpgroup:
/// they raise their registers to `COMPUTE_REGS` (`setmaxnreg.inc`) and run
/// `compute_context(pipeline)`, which creates its carry (accumulators live
/// only in the compute warpgroups' registers), calls
/// [`ComputePipeline::run`] (the ring's [`Consumer`]), and consumes the
/// result (epilogue).
///
/// `loaded[i]` needs 1 arrival; `consumed[i]` one per compute thread
/// (`128 * (warpgroups per CTA - 1)`). `memory_wg` is the memory
/// warpgroup's *index* (e.g. 2 for compute warpgroups 0 and 1), not a count. Called by every thread of the CTA; returns
/// when the thread's role is done (no CTA barrier at the end: the caller
/// synchronizes the roles it needs, e.g. with a named barrier among the
/// compute warpgroups). `#[track_caller]`: emulator reports name the
/// caller's line (module docs).
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn emit_pipeline_warp_specialized<const S: usize, const MEMORY_REGS: u32, const COMPUTE_REGS: u32, I: PipelineInputs<S>>(
    steps: u32,
    inputs: I,
    loaded: &Barriers<S>,
    consumed: &Barriers<S>,
    memory_wg: u32,
    delay_release: u32,
    compute_context: impl FnOnce(ComputePipeline<'_, S, I>),
) {
    assert!(delay_release < S as u32, "emit_pipeline_warp_specialized: delay_release must be below the slot count");
    let b = crate::index::block_dim();
    let compute = (b.x * b.y * b.z).saturating_sub(128);
    #[cfg(not(target_arch = "nvptx64"))]
    let _scope = emu::entry_checks::<S>("emit_pipeline_warp_specialized", steps, loaded, Some((consumed, compute)));
    let ring = Ring::new(loaded, consumed, compute);
    if crate::index::warpgroup_idx() == memory_wg {
        produce::<S, MEMORY_REGS, I>(ring, &inputs, steps);
    } else {
        crate::wgmma::setmaxnreg_inc::<COMPUTE_REGS>();
        compute_context(ComputePipeline { steps, inputs: &inputs, ring, delay_release });
    }
}

/// The compute side of [`emit_pipeline_ping_pong`], handed to each
/// compute warpgroup's context.
pub struct PingPongPipeline<'a, const S: usize, I: PipelineInputs<S>> {
    tiles: u32,
    steps_per_tile: u32,
    inputs: &'a I,
    ring: Ring<'a, S>,
    delay_release: u32,
    /// This warpgroup: 0 or 1.
    turn: u32,
}

impl<'a, const S: usize, I: PipelineInputs<S>> PingPongPipeline<'a, S, I> {
    /// This compute warpgroup's tiles, `turn, turn + 2, ..` below `tiles`:
    /// for each, `tile(t, steps)`, which runs the tile's steps with
    /// [`TileSteps::run`] and then its epilogue. The other warpgroup's
    /// tiles' steps are skipped ([`Consumer::skip`]): their slots are the
    /// other's to wait for and release. `#[track_caller]`: emulator reports
    /// name the caller's line.
    #[inline(always)]
    #[track_caller]
    pub fn for_each_tile(&self, mut tile: impl FnMut(u32, &mut TileSteps<'_, 'a, S, I>)) {
        #[cfg(not(target_arch = "nvptx64"))]
        let _scope = kernel_emu::scope("PingPongPipeline::for_each_tile");
        let mut consumer = self.ring.consumer();
        let mut t = 0;
        while t < self.tiles {
            if t % 2 == self.turn {
                let mut steps = TileSteps { consumer: &mut consumer, inputs: self.inputs, steps: self.steps_per_tile, delay_release: self.delay_release };
                tile(t, &mut steps);
                consumer.release_all();
            } else {
                consumer.skip(self.steps_per_tile);
            }
            t += 1;
        }
    }
}

/// One tile's steps in a [`PingPongPipeline`].
pub struct TileSteps<'c, 'a, const S: usize, I: PipelineInputs<S>> {
    consumer: &'c mut Consumer<'a, S>,
    inputs: &'a I,
    steps: u32,
    delay_release: u32,
}

impl<const S: usize, I: PipelineInputs<S>> TileSteps<'_, '_, S, I> {
    /// Runs `body(step, slot_tiles, carry) -> carry` for the tile's steps
    /// (`step` from 0) and returns the final carry, releasing each slot
    /// `delay_release` steps later. The tile's last slots are released
    /// by [`TileSteps::finish`] (or when the tile's closure returns): call
    /// it once the body's reads of them are done (its wgmmas waited for),
    /// before a long epilogue, so the producer can refill them for the
    /// other warpgroup.
    #[inline(always)]
    #[track_caller]
    pub fn run<C>(&mut self, init: C, body: impl FnMut(u32, I::Slot, C) -> C) -> C {
        run_steps(self.consumer, self.inputs, self.steps, self.delay_release, init, body)
    }
    /// Releases the tile's remaining slots (see [`TileSteps::run`]).
    #[inline(always)]
    #[track_caller]
    pub fn finish(&mut self) {
        self.consumer.release_all();
    }
}

/// Ping-pong pipeline: compute warpgroups 0 and 1 take alternate tiles
/// (CUTLASS's ping-pong schedule, as a pipeline form).
///
/// The memory warpgroup (index 2; registers down to `MEMORY_REGS`) issues
/// the copies of every step of every tile in order: tile `t`'s step `k` is
/// the ring's step `t steps_per_tile + k`, and `inputs`' index maps take
/// that global step. Compute warpgroup `w` (0 or 1; registers up to
/// `COMPUTE_REGS`) runs `compute_context(pipeline)`, whose
/// [`PingPongPipeline::for_each_tile`] visits tiles `w, w + 2, ..`: while
/// one warpgroup runs its tile's epilogue, the other's mainloop has the
/// tensor cores. Each step's slot is released by the one warpgroup that
/// computed it, so `consumed[i]` takes **128** arrivals
/// (`#[scratch(arrivals = 128)]`); `loaded[i]` 1.
///
/// The two warpgroups' mainloops must take turns (CUTLASS's ordering
/// barrier, here the caller's: [`crate::sync::TurnOrder`], `wait_turn`
/// before a tile's [`TileSteps::run`] and `pass_turn` after it, the last
/// tile's turn passed to no one). This is correctness, not only the tensor
/// pipe's order: a parity wait tells only adjacent phases apart, so the
/// warpgroup that starts tile `t + 1` while its first slot is still a lap
/// behind (tile `t`'s steps not landed) would pass its wait at once and
/// read the slot before the copy. The emulator reports that wait ("a wait
/// on a phase ahead of the barrier"; `tests/fixtures/src/pipeline_forms.rs`
/// has both kernels).
///
/// Called by every thread of a 3-warpgroup CTA; returns when the thread's
/// role is done. `#[track_caller]`: emulator reports name the caller's line.
#[inline(always)]
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn emit_pipeline_ping_pong<const S: usize, const MEMORY_REGS: u32, const COMPUTE_REGS: u32, I: PipelineInputs<S>>(
    tiles: u32,
    steps_per_tile: u32,
    inputs: I,
    loaded: &Barriers<S>,
    consumed: &Barriers<S>,
    delay_release: u32,
    compute_context: impl FnOnce(PingPongPipeline<'_, S, I>),
) {
    assert!(delay_release < S as u32, "emit_pipeline_ping_pong: delay_release must be below the slot count");
    let steps = tiles * steps_per_tile;
    #[cfg(not(target_arch = "nvptx64"))]
    let _scope = emu::entry_checks::<S>("emit_pipeline_ping_pong", steps, loaded, Some((consumed, 128)));
    let ring = Ring::new(loaded, consumed, 128);
    let wg = crate::index::warpgroup_idx();
    if wg == 2 {
        produce::<S, MEMORY_REGS, I>(ring, &inputs, steps);
    } else {
        crate::wgmma::setmaxnreg_inc::<COMPUTE_REGS>();
        compute_context(PingPongPipeline { tiles, steps_per_tile, inputs: &inputs, ring, delay_release, turn: wg });
    }
}
