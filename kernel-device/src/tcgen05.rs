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
//! The CTA group (PTX's `.cta_group::1` / `::2`) is a type parameter
//! ([`CtaGroup`]: [`Cta1`], [`Cta2`]) of the MMAs, the commit, [`Tmem`] and
//! the raw alloc/relinquish/dealloc: one wrapper per PTX form serves both.
//! Every MMA and commit takes its issuer first, which decides the group:
//! `&Cta1` for one CTA, a pair's [`crate::collective::PairLeader`] for
//! cta_group::2 ([`crate::collective`]). A pair accumulator
//! (`Tmem<.., Cta2>`) takes only the pair's issuer (a compile error
//! naming the rule otherwise).
//!
//! Who issues what:
//!
//! | op | issued by |
//! |---|---|
//! | [`tcgen05_mma`] / [`tcgen05_mma_kn`] / [`tcgen05_mma_ts`] | one thread (e.g. `elect_one()` in the MMA warp; for a pair, in the leader CTA) |
//! | [`tcgen05_cp`] (SMEM -> TMEM copy) | one thread, like an MMA |
//! | [`tcgen05_commit_arrive`] | the same thread (a commit covers only its own MMAs and copies) |
//! | `wait` of a `Barrier<TensorCore>` | every thread that reads the result |
//! | alloc / relinquish / dealloc ([`raw`]) | one whole warp (in each CTA of a pair; `#[kernel]` does it for `Tmem` scratch) |
//!
//! A barrier that tensor-core work arrives on is of kind [`TensorCore`]
//! (`Barrier<TensorCore>`, `Barriers<N, TensorCore>`; Pallas's
//! `orders_tensor_core=True`): its `wait` is
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
use crate::mbarrier::{Barrier, BarrierRef};
use crate::smem::Smem;
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
    #[inline(always)]
    fn add_start(self, bytes: u32) -> Self {
        SmemDescriptor::add_start(self, bytes)
    }
}

// ----- CTA groups --------------------------------------------------------------

pub(crate) mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Cta1 {}
    impl Sealed for super::Cta2 {}
    impl Sealed for crate::collective::PairLeader {}
    impl Sealed for crate::collective::PairPeer {}
}

/// The CTA group of tensor-core work (PTX's `.cta_group::1` / `::2`): a
/// type parameter of the MMA, commit and TMEM allocation ops ([`raw`]) and
/// of [`Tmem`] (so `Tmem<.., Cta2>`, [`crate::collective::TmemPair`], is
/// written by pair MMAs only). Implemented by [`Cta1`] and [`Cta2`].
pub trait CtaGroup: sealed::Sealed + 'static {
    /// CTAs one MMA of the group computes for (the `N` of `.cta_group::N`,
    /// written into the PTX; the emulator's group size): 1 or 2.
    const CTAS: u32;
}

/// `.cta_group::1`: an MMA on this CTA's tensor memory, issued by any one
/// thread. As an [`Issuer`], `&Cta1` is what a cta_group::1 op takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cta1;

/// `.cta_group::2`: an MMA of a CTA pair (ranks `2p`, `2p + 1` of the
/// cluster) on both CTAs' tensor memory, issued by the pair's leader (its
/// [`Issuer`] is [`crate::collective::PairLeader`]). A type only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cta2 {}

impl CtaGroup for Cta1 {
    const CTAS: u32 = 1;
}
impl CtaGroup for Cta2 {
    const CTAS: u32 = 2;
}

