//! mbarrier: arrive/wait barriers in shared memory with transaction counts
//! (PTX ISA §9.7.13.15).
//!
//! An mbarrier completes a *phase* when its pending arrival count reaches zero
//! and its transaction count (bytes announced with `expect_tx`, retired by TMA
//! copies with `complete_tx`) is zero; it then flips its phase parity and
//! re-arms with the count it was initialized with. A waiter waits for the
//! phase with a given parity to complete.
//!
//! [`Barrier`] (one mbarrier) and [`Barriers`] (an array, one per pipeline
//! slot) own the parity each thread waits for, and flip it on a completed
//! wait: kernels carry no parity integers. One family serves every use: a
//! kind parameter ([`BarrierKind`]: [`Plain`], [`TensorCore`], [`PairTma`])
//! says what arrives on the barrier and so which operations its handles
//! offer (a tcgen05 commit takes only a `TensorCore` barrier; a pair's
//! partitioned-copy barrier is waited on only with the pair's leader). Each thread has its own handle (a
//! kernel parameter is a local value), so each thread tracks its own phase,
//! which is right as long as every thread that waits on a barrier waits for
//! every phase in order.
//!
//! Who issues what:
//!
//! | op | issued by |
//! |---|---|
//! | init | one thread, before any use (done by `#[kernel]` for scratch barriers) |
//! | arrive | each arriving thread (counts one arrival) |
//! | arrive_expect_tx | one thread (one arrival + announces bytes) |
//! | wait | any thread that consumes the phase |
use core::cell::Cell;
use core::marker::PhantomData;

/// Bytes of one mbarrier object (`.b64`).
pub const MBARRIER_BYTES: usize = 8;
/// Largest arrival count an mbarrier accepts: 2^20 - 1
/// (`kernel_spec::limits::MAX_MBARRIER_ARRIVALS`).
pub use kernel_spec::limits::MAX_MBARRIER_ARRIVALS as MAX_ARRIVALS;

pub mod raw {
    //! One `unsafe fn` per mbarrier PTX form. `bar` is the 32-bit
    //! shared-memory (`.shared::cta`) address of an 8-byte-aligned mbarrier.

