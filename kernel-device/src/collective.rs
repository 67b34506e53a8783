//! Collective (2-CTA, `cta_group::2`) tensor-core work on Blackwell
//! (sm_100a): a **CTA pair** (ranks `2p` and `2p + 1` of a cluster whose x
//! extent is even) computes one `256 x N` MMA whose A rows and B columns are
//! split between the two CTAs' shared memory, with the accumulator split
//! between their tensor memories (rows 0..128 in the even CTA, the leader,
//! rows 128..256 in the odd one).
//!
//! | op | issued by |
//! |---|---|
//! | [`TmemPair`] alloc/dealloc (`#[kernel]` does them) | one warp in **each** CTA of the pair |
//! | [`tcgen05_mma_kn_pair`] | one thread of the **leader** CTA (takes [`PairLeader`]) |
//! | [`tcgen05_commit_arrive_pair`] (multicast to both CTAs' barriers) | the thread that issued the MMAs (takes [`PairLeader`]) |
//! | [`PartitionedTma::load_partitioned`] | one thread in **each** CTA (its half), completing on the leader's [`PairBarriers`] |
//! | [`PairBarrierRef::arrive_expect_tx`] / [`PairBarrierRef::wait`] | the **leader** CTA (takes [`PairLeader`]) |
//!
//! Who is the leader is in the types: [`pair_role`] gives a [`PairLeader`]
//! in the even CTA and a [`PairPeer`] in the odd one, and every op of the
//! leader takes `&PairLeader`. Issuing one in the peer (with the
//! `PairPeer`) is a compile error naming the rule.
//!
//! Rules checked at compile time: the collective MMA's shape (`M = 256`,
//! `N` a multiple of 16 in 16..=256), a [`TmemPair`] (and so every
//! collective op, which takes one) only in a kernel whose cluster's x
//! extent is a multiple of 2, and a partitioned copy only along an axis the
//! tile splits in two; the leader's ops (collective MMA, its commit, the
//! cluster-scope barrier of the partitioned copies: expect-tx and wait)
//! only with the [`PairLeader`] token. A partitioned copy completes on the **leader's**
//! barrier (Pallas: "a partitioned collective copy only completes the
//! barrier in the leader block"): the leader expects the bytes of both
//! halves.
//!
//! Emulator: the pair MMA reads both CTAs' SMEM at issue and runs
//! asynchronously on both CTAs' TMEM (`kernel_emu::tmem::mma_pair`); the
//! multicast commit arrives on the barrier at the same offset in every CTA
//! of the mask once the issuer's MMAs executed (`commit_multicast`).
use crate::layout::TileLayout;
use crate::mbarrier::{BarrierRef, Barriers};
use crate::smem::{Scratch, Smem};
use crate::tcgen05::{instr_descriptor, AccumulatesInto, Major, MmaAccum, SmemDescriptor, TcBarrierRef, TileDescriptor};
use crate::tma::Tma;
use crate::tmem::{Tmem, TmemElem};

/// The `cta_group::2` shape rule of `tcgen05.mma` as this crate offers it
/// (PTX ISA §9.7.16.10.1): `M = 256` (128 rows per CTA, one TMEM lane per
/// row), `N` a multiple of 16 in 16..=256.
pub const fn pair_shape_ok(m: usize, n: usize) -> bool {
    m == 256 && n % 16 == 0 && n >= 16 && n <= 256
}

pub mod raw {
    //! One `unsafe fn` per `cta_group::2` PTX form.