/// Who may issue a group's tensor-core work (MMA and commit; for a pair,
/// also the expect-tx and wait of the barrier its partitioned copies
/// complete on): [`Cta1`] for cta_group::1, the pair's
/// [`crate::collective::PairLeader`] for cta_group::2 (sealed, so a
/// [`crate::collective::PairPeer`] does not compile).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot issue the pair's collective work: only the leader CTA (even cluster rank) of a CTA pair issues it",
    label = "not the pair's leader",
    note = "the collective MMA (`tcgen05.mma.cta_group::2`), its multicast commit, and the cluster-scope barrier the pair's partitioned copies complete on (its expect-tx and its wait) belong to the leader CTA; the peer's barrier never completes. Issue them under `if let Some(leader) = pair_role().leader() {{ .. }}` and pass `&leader` (cta_group::1 work takes `&Cta1`)"
)]
pub trait Issuer: sealed::Sealed {
    /// The CTA group of the work it issues.
    type Group: CtaGroup;
}
impl Issuer for Cta1 {
    type Group = Cta1;
}
impl Issuer for crate::collective::PairLeader {
    type Group = Cta2;
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

/// The `cta_group::2` shape rule of `tcgen05.mma` as this crate offers it
/// (PTX ISA §9.7.16.10.1): `M = 256` (128 rows per CTA, one TMEM lane per
/// row), `N` a multiple of 16 in 16..=256.
pub const fn pair_shape_ok(m: usize, n: usize) -> bool {
    m == 256 && n % 16 == 0 && n >= 16 && n <= 256
}

// ----- raw instructions --------------------------------------------------------

pub mod raw {
    //! One `unsafe fn` per tcgen05 PTX form; the CTA group (`G`, written
    //! into the PTX as `.cta_group::{G::CTAS}`) is a type parameter.
    #[cfg(not(target_arch = "nvptx64"))]
    extern crate std;
    use super::CtaGroup;

