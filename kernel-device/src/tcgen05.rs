//! Blackwell 5th-generation tensor core: `tcgen05.mma`, its descriptors,
//! `tcgen05.commit`, the tcgen05 fences and tensor-core barriers (PTX ISA
//! §9.7.16, sm_100a). Tensor memory itself is in [`crate::tmem`].
//!
//! `tcgen05.mma` computes `D[M x N] (+)= A[M x K] · B[K x N]` on the tensor
//! core with D in tensor memory, A in SMEM (or TMEM) and B in SMEM, and is
//! issued by **one thread**. It completes asynchronously: the only way to
//! observe completion is an mbarrier that `tcgen05.commit` arrives on once
//! every tcgen05 operation *the committing thread* issued before is done.
//!
//! Who issues what (cta_group::1):
//!
//! | op | issued by |
//! |---|---|
//! | [`tcgen05_mma`] / [`tcgen05_mma_kn`] / [`tcgen05_mma_ts`] | one thread (e.g. `elect_one()` in the MMA warp) |
//! | [`tcgen05_commit_arrive`] | the same thread (a commit covers only its own MMAs) |
//! | [`TcBarrier::wait`] | every thread that reads the result |
//! | alloc / relinquish / dealloc ([`raw`]) | one whole warp (`#[kernel]` does it for `Tmem` scratch) |
//!
//! A barrier that tensor-core work arrives on is a [`TcBarrier`] /
//! [`TcBarriers`] (Pallas's `orders_tensor_core=True`): its `wait` is
//! followed by `tcgen05.fence::after_thread_sync` and its `arrive` preceded by
//! `tcgen05.fence::before_thread_sync`, so tensor-core operations are not
//! moved across it. MMA and commit take only these types: passing a plain
//! [`crate::Barrier`] does not compile.
//!
//! Descriptors ([`InstrDescriptor`], [`SmemDescriptor`]) are defined in
//! `kernel-spec` (`desc_tcgen05`), checked field by field against the PTX
//! ISA tables and an independent encoder there and in the tests below.
//! On the CPU emulator each MMA's body is one call into
//! `kernel_emu::tcgen05`, which decodes these operands as the hardware does.
use crate::layout::{Swizzle, TileLayout};
use crate::mbarrier::{Barrier, BarrierRef, Barriers};
use crate::smem::{Scratch, Smem};
use crate::tmem::{Tmem, TmemElem};

/// The encodings both sides agree on, defined once in `kernel-spec`:
/// `K_BITS` (K = 256 / element bits), the `.kind`, the majors, the
/// instruction descriptor and the SM100 shared-memory descriptor (with their
/// bit layouts and decoding `Debug`s). The emulator decodes them in
/// `kernel_emu::tcgen05`.
pub use kernel_spec::desc_tcgen05::{InstrDescriptor, Kind, Major, SmemDescriptor, K_BITS};
/// Builds operand descriptors of tiles (`SmemDescriptor::k_major::<Tl>(..)`).
pub use crate::wgmma::TileDescriptor;

// ----- element types ---------------------------------------------------------

/// The FP8 element types (defined at the crate root, shared with `wgmma`).
pub use crate::{E4M3, E5M2};

/// An MMA input element type: its kind and instruction-descriptor code.
#[diagnostic::on_unimplemented(
    message = "tcgen05.mma does not take `{Self}` inputs",
    note = "inputs: f16, bf16 (kind::f16), E4M3, E5M2 (kind::f8f6f4), i8, u8 (kind::i8)"
)]
pub trait MmaInput: Copy + 'static {
    const KIND: Kind;
    /// atype/btype code of the instruction descriptor (bits 7-9 / 10-12).
    const CODE: u32;
    const BITS: usize;
    /// K of one instruction: `256 / BITS`.
    const K: usize = K_BITS / Self::BITS;
}
impl MmaInput for half::f16 {
    const KIND: Kind = Kind::F16;
    const CODE: u32 = 0;
    const BITS: usize = 16;
}
impl MmaInput for half::bf16 {
    const KIND: Kind = Kind::F16;
    const CODE: u32 = 1;
    const BITS: usize = 16;
}
impl MmaInput for E4M3 {
    const KIND: Kind = Kind::F8F6F4;
    const CODE: u32 = 0;
    const BITS: usize = 8;
}
impl MmaInput for E5M2 {
    const KIND: Kind = Kind::F8F6F4;
    const CODE: u32 = 1;
    const BITS: usize = 8;
}
impl MmaInput for u8 {
    const KIND: Kind = Kind::I8;
    const CODE: u32 = 0;
    const BITS: usize = 8;
}
impl MmaInput for i8 {
    const KIND: Kind = Kind::I8;
    const CODE: u32 = 1;
    const BITS: usize = 8;
}

