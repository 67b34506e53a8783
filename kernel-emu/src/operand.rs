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
    seen.push(off as u32 & !15);
    // SAFETY: `off + bytes <= size`: inside the CTA's SMEM buffer, which
    // lives for the whole run; unaligned reads.
    unsafe {
        match bytes {
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