    /// `tcgen05.alloc.cta_group::{1,2}.sync.aligned.shared::cta.b32 [dst], ncols;`
    ///
    /// # Safety
    /// All 32 lanes of one warp, converged (for [`super::Cta2`]: one such
    /// warp in **each** CTA of the pair, with the same `ncols`); `ncols` a
    /// power of two in 32..=512; `dst` a 4-byte `.shared::cta` slot that
    /// receives the TMEM address. Every tcgen05 op of the kernel uses the
    /// same group. Blocks while the columns are not free.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn alloc<G: CtaGroup>(dst: u32, ncols: u32) {
        device!("tcgen05.alloc", {
            // SAFETY: caller contract; writes SMEM (memory clobber).
            unsafe {
                core::arch::asm!("tcgen05.alloc.cta_group::{g}.sync.aligned.shared::cta.b32 [{0}], {1};", in(reg32) dst, in(reg32) ncols,
                    g = const G::CTAS, options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::alloc(dst, ncols) })
    }

    /// `tcgen05.relinquish_alloc_permit.cta_group::{1,2}.sync.aligned;`
    ///
    /// # Safety
    /// The warp that allocated (in each CTA of a pair), converged; no
    /// `alloc` by this CTA afterwards.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn relinquish_alloc_permit<G: CtaGroup>() {
        device!("tcgen05.relinquish_alloc_permit", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("tcgen05.relinquish_alloc_permit.cta_group::{g}.sync.aligned;", g = const G::CTAS, options(nostack, preserves_flags)) }
        }, host: { kernel_emu::tmem::relinquish_alloc_permit() })
    }

    /// `tcgen05.dealloc.cta_group::{1,2}.sync.aligned.b32 taddr, ncols;`
    ///
    /// # Safety
    /// One warp, converged (in each CTA of a pair, after every MMA on the
    /// columns completed in both: a cluster barrier); `taddr`/`ncols` an
    /// allocation of this CTA that no tcgen05 operation uses any more.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn dealloc<G: CtaGroup>(taddr: u32, ncols: u32) {
        device!("tcgen05.dealloc", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.dealloc.cta_group::{g}.sync.aligned.b32 {0}, {1};", in(reg32) taddr, in(reg32) ncols,
                    g = const G::CTAS, options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::dealloc(taddr, ncols) })
    }

    /// `tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one.shared::cluster.b64 [bar];`
    /// (a `.shared::cta` address is a valid `.shared::cluster` address of
    /// the own CTA).
    ///
    /// # Safety
    /// `bar` an initialized mbarrier expecting this arrival. One thread.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn commit<G: CtaGroup>(bar: u32) {
        device!("tcgen05.commit", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.commit.cta_group::{g}.mbarrier::arrive::one.shared::cluster.b64 [{0}];", in(reg32) bar,
                    g = const G::CTAS, options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::commit(bar) })
    }

    /// `tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], mask;`
    ///
    /// # Safety
    /// One thread (the one that issued the MMAs); `bar` a `.shared::cta`
    /// offset of an initialized mbarrier that, in every CTA of `mask`,
    /// expects this arrival.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn commit_multicast<G: CtaGroup>(bar: u32, mask: u16) {
        device!("tcgen05.commit (multicast)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.commit.cta_group::{g}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [{0}], {1};",
                    in(reg32) bar, in(reg16) mask, g = const G::CTAS, options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::commit_multicast(bar, mask) })
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
        }, host: { kernel_emu::tmem::fence_before_thread_sync() })
    }

    /// `tcgen05.fence::after_thread_sync;`: orders this thread's following
    /// tcgen05 operations after a preceding thread sync (barrier wait).
    #[inline(always)]
    #[track_caller]
    pub fn fence_after_thread_sync() {
        device!("tcgen05.fence::after_thread_sync", {
            // SAFETY: a fence; memory clobber.
            unsafe { core::arch::asm!("tcgen05.fence::after_thread_sync;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::tmem::fence_after_thread_sync() })
    }

    /// `tcgen05.mma.cta_group::{1,2}.kind::{f16,f8f6f4,i8} [d], a_desc, b_desc, idesc, p;`
    /// with A and B in SMEM; `p = accumulate` (enable-input-d).
    ///
    /// # Safety
    /// One thread (for [`super::Cta2`]: of the pair's leader CTA); `d`
    /// inside this CTA's TMEM allocation (both CTAs' `cta_group::2`
    /// allocation for a pair); descriptors describe SMEM operands (at the
    /// same offsets in both CTAs of a pair) that stay untouched until the
    /// MMA's commit is observed; `idesc` matches them.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn mma_ss<G: CtaGroup>(kind: super::Kind, d: u32, a: u64, b: u64, idesc: u32, accumulate: bool) {
        device!("tcgen05.mma", {
            let p = accumulate as u32;
            macro_rules! issue {
                ($k:literal) => {
                    // SAFETY: caller contract; reads SMEM (both CTAs' for a
                    // pair), writes TMEM (memory clobber).
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; setp.ne.b32 p, {p}, 0; tcgen05.mma.cta_group::{g}.kind::", $k, " [{d}], {a}, {b}, {i}, p; }}"),
                            d = in(reg32) d, a = in(reg64) a, b = in(reg64) b, i = in(reg32) idesc, p = in(reg32) p,
                            g = const G::CTAS, options(nostack)
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
            let (a, b, i) = (super::SmemDescriptor(a), super::SmemDescriptor(b), super::InstrDescriptor(idesc));
            if G::CTAS == 1 {
                kernel_emu::tcgen05::mma(kind, d, kernel_emu::tcgen05::A::Smem(a), b, i, accumulate, op)
            } else {
                kernel_emu::tcgen05::mma_pair(kind, d, a, b, i, accumulate)
            }
        })
    }

    /// `tcgen05.mma.cta_group::1.kind::{f16,f8f6f4,i8} [d], [a_tmem], b_desc, idesc, p;`
    /// with A in TMEM (packed).
    ///
    /// # Safety
    /// As [`mma_ss`] for cta_group::1; `a_tmem` a packed A operand in this
    /// CTA's TMEM.
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

    /// `tcgen05.cp.cta_group::1.<shape> [taddr], s_desc;` (SMEM -> TMEM),
    /// the shape `S` ([`super::CopyShape`]); no decompression formats.
    ///
    /// # Safety
    /// One thread; `taddr` inside this CTA's TMEM allocation (lane 0, or
    /// below 32 for [`super::Cp4x256b`]) with room for the shape's columns;
    /// `src` a descriptor of the shape's rows in the canonical K-major
    /// layout, untouched until the copy's commit is observed; the
    /// destination not read or written (nor under an MMA in flight) until
    /// then.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn cp<S: super::CopyShape>(taddr: u32, src: u64) {
        device!("tcgen05.cp", {
            macro_rules! issue {
                ($s:literal) => {
                    // SAFETY: caller contract; reads SMEM, writes TMEM
                    // (memory clobber).
                    unsafe { core::arch::asm!(concat!("tcgen05.cp.cta_group::1.", $s, " [{t}], {d};"), t = in(reg32) taddr, d = in(reg64) src, options(nostack)) }
                };
            }
            match S::SHAPE {
                super::CpShape::S128x256b => issue!("128x256b"),
                super::CpShape::S128x128b => issue!("128x128b"),
                super::CpShape::S4x256b => issue!("4x256b"),
                super::CpShape::S64x128bWarpx2_02_13 => issue!("64x128b.warpx2::02_13"),
                super::CpShape::S64x128bWarpx2_01_23 => issue!("64x128b.warpx2::01_23"),
                super::CpShape::S32x128bWarpx4 => issue!("32x128b.warpx4"),
            }
        }, host |op| { kernel_emu::tcgen05::cp(S::SHAPE, taddr, super::SmemDescriptor(src), op) })
    }
}

// ----- tcgen05.cp ---------------------------------------------------------------

/// The shapes of `tcgen05.cp` (defined in `kernel-spec`: source rows,
/// 32-bit words per row, the TMEM lanes each row lands in).
pub use kernel_spec::desc_tcgen05::CpShape;

/// A `tcgen05.cp` shape as a type, for [`tcgen05_cp`] and [`raw::cp`].
pub trait CopyShape: sealed::Sealed + Copy + 'static {
    /// The shape.
    const SHAPE: CpShape;
}