/// An accumulator (D) element type and its dtype code (bits 4-5).
pub trait MmaAccum: TmemElem {
    const DTYPE: u32;
}
impl MmaAccum for f32 {
    const DTYPE: u32 = 1;
}
impl MmaAccum for half::f16 {
    const DTYPE: u32 = 0;
}
impl MmaAccum for i32 {
    const DTYPE: u32 = 2;
}

/// `Self` inputs may accumulate into `D` (PTX ISA §9.7.16.4.2, Table 42;
/// bf16 and fp8 need f32, as in Pallas).
#[diagnostic::on_unimplemented(
    message = "tcgen05.mma: `{Self}` inputs cannot accumulate into a `{D}` accumulator",
    label = "accumulator dtype not allowed for this input dtype",
    note = "allowed: f16 -> f32 or f16; bf16 -> f32; E4M3/E5M2 -> f32; i8/u8 -> i32. Declare the accumulator as `Tmem<f32, M, N>` (or i32 for integers)"
)]
pub trait AccumulatesInto<D: MmaAccum>: MmaInput {}
impl AccumulatesInto<f32> for half::f16 {}
impl AccumulatesInto<half::f16> for half::f16 {}
impl AccumulatesInto<f32> for half::bf16 {}
impl AccumulatesInto<f32> for E4M3 {}
impl AccumulatesInto<f32> for E5M2 {}
impl AccumulatesInto<i32> for i8 {}
impl AccumulatesInto<i32> for u8 {}

// ----- descriptors -------------------------------------------------------------

/// The instruction descriptor of an `E x E -> D` MMA of shape `m x n`
/// (PTX ISA §9.7.16.4.2, Table 42: `D`'s dtype code, `E`'s atype/btype
/// code; the layout is [`InstrDescriptor`]'s).
#[inline(always)]
pub const fn instr_descriptor<E: AccumulatesInto<D>, D: MmaAccum>(a_major: Major, b_major: Major, m: u32, n: u32) -> InstrDescriptor {
    InstrDescriptor::new(D::DTYPE, E::CODE, E::CODE, a_major, b_major, m, n)
}

impl TileDescriptor for SmemDescriptor {
    #[inline(always)]
    fn encode(start_addr: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> Self {
        SmemDescriptor::new(start_addr, leading_byte_offset, stride_byte_offset, swizzle)
    }
}

// ----- shape rules -----------------------------------------------------------

/// The cta_group::1 shape rule of `tcgen05.mma` (PTX ISA §9.7.16.10.1):
/// M 64 or 128; N a multiple of 8 in 8..=256 for M = 64, of 16 in 16..=256
/// for M = 128.
pub const fn shape_ok(m: usize, n: usize) -> bool {
    match m {
        64 => n % 8 == 0 && n >= 8 && n <= 256,
        128 => n % 16 == 0 && n >= 16 && n <= 256,
        _ => false,
    }
}

// ----- raw instructions --------------------------------------------------------

pub mod raw {
    //! One `unsafe fn` per tcgen05 PTX form (cta_group::1).
    #[cfg(not(target_arch = "nvptx64"))]
    extern crate std;

    /// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols;`
    ///
    /// # Safety
    /// All 32 lanes of one warp, converged; `ncols` a power of two in
    /// 32..=512; `dst` a 4-byte `.shared::cta` slot that receives the TMEM
    /// address. Blocks while the columns are not free.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn alloc(dst: u32, ncols: u32) {
        device!("tcgen05.alloc", {
            // SAFETY: caller contract; writes SMEM (memory clobber).
            unsafe {
                core::arch::asm!("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{0}], {1};", in(reg32) dst, in(reg32) ncols,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::alloc(dst, ncols) })
    }

    /// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;`
    ///
    /// # Safety
    /// One warp, converged; no `alloc` by this CTA afterwards.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn relinquish_alloc_permit() {
        device!("tcgen05.relinquish_alloc_permit", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::tmem::relinquish_alloc_permit() })
    }

