//! The emulator's `tcgen05.mma` issue (PTX ISA §9.7.16.10): the host bodies
//! of `kernel_device::tcgen05`'s and `kernel_device::collective`'s MMAs.
//!
//! They take what the instruction takes — the `.kind`, the accumulator's
//! TMEM address, A's shared-memory descriptor (or TMEM address), B's
//! descriptor, the instruction descriptor and enable-input-d — and decode
//! them as the hardware does: the shape, the element types, the majors and
//! the accumulator type from the instruction descriptor
//! ([`InstrDescriptor`]), the SMEM operands through their descriptors as
//! the canonical swizzled layouts (documented on [`kernel_spec::desc_wgmma::SmemDescriptor`]). The values, checked
//! against the async proxy's view, go to [`crate::tmem::mma`] /
//! [`crate::tmem::mma_pair`], which run the MMA asynchronously on TMEM.
use crate::operand::{chunk_ranges, read_bits, Desc};
use crate::tmem::{AOperand, DType, MmaIssue};
use kernel_spec::desc_tcgen05::{e4m3_to_f32, CpShape, Elem, InstrDescriptor, Kind, Major, SmemDescriptor};

/// Where A comes from.
#[derive(Clone, Copy, Debug)]
pub enum A {
    /// SMEM, through its descriptor (major from the instruction descriptor).
    Smem(SmemDescriptor),
    /// TMEM at this address: packed 16-bit pairs (element `k` in column
    /// `k / 2`).
    Tmem(u32),
}

/// An element's raw bits (low `elem.bits()` bits) as f32 (exact: every
/// value of these types is an f32). Also wgmma's decoder.
pub(crate) fn decode(elem: Elem, bits: u32) -> f32 {
    match elem {
        Elem::F16 => half::f16::from_bits(bits as u16).to_f32(),
        Elem::Bf16 => half::bf16::from_bits(bits as u16).to_f32(),
        Elem::E4M3 => e4m3_to_f32(bits as u8),
        // E5M2 is the top byte of an f16.
        Elem::E5M2 => half::f16::from_bits(u16::from(bits as u8) << 8).to_f32(),
        Elem::U8 => (bits as u8) as f32,
        Elem::S8 => (bits as u8 as i8) as f32,
    }
}

/// Element `(mn, k)` of an operand with `mn` rows/columns along M or N, in
/// the SMEM buffer at `smem` (`size` bytes); its chunk goes to `seen`.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn at(smem: *const u8, size: usize, d: Desc, major: Major, mn: usize, k: usize, elem: Elem, op: &str, seen: &mut Vec<u32>) -> f32 {
    let e = elem.bits() / 8;
    let off = d.offset(major, mn, k, e, op, "tcgen05");
    decode(elem, read_bits(smem, size, off, e, seen))
}

/// The element type of the instruction descriptor's A (B has the same code
/// in every descriptor this project makes).
#[track_caller]
fn elem(kind: Kind, idesc: InstrDescriptor, op: &str) -> Elem {
    match Elem::of(kind, idesc.atype()) {
        Some(e) => e,
        None => panic!("{op}: atype {} of kind {kind:?} is not emulated (f16, bf16, e4m3, e5m2, u8, s8 are); {idesc:?}", idesc.atype()),
    }
}

fn dtype(idesc: InstrDescriptor) -> DType {
    match idesc.dtype() {
        0 => DType::F16,
        2 => DType::S32,
        _ => DType::F32,
    }
}

/// `tcgen05.mma.cta_group::1.kind::{kind} [d], a, b_desc, idesc, accumulate`
/// issued by the calling thread: decodes the operands (see the module docs)
/// and hands the MMA to [`crate::tmem::mma`]. `op` names the form in reports.
#[track_caller]
pub fn mma(kind: Kind, d: u32, a: A, b: SmemDescriptor, idesc: InstrDescriptor, accumulate: bool, op: &'static str) {
    let elem = elem(kind, idesc, op);
    let (m, n, k) = (idesc.m() as usize, idesc.n() as usize, elem.k());
    let smem = crate::smem_base() as *const u8;
    let size = crate::smem_size();
    let mut seen = Vec::new();
    let a = match a {
        A::Smem(da) => {
            let (da, major) = (Desc::from(da), idesc.a_major());
            let mut v = Vec::with_capacity(m * k);
            for r in 0..m {
                for kk in 0..k {
                    v.push(at(smem, size, da, major, r, kk, elem, op, &mut seen));
                }
            }
            AOperand::Smem(v)
        }
        A::Tmem(taddr) => AOperand::Tmem { taddr, bf16: elem == Elem::Bf16 },
    };
    let (db, b_major) = (Desc::from(b), idesc.b_major());
    let mut bv = Vec::with_capacity(n * k);
    for j in 0..n {
        for kk in 0..k {
            bv.push(at(smem, size, db, b_major, j, kk, elem, op, &mut seen));
        }
    }
    let reads = chunk_ranges(seen);
    for &(lo, hi) in &reads {
        crate::async_proxy_read(lo, (hi - lo) as usize, op);
    }
    crate::tmem::mma(MmaIssue { d, a, b: bv, m: m as u32, n: n as u32, k: k as u32, accumulate, dtype: dtype(idesc), smem_reads: &reads, op });
}