macro_rules! copy_shapes {
    ($($(#[$m:meta])* $t:ident => $v:ident),* $(,)?) => {
        $(
            $(#[$m])*
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct $t;
            impl sealed::Sealed for $t {}
            impl CopyShape for $t {
                const SHAPE: CpShape = CpShape::$v;
            }
        )*
    };
}
copy_shapes!(
    /// `.128x256b`: 128 rows of 32 bytes, row `r` to lane `r` (8 columns).
    /// A packed 16-bit A operand, 16 elements of K per copy.
    Cp128x256b => S128x256b,
    /// `.128x128b`: 128 rows of 16 bytes, row `r` to lane `r` (4 columns).
    Cp128x128b => S128x128b,
    /// `.4x256b`: 4 rows of 32 bytes, row `r` to lane `32 r` (block-scale
    /// factors; [`raw::cp`] only: a `Tile` has a multiple of 8 rows).
    Cp4x256b => S4x256b,
    /// `.64x128b.warpx2::02_13`: 64 rows of 16 bytes, each to lanes `r`
    /// and `r + 64`.
    Cp64x128bWarpx2_02_13 => S64x128bWarpx2_02_13,
    /// `.64x128b.warpx2::01_23`: 64 rows of 16 bytes, row `r` to lanes
    /// `64 (r / 32) + r % 32` and 32 after it.
    Cp64x128bWarpx2_01_23 => S64x128bWarpx2_01_23,
    /// `.32x128b.warpx4`: 32 rows of 16 bytes, each to all four lane
    /// quarters (block-scale factors broadcast to every warp).
    Cp32x128bWarpx4 => S32x128bWarpx4,
);

/// `tcgen05.cp` (Pallas's `async_copy_smem_to_tmem`): copies the SMEM tile
/// `src` into `dst`, one copy of shape `S` per `S::SHAPE.row_bytes()` of a
/// tile row (column block by column block, as the MMA walks K): tile row
/// `r`'s bytes land, as raw 32-bit words, in the lanes the shape maps row
/// `r` to, from `dst`'s first column. For a 16-bit A operand, [`Cp128x256b`]
/// into a packed `Tmem<E, 128, K, true>` gives exactly what
/// [`tcgen05_mma_ts`] reads (element `k` of a row in column `k / 2`).
///
/// Asynchronous, issued by **one thread** (like an MMA; `&Cta1`): the copy
/// is complete when a [`tcgen05_commit_arrive`] of the same thread, issued
/// after it, has arrived, and an MMA the same thread issues after it reads
/// the copied cells (the tensor core runs a copy before a later MMA). Until
/// then `src` must not be overwritten and `dst` not be read (`tcgen05.ld`)
/// or written (a store, or another copy), and a copy over the operands of
/// an MMA that has not completed is a race (the tensor core does not order
/// an MMA before a later copy). Ordinary stores into `src` need
/// [`crate::tma::commit_smem`] and a barrier before the copy, as for an
/// MMA operand.
///
/// Compile-time rules: the tile has the shape's rows, is swizzled (the
/// canonical K-major layout the descriptor describes), its row is a whole
/// number of the shape's rows, and `dst` holds a row. cta_group::1 only.
#[inline(always)]
#[track_caller]
pub fn tcgen05_cp<S, T, A, const COLS: usize, const PACKED: bool>(_issuer: &Cta1, _shape: S, dst: &Tmem<T, 128, COLS, PACKED>, src: Smem<A>)
where
    S: CopyShape,
    T: TmemElem,
    A: TileLayout,
{
    const {
        assert!(
            A::ROWS == S::SHAPE.rows() as usize,
            "tcgen05_cp: the SMEM tile must have the shape's rows (128 for Cp128x256b and Cp128x128b, 64 for the Cp64x128b shapes, 32 for Cp32x128bWarpx4; Cp4x256b copies 4 rows: use tcgen05::raw::cp)"
        );
        assert!(!matches!(A::SWIZZLE, Swizzle::None), "tcgen05_cp: the SMEM tile must be swizzled (Swizzled<32/64/128>), the canonical K-major layout a tcgen05 descriptor describes");
        assert!(
            (A::COLS * A::ELEM_BYTES) % S::SHAPE.row_bytes() as usize == 0,
            "tcgen05_cp: a tile row must be a whole number of the shape's rows (32 bytes for the 256b shapes, 16 for the 128b ones)"
        );
        assert!(
            A::COLS * A::ELEM_BYTES <= 4 * Tmem::<T, 128, COLS, PACKED>::PHYS_COLS,
            "tcgen05_cp: the destination Tmem must hold a tile row (row bytes / 4 columns of 32 bits)"
        );
    };
    let per = S::SHAPE.row_bytes() as usize / A::ELEM_BYTES;
    let addr = src.smem_addr();
    let mut i = 0;
    while i * per < A::COLS {
        let d = SmemDescriptor::k_major::<A>(addr, 0, i * per);
        // SAFETY: one thread (documented); the descriptor of a typed tile
        // with the shape's rows; the destination inside `dst` (checked above).
        unsafe { raw::cp::<S>(dst.addr() + (i * S::SHAPE.words() as usize) as u32, d.0) };
        i += 1;
    }
}

// ----- tensor-core barriers ----------------------------------------------------

/// The kind of barrier tensor-core work arrives on (`Barrier<TensorCore>`,
/// `Barriers<N, TensorCore>`; defined with the other kinds in
/// [`crate::mbarrier`]).
pub use crate::mbarrier::TensorCore;

impl<'a> BarrierRef<'a, TensorCore> {
    /// The plain barrier view (for a TMA copy that completes on it too).
    #[inline(always)]
    pub fn plain(&self) -> BarrierRef<'a> {
        self.as_kind()
    }
    /// Waits for this thread's next phase, then
    /// `tcgen05.fence::after_thread_sync` (tensor-core work that follows is
    /// not moved before the wait).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.plain().wait();
        raw::fence_after_thread_sync();
    }
    /// `tcgen05.fence::before_thread_sync`, then one arrival.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        raw::fence_before_thread_sync();
        self.plain().arrive();
    }
}