    /// `tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [dst], ncols;`
    ///
    /// # Safety
    /// One whole warp in **each** CTA of the pair, converged, with the same
    /// `ncols` (a power of two in 32..=512); `dst` a 4-byte `.shared::cta`
    /// slot. Every tcgen05 op of the kernel must be `cta_group::2`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn alloc(dst: u32, ncols: u32) {
        device!("tcgen05.alloc.cta_group::2", {
            // SAFETY: caller contract; writes the slot (memory clobber).
            unsafe {
                core::arch::asm!("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [{0}], {1};", in(reg32) dst, in(reg32) ncols,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::alloc(dst, ncols) })
    }

    /// `tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;`
    ///
    /// # Safety
    /// The warp that allocated, in each CTA of the pair.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn relinquish_alloc_permit() {
        device!("tcgen05.relinquish_alloc_permit.cta_group::2", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::tmem::relinquish_alloc_permit() })
    }

    /// `tcgen05.dealloc.cta_group::2.sync.aligned.b32 taddr, ncols;`
    ///
    /// # Safety
    /// One whole warp in each CTA of the pair, after every MMA on the
    /// columns completed in both (a cluster barrier); the allocation's
    /// `taddr` and `ncols`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn dealloc(taddr: u32, ncols: u32) {
        device!("tcgen05.dealloc.cta_group::2", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.dealloc.cta_group::2.sync.aligned.b32 {0}, {1};", in(reg32) taddr, in(reg32) ncols,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::dealloc(taddr, ncols) })
    }

    /// `tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], mask;`
    ///
    /// # Safety
    /// One thread (the one that issued the MMAs); `bar` a `.shared::cta`
    /// offset of an initialized mbarrier that, in every CTA of `mask`,
    /// expects this arrival.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn commit_multicast(bar: u32, mask: u16) {
        device!("tcgen05.commit (multicast)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [{0}], {1};",
                    in(reg32) bar, in(reg16) mask, options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::commit_multicast(bar, mask) })
    }

    /// `tcgen05.mma.cta_group::2.kind::f16 [d], a_desc, b_desc, idesc, p;`
    ///
    /// # Safety
    /// One thread of the leader CTA; `d` inside both CTAs' `cta_group::2`
    /// allocation; the descriptors describe SMEM at the same offsets in both
    /// CTAs, untouched until the MMA's commit is observed.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn mma_f16(d: u32, a: u64, b: u64, idesc: u32, accumulate: bool) {
        device!("tcgen05.mma.cta_group::2", {
            let p = accumulate as u32;
            // SAFETY: caller contract; reads SMEM of both CTAs, writes TMEM (memory clobber).
            unsafe {
                core::arch::asm!(
                    "{{ .reg .pred p; setp.ne.b32 p, {p}, 0; tcgen05.mma.cta_group::2.kind::f16 [{d}], {a}, {b}, {i}, p; }}",
                    d = in(reg32) d, a = in(reg64) a, b = in(reg64) b, i = in(reg32) idesc, p = in(reg32) p,
                    options(nostack)
                )
            }
        }, host: {
            use crate::tcgen05::{InstrDescriptor, Kind, SmemDescriptor};
            kernel_emu::tcgen05::mma_pair(Kind::F16, d, SmemDescriptor(a), SmemDescriptor(b), InstrDescriptor(idesc), accumulate)
        })
    }

    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2 [dst], [tmap, {c0, c1}], [bar];`
    /// (sm_100a): `bar` may be the peer CTA's mbarrier (a `.shared::cluster`
    /// address from `mapa`).
    ///
    /// # Safety
    /// As `tma::raw::load_2d`; `bar` expects the bytes in this phase.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_2d_pair(dst: u32, tmap: u64, c0: i32, c1: i32, bar: u32) {
        device!("cp.async.bulk.tensor.2d.cta_group::2 (load)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2 [{0}], [{1}, {{{2}, {3}}}], [{4}];",
                    in(reg32) dst, in(reg64) tmap, in(reg32) c0, in(reg32) c1, in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host: {
            let op = "cp.async.bulk.tensor.2d.cta_group::2 (partitioned load)";
            // SAFETY: caller contract (`tmap` a `Tma` parameter's address).
            unsafe { kernel_emu::tma::load(dst, tmap, &[c0, c1], bar, op) }
        })
    }
}

// ----- collective TMEM ---------------------------------------------------------

/// Collective tensor memory (Pallas's `plgpu.TMEM(.., collective=True)`):
/// a `ROWS x COLS` tile at the same columns of both CTAs of a pair,
/// allocated with `cta_group::2` by `#[kernel]` (scratch:
/// `#[scratch] acc: TmemPair<f32, 128, N>`). A kernel with one must have a
/// cluster whose x extent is a multiple of 2 (a compile error otherwise).
pub struct TmemPair<T: TmemElem, const ROWS: usize, const COLS: usize>(Tmem<T, ROWS, COLS>);