    /// `mbarrier.init.shared::cta.b64 [bar], count;` (sm_80).
    ///
    /// # Safety
    /// One thread; `bar` a valid, unused mbarrier address; 1 <= count < 2^20.
    /// Other threads may use it only after a fence/barrier that orders the init.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn init(bar: u32, count: u32) {
        device!("mbarrier.init", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("mbarrier.init.shared::cta.b64 [{0}], {1};", in(reg32) bar, in(reg32) count,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::mbarrier_init(bar, count) })
    }

    /// `mbarrier.inval.shared::cta.b64 [bar];` (sm_80).
    ///
    /// # Safety
    /// One thread; no thread uses the barrier afterwards (until re-init).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn inval(bar: u32) {
        device!("mbarrier.inval", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("mbarrier.inval.shared::cta.b64 [{0}];", in(reg32) bar, options(nostack, preserves_flags)) }
        }, host: { kernel_emu::mbarrier_inval(bar) })
    }

    /// `mbarrier.arrive.shared::cta.b64 state, [bar];` (sm_80; release, CTA
    /// scope): one arrival. Returns the opaque phase state.
    ///
    /// # Safety
    /// `bar` is an initialized mbarrier; the arrival must be expected by the
    /// current phase (arriving more often than the count is undefined).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn arrive(bar: u32) -> u64 {
        device!("mbarrier.arrive", {
            let state: u64;
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("mbarrier.arrive.shared::cta.b64 {0}, [{1}];", out(reg64) state, in(reg32) bar,
                    options(nostack, preserves_flags))
            };
            state
        }, host: { kernel_emu::mbarrier_arrive(bar); 0 })
    }

    /// `mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], tx;` (sm_90):
    /// announces `tx` bytes of asynchronous transactions, then arrives once.
    ///
    /// # Safety
    /// As [`arrive`]; the announced bytes must be retired by copies that
    /// complete on this barrier in this phase.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn arrive_expect_tx(bar: u32, tx: u32) -> u64 {
        device!("mbarrier.arrive.expect_tx", {
            let state: u64;
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("mbarrier.arrive.expect_tx.shared::cta.b64 {0}, [{1}], {2};",
                    out(reg64) state, in(reg32) bar, in(reg32) tx, options(nostack, preserves_flags))
            };
            state
        }, host: { kernel_emu::mbarrier_expect_tx(bar, tx); kernel_emu::mbarrier_arrive(bar); 0 })
    }

    /// `mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], tx;` (sm_90):
    /// announces `tx` bytes without arriving.
    ///
    /// # Safety
    /// As [`arrive_expect_tx`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn expect_tx(bar: u32, tx: u32) {
        device!("mbarrier.expect_tx", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{0}], {1};", in(reg32) bar, in(reg32) tx,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::mbarrier_expect_tx(bar, tx) })
    }

    /// `mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [bar], parity;`
    /// (sm_90; acquire at **cluster** scope): as [`try_wait_parity`], and
    /// the acquire synchronizes with releases by threads of other CTAs of
    /// the cluster (remote `mbarrier.arrive.release.cluster`), so their
    /// earlier writes (distributed shared memory included) are visible
    /// after it. A CTA-scope acquire is not morally strong with a release
    /// in another CTA (PTX memory model), and compute-sanitizer's racecheck
    /// reports DSMEM data handed over that way.
    ///
    /// # Safety
    /// `bar` is an initialized mbarrier.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn try_wait_parity_cluster(bar: u32, parity: u32) -> bool {
        device!("mbarrier.try_wait.parity.acquire.cluster", {
            let done: u32;
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [{1}], {2}; selp.u32 {0}, 1, 0, p; }}",
                    out(reg32) done, in(reg32) bar, in(reg32) parity, options(nostack, preserves_flags))
            };
            done != 0
        }, host: { kernel_emu::mbarrier_try_wait_parity_cluster(bar, parity) })
    }

    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;` (sm_90;
    /// acquire, CTA scope): true once the phase with parity `parity` has
    /// completed. May suspend the thread for a system-dependent time first.
    ///
    /// # Safety
    /// `bar` is an initialized mbarrier.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn try_wait_parity(bar: u32, parity: u32) -> bool {
        device!("mbarrier.try_wait.parity", {
            let done: u32;
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{1}], {2}; selp.u32 {0}, 1, 0, p; }}",
                    out(reg32) done, in(reg32) bar, in(reg32) parity, options(nostack, preserves_flags))
            };
            done != 0
        }, host: { kernel_emu::mbarrier_try_wait_parity(bar, parity) })
    }

    /// `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [bar];`
    /// (sm_90): one arrival on an mbarrier in any CTA of the cluster; `bar` is
    /// a `.shared::cluster` address from [`crate::cluster::raw::mapa_shared`].
    ///
    /// # Safety
    /// As [`arrive`], for the barrier in the target CTA, which must be running.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn arrive_cluster(bar: u32) {
        device!("mbarrier.arrive.release.cluster", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{0}];", in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::mbarrier_arrive_cluster(bar) })
    }

    /// `mbarrier.arrive.shared::cluster.b64 _, [bar];` (sm_90): one arrival
    /// on an mbarrier in any CTA of the cluster with the default semantics,
    /// release at CTA scope (CUTLASS's `ClusterBarrier::arrive(cta_id)`).
    /// Measured on an H100: [`arrive_cluster`]'s `.release.cluster` costs
    /// each arriving warp a cluster-scope memory barrier (a 25-cycle-per-
    /// instruction membar stall in a GEMM mainloop); this form does not.
    /// Enough to hand a stage slot whose reads were retired by
    /// `wgmma.wait_group` (async proxy) back to a peer's TMA producer.
    ///
    /// # Safety
    /// As [`arrive_cluster`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn arrive_cluster_cta(bar: u32) {
        device!("mbarrier.arrive.shared::cluster", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("mbarrier.arrive.shared::cluster.b64 _, [{0}];", in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::mbarrier_arrive(bar) })
    }
}

// ----- barrier kinds -------------------------------------------------------------

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Plain {}
    impl Sealed for super::TensorCore {}
    impl Sealed for super::PairTma {}
}

/// What arrives on an mbarrier, and so which operations its handles
/// offer: the kind parameter of [`Barriers`] and [`BarrierRef`] (sealed).
///
/// | kind | arrivals | offers |
/// |---|---|---|
/// | [`Plain`] (default) | threads, TMA copies' bytes | every operation of [`BarrierRef`] |
/// | [`TensorCore`] | tcgen05 commits (`crate::tcgen05::tcgen05_commit_arrive` takes only this kind) | `wait` (then `tcgen05.fence::after_thread_sync`), `arrive` (after `tcgen05.fence::before_thread_sync`), `plain()` |
/// | [`PairTma`] | a CTA pair's partitioned copies, on the leader's barrier | `arrive_expect_tx` and `wait`, each taking the pair's leader |
pub trait BarrierKind: sealed::Sealed + 'static {
    /// The kind's name (in `Debug` output).
    const NAME: &'static str;
}

/// An ordinary mbarrier: threads arrive, TMA copies complete bytes on it.
#[derive(Clone, Copy, Debug)]
pub enum Plain {}

/// An mbarrier that tensor-core work arrives on (Pallas's
/// `Barrier(orders_tensor_core=True)`), see [`crate::tcgen05`]: kernel
/// scratch `#[scratch] mma_done: Barrier<TensorCore>` (1 arrival by
/// default: one commit), `#[scratch] consumed: Barriers<S, TensorCore>`.
#[derive(Clone, Copy, Debug)]
pub enum TensorCore {}