impl Barrier<TensorCore> {
    /// See [`BarrierRef::<TensorCore>::wait`](BarrierRef#method.wait-1).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.as_ref().wait()
    }
    /// See [`BarrierRef::<TensorCore>::arrive`](BarrierRef#method.arrive-1).
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        self.as_ref().arrive()
    }
}

// ----- Pallas-level operations -------------------------------------------------

/// `tcgen05_commit_arrive(bar)`: one arrival on `bar` once every tcgen05
/// operation this thread issued has completed. Issued by the thread that
/// issued the MMAs: `&Cta1` (one arrival on this CTA's `bar`) or a pair's
/// leader (Pallas's `collective_axis`: `.multicast::cluster` with the
/// pair's mask, one arrival on `bar` **in both CTAs of the pair**).
#[inline(always)]
#[track_caller]
pub fn tcgen05_commit_arrive<I: Issuer>(_issuer: &I, bar: BarrierRef<'_, TensorCore>) {
    if <I::Group as CtaGroup>::CTAS == 1 {
        // SAFETY: `bar` is an initialized scratch tensor-core barrier.
        unsafe { raw::commit::<I::Group>(bar.smem_addr()) }
    } else {
        // SAFETY: `bar` is a scratch tensor-core barrier, at the same offset
        // in every CTA of the pair (same kernel).
        unsafe { raw::commit_multicast::<I::Group>(bar.smem_addr(), crate::collective::pair_mask()) }
    }
}

