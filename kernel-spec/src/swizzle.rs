//! [`Swizzle`]: the shared-memory swizzle modes of TMA and wgmma/tcgen05
//! (PTX ISA §5.5.6, "Tensor swizzling modes"), as values. The type-level
//! layouts (`Swizzled<S>`, `Tile`) are `kernel_device::layout`'s.

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
    pub const fn bytes(self) -> usize {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    /// The mode for a span of `bytes` (0 or 16 mean no swizzle, as in Pallas).
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
    pub const fn pattern_bytes(self) -> usize {
        self.bytes() * 8
    }

    /// Applies the swizzle to a byte offset from a pattern-aligned base: the
    /// 16-byte chunk index is XORed with the row within the 8-row pattern,
    /// `o ^ (((o >> 7) & (S / 16 - 1)) << 4)`.
    pub const fn apply(self, offset: usize) -> usize {
        match self {
            Swizzle::None => offset,
            s => offset ^ (((offset >> 7) & (s.bytes() / 16 - 1)) << 4),
        }
    }
}

/// The largest swizzle whose span divides a row of `row_bytes` bytes
/// (Pallas's `find_swizzle`): 128, 64, 32, else none.
pub const fn find_swizzle(row_bytes: usize) -> Swizzle {
    if row_bytes % 128 == 0 {
        Swizzle::B128
    } else if row_bytes % 64 == 0 {
        Swizzle::B64
    } else if row_bytes % 32 == 0 {
        Swizzle::B32
    } else {
        Swizzle::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzle_128_matches_the_ptx_pattern() {
        // Row r of 128 bytes: 16-byte chunk c lands at chunk c ^ (r % 8).
        for r in 0..16usize {
            for c in 0..8usize {
                let o = r * 128 + c * 16 + 6;
                assert_eq!(Swizzle::B128.apply(o), r * 128 + ((c ^ (r % 8)) * 16) + 6, "r={r} c={c}");
            }
        }
        // Worked by hand: row 3, bytes 32..48 (chunk 2) -> chunk 1: 3*128 + 16.
        assert_eq!(Swizzle::B128.apply(3 * 128 + 32), 3 * 128 + 16);
    }

    #[test]
    fn swizzle_64_and_32() {
        // 64B: rows of 64 bytes; chunk (0..4) ^= (offset >> 7) & 3 = (r / 2) % 4.
        for r in 0..16usize {
            for c in 0..4usize {
                assert_eq!(Swizzle::B64.apply(r * 64 + c * 16), r * 64 + ((c ^ ((r / 2) % 4)) * 16), "r={r} c={c}");
            }
        }
        // 32B: rows of 32 bytes; chunk (0..2) ^= (r / 4) % 2.
        for r in 0..16usize {
            for c in 0..2usize {
                assert_eq!(Swizzle::B32.apply(r * 32 + c * 16), r * 32 + ((c ^ ((r / 4) % 2)) * 16), "r={r} c={c}");
            }
        }
        assert_eq!(Swizzle::None.apply(1234), 1234);
    }

    #[test]
    fn swizzle_is_a_permutation_of_each_pattern() {
        for s in [Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            let n = s.pattern_bytes();
            let mut seen = [false; 1024];
            for o in 0..n {
                let t = s.apply(o);
                assert!(t < n && !seen[t], "{s:?}: {o} -> {t}");
                seen[t] = true;
            }
        }
    }

    #[test]
    fn from_bytes_round_trips_and_rejects_other_spans() {
        for s in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            assert_eq!(Swizzle::from_bytes(s.bytes()), Some(s));
        }
        assert_eq!(Swizzle::from_bytes(16), Some(Swizzle::None));
        assert_eq!(Swizzle::from_bytes(96), None);
        assert_eq!(Swizzle::from_bytes(256), None);
    }

    #[test]
    fn find_swizzle_picks_the_largest_dividing_span() {
        assert_eq!(find_swizzle(256), Swizzle::B128);
        assert_eq!(find_swizzle(64 * 2), Swizzle::B128);
        assert_eq!(find_swizzle(32 * 2), Swizzle::B64);
        assert_eq!(find_swizzle(16 * 2), Swizzle::B32);
        assert_eq!(find_swizzle(8 * 2), Swizzle::None);
    }
}
