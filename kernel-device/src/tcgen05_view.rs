//! `tcgen05.mma` with SMEM operands given as views (Pallas's
//! `plgpu.TransposeTransform` on Blackwell): a tile ([`Smem`](crate::smem::Smem), K-major, as
//! [`crate::tcgen05::tcgen05_mma`] reads it) or a transposed tile
//! ([`Transposed`](crate::wgmma::Transposed), from [`Smem::transposed`](crate::smem::Smem::transposed): stored `K x M` / `K x N`,
//! read MN-major, the instruction descriptor's transpose bit set for that
//! operand). The same views as the Hopper [`crate::wgmma::Acc::mma_view`].
//!
//! `tcgen05_mma_view(&Cta1, &acc, a, b_kn.transposed(), false)` is
//! [`crate::tcgen05::tcgen05_mma_kn`]; `tcgen05_mma_view(&Cta1, &acc,
//! a_km.transposed(), b, false)` takes A stored `K x M`.
use crate::layout::TileLayout;
use crate::tcgen05::{check_mma, instr_descriptor, raw, AccumulatesInto, CtaGroup, Issuer, Major, MmaAccum, SmemDescriptor};
use crate::tmem::Tmem;
use crate::wgmma::MmaOperand;

/// `acc (+)= A · Bᵀ` over the whole K, with `A` (`M x K`) and `B`
/// (`N x K`) given as views ([`MmaOperand`], the views wgmma takes too): a tile, K-major, or
/// `x.transposed()` of a tile stored `K x M` / `K x N`, MN-major. One
/// `tcgen05.mma` per instruction K; `accumulate = false` overwrites the
/// accumulator with the first. Issued by one thread (`&Cta1`, or a pair's
/// leader for a `TmemPair`: B's `N / 2` rows per CTA); completion through
/// [`crate::tcgen05::tcgen05_commit_arrive`].
///
/// Compile-time rules: the issuer's CTA group is the accumulator's; the
/// accumulator shape (M 64 or 128, N per the ISA; 256 x N for a pair);
/// A has M rows and B N (N / 2 per CTA of a pair), logical (a transposed
/// tile's rows are its stored columns); equal K, a multiple of the
/// instruction's K; swizzled tiles; a transposed operand has 16-bit
/// elements (f16, bf16; this project's rule: the emulator's MN-major
/// decoding is checked for 16-bit types only).
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_view<I, G, E, D, OA, OB, const M: usize, const N: usize>(_issuer: &I, acc: &Tmem<D, M, N, false, G>, a: OA, b: OB, accumulate: bool)
where
    I: Issuer,
    G: CtaGroup,
    E: AccumulatesInto<D>,
    D: MmaAccum,
    OA: MmaOperand,
    OB: MmaOperand,
    OA::Tile: TileLayout<Elem = E>,
    OB::Tile: TileLayout<Elem = E>,
{
    const {
        check_mma::<I, E, G>(M, N, OA::K, <OA::Tile as TileLayout>::SWIZZLE, <OB::Tile as TileLayout>::SWIZZLE);
        assert!(
            E::BITS == 16 || (!OA::MN_MAJOR && !OB::MN_MAJOR),
            "tcgen05_mma_view: a transposed (MN-major) operand needs 16-bit elements (f16, bf16) here; keep 8-bit operands K-major (untransposed)"
        );
        assert!(OA::ROWS == M, "tcgen05_mma_view: A must have M rows (the accumulator's rows in this CTA; a transposed A: M stored columns)");
        assert!(OB::ROWS * G::CTAS as usize == N, "tcgen05_mma_view: B must have N rows (the accumulator's columns, N / 2 per CTA of a pair; a transposed B: stored columns)");
        assert!(OA::K == OB::K, "tcgen05_mma_view: A's K and B's K must be equal (a transposed operand's K is its stored rows)");
    };
    issue_views::<G, E, D, OA, OB, M, N>(acc, a, b, accumulate);
}

/// The issue loop of every SMEM-operand MMA form ([`tcgen05_mma_view`],
/// [`crate::tcgen05::tcgen05_mma`], [`crate::tcgen05::tcgen05_mma_kn`],
/// after their compile-time rules): one `tcgen05.mma` per instruction K,
/// each operand's descriptor at that K, the transpose bits from the views.
#[inline(always)]
#[track_caller]
pub(crate) fn issue_views<G, E, D, OA, OB, const M: usize, const N: usize>(acc: &Tmem<D, M, N, false, G>, a: OA, b: OB, accumulate: bool)
where
    G: CtaGroup,
    E: AccumulatesInto<D>,
    D: MmaAccum,
    OA: MmaOperand,
    OB: MmaOperand,
{
    let idesc = const { instr_descriptor::<E, D>(major(OA::MN_MAJOR), major(OB::MN_MAJOR), (M * G::CTAS as usize) as u32, N as u32) };
    let mut k = 0;
    while k < OA::K {
        let (da, db) = (a.descriptor::<SmemDescriptor>(0, k), b.descriptor::<SmemDescriptor>(0, k));
        // SAFETY: one thread issues it (documented; the pair's leader for
        // cta_group::2 by the `Issuer` bound); descriptors from typed tiles,
        // in bounds (the rules above).
        unsafe { raw::mma_ss::<G>(E::KIND, acc.addr(), da.0, db.0, idesc.0, accumulate || k > 0) };
        k += E::K;
    }
}

/// The instruction descriptor's major of an operand view.
const fn major(mn_major: bool) -> Major {
    if mn_major {
        Major::MN
    } else {
        Major::K
    }
}