/// The mbarriers a CTA pair's partitioned copies complete on, see
/// [`crate::collective`] (Pallas: "a partitioned collective copy only
/// completes the barrier in the leader block"): kernel scratch
/// `#[scratch] loaded: Barriers<S, PairTma>`. Only the leader expects the
/// bytes and waits; the peer's instance is never used.
#[derive(Clone, Copy, Debug)]
pub enum PairTma {}

impl BarrierKind for Plain {
    const NAME: &'static str = "Plain";
}
impl BarrierKind for TensorCore {
    const NAME: &'static str = "TensorCore";
}
impl BarrierKind for PairTma {
    const NAME: &'static str = "PairTma";
}

// ----- handles -------------------------------------------------------------------

/// A view of one mbarrier of kind `K` plus the parity bit this thread waits
/// for next. Obtained from [`Barrier::as_ref`](Barriers::as_ref) or
/// [`Barriers::at`].
pub struct BarrierRef<'a, K: BarrierKind = Plain> {
    addr: u32,
    phases: &'a Cell<u64>,
    bit: u32,
    _k: PhantomData<K>,
}

impl<K: BarrierKind> Clone for BarrierRef<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: BarrierKind> Copy for BarrierRef<'_, K> {}

impl<K: BarrierKind> core::fmt::Debug for BarrierRef<'_, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BarrierRef")
            .field("kind", &K::NAME)
            .field("smem_addr", &self.addr)
            .field("parity", &self.parity())
            .finish()
    }
}

impl<'a, K: BarrierKind> BarrierRef<'a, K> {
    /// The mbarrier's 32-bit shared-memory address.
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.addr
    }
    /// The parity of the phase this thread waits for next.
    #[inline(always)]
    pub fn parity(&self) -> u32 {
        ((self.phases.get() >> self.bit) & 1) as u32
    }
    #[inline(always)]
    fn flip(&self) {
        self.phases.set(self.phases.get() ^ (1u64 << self.bit));
    }
    /// Pass over the phase this thread would wait for next without waiting
    /// on it: a phase that other threads consume (no instruction; this
    /// thread acquires nothing from it). A ring of slots shared by consumers
    /// that take turns (ping-pong warpgroups) calls it for the slots of the
    /// other consumer's steps, so its next [`BarrierRef::wait`] waits for the
    /// right phase.
    #[inline(always)]
    #[track_caller]
    pub fn skip_phase(&self) {
        device!("mbarrier skip_phase", {
            // No instruction: only this thread's parity bit changes.
        }, host: { kernel_emu::mbarrier_skip_phase(self.addr) });
        self.flip();
    }
    /// The same barrier and phase bit as kind `K2`: for the kinds' own
    /// operations, which are the plain ones plus their rule.
    #[inline(always)]
    pub(crate) fn as_kind<K2: BarrierKind>(self) -> BarrierRef<'a, K2> {
        BarrierRef { addr: self.addr, phases: self.phases, bit: self.bit, _k: PhantomData }
    }
}