    /// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols;`
    ///
    /// # Safety
    /// One warp, converged; `taddr`/`ncols` an allocation of this CTA that no
    /// tcgen05 operation uses any more.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn dealloc(taddr: u32, ncols: u32) {
        device!("tcgen05.dealloc", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.dealloc.cta_group::1.sync.aligned.b32 {0}, {1};", in(reg32) taddr, in(reg32) ncols,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::dealloc(taddr, ncols) })
    }

    /// `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];`
    /// (a `.shared::cta` address is a valid `.shared::cluster` address of
    /// the own CTA).
    ///
    /// # Safety
    /// `bar` an initialized mbarrier expecting this arrival. One thread.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn commit(bar: u32) {
        device!("tcgen05.commit", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{0}];", in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::commit(bar) })
    }

    /// `tcgen05.fence::before_thread_sync;`: orders this thread's prior
    /// tcgen05 operations before a following thread sync (barrier arrive,
    /// `bar.sync`).
    #[inline(always)]
    #[track_caller]
    pub fn fence_before_thread_sync() {
        device!("tcgen05.fence::before_thread_sync", {
            // SAFETY: a fence; memory clobber.
            unsafe { core::arch::asm!("tcgen05.fence::before_thread_sync;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::yield_point("tcgen05.fence::before_thread_sync") })
    }

    /// `tcgen05.fence::after_thread_sync;`: orders this thread's following
    /// tcgen05 operations after a preceding thread sync (barrier wait).
    #[inline(always)]
    #[track_caller]
    pub fn fence_after_thread_sync() {
        device!("tcgen05.fence::after_thread_sync", {
            // SAFETY: a fence; memory clobber.
            unsafe { core::arch::asm!("tcgen05.fence::after_thread_sync;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::yield_point("tcgen05.fence::after_thread_sync") })
    }

    /// `tcgen05.mma.cta_group::1.kind::{f16,f8f6f4,i8} [d], a_desc, b_desc, idesc, p;`
    /// with A and B in SMEM; `p = accumulate` (enable-input-d).
    ///
    /// # Safety
    /// One thread; `d` inside this CTA's TMEM allocation; descriptors
    /// describe SMEM operands that stay untouched until the MMA's commit is
    /// observed; `idesc` matches them.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn mma_ss(kind: super::Kind, d: u32, a: u64, b: u64, idesc: u32, accumulate: bool) {
        device!("tcgen05.mma", {
            let p = accumulate as u32;
            macro_rules! issue {
                ($k:literal) => {
                    // SAFETY: caller contract; reads SMEM, writes TMEM (memory clobber).
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; setp.ne.b32 p, {p}, 0; tcgen05.mma.cta_group::1.kind::", $k, " [{d}], {a}, {b}, {i}, p; }}"),
                            d = in(reg32) d, a = in(reg64) a, b = in(reg64) b, i = in(reg32) idesc, p = in(reg32) p,
                            options(nostack)
                        )
                    }
                };
            }
            match kind {
                super::Kind::F16 => issue!("f16"),
                super::Kind::F8F6F4 => issue!("f8f6f4"),
                super::Kind::I8 => issue!("i8"),
            }
        }, host |op| {
            kernel_emu::tcgen05::mma(kind, d, kernel_emu::tcgen05::A::Smem(super::SmemDescriptor(a)), super::SmemDescriptor(b), super::InstrDescriptor(idesc), accumulate, op)
        })
    }

    /// `tcgen05.mma.cta_group::1.kind::{f16,f8f6f4,i8} [d], [a_tmem], b_desc, idesc, p;`
    /// with A in TMEM (packed).
    ///
    /// # Safety
    /// As [`mma_ss`]; `a_tmem` a packed A operand in this CTA's TMEM.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn mma_ts(kind: super::Kind, d: u32, a_tmem: u32, b: u64, idesc: u32, accumulate: bool) {
        device!("tcgen05.mma (A in TMEM)", {
            let p = accumulate as u32;
            macro_rules! issue {
                ($k:literal) => {
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; setp.ne.b32 p, {p}, 0; tcgen05.mma.cta_group::1.kind::", $k, " [{d}], [{a}], {b}, {i}, p; }}"),
                            d = in(reg32) d, a = in(reg32) a_tmem, b = in(reg64) b, i = in(reg32) idesc, p = in(reg32) p,
                            options(nostack)
                        )
                    }
                };
            }
            match kind {
                super::Kind::F16 => issue!("f16"),
                super::Kind::F8F6F4 => issue!("f8f6f4"),
                super::Kind::I8 => issue!("i8"),
            }
        }, host |op| {
            kernel_emu::tcgen05::mma(kind, d, kernel_emu::tcgen05::A::Tmem(a_tmem), super::SmemDescriptor(b), super::InstrDescriptor(idesc), accumulate, op)
        })
    }
}