/// The compile-time rules every MMA form checks: the group's shape (`m` the
/// accumulator's rows per CTA, `n` its columns), K, swizzled operands.
pub(crate) const fn check_mma<I: Issuer, E: MmaInput, G: CtaGroup>(m: usize, n: usize, k: usize, a_swz: Swizzle, b_swz: Swizzle) {
    assert!(
        <I::Group as CtaGroup>::CTAS == G::CTAS,
        "tcgen05.mma: the issuer's CTA group must be the accumulator's: one CTA's `Tmem` is written by cta_group::1 MMAs (issuer `&Cta1`), a pair's collective `TmemPair` only by the pair's cta_group::2 MMAs (issuer: the pair's leader, `&leader` from `pair_role().leader()`)"
    );
    if G::CTAS == 1 {
        assert!(shape_ok(m, n), "tcgen05.mma (cta_group::1): M must be 64 or 128, N a multiple of 8 in 8..=256 for M = 64 and a multiple of 16 in 16..=256 for M = 128 (the accumulator Tmem<D, M, N>)");
    } else {
        assert!(pair_shape_ok(2 * m, n), "tcgen05.mma.cta_group::2: the pair's accumulator must be 256 x N with N a multiple of 16 in 16..=256 (TmemPair<D, 128, N> per CTA)");
        assert!(E::BITS == 16, "tcgen05.mma.cta_group::2: implemented for kind::f16");
    }
    assert!(k % E::K == 0, "tcgen05.mma: the tiles' K must be a multiple of the instruction's K (16 for kind::f16, 32 for kind::f8f6f4 and kind::i8)");
    assert!(!matches!(a_swz, Swizzle::None) && !matches!(b_swz, Swizzle::None), "tcgen05.mma: SMEM operand tiles must be swizzled (Swizzled<32/64/128>)");
}

/// `acc (+)= A · Bᵀ` over the whole K of the tiles: `A` is `M x K`
/// K-major, `B` is `N x K` K-major (`D = A · Bᵀ`), one `tcgen05.mma` per
/// instruction K (16 for 16-bit inputs); `accumulate = false` overwrites the
/// accumulator with the first one. Issued by **one thread**: `&Cta1`, or a
/// pair's leader for a pair accumulator (`TmemPair`, M = 256: each CTA
/// holds A's 128 rows and B's `N / 2` rows of its half at the same SMEM
/// offsets). Completion is observed through [`tcgen05_commit_arrive`].
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma<I, G, E, D, A, B, const M: usize, const N: usize>(_issuer: &I, acc: &Tmem<D, M, N, false, G>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    I: Issuer,
    G: CtaGroup,
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<I, E, G>(M, N, A::COLS, A::SWIZZLE, B::SWIZZLE);
        assert!(A::ROWS == M, "tcgen05.mma: the A tile must have M rows (the accumulator's rows in this CTA)");
        assert!(B::ROWS * G::CTAS as usize == N, "tcgen05.mma: the B tile (N x K, K-major) must have N rows (the accumulator's columns; N / 2 per CTA for cta_group::2)");
        assert!(A::COLS == B::COLS, "tcgen05.mma: A and B tiles must have the same K (columns)");
    };
    crate::tcgen05_view::issue_views::<G, E, D, _, _, M, N>(acc, a, b, accumulate);
}

/// As [`tcgen05_mma`] with B stored `K x N` (N contiguous, MN-major: a
/// row-major `K x N` matrix, the tutorial's B): `acc (+)= A · B`. For a
/// pair, each CTA's B tile is `K x N/2` (its half of the columns).
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_kn<I, G, E, D, A, B, const M: usize, const N: usize>(_issuer: &I, acc: &Tmem<D, M, N, false, G>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    I: Issuer,
    G: CtaGroup,
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<I, E, G>(M, N, A::COLS, A::SWIZZLE, B::SWIZZLE);
        assert!(A::ROWS == M, "tcgen05.mma: the A tile must have M rows (the accumulator's rows in this CTA)");
        assert!(B::COLS * G::CTAS as usize == N, "tcgen05.mma (B K x N): the B tile must have N columns (the accumulator's columns; N / 2 per CTA for cta_group::2)");
        assert!(A::COLS == B::ROWS, "tcgen05.mma (B K x N): A's columns and B's rows must both be K");
    };
    crate::tcgen05_view::issue_views::<G, E, D, _, _, M, N>(acc, a, b.transposed(), accumulate);
}

/// As [`tcgen05_mma`] with A from tensor memory: `a` is a **packed**
/// `M x K` TMEM operand (two 16-bit elements per 32-bit column), `B` an
/// `N x K` K-major SMEM tile. cta_group::1 (`&Cta1`).
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_ts<E, D, B, const M: usize, const N: usize, const K: usize>(
    _issuer: &Cta1,
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
        check_mma::<Cta1, E, Cta1>(M, N, K, Swizzle::B128, B::SWIZZLE);
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