impl<T: TmemElem, const ROWS: usize, const COLS: usize> Clone for TmemPair<T, ROWS, COLS> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: TmemElem, const ROWS: usize, const COLS: usize> Copy for TmemPair<T, ROWS, COLS> {}

impl<T: TmemElem, const ROWS: usize, const COLS: usize> TmemPair<T, ROWS, COLS> {
    /// This CTA's half of the collective tile (its rows of the pair's
    /// accumulator), for `tcgen05.ld`.
    #[inline(always)]
    pub fn local(&self) -> Tmem<T, ROWS, COLS> {
        self.0
    }
    /// Columns `off .. off + W` (traps if outside), e.g. one of two
    /// accumulator buffers.
    #[inline(always)]
    #[track_caller]
    pub fn cols_at<const W: usize>(&self, off: usize) -> TmemPair<T, ROWS, W> {
        TmemPair(self.0.cols_at::<W>(off))
    }
}

// SAFETY: as `Tmem` (no SMEM), marked collective for `#[kernel]`.
unsafe impl<T: TmemElem, const ROWS: usize, const COLS: usize> Scratch for TmemPair<T, ROWS, COLS> {
    const BYTES: usize = 0;
    const ALIGN: usize = 1;
    const TMEM_COLS: usize = Tmem::<T, ROWS, COLS>::ALLOC_COLS;
    const TMEM_COLLECTIVE: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: forwarded.
        TmemPair(unsafe { <Tmem<T, ROWS, COLS> as Scratch>::from_smem(ptr) })
    }
    unsafe fn bind_tmem(&mut self, taddr: u32) {
        // SAFETY: forwarded.
        unsafe { <Tmem<T, ROWS, COLS> as Scratch>::bind_tmem(&mut self.0, taddr) }
    }
}

/// The message of the cluster rule, shared with `#[kernel]`'s check.
pub const PAIR_CLUSTER_MSG: &str =
    "collective (cta_group::2) tensor-core work needs CTA pairs: the kernel's cluster x extent must be a multiple of 2 (`#[kernel(cluster = (2, 1, 1), ..)]`)";

// ----- collective MMA and commit -------------------------------------------------

/// This CTA's rank in its pair (0: the leader, which issues the MMAs).
#[inline(always)]
pub fn pair_rank() -> u32 {
    crate::index::cluster_ctarank() % 2
}

/// Proof that the code holding it runs in the **leader** CTA of its pair
/// (even cluster rank): the collective MMA, its multicast commit and the
/// leader's side of a [`PairBarriers`] take `&PairLeader`. Only
/// [`pair_role`] makes one.
#[derive(Clone, Copy, Debug)]
pub struct PairLeader(());

/// The **peer** CTA of a pair (odd cluster rank): it loads its halves of
/// the pair's tiles and reads its rows of the accumulator, but issues no
/// collective tensor-core work and does not wait on the pair's barriers.
#[derive(Clone, Copy, Debug)]
pub struct PairPeer(());

/// This CTA's role in its pair, from [`pair_role`].
#[derive(Clone, Copy, Debug)]
pub enum PairRole {
    /// The even CTA: issues the pair's MMAs and owns its copy barriers.
    Leader(PairLeader),
    /// The odd CTA.
    Peer(PairPeer),
}

impl PairRole {
    /// The leader token, `None` in the peer CTA.
    #[inline(always)]
    pub fn leader(self) -> Option<PairLeader> {
        match self {
            PairRole::Leader(l) => Some(l),
            PairRole::Peer(_) => None,
        }
    }
}

/// This CTA's role in its pair: `Leader` for even cluster ranks, `Peer`
/// for odd ones.
#[inline(always)]
pub fn pair_role() -> PairRole {
    if pair_rank() == 0 {
        PairRole::Leader(PairLeader(()))
    } else {
        PairRole::Peer(PairPeer(()))
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::PairLeader {}
    impl Sealed for super::PairPeer {}
}

/// The issuer of the pair's collective work: implemented by [`PairLeader`]
/// only (sealed), so handing a [`PairPeer`] to a leader op does not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot issue the pair's collective work: only the leader CTA (even cluster rank) of a CTA pair issues it",
    label = "not the pair's leader",
    note = "the collective MMA (`tcgen05.mma.cta_group::2`), its multicast commit, and the cluster-scope barrier the pair's partitioned copies complete on (its expect-tx and its wait) belong to the leader CTA; the peer's barrier never completes. Issue them under `if let Some(leader) = pair_role().leader() {{ .. }}` and pass `&leader`"
)]
pub trait PairIssuer: sealed::Sealed {}
impl PairIssuer for PairLeader {}