// ----- tensor-core barriers ----------------------------------------------------

/// A view of one tensor-core mbarrier ([`TcBarrier`] / [`TcBarriers::at`]).
#[derive(Clone, Copy, Debug)]
pub struct TcBarrierRef<'a>(BarrierRef<'a>);

impl<'a> TcBarrierRef<'a> {
    /// The mbarrier's `.shared::cta` address.
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.0.smem_addr()
    }
    /// The plain barrier view (for a TMA copy that completes on it too).
    #[inline(always)]
    pub fn plain(&self) -> BarrierRef<'a> {
        self.0
    }
    /// Waits for this thread's next phase, then
    /// `tcgen05.fence::after_thread_sync` (tensor-core work that follows is
    /// not moved before the wait).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.0.wait();
        raw::fence_after_thread_sync();
    }
    /// `tcgen05.fence::before_thread_sync`, then one arrival.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        raw::fence_before_thread_sync();
        self.0.arrive();
    }
}

/// One mbarrier that tensor-core work arrives on (Pallas's
/// `Barrier(orders_tensor_core=True)`). Kernel scratch:
/// `#[scratch] mma_done: TcBarrier` (1 arrival by default: one commit).
pub struct TcBarrier(Barrier);

impl TcBarrier {
    #[inline(always)]
    pub fn as_ref(&self) -> TcBarrierRef<'_> {
        TcBarrierRef(self.0.as_ref())
    }
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.0.smem_addr()
    }
    /// See [`TcBarrierRef::wait`].
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.as_ref().wait()
    }
    /// See [`TcBarrierRef::arrive`].
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        self.as_ref().arrive()
    }
}

/// `N` tensor-core mbarriers (one per pipeline slot).
pub struct TcBarriers<const N: usize>(Barriers<N>);

impl<const N: usize> TcBarriers<N> {
    /// Barrier `i` (traps if `i >= N`).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> TcBarrierRef<'_> {
        TcBarrierRef(self.0.at(i))
    }
}

// SAFETY: one 8-byte mbarrier, as `Barrier`.
unsafe impl Scratch for TcBarrier {
    const BYTES: usize = crate::mbarrier::MBARRIER_BYTES;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: forwarded contract.
        TcBarrier(unsafe { <Barrier as Scratch>::from_smem(ptr) })
    }
    unsafe fn init(&self, arrivals: u32) {
        // SAFETY: forwarded contract.
        unsafe { <Barrier as Scratch>::init(&self.0, arrivals) }
    }
}

// SAFETY: N consecutive mbarriers, as `Barriers<N>`.
unsafe impl<const N: usize> Scratch for TcBarriers<N> {
    const BYTES: usize = crate::mbarrier::MBARRIER_BYTES * N;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: forwarded contract.
        TcBarriers(unsafe { <Barriers<N> as Scratch>::from_smem(ptr) })
    }
    unsafe fn init(&self, arrivals: u32) {
        // SAFETY: forwarded contract.
        unsafe { <Barriers<N> as Scratch>::init(&self.0, arrivals) }
    }
}

// ----- Pallas-level operations -------------------------------------------------