/// `tcgen05.mma.cta_group::2.kind::{kind} [d], a_desc, b_desc, idesc, accumulate`
/// (M = 256 or 128) issued by the calling thread of the leader CTA: A's rows
/// 0..M/2 and B's columns 0..N/2 from the leader's (the caller's) SMEM, A's
/// rows M/2..M and B's columns N/2..N from the peer's at the same
/// offsets; the accumulator's rows 0..M/2 go to the leader's TMEM and
/// M/2..M to the peer's ([`crate::tmem::mma_pair`], which lays them out by
/// the data path of M).
#[track_caller]
pub fn mma_pair(kind: Kind, d: u32, a: SmemDescriptor, b: SmemDescriptor, idesc: InstrDescriptor, accumulate: bool) {
    let op = "tcgen05.mma.cta_group::2";
    let elem = elem(kind, idesc, op);
    let (n, k) = (idesc.n() as usize, elem.k());
    let rows = idesc.m() as usize / 2;
    let (da, a_major) = (Desc::from(a), idesc.a_major());
    let (db, b_major) = (Desc::from(b), idesc.b_major());
    let peer = crate::cluster_ctarank() ^ 1;
    let own = crate::smem_base() as *const u8;
    let other = crate::map_rank_ptr(crate::smem_base(), peer) as *const u8;
    let size = crate::smem_size();
    let (mut seen_own, mut seen_peer) = (Vec::new(), Vec::new());
    let mut a_own = Vec::with_capacity(rows * k);
    let mut a_peer = Vec::with_capacity(rows * k);
    for r in 0..rows {
        for kk in 0..k {
            a_own.push(at(own, size, da, a_major, r, kk, elem, op, &mut seen_own));
            a_peer.push(at(other, size, da, a_major, r, kk, elem, op, &mut seen_peer));
        }
    }
    let mut bv = Vec::with_capacity(n * k);
    for j in 0..n {
        for kk in 0..k {
            let (base, seen) = if j < n / 2 { (own, &mut seen_own) } else { (other, &mut seen_peer) };
            bv.push(at(base, size, db, b_major, j % (n / 2), kk, elem, op, seen));
        }
    }
    let (r_own, r_peer) = (chunk_ranges(seen_own), chunk_ranges(seen_peer));
    // Ordinary stores into either half need a proxy fence before the MMA;
    // the race detector sees the reads when each half executes (a TMA load
    // that refills a slot must be ordered after it, in the peer CTA too).
    for &(lo, hi) in &r_own {
        crate::async_proxy_read(lo, (hi - lo) as usize, op);
    }
    for &(lo, hi) in &r_peer {
        crate::async_proxy_read(crate::map_rank_addr(lo, peer), (hi - lo) as usize, op);
    }
    crate::tmem::mma_pair(
        MmaIssue { d, a: AOperand::Smem(a_own), b: bv, m: rows as u32, n: n as u32, k: k as u32, accumulate, dtype: dtype(idesc), smem_reads: &r_own, op },
        peer,
        a_peer,
        &r_peer,
    );
}

/// `tcgen05.cp.cta_group::1.<shape> [taddr], s_desc` issued by the calling
/// thread: reads the source's rows through the descriptor as the canonical
/// K-major layout (row `r`, 32-bit word `w` at `start + (r / 8) SBO +
/// (r % 8) span + 4 w`, swizzled), checked against the async proxy's view,
/// and hands them to [`crate::tmem::cp`], which writes them to TMEM
/// asynchronously. `op` names the form in reports.
#[track_caller]
pub fn cp(shape: CpShape, taddr: u32, src: SmemDescriptor, op: &'static str) {
    let d = Desc::from(src);
    let smem = crate::smem_base() as *const u8;
    let size = crate::smem_size();
    let mut seen = Vec::new();
    let rows: Vec<Vec<u32>> = (0..shape.rows() as usize)
        .map(|r| (0..shape.words() as usize).map(|w| read_bits(smem, size, d.offset(Major::K, r, w, 4, op, "tcgen05"), 4, &mut seen)).collect())
        .collect();
    let reads = chunk_ranges(seen);
    for &(lo, hi) in &reads {
        crate::async_proxy_read(lo, (hi - lo) as usize, op);
    }
    crate::tmem::cp(crate::tmem::CpIssue { taddr, shape, rows, smem_reads: &reads, op });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_decode_by_kind_and_code() {
        let e = |kind, code, bits| decode(Elem::of(kind, code).unwrap(), bits);
        assert_eq!(e(Kind::F16, 0, 0x3C00), 1.0); // f16 1.0
        assert_eq!(e(Kind::F16, 1, 0xC000), -2.0); // bf16 -2.0
        assert_eq!(e(Kind::F8F6F4, 0, 0x38), 1.0); // e4m3, exponent 7 = bias
        assert_eq!(e(Kind::F8F6F4, 1, 0x3C), 1.0); // e5m2 = top byte of f16 0x3C00
        assert_eq!(e(Kind::I8, 0, 0xFF), 255.0);
        assert_eq!(e(Kind::I8, 1, 0xFF), -1.0);
    }

    #[test]
    fn accumulator_type_from_the_descriptor() {
        let d = |dt| dtype(InstrDescriptor::new(dt, 0, 0, Major::K, Major::K, 128, 128));
        assert_eq!((d(0), d(1), d(2)), (DType::F16, DType::F32, DType::S32));
    }
}