impl BarrierRef<'_, Plain> {
    /// One arrival (`mbarrier.arrive`, release at CTA scope): this thread's
    /// prior writes are visible to threads that complete a wait on this phase.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        // SAFETY: the address comes from an initialized scratch barrier.
        unsafe { raw::arrive(self.addr) };
    }
    /// Announce `bytes` of asynchronous copies, then arrive once
    /// (`mbarrier.arrive.expect_tx`). One thread per phase.
    #[inline(always)]
    #[track_caller]
    pub fn arrive_expect_tx(&self, bytes: u32) {
        // SAFETY: as `arrive`.
        unsafe { raw::arrive_expect_tx(self.addr, bytes) };
    }
    /// Announce `bytes` without arriving (`mbarrier.expect_tx`).
    #[inline(always)]
    #[track_caller]
    pub fn expect_tx(&self, bytes: u32) {
        // SAFETY: as `arrive`.
        unsafe { raw::expect_tx(self.addr, bytes) };
    }
    /// Arrive once on the same barrier in CTA `cta_rank` of this cluster
    /// (`mapa` + `mbarrier.arrive.release.cluster`).
    #[inline(always)]
    #[track_caller]
    pub fn arrive_cluster(&self, cta_rank: u32) {
        // SAFETY: the barrier exists at the same offset in every CTA of the
        // cluster (same kernel, same scratch layout).
        unsafe { raw::arrive_cluster(crate::cluster::raw::mapa_shared(self.addr, cta_rank)) };
    }
    /// As [`BarrierRef::arrive_cluster`] with release at CTA scope
    /// (`mbarrier.arrive.shared::cluster.b64`, see [`raw::arrive_cluster_cta`]):
    /// no cluster-scope memory barrier.
    #[inline(always)]
    #[track_caller]
    pub fn arrive_cluster_cta(&self, cta_rank: u32) {
        // SAFETY: as `arrive_cluster`.
        unsafe { raw::arrive_cluster_cta(crate::cluster::raw::mapa_shared(self.addr, cta_rank)) };
    }
    /// Block until the phase this thread waits for completes, then flip the
    /// parity this thread waits for (acquire at CTA scope: it does not
    /// acquire the cluster-scope arrivals of other CTAs,
    /// [`BarrierRef::arrive_cluster`]; wait for those with
    /// [`BarrierRef::wait_cluster`]).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        let parity = self.parity();
        // SAFETY: as `arrive`.
        while !unsafe { raw::try_wait_parity(self.addr, parity) } {}
        self.flip();
    }
    /// As [`BarrierRef::wait`], acquiring at cluster scope
    /// ([`raw::try_wait_parity_cluster`]): for a phase that other CTAs'
    /// [`BarrierRef::arrive_cluster`] complete, when this thread must see
    /// what they did before arriving.
    #[inline(always)]
    #[track_caller]
    pub fn wait_cluster(&self) {
        let parity = self.parity();
        // SAFETY: as `arrive`.
        while !unsafe { raw::try_wait_parity_cluster(self.addr, parity) } {}
        self.flip();
    }
    /// Non-blocking wait: true (and the parity flipped) if the phase completed.
    #[inline(always)]
    #[track_caller]
    pub fn try_wait(&self) -> bool {
        // SAFETY: as `arrive`.
        let done = unsafe { raw::try_wait_parity(self.addr, self.parity()) };
        if done {
            self.flip();
        }
        done
    }
}

/// `N` mbarriers of kind `K` in shared memory (one per pipeline slot),
/// each with the phase bit this thread waits for next.
///
/// Declared as kernel scratch: `#[scratch(arrivals = 1)] loaded: Barriers<4>`,
/// `#[scratch] consumed: Barriers<4, TensorCore>` (`arrivals` defaults to 1).
pub struct Barriers<const N: usize, K: BarrierKind = Plain> {
    base: u32,
    phases: Cell<u64>,
    _k: PhantomData<K>,
}