/// `N` mbarriers that the pair's partitioned copies complete on (Pallas:
/// "a partitioned collective copy only completes the barrier in the leader
/// block"). Both CTAs hand one to [`PartitionedTma::load_partitioned`],
/// which maps it to the leader's; only the leader expects the bytes and
/// waits ([`PairBarrierRef::arrive_expect_tx`], [`PairBarrierRef::wait`]
/// take `&PairLeader`): the peer's instance is never used.
pub struct PairBarriers<const N: usize>(Barriers<N>);

/// One barrier of a [`PairBarriers`].
#[derive(Clone, Copy)]
pub struct PairBarrierRef<'a>(BarrierRef<'a>);

impl<const N: usize> PairBarriers<N> {
    /// Barrier `i` (traps if `i >= N`).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> PairBarrierRef<'_> {
        PairBarrierRef(self.0.at(i))
    }
}

impl PairBarrierRef<'_> {
    /// The leader arrives and expects `bytes` this phase: both halves of
    /// every partitioned copy completing here (`PartitionedTma::PAIR_BYTES`).
    #[inline(always)]
    #[track_caller]
    pub fn arrive_expect_tx<I: PairIssuer>(&self, _leader: &I, bytes: u32) {
        self.0.arrive_expect_tx(bytes)
    }
    /// The leader waits for the current phase (both halves landed).
    #[inline(always)]
    #[track_caller]
    pub fn wait<I: PairIssuer>(&self, _leader: &I) {
        self.0.wait()
    }
    /// The barrier's `.shared::cta` address in this CTA.
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.0.smem_addr()
    }
}

// SAFETY: N consecutive mbarriers, as `Barriers<N>`.
unsafe impl<const N: usize> Scratch for PairBarriers<N> {
    const BYTES: usize = crate::mbarrier::MBARRIER_BYTES * N;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: forwarded contract.
        PairBarriers(unsafe { <Barriers<N> as Scratch>::from_smem(ptr) })
    }
    unsafe fn init(&self, arrivals: u32) {
        // SAFETY: forwarded contract.
        unsafe { <Barriers<N> as Scratch>::init(&self.0, arrivals) }
    }
}

/// The cluster mask of this CTA's pair (bits `2p` and `2p + 1`).
#[inline(always)]
pub fn pair_mask() -> u16 {
    0b11 << (crate::index::cluster_ctarank() & !1)
}

/// `acc (+)= A · B` for the pair, B stored `K x N` (MN-major): each CTA
/// holds `A`'s 128 rows of its half (`128 x K`, K-major) and `B`'s `N / 2`
/// columns of its half (`K x N/2`) at the same SMEM offsets; `acc` is the
/// pair's `128 x N` collective TMEM per CTA. One `tcgen05.mma.cta_group::2`
/// (M = 256) per instruction K. Issued by **one thread of the leader CTA**
/// (hence `leader`); completion through [`tcgen05_commit_arrive_pair`].
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_kn_pair<I, E, D, A, B, const N: usize>(_leader: &I, acc: &TmemPair<D, 128, N>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    I: PairIssuer,
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        assert!(pair_shape_ok(256, N), "tcgen05.mma.cta_group::2: the pair's accumulator must be 256 x N with N a multiple of 16 in 16..=256 (TmemPair<D, 128, N> per CTA)");
        assert!(A::ROWS == 128, "tcgen05.mma.cta_group::2: each CTA's A tile holds its 128 rows of the pair's 256");
        assert!(B::COLS * 2 == N, "tcgen05.mma.cta_group::2 (B K x N): each CTA's B tile holds N / 2 columns (its half of the pair's N)");
        assert!(A::COLS == B::ROWS, "tcgen05.mma.cta_group::2 (B K x N): A's columns and B's rows must both be K");
        assert!(A::COLS % E::K == 0, "tcgen05.mma: the tiles' K must be a multiple of the instruction's K");
        assert!(<E as crate::tcgen05::MmaInput>::BITS == 16, "tcgen05.mma.cta_group::2: implemented for kind::f16");
    };
    let idesc = const { instr_descriptor::<E, D>(Major::K, Major::MN, 256, N as u32) };
    let (aa, ba) = (a.smem_addr(), b.smem_addr());
    let mut k = 0;
    while k < A::COLS {
        let da = SmemDescriptor::k_major::<A>(aa, 0, k);
        let db = SmemDescriptor::mn_major::<B>(ba, k, 0);
        // SAFETY: one leader thread (documented); descriptors from typed tiles.
        unsafe { raw::mma_f16(acc.0.addr(), da.0, db.0, idesc.0, accumulate || k > 0) };
        k += E::K;
    }
}

