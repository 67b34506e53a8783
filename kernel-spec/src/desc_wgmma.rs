//! The Hopper `wgmma` shared-memory matrix descriptor (PTX ISA §9.7.15.5.1,
//! "Matrix Descriptor Format"): what the device API encodes
//! (`kernel_device::wgmma`) and the emulator decodes (`kernel_emu::wgmma`).
use crate::swizzle::Swizzle;

/// A descriptor's bits with the start address (bits 0..14, `address >> 4`,
/// the same field in wgmma's and tcgen05's formats) moved `bytes` further:
/// a 32-bit add on the low word (no carry reaches bit 32 while the address
/// stays in the shared window), on the GPU one integer add instead of a
/// 64-bit add-with-carry pair.
pub(crate) const fn add_start_bits(bits: u64, bytes: u32) -> u64 {
    (bits & !0xFFFF_FFFF) | (bits as u32).wrapping_add(bytes >> 4) as u64
}

/// `wgmma` is issued by a warpgroup: 4 consecutive warps, 128 threads.
pub const WARPGROUP_THREADS: u32 = 128;

/// A wgmma shared-memory matrix descriptor, a 64-bit register operand:
///
/// ```text
/// bits  0..14  start address >> 4        (18-bit .shared::cta address)
/// bits 16..30  leading-dimension byte offset >> 4
/// bits 32..46  stride-dimension byte offset >> 4
/// bits 49..52  base offset (0: tiles are pattern-aligned)
/// bits 62..64  swizzle: 0 none, 1 128B, 2 64B, 3 32B
/// ```
///
/// The operand layouts it describes (canonical, swizzled; `span` = the
/// swizzle's byte span, `e` = element bytes), as the emulator reads them:
///
/// * K-major: element `(r, k)` at `start + (r / 8) * SBO + (r % 8) * span + k * e`;
/// * MN-major: element `(k, n)` at
///   `start + (n / (span / e)) * LBO + (k / 8) * SBO + (k % 8) * span + (n % (span / e)) * e`;
///
/// then [`Swizzle::apply`] on the offset (tiles are pattern-aligned).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SmemDescriptor(pub u64);

impl SmemDescriptor {
    /// Encodes a descriptor. Byte offsets are multiples of 16.
    #[inline]
    pub const fn new(start_addr: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> Self {
        let mode: u64 = match swizzle {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        };
        SmemDescriptor(
            // bits 0..14: start address >> 4 (of the 18-bit window)
            ((start_addr as u64 & 0x3_FFFF) >> 4)
                // bits 16..30: LBO >> 4
                | ((((leading_byte_offset as u64) >> 4) & 0x3FFF) << 16)
                // bits 32..46: SBO >> 4
                | ((((stride_byte_offset as u64) >> 4) & 0x3FFF) << 32)
                // bits 62..64: swizzle mode
                | (mode << 62),
        )
    }
    /// This descriptor with its start address moved `bytes` further (a
    /// multiple of 16): one add on the encoded bits. The start-address field
    /// (bits 0..14) holds `address >> 4` of the 18-bit shared window, so the
    /// add cannot carry out of it while the moved address stays in the
    /// window (shared memory is at most 228 KB per CTA): `new(a + d, ..) ==
    /// new(a, ..).add_start(d)`. Kernels build a tile's descriptor once and
    /// step through K with this (an add per MMA instead of the encoding).
    #[inline]
    pub const fn add_start(self, bytes: u32) -> Self {
        SmemDescriptor(add_start_bits(self.0, bytes))
    }
    /// Start address (bytes), bits 0..14.
    #[inline]
    pub const fn start_addr(self) -> u32 {
        ((self.0 & 0x3FFF) << 4) as u32
    }
    /// Leading-dimension byte offset, bits 16..30.
    #[inline]
    pub const fn leading_byte_offset(self) -> u32 {
        (((self.0 >> 16) & 0x3FFF) << 4) as u32
    }
    /// Stride-dimension byte offset, bits 32..46.
    #[inline]
    pub const fn stride_byte_offset(self) -> u32 {
        (((self.0 >> 32) & 0x3FFF) << 4) as u32
    }
    /// Swizzle mode, bits 62..64.
    #[inline]
    pub const fn swizzle(self) -> Swizzle {
        match self.0 >> 62 {
            1 => Swizzle::B128,
            2 => Swizzle::B64,
            3 => Swizzle::B32,
            _ => Swizzle::None,
        }
    }
}

impl core::fmt::Debug for SmemDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SmemDescriptor")
            .field("start_addr", &format_args!("{:#x}", self.start_addr()))
            .field("leading_byte_offset", &self.leading_byte_offset())
            .field("stride_byte_offset", &self.stride_byte_offset())
            .field("swizzle", &self.swizzle())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_fields_round_trip() {
        let d = SmemDescriptor::new(0x1_2340, 16, 1024, Swizzle::B128);
        assert_eq!(d.start_addr(), 0x1_2340);
        assert_eq!(d.leading_byte_offset(), 16);
        assert_eq!(d.stride_byte_offset(), 1024);
        assert_eq!(d.swizzle(), Swizzle::B128);
        // Worked by hand: (0x12340 >> 4) = 0x1234; LBO 1 << 16; SBO 64 << 32; mode 1 << 62.
        assert_eq!(d.0, 0x1234 | (1 << 16) | (64u64 << 32) | (1u64 << 62));
        assert_eq!(SmemDescriptor::new(0, 16, 512, Swizzle::B64).0 >> 62, 2);
        assert_eq!(SmemDescriptor::new(0, 16, 256, Swizzle::B32).0 >> 62, 3);
    }
}