/// One mbarrier of kind `K` (`Barriers<1, K>`, with the single barrier's
/// operations on the handle itself): `#[scratch(arrivals = N)] done: Barrier`,
/// `#[scratch] mma_done: Barrier<TensorCore>`.
pub type Barrier<K = Plain> = Barriers<1, K>;

impl<const N: usize, K: BarrierKind> Barriers<N, K> {
    const CHECK: () = assert!(
        N >= 1 && N <= 64,
        "Barriers<N>: N must be in 1..=64 (one phase bit per barrier in a u64)"
    );

    /// # Safety
    /// `smem_addr` is an 8-byte-aligned `.shared::cta` address of `N`
    /// consecutive mbarriers that are (or will be, before use) initialized.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_smem_addr(smem_addr: u32) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CHECK;
        Barriers {
            base: smem_addr,
            phases: Cell::new(0),
            _k: PhantomData,
        }
    }
    /// Number of barriers.
    pub const fn len(&self) -> usize {
        N
    }
    pub const fn is_empty(&self) -> bool {
        false
    }
    /// Barrier `i` (panics, i.e. traps on the device, if `i >= N`).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> BarrierRef<'_, K> {
        assert!(i < N, "Barriers::at: index out of range");
        BarrierRef {
            addr: self.base + (i * MBARRIER_BYTES) as u32,
            phases: &self.phases,
            bit: i as u32,
            _k: PhantomData,
        }
    }
}

impl<K: BarrierKind> Barriers<1, K> {
    /// The single barrier's view.
    #[inline(always)]
    pub fn as_ref(&self) -> BarrierRef<'_, K> {
        BarrierRef {
            addr: self.base,
            phases: &self.phases,
            bit: 0,
            _k: PhantomData,
        }
    }
    /// See [`BarrierRef::smem_addr`].
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.base
    }
    /// See [`BarrierRef::parity`].
    #[inline(always)]
    pub fn parity(&self) -> u32 {
        self.as_ref().parity()
    }
}

impl Barrier {
    /// See [`BarrierRef::arrive`].
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        self.as_ref().arrive()
    }
    /// See [`BarrierRef::arrive_expect_tx`].
    #[inline(always)]
    #[track_caller]
    pub fn arrive_expect_tx(&self, bytes: u32) {
        self.as_ref().arrive_expect_tx(bytes)
    }
    /// See [`BarrierRef::expect_tx`].
    #[inline(always)]
    #[track_caller]
    pub fn expect_tx(&self, bytes: u32) {
        self.as_ref().expect_tx(bytes)
    }
    /// See [`BarrierRef::arrive_cluster`].
    #[inline(always)]
    #[track_caller]
    pub fn arrive_cluster(&self, cta_rank: u32) {
        self.as_ref().arrive_cluster(cta_rank)
    }
    /// See [`BarrierRef::wait`].
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.as_ref().wait()
    }
    /// See [`BarrierRef::wait_cluster`]: the wait for phases completed by
    /// other CTAs' cluster-scope arrivals ([`Barrier::arrive_cluster`]).
    #[inline(always)]
    #[track_caller]
    pub fn wait_cluster(&self) {
        self.as_ref().wait_cluster()
    }
    /// See [`BarrierRef::try_wait`].
    #[inline(always)]
    #[track_caller]
    pub fn try_wait(&self) -> bool {
        self.as_ref().try_wait()
    }
}

// SAFETY: N consecutive 8-byte mbarriers, 8-byte aligned.
unsafe impl<const N: usize, K: BarrierKind> crate::smem::Scratch for Barriers<N, K> {
    const BYTES: usize = MBARRIER_BYTES * N;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: `ptr` is N aligned mbarriers.
        unsafe { Barriers::from_smem_addr(crate::smem::shared_addr(ptr)) }
    }
    unsafe fn init(&self, arrivals: u32) {
        if N == 1 {
            // One barrier without the loop: the PTX of a `Barrier`'s init
            // stays one straight-line `mbarrier.init`.
            // SAFETY: one thread, before use (trait contract).
            unsafe { raw::init(self.base, arrivals) }
        } else {
            for i in 0..N {
                // SAFETY: one thread, before use (trait contract).
                unsafe { raw::init(self.at(i).smem_addr(), arrivals) }
            }
        }
    }
}