/// `tcgen05_commit_arrive(bar)`: one arrival on `bar` once every tcgen05
/// operation this thread issued has completed. Issued by the thread that
/// issued the MMAs (one thread).
#[inline(always)]
#[track_caller]
pub fn tcgen05_commit_arrive(bar: TcBarrierRef<'_>) {
    // SAFETY: `bar` is an initialized scratch tensor-core barrier.
    unsafe { raw::commit(bar.smem_addr()) }
}

/// The compile-time rules every MMA form checks.
const fn check_mma<E: MmaInput>(m: usize, n: usize, k: usize, a_swz: Swizzle, b_swz: Swizzle) {
    assert!(shape_ok(m, n), "tcgen05.mma (cta_group::1): M must be 64 or 128, N a multiple of 8 in 8..=256 for M = 64 and a multiple of 16 in 16..=256 for M = 128 (the accumulator Tmem<D, M, N>)");
    assert!(k % E::K == 0, "tcgen05.mma: the tiles' K must be a multiple of the instruction's K (16 for kind::f16, 32 for kind::f8f6f4 and kind::i8)");
    assert!(!matches!(a_swz, Swizzle::None) && !matches!(b_swz, Swizzle::None), "tcgen05.mma: SMEM operand tiles must be swizzled (Swizzled<32/64/128>)");
}

/// `acc (+)= A · Bᵀ` over the whole K of the tiles: `A` is `M x K`
/// K-major, `B` is `N x K` K-major (`D = A · Bᵀ`), one `tcgen05.mma` per
/// instruction K (16 for 16-bit inputs); `accumulate = false` overwrites the
/// accumulator with the first one. Issued by **one thread**; completion is
/// observed through [`tcgen05_commit_arrive`].
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma<E, D, A, B, const M: usize, const N: usize>(acc: &Tmem<D, M, N>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<E>(M, N, A::COLS, A::SWIZZLE, B::SWIZZLE);
        assert!(A::ROWS == M, "tcgen05.mma: the A tile must have M rows (the accumulator's rows)");
        assert!(B::ROWS == N, "tcgen05.mma: the B tile (N x K, K-major) must have N rows (the accumulator's columns)");
        assert!(A::COLS == B::COLS, "tcgen05.mma: A and B tiles must have the same K (columns)");
    };
    let idesc = const { instr_descriptor::<E, D>(Major::K, Major::K, M as u32, N as u32) };
    let (aa, ba) = (a.smem_addr(), b.smem_addr());
    let mut k = 0;
    while k < A::COLS {
        let da = SmemDescriptor::k_major::<A>(aa, 0, k);
        let db = SmemDescriptor::k_major::<B>(ba, 0, k);
        issue_ss::<E, D>(acc.addr(), da, db, idesc, accumulate || k > 0);
        k += E::K;
    }
}

/// As [`tcgen05_mma`] with B stored `K x N` (N contiguous, MN-major: a
/// row-major `K x N` matrix, the tutorial's B): `acc (+)= A · B`.
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_kn<E, D, A, B, const M: usize, const N: usize>(acc: &Tmem<D, M, N>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<E>(M, N, A::COLS, A::SWIZZLE, B::SWIZZLE);
        assert!(A::ROWS == M, "tcgen05.mma: the A tile must have M rows (the accumulator's rows)");
        assert!(B::COLS == N, "tcgen05.mma (B K x N): the B tile must have N columns (the accumulator's columns)");
        assert!(A::COLS == B::ROWS, "tcgen05.mma (B K x N): A's columns and B's rows must both be K");
    };
    let idesc = const { instr_descriptor::<E, D>(Major::K, Major::MN, M as u32, N as u32) };
    let (aa, ba) = (a.smem_addr(), b.smem_addr());
    let mut k = 0;
    while k < A::COLS {
        let da = SmemDescriptor::k_major::<A>(aa, 0, k);
        let db = SmemDescriptor::mn_major::<B>(ba, k, 0);
        issue_ss::<E, D>(acc.addr(), da, db, idesc, accumulate || k > 0);
        k += E::K;
    }
}

