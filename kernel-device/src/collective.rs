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
//! | [`tcgen05_mma_kn`](crate::tcgen05::tcgen05_mma_kn)`(&leader, ..)` | one thread of the **leader** CTA (takes [`PairLeader`]) |
//! | [`tcgen05_commit_arrive`](crate::tcgen05::tcgen05_commit_arrive)`(&leader, ..)` (multicast to both CTAs' barriers) | the thread that issued the MMAs (takes [`PairLeader`]) |
//! | [`PartitionedTma::load_partitioned`] | one thread in **each** CTA (its half), completing on the leader's `Barriers<N, PairTma>` |
//! | `arrive_expect_tx` / `wait` of a `BarrierRef<PairTma>` ([`PairTma`]) | the **leader** CTA (takes [`PairLeader`]) |
//!
//! The pair's MMA, commit and TMEM allocation are the ops of
//! [`crate::tcgen05`] (the same wrappers one CTA uses) with the CTA group
//! [`Cta2`] as their type parameter:
//! the issuer token decides it (`&Cta1` for one CTA, `&PairLeader` for a
//! pair), and a pair accumulator (`Tmem<.., Cta2>`, [`TmemPair`]) takes
//! only the pair's issuer. This module has what only a pair has: the roles,
//! the collective TMEM type, the partitioned copies and their barrier kind.
//!
//! Who is the leader is in the types: [`pair_role`] gives a [`PairLeader`]
//! in the even CTA and a [`PairPeer`] in the odd one, and every op of the
//! leader takes `&PairLeader` (an [`Issuer`] of group [`Cta2`]). Issuing
//! one in the peer (with the `PairPeer`) is a compile error naming the rule.
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
use crate::mbarrier::{BarrierRef, Plain};
use crate::smem::Smem;
use crate::tcgen05::{Cta2, Issuer};
use crate::tma::Tma;
use crate::tmem::Tmem;

pub mod raw {
    //! The `.cta_group::2` form of the TMA load (the pair's MMA, commit and
    //! TMEM allocation are `tcgen05::raw`'s, with `Cta2`).

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
/// `#[scratch] acc: TmemPair<f32, 128, N>`), written by the pair's MMAs
/// only (their issuer is the [`PairLeader`]); each CTA loads its own rows
/// (`acc.load_f32::<32>(col).wait()`). A kernel with one must have a cluster
/// whose x extent is a multiple of 2 (a compile error otherwise).
pub type TmemPair<T, const ROWS: usize, const COLS: usize> = Tmem<T, ROWS, COLS, false, Cta2>;

/// The message of the cluster rule, shared with `#[kernel]`'s check.
pub const PAIR_CLUSTER_MSG: &str =
    "collective (cta_group::2) tensor-core work needs CTA pairs: the kernel's cluster x extent must be a multiple of 2 (`#[kernel(cluster = (2, 1, 1), ..)]`)";

// ----- the pair's roles ------------------------------------------------------------

/// This CTA's rank in its pair (0: the leader, which issues the MMAs).
#[inline(always)]
pub fn pair_rank() -> u32 {
    crate::index::cluster_ctarank() % 2
}

/// Proof that the code holding it runs in the **leader** CTA of its pair
/// (even cluster rank): the collective MMA, its multicast commit and the
/// leader's side of a [`PairTma`] barrier take `&PairLeader`. Only
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

/// The kind of the barriers the pair's partitioned copies complete on
/// (`Barriers<N, PairTma>`; defined with the other kinds in
/// [`crate::mbarrier`]). Both CTAs hand one to
/// [`PartitionedTma::load_partitioned`], which maps it to the leader's;
/// only the leader expects the bytes and waits (both take `&PairLeader`):
/// the peer's instance is never used.
pub use crate::mbarrier::PairTma;

impl BarrierRef<'_, PairTma> {
    /// The leader arrives and expects `bytes` this phase: both halves of
    /// every partitioned copy completing here (`PartitionedTma::PAIR_BYTES`).
    #[inline(always)]
    #[track_caller]
    pub fn arrive_expect_tx<I: Issuer<Group = Cta2>>(&self, _leader: &I, bytes: u32) {
        self.as_kind::<Plain>().arrive_expect_tx(bytes)
    }
    /// The leader waits for the current phase (both halves landed).
    #[inline(always)]
    #[track_caller]
    pub fn wait<I: Issuer<Group = Cta2>>(&self, _leader: &I) {
        self.as_kind::<Plain>().wait()
    }
}

/// The cluster mask of this CTA's pair (bits `2p` and `2p + 1`).
#[inline(always)]
pub fn pair_mask() -> u16 {
    0b11 << (crate::index::cluster_ctarank() & !1)
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
    fn load_partitioned<const AXIS: usize>(&self, dst: Smem<Tl>, row: u32, col: u32, bar: BarrierRef<'_, PairTma>);
    /// Bytes both halves deliver to the leader's barrier.
    const PAIR_BYTES: u32;
}

impl<Tl: TileLayout> PartitionedTma<Tl> for Tma<Tl, 2> {
    const PAIR_BYTES: u32 = 2 * Tl::BYTES as u32;
    #[inline(always)]
    #[track_caller]
    fn load_partitioned<const AXIS: usize>(&self, dst: Smem<Tl>, row: u32, col: u32, bar: BarrierRef<'_, PairTma>) {
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
