//! The swizzle modes of TMA, wgmma and tcgen05 (PTX ISA §5.5.6, "Tensor
//! swizzling modes"): the byte span of one swizzled row, and the address
//! map every side applies (the device API's tile layouts, the emulator's
//! TMA copies and MMA operand reads, the host's tensor maps).
//!
//! ```text
//! swizzled(o) = o ^ (((o >> 7) & (S / 16 - 1)) << 4)      // bits [4, 4+log2(S/16)) ^= bits [7, ..)
//! ```
//!
//! for an offset `o` from a base aligned to the pattern (`8 * S` bytes).

/// The swizzle modes of TMA and wgmma (the byte span of one swizzled row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swizzle {
    /// No swizzle: plain row-major.
    None,
    /// 32-byte span (pattern of 8 rows x 32 bytes = 256 bytes).
    B32,
    /// 64-byte span (pattern of 512 bytes).
    B64,
    /// 128-byte span (pattern of 1024 bytes).
    B128,
}

impl Swizzle {
    /// The span in bytes (0 for [`Swizzle::None`]).
    #[inline]
    pub const fn bytes(self) -> usize {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The mode for a span of `bytes` (0 or 16 mean no swizzle, as in Pallas).
    #[inline]
    pub const fn from_bytes(bytes: usize) -> Option<Swizzle> {
        match bytes {
            0 | 16 => Some(Swizzle::None),
            32 => Some(Swizzle::B32),
            64 => Some(Swizzle::B64),
            128 => Some(Swizzle::B128),
            _ => None,
        }
    }

    /// Bytes after which the pattern repeats (8 rows of the span).
    #[inline]
    pub const fn pattern_bytes(self) -> usize {
        self.bytes() * 8
    }

    /// Applies the swizzle to a byte offset from a pattern-aligned base.
    #[inline]
    pub const fn apply(self, offset: usize) -> usize {
        match self {
            Swizzle::None => offset,
            s => offset ^ (((offset >> 7) & (s.bytes() / 16 - 1)) << 4),
        }
    }
}