/// As [`tcgen05_mma`] with A from tensor memory: `a` is a **packed**
/// `M x K` TMEM operand (two 16-bit elements per 32-bit column), `B` an
/// `N x K` K-major SMEM tile.
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_ts<E, D, B, const M: usize, const N: usize, const K: usize>(
    acc: &Tmem<D, M, N>,
    a: &Tmem<E, M, K, true>,
    b: Smem<B>,
    accumulate: bool,
) where
    E: AccumulatesInto<D> + TmemElem,
    D: MmaAccum,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<E>(M, N, K, Swizzle::B128, B::SWIZZLE);
        assert!(<E as MmaInput>::BITS == 16, "tcgen05.mma with A in TMEM: implemented for 16-bit inputs (kind::f16)");
        assert!(B::ROWS == N && B::COLS == K, "tcgen05.mma (A in TMEM): the B tile must be N x K (K-major)");
    };
    let idesc = const { instr_descriptor::<E, D>(Major::K, Major::K, M as u32, N as u32) };
    let ba = b.smem_addr();
    let mut k = 0;
    while k < K {
        let db = SmemDescriptor::k_major::<B>(ba, 0, k);
        // Packed: K elements in K / 2 columns.
        let a_addr = a.addr() + (k / 2) as u32;
        // SAFETY: one thread (documented); operands from typed handles.
        unsafe { raw::mma_ts(E::KIND, acc.addr(), a_addr, db.0, idesc.0, accumulate || k > 0) };
        k += E::K;
    }
}

