//! Reading tensor-core operands from SMEM through their shared-memory
//! matrix descriptors, for the emulator's `wgmma` ([`crate::wgmma`]) and
//! `tcgen05.mma` ([`crate::tcgen05`]): both describe the same canonical
//! swizzled layouts (PTX ISA §9.7.15.5.1 and §9.7.16.4.1; `span` = the
//! swizzle's byte span, `e` = element bytes):
//!
//! * K-major: element `(mn, k)` at `start + (mn / 8) * SBO + (mn % 8) * span + k * e`;
//! * MN-major: element `(k, mn)` at
//!   `start + (mn / (span / e)) * LBO + (k / 8) * SBO + (k % 8) * span + (mn % (span / e)) * e`;
//!
//! then the swizzle on the offset from the CTA's SMEM base (tiles are
//! pattern-aligned).
use crate::Range;
use kernel_spec::desc_tcgen05::Major;
use kernel_spec::swizzle::Swizzle;

/// The fields of a shared-memory matrix descriptor the layouts use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Desc {
    pub start: usize,
    pub lbo: usize,
    pub sbo: usize,
    pub swizzle: Swizzle,
}

impl From<kernel_spec::desc_wgmma::SmemDescriptor> for Desc {
    fn from(d: kernel_spec::desc_wgmma::SmemDescriptor) -> Self {
        Desc { start: d.start_addr() as usize, lbo: d.leading_byte_offset() as usize, sbo: d.stride_byte_offset() as usize, swizzle: d.swizzle() }
    }
}

impl From<kernel_spec::desc_tcgen05::SmemDescriptor> for Desc {
    fn from(d: kernel_spec::desc_tcgen05::SmemDescriptor) -> Self {
        Desc { start: d.start_addr() as usize, lbo: d.leading_byte_offset() as usize, sbo: d.stride_byte_offset() as usize, swizzle: d.swizzle() }
    }
}

impl Desc {
    /// The swizzled SMEM offset of element `(mn, k)` of `e`-byte elements
    /// stored `major`-contiguous; `op` and `unit` ("wgmma", "tcgen05")
    /// name the instruction in the report of an unswizzled operand.
    #[track_caller]
    pub fn offset(&self, major: Major, mn: usize, k: usize, e: usize, op: &str, unit: &str) -> usize {
        let span = self.swizzle.bytes();
        assert!(span != 0, "{op}: unswizzled {unit} operands are not emulated (the crate only makes swizzled ones)");
        let off = match major {
            Major::K => self.start + (mn / 8) * self.sbo + (mn % 8) * span + k * e,
            Major::MN => {
                let per = span / e;
                self.start + (mn / per) * self.lbo + (k / 8) * self.sbo + (k % 8) * span + (mn % per) * e
            }
        };
        self.swizzle.apply(off)
    }
}

/// The raw bits of the `bytes`-byte element at SMEM offset `off` of the CTA
/// whose SMEM buffer (`size` bytes) starts at `smem`; its 16-byte chunk goes
/// to `seen`. An offset outside the buffer is reported as the out-of-bounds
/// SMEM access it is.
#[track_caller]
pub(crate) fn read_bits(smem: *const u8, size: usize, off: usize, bytes: usize, seen: &mut Vec<u32>) -> u32 {
    if off + bytes > size {
        // Reports the out-of-bounds access (never returns here).
        crate::smem_ptr_range(off as u32, bytes);
    }
    // Neighbouring elements share a chunk: skip the repeat (the ranges
    // are sorted and merged later; this only keeps the list short).
    let chunk = off as u32 & !15;
    if seen.last() != Some(&chunk) {
        seen.push(chunk);
    }
    // SAFETY: `off + bytes <= size`: inside the CTA's SMEM buffer, which
    // lives for the whole run; unaligned reads.
    unsafe {
        match bytes {
            4 => (smem.add(off) as *const u32).read_unaligned(),
            2 => u32::from((smem.add(off) as *const u16).read_unaligned()),
            _ => u32::from(smem.add(off).read()),
        }
    }
}

/// The 16-byte chunks in `seen` as sorted, merged half-open ranges.
pub(crate) fn chunk_ranges(mut seen: Vec<u32>) -> Vec<Range> {
    seen.sort_unstable();
    seen.dedup();
    let mut out: Vec<Range> = Vec::new();
    for c in seen {
        match out.last_mut() {
            Some(last) if last.1 == c => last.1 = c + 16,
            _ => out.push((c, c + 16)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets worked by hand from the canonical layouts and the swizzle
    /// (16-byte chunk index XOR row within the 8-row pattern).
    #[test]
    fn canonical_offsets() {
        let k_major = Desc { start: 0x400, lbo: 16, sbo: 1024, swizzle: Swizzle::B128 };
        // (mn 9, k 3), f16: 0x400 + 1 * 1024 + 1 * 128 + 3 * 2 = 2182; row 1 of
        // the pattern (2182 >> 7 = 17, 17 % 8 = 1): chunk ^= 1 -> + 16.
        assert_eq!(k_major.offset(Major::K, 9, 3, 2, "t", "test"), 2198);
        let mn_major = Desc { start: 0, lbo: 8192, sbo: 1024, swizzle: Swizzle::B128 };
        // (k 10, mn 70), f16, 64 per 128-byte row: 1 * 8192 + 1 * 1024 + 2 * 128
        // + 6 * 2 = 9484; pattern row 74 % 8 = 2: chunk ^= 2 -> + 32.
        assert_eq!(mn_major.offset(Major::MN, 70, 10, 2, "t", "test"), 9516);
        // 64B swizzle, K-major (mn 3, k 5): 0x800 + 3 * 64 + 10 = 2250; pattern
        // bits (2250 >> 7) & 3 = 1: chunk ^= 1 -> + 16.
        let d = Desc { start: 0x800, lbo: 16, sbo: 512, swizzle: Swizzle::B64 };
        assert_eq!(d.offset(Major::K, 3, 5, 2, "t", "test"), 2266);
    }

    #[test]
    #[should_panic(expected = "wgmma.mma_async: unswizzled wgmma operands are not emulated")]
    fn unswizzled_operands_are_reported() {
        let d = Desc { start: 0, lbo: 16, sbo: 128, swizzle: Swizzle::None };
        d.offset(Major::K, 0, 0, 2, "wgmma.mma_async", "wgmma");
    }

    #[test]
    fn chunks_merge_into_ranges() {
        assert_eq!(chunk_ranges(vec![0x10, 0x0, 0x30, 0x10, 0x40]), vec![(0, 0x20), (0x30, 0x50)]);
    }
}
