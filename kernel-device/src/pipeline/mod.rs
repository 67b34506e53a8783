//! Software pipelines over sequential steps (Pallas's `emit_pipeline`), and
//! the ring they are made of ([`Ring`]: a ring of stage slots with its full
//! and empty barriers, and the producer and consumer states that walk it).
//!
//! ```text
//! emit_pipeline(steps, (spec_a, spec_b), &loaded, delay_release, |step, (a, b)| body)
//! ```
//!
//! Each [`BlockSpec`] names a TMA source, an `S`-slot SMEM buffer and an
//! index map `step -> (block row, block col)` (in tiles). The pipeline keeps
//! `S - delay_release` steps of copies in flight: one thread issues the TMA
//! loads of a step into slot `step % S`, completing on `loaded.at(slot)`;
//! every thread waits on that barrier, runs the body on the slot's tiles,
//! and, after a CTA barrier, the slot of step `step - delay_release` is
//! refilled with step `step - delay_release + S`.
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
//! when a pipeline's run never reused a slot (once per launch, on stderr
//! and in `kernel_emu::RunReport::warnings`), naming the kernel, the call,
//! the stages and the steps.
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

/// One pipelined input: a TMA source, `S` SMEM slots, and the tile each step
/// reads (`index(step) -> (block_row, block_col)`, in tiles).
pub struct BlockSpec<Tl: TileLayout, const S: usize, F: Fn(u32) -> (u32, u32)> {
    pub tma: Tma<Tl>,
    pub bufs: Smem<[Tl; S]>,
    pub index: F,
}

impl<Tl: TileLayout, const S: usize, F: Fn(u32) -> (u32, u32)> BlockSpec<Tl, S, F> {
    pub fn new(tma: Tma<Tl>, bufs: Smem<[Tl; S]>, index: F) -> Self {
        BlockSpec { tma, bufs, index }
    }
    #[inline(always)]
    #[track_caller]
    fn issue(&self, step: u32, slot: usize, bar: BarrierRef<'_>) {
        let (bi, bj) = (self.index)(step);
        self.tma.load(self.bufs.at(slot), bi * Tl::ROWS as u32, bj * Tl::COLS as u32, bar);
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
    ($(($Tl:ident, $F:ident, $i:tt)),+) => {
        impl<const S: usize, $($Tl: TileLayout, $F: Fn(u32) -> (u32, u32)),+> PipelineInputs<S> for ($(BlockSpec<$Tl, S, $F>,)+) {
            type Slot = ($(Smem<$Tl>,)+);
            const BYTES: u32 = 0 $(+ $Tl::BYTES as u32)+;
            #[inline(always)]
            #[track_caller]
            fn issue(&self, step: u32, slot: usize, bar: BarrierRef<'_>) {
                $( self.$i.issue(step, slot, bar); )+
            }
            #[inline(always)]
            fn slot(&self, slot: usize) -> Self::Slot {
                ($(self.$i.bufs.at(slot),)+)
            }
        }
    };
}
inputs_tuple!((T0, F0, 0));
inputs_tuple!((T0, F0, 0), (T1, F1, 1));
inputs_tuple!((T0, F0, 0), (T1, F1, 1), (T2, F2, 2));

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
            issue_step(&inputs, loaded, s);
            s += 1;
        }
    }
    for step in 0..steps {
        let slot = (step % S as u32) as usize;
        loaded.at(slot).wait();
        body(step, inputs.slot(slot));
        let next = step + ahead;
        if next < steps {
            // Every thread is done with slot `(step - delay_release) % S`.
            crate::sync::sync_threads();
            if leader {
                issue_step(&inputs, loaded, next);
            }
        }
    }
}