#[inline(always)]
#[track_caller]
fn issue_ss<E: AccumulatesInto<D>, D: MmaAccum>(d: u32, da: SmemDescriptor, db: SmemDescriptor, idesc: InstrDescriptor, accumulate: bool) {
    // SAFETY: one thread (documented); descriptors from typed tiles.
    unsafe { raw::mma_ss(E::KIND, d, da.0, db.0, idesc.0, accumulate) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Swizzled, Tile};
    use half::{bf16, f16};

    /// Values worked out by hand from PTX ISA §9.7.16.4.2, Table 42.
    #[test]
    fn instr_descriptor_fields_from_the_isa_table() {
        // kind::f16, f16 x f16 -> f32, both K-major, M = 128, N = 256:
        // dtype F32 = 1 << 4 = 0x10; atype = btype = 0; N >> 3 = 32 -> 32 << 17 = 0x40_0000;
        // M >> 4 = 8 -> 8 << 24 = 0x800_0000.
        let d = instr_descriptor::<f16, f32>(Major::K, Major::K, 128, 256);
        assert_eq!(d.0, 0x10 | 0x40_0000 | 0x800_0000);
        assert_eq!((d.m(), d.n(), d.dtype(), d.atype(), d.btype()), (128, 256, 1, 0, 0));
        // bf16 -> f32, B N-major (transpose B, bit 16), M = 64, N = 8:
        // 0x10 | 1 << 7 | 1 << 10 | 1 << 16 | 1 << 17 | 4 << 24.
        let d = instr_descriptor::<bf16, f32>(Major::K, Major::MN, 64, 8);
        assert_eq!(d.0, 0x10 | 0x80 | 0x400 | 0x1_0000 | 0x2_0000 | 0x400_0000);
        assert_eq!(d.b_major(), Major::MN);
        assert_eq!(d.a_major(), Major::K);
        // f16 -> f16 accumulator: dtype 0.
        assert_eq!(instr_descriptor::<f16, f16>(Major::K, Major::K, 128, 128).dtype(), 0);
        // kind::f8f6f4 e5m2 -> f32: atype = btype = 1; kind::i8 s8 -> s32: dtype 2, types 1.
        let d = instr_descriptor::<E5M2, f32>(Major::K, Major::K, 128, 128);
        assert_eq!((d.atype(), d.btype(), d.dtype()), (1, 1, 1));
        let d = instr_descriptor::<i8, i32>(Major::K, Major::K, 128, 16);
        assert_eq!((d.atype(), d.btype(), d.dtype(), d.n()), (1, 1, 2, 16));
        assert_eq!(instr_descriptor::<u8, i32>(Major::K, Major::K, 128, 16).atype(), 0);
        // Negation bits 13 and 14.
        assert_eq!(InstrDescriptor::new(1, 0, 0, Major::K, Major::K, 0, 0).negate_a().negate_b().0, 0x10 | 0x2000 | 0x4000);
        // Transpose A: bit 15.
        assert_eq!(InstrDescriptor::new(0, 0, 0, Major::MN, Major::K, 0, 0).0, 0x8000);
    }

    /// Outputs of an independent encoder: `tests/encodings/tcgen05_desc.py`,
    /// a transcription of the ISA tables (Table 42 and §9.7.16.4.1) written
    /// separately from this module, run with python3 3.11 on 2026-11-22;
    /// its printed lines are pasted here unchanged.
    #[test]
    fn descriptors_match_the_independent_python_encoder() {
        let idesc: [(InstrDescriptor, u32); 6] = [
            (instr_descriptor::<f16, f32>(Major::K, Major::K, 128, 128), 0x08200010),
            (instr_descriptor::<f16, f32>(Major::K, Major::MN, 128, 256), 0x08410010),
            (instr_descriptor::<bf16, f32>(Major::K, Major::K, 64, 64), 0x04100490),
            (instr_descriptor::<f16, f16>(Major::K, Major::K, 128, 16), 0x08040000),
            (instr_descriptor::<E4M3, f32>(Major::K, Major::K, 128, 256), 0x08400010),
            (instr_descriptor::<i8, i32>(Major::K, Major::K, 128, 128), 0x082004a0),
        ];
        for (d, want) in idesc {
            assert_eq!(d.0, want, "{d:?}");
        }
        // The encoder's SMEM descriptor lines are checked once, by
        // `kernel_spec::desc_tcgen05`'s test of the same name.
    }

    // The SMEM descriptor's fields from the ISA table, and the raw
    // encodings against the independent encoder: `kernel_spec::desc_tcgen05`.

    #[test]
    fn operand_descriptors_walk_the_tiles() {
        type A = Tile<f16, 128, 64, Swizzled<128>>;
        let d = SmemDescriptor::k_major::<A>(0x400, 0, 16);
        assert_eq!((d.start_addr(), d.stride_byte_offset(), d.swizzle()), (0x400 + 32, 1024, Swizzle::B128));
        // B K x N = 64 x 128 f16: two column blocks of 64 rows x 128 B.
        type B = Tile<f16, 64, 128, Swizzled<128>>;
        let d = SmemDescriptor::mn_major::<B>(0x800, 16, 0);
        assert_eq!((d.start_addr(), d.leading_byte_offset(), d.stride_byte_offset()), (0x800 + 16 * 128, 8192, 1024));
    }

    #[test]
    fn shape_rule() {
        assert!(shape_ok(128, 16) && shape_ok(128, 256) && shape_ok(64, 8) && shape_ok(64, 248));
        assert!(!shape_ok(128, 8) && !shape_ok(128, 272) && !shape_ok(64, 12) && !shape_ok(256, 128) && !shape_ok(32, 32));
    }

    #[test]
    fn fp8_decoding() {
        assert_eq!(E4M3::from_bits(0x38).to_f32(), 1.0); // exponent 7 = bias
        assert_eq!(E4M3::from_bits(0xC0).to_f32(), -2.0);
        assert_eq!(E4M3::from_bits(0x7E).to_f32(), 448.0); // largest finite
        assert!(E4M3::from_bits(0x7F).to_f32().is_nan());
        assert_eq!(E4M3::from_bits(0x01).to_f32(), 2f32.powi(-9)); // smallest subnormal
        assert_eq!(E5M2::from_bits(0x3C).to_f32(), 1.0);
        assert_eq!(E5M2::from_bits(0xC0).to_f32(), -2.0);
        // Every byte: the element types' values (float8's) are the
        // emulator's decodings (kernel-spec), bit for bit (NaN for NaN).
        for b in 0..=255u8 {
            let (got, want) = (E4M3::from_bits(b).to_f32(), kernel_spec::desc_tcgen05::e4m3_to_f32(b));
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "e4m3 {b:#04x}: {got} vs {want}");
            let (got, want) = (E5M2::from_bits(b).to_f32(), half::f16::from_bits(u16::from(b) << 8).to_f32());
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "e5m2 {b:#04x}: {got} vs {want}");
        }
    }
}