/// `tcgen05_commit_arrive(bar, collective_axis=..)`: one arrival on `bar`
/// **in both CTAs of the pair** once every tcgen05 operation this thread
/// issued completed (`.multicast::cluster` with the pair's mask). Issued by
/// the thread that issued the MMAs (in the leader CTA).
#[inline(always)]
#[track_caller]
pub fn tcgen05_commit_arrive_pair<I: PairIssuer>(_leader: &I, bar: TcBarrierRef<'_>) {
    // SAFETY: `bar` is a scratch tensor-core barrier, at the same offset in
    // every CTA of the pair (same kernel).
    unsafe { raw::commit_multicast(bar.smem_addr(), pair_mask()) }
}

// ----- partitioned collective TMA ------------------------------------------------

/// A TMA map whose tile the pair shares, split along `AXIS` (Pallas's
/// `collective_axes="cluster", partitioned_axis=AXIS`): the tile `Tl` is one
/// CTA's half; the pair's whole window is twice as long along `AXIS`.
pub trait PartitionedTma<Tl: TileLayout> {
    /// Loads this CTA's half of the pair's window whose top-left element is
    /// `(row, col)` (of the whole window) into `dst`, completing its bytes
    /// on the **leader's** barrier `bar` (the leader expects
    /// [`Self::PAIR_BYTES`]). One thread in **each** CTA of the pair.
    fn load_partitioned<const AXIS: usize>(&self, dst: Smem<Tl>, row: u32, col: u32, bar: PairBarrierRef<'_>);
    /// Bytes both halves deliver to the leader's barrier.
    const PAIR_BYTES: u32;
}

impl<Tl: TileLayout> PartitionedTma<Tl> for Tma<Tl, 2> {
    const PAIR_BYTES: u32 = 2 * Tl::BYTES as u32;
    #[inline(always)]
    #[track_caller]
    fn load_partitioned<const AXIS: usize>(&self, dst: Smem<Tl>, row: u32, col: u32, bar: PairBarrierRef<'_>) {
        const {
            assert!(AXIS < 2, "partitioned copy: AXIS is 0 (rows) or 1 (columns) of a 2-D tile");
            let len = if AXIS == 0 { Tl::ROWS } else { Tl::COLS };
            assert!(len % 8 == 0, "partitioned copy: the tile cannot split along this axis (its half must be a whole number of 8-row / 8-column groups)");
            assert!(AXIS == 0 || Tl::COLS % Tl::BLOCK_COLS == 0, "partitioned copy along columns: each half must be whole swizzle column blocks");
        };
        let r = pair_rank();
        let (row, col) = if AXIS == 0 { (row + r * Tl::ROWS as u32, col) } else { (row, col + r * Tl::COLS as u32) };
        // The leader's barrier, as a `.shared::cluster` address.
        let leader = crate::index::cluster_ctarank() & !1;
        // SAFETY: mapa of a scratch barrier's offset to a rank of this cluster.
        let lbar = unsafe { crate::cluster::raw::mapa_shared(bar.smem_addr(), leader) };
        let base = dst.smem_addr();
        for j in 0..Tl::BLOCKS {
            // SAFETY: one thread per CTA (documented); `dst` holds the box; the
            // leader's barrier expects both halves' bytes.
            unsafe {
                raw::load_2d_pair(base + (j * Tl::BLOCK_BYTES) as u32, self.desc_addr(), (col as usize + j * Tl::BLOCK_COLS) as i32, row as i32, lbar)
            }
        }
    }
}