/// One thread: arm `loaded` for `step`'s slot and issue its copies.
#[inline(always)]
#[track_caller]
fn issue_step<const S: usize, I: PipelineInputs<S>>(inputs: &I, loaded: &Barriers<S>, step: u32) {
    let slot = (step % S as u32) as usize;
    let bar = loaded.at(slot);
    bar.arrive_expect_tx(I::BYTES);
    inputs.issue(step, slot, bar);
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
    /// per compute thread: all but the memory warpgroup's 128); warns when
    /// `steps <= S` (no slot is ever reused).
    #[track_caller]
    pub(super) fn entry_checks<const S: usize>(what: &'static str, steps: u32, loaded: &Barriers<S>, consumed: Option<&Barriers<S>>) -> kernel_emu::ScopeGuard {
        let at = core::panic::Location::caller();
        let scope = kernel_emu::scope(what);
        for i in 0..S {
            let who = barrier_who("the pipeline's TMA issuer", "loaded", what, i);
            kernel_emu::mbarrier_expect_arrivals(loaded.at(i).smem_addr(), 1, &who);
        }
        if let Some(consumed) = consumed {
            let b = crate::index::block_dim();
            let compute = (b.x * b.y * b.z).saturating_sub(128);
            for i in 0..S {
                let who = barrier_who(&format!("the {compute} compute threads"), "consumed", what, i);
                kernel_emu::mbarrier_expect_arrivals(consumed.at(i).smem_addr(), compute, &who);
            }
        }
        if steps <= S as u32 && crate::index::thread_linear() == 0 {
            kernel_emu::warn_once(format!(
                "kernel `{}`: `{what}` (called at {at}) ran {steps} step(s) with {S} stages, so no slot was ever reused: \
                 the slot-reuse protocol (refill after release: `delay_release`, the `consumed` barrier) was not \
                 exercised; test with more steps than stages (K > {S} x the tile's K)",
                kernel_emu::kernel_name()
            ));
        }
        scope
    }

    /// "`who` (`param` barrier `i` of `what`)": who arrives on a pipeline barrier.
    fn barrier_who(who: &str, param: &str, what: &str, i: usize) -> String {
        format!("{who} (`{param}` barrier {i} of `{what}`)")
    }
}

/// The compute side of [`emit_pipeline_warp_specialized`], handed to the
/// compute context.
pub struct ComputePipeline<'a, const S: usize, I: PipelineInputs<S>> {
    steps: u32,
    inputs: &'a I,
    loaded: &'a Barriers<S>,
    consumed: &'a Barriers<S>,
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
    pub fn run<C>(&self, init: C, mut body: impl FnMut(u32, I::Slot, C) -> C) -> C {
        #[cfg(not(target_arch = "nvptx64"))]
        let _scope = kernel_emu::scope("ComputePipeline::run");
        let mut carry = init;
        for step in 0..self.steps {
            let slot = (step % S as u32) as usize;
            self.loaded.at(slot).wait();
            carry = body(step, self.inputs.slot(slot), carry);
            if step >= self.delay_release {
                self.consumed.at(((step - self.delay_release) % S as u32) as usize).arrive();
            }
        }
        carry
    }
}

/// Warp-specialized pipeline (Pallas's `emit_pipeline_warp_specialized`).
///
/// Warpgroup `memory_wg` is the memory thread: it lowers its registers to
/// `MEMORY_REGS` (`setmaxnreg.dec`), and one of its threads issues every
/// step's TMA loads into slot `step % S`, first waiting (from step `S` on)
/// until the compute warpgroups released the slot (`consumed`). Every other
/// warpgroup of the CTA is a compute warpgroup: they raise their registers to `COMPUTE_REGS`
/// (`setmaxnreg.inc`) and run `compute_context(pipeline)`, which creates its
/// carry (accumulators live only in the compute warpgroups' registers),
/// calls [`ComputePipeline::run`], and consumes the result (epilogue).
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
    #[cfg(not(target_arch = "nvptx64"))]
    let _scope = emu::entry_checks::<S>("emit_pipeline_warp_specialized", steps, loaded, Some(consumed));
    if crate::index::warpgroup_idx() == memory_wg {
        crate::wgmma::setmaxnreg_dec::<MEMORY_REGS>();
        if crate::index::thread_in_warpgroup() == 0 {
            for step in 0..steps {
                let slot = (step % S as u32) as usize;
                if step >= S as u32 {
                    consumed.at(slot).wait();
                }
                let bar = loaded.at(slot);
                bar.arrive_expect_tx(I::BYTES);
                inputs.issue(step, slot, bar);
            }
        }
    } else {
        crate::wgmma::setmaxnreg_inc::<COMPUTE_REGS>();
        compute_context(ComputePipeline { steps, inputs: &inputs, loaded, consumed, delay_release });
    }
}
