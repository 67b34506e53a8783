//! The Blackwell `tcgen05.mma` operand encodings (PTX ISA §9.7.16.4): the
//! instruction descriptor, the SM100 shared-memory matrix descriptor, the
//! `.kind` and the element codes. The device API encodes them
//! (`kernel_device::tcgen05`), the emulator decodes them
//! (`kernel_emu::tcgen05`).
use crate::swizzle::Swizzle;

/// Bits of data one MMA instruction consumes along K per row: K = 256 / bits
/// (16 for 16-bit inputs, 32 for 8-bit).
pub const K_BITS: usize = 256;

/// The `.kind` of a tcgen05.mma.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `kind::f16`: f16/bf16 inputs.
    F16,
    /// `kind::f8f6f4`: e4m3/e5m2 inputs (f6/f4 not implemented).
    F8F6F4,
    /// `kind::i8`: signed/unsigned 8-bit integer inputs.
    I8,
}

/// An input element type, as a `.kind` and its atype/btype code name it
/// (PTX ISA §9.7.16.4.2, Table 42).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F16,
    Bf16,
    E4M3,
    E5M2,
    U8,
    S8,
}

impl Elem {
    /// The element of `kind` with atype/btype `code` (the codes past 1 are
    /// f6/f4 formats, not implemented: `None`).
    #[inline]
    pub const fn of(kind: Kind, code: u32) -> Option<Elem> {
        Some(match (kind, code) {
            (Kind::F16, 0) => Elem::F16,
            (Kind::F16, 1) => Elem::Bf16,
            (Kind::F8F6F4, 0) => Elem::E4M3,
            (Kind::F8F6F4, 1) => Elem::E5M2,
            (Kind::I8, 0) => Elem::U8,
            (Kind::I8, 1) => Elem::S8,
            _ => return None,
        })
    }
    /// Bits of one element.
    #[inline]
    pub const fn bits(self) -> usize {
        match self {
            Elem::F16 | Elem::Bf16 => 16,
            _ => 8,
        }
    }
    /// K of one instruction: `256 / bits`.
    #[inline]
    pub const fn k(self) -> usize {
        K_BITS / self.bits()
    }
}

/// `2^e` for a normal-range exponent (no_std: no `powi`).
#[inline]
fn exp2i(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// FP8 E4M3 bits as f32 (bias 7, no infinities, `S.1111.111` is NaN).
#[inline]
pub fn e4m3_to_f32(bits: u8) -> f32 {
    let (s, e, m) = ((bits >> 7) as u32, ((bits >> 3) & 0xF) as i32, (bits & 7) as f32);
    let mag = if e == 0xF && m == 7.0 {
        f32::NAN
    } else if e == 0 {
        m / 8.0 * exp2i(-6)
    } else {
        (1.0 + m / 8.0) * exp2i(e - 7)
    };
    if s == 1 {
        -mag
    } else {
        mag
    }
}

/// Which dimension of an operand is contiguous in SMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Major {
    /// K contiguous ("no transpose").
    K,
    /// M (for A) or N (for B) contiguous ("transpose").
    MN,
}

/// The tcgen05 instruction descriptor for `.kind::f16/f8f6f4/i8` (PTX ISA
/// §9.7.16.4.2, Table 42), a 32-bit register operand:
///
/// ```text
/// bits  0..2   sparsity selector (0: dense)
/// bit   2      sparsity (0: dense)
/// bit   3      saturate (kind::i8 only; 0)
/// bits  4..6   dtype: F16 = 0, F32 = 1, S32 = 2
/// bit   6      reserved
/// bits  7..10  atype: kind::f16 F16 = 0, BF16 = 1; f8f6f4 E4M3 = 0, E5M2 = 1; i8 U8 = 0, S8 = 1
/// bits 10..13  btype (same codes)
/// bit  13      negate A        bit 14  negate B
/// bit  15      transpose A (1: M-major)   bit 16  transpose B (1: N-major)
/// bits 17..23  N >> 3
/// bit  23      reserved
/// bits 24..29  M >> 4
/// bit  29      reserved
/// bits 30..32  max shift (.ws only; 0)
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InstrDescriptor(pub u32);

impl InstrDescriptor {
    /// A dense descriptor. `m`, `n` must be legal (checked by the MMA
    /// functions at compile time; here only masked into their fields).
    #[inline]
    pub const fn new(dtype: u32, atype: u32, btype: u32, a_major: Major, b_major: Major, m: u32, n: u32) -> Self {
        InstrDescriptor(
            ((dtype & 0x3) << 4) // bits 4..6
                | ((atype & 0x7) << 7) // bits 7..10
                | ((btype & 0x7) << 10) // bits 10..13
                | ((matches!(a_major, Major::MN) as u32) << 15) // bit 15
                | ((matches!(b_major, Major::MN) as u32) << 16) // bit 16
                | (((n >> 3) & 0x3F) << 17) // bits 17..23
                | (((m >> 4) & 0x1F) << 24), // bits 24..29
        )
    }
    /// With A negated (bit 13; not for kind::i8).
    #[inline]
    pub const fn negate_a(self) -> Self {
        InstrDescriptor(self.0 | 1 << 13)
    }
    /// With B negated (bit 14; not for kind::i8).
    #[inline]
    pub const fn negate_b(self) -> Self {
        InstrDescriptor(self.0 | 1 << 14)
    }
    /// Accumulator type code, bits 4..6.
    #[inline]
    pub const fn dtype(self) -> u32 {
        (self.0 >> 4) & 0x3
    }
    /// A's type code, bits 7..10.
    #[inline]
    pub const fn atype(self) -> u32 {
        (self.0 >> 7) & 0x7
    }
    /// B's type code, bits 10..13.
    #[inline]
    pub const fn btype(self) -> u32 {
        (self.0 >> 10) & 0x7
    }
    /// Bit 13.
    #[inline]
    pub const fn negated_a(self) -> bool {
        self.0 >> 13 & 1 == 1
    }
    /// Bit 14.
    #[inline]
    pub const fn negated_b(self) -> bool {
        self.0 >> 14 & 1 == 1
    }
    /// Bit 15.
    #[inline]
    pub const fn a_major(self) -> Major {
        if self.0 >> 15 & 1 == 1 {
            Major::MN
        } else {
            Major::K
        }
    }
    /// Bit 16.
    #[inline]
    pub const fn b_major(self) -> Major {
        if self.0 >> 16 & 1 == 1 {
            Major::MN
        } else {
            Major::K
        }
    }
    /// N, bits 17..23.
    #[inline]
    pub const fn n(self) -> u32 {
        ((self.0 >> 17) & 0x3F) << 3
    }
    /// M, bits 24..29.
    #[inline]
    pub const fn m(self) -> u32 {
        ((self.0 >> 24) & 0x1F) << 4
    }
}

impl core::fmt::Debug for InstrDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InstrDescriptor")
            .field("raw", &format_args!("{:#010x}", self.0))
            .field("dtype", &self.dtype())
            .field("atype", &self.atype())
            .field("btype", &self.btype())
            .field("negate_a", &self.negated_a())
            .field("negate_b", &self.negated_b())
            .field("a_major", &self.a_major())
            .field("b_major", &self.b_major())
            .field("m", &self.m())
            .field("n", &self.n())
            .finish()
    }
}

/// The SM100 shared-memory matrix descriptor of tcgen05 (PTX ISA
/// §9.7.16.4.1), a 64-bit register operand:
///
/// ```text
/// bits  0..14  start address >> 4   (matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4)
/// bits 16..30  leading-dimension byte offset >> 4
/// bits 32..46  stride-dimension byte offset >> 4
/// bits 46..49  fixed 0b001 (the SM100 descriptor version)
/// bits 49..52  base offset (0: operands start on a swizzle-pattern boundary)
/// bit  52      LBO mode (0: relative byte offset)
/// bits 53..61  fixed 0
/// bits 61..64  swizzle: 0 none, 1 128B/32B-atom, 2 128B, 4 64B, 6 32B
/// ```
///
/// It differs from the Hopper wgmma descriptor
/// ([`crate::desc_wgmma::SmemDescriptor`]) in the version bits 46-48 and the
/// 3-bit swizzle field at 61-63; the operand layouts it describes are the
/// same canonical ones.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SmemDescriptor(pub u64);

impl SmemDescriptor {
    /// Encodes a descriptor; byte offsets are multiples of 16.
    #[inline]
    pub const fn new(start_addr: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> Self {
        let mode: u64 = match swizzle {
            Swizzle::None => 0,
            Swizzle::B128 => 2,
            Swizzle::B64 => 4,
            Swizzle::B32 => 6,
        };
        SmemDescriptor(
            ((start_addr as u64 & 0x3_FFFF) >> 4) // bits 0..14
                | (((leading_byte_offset as u64 & 0x3_FFFF) >> 4) << 16) // bits 16..30
                | (((stride_byte_offset as u64 & 0x3_FFFF) >> 4) << 32) // bits 32..46
                | (0b001 << 46) // bits 46..49: version
                | (mode << 61), // bits 61..64
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
        SmemDescriptor(crate::desc_wgmma::add_start_bits(self.0, bytes))
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
    /// Descriptor version, bits 46..49 (1 on SM100).
    #[inline]
    pub const fn version(self) -> u32 {
        ((self.0 >> 46) & 0x7) as u32
    }
    /// Base offset, bits 49..52.
    #[inline]
    pub const fn base_offset(self) -> u32 {
        ((self.0 >> 49) & 0x7) as u32
    }
    /// The swizzle, bits 61..64 (`None` also for the invalid codes 3, 5, 7
    /// and for 1, the 128B/32B-atom mode, which this project does not
    /// produce).
    #[inline]
    pub const fn swizzle(self) -> Swizzle {
        match self.0 >> 61 {
            2 => Swizzle::B128,
            4 => Swizzle::B64,
            6 => Swizzle::B32,
            _ => Swizzle::None,
        }
    }
}

impl core::fmt::Debug for SmemDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("tcgen05::SmemDescriptor")
            .field("raw", &format_args!("{:#018x}", self.0))
            .field("start_addr", &format_args!("{:#x}", self.start_addr()))
            .field("leading_byte_offset", &self.leading_byte_offset())
            .field("stride_byte_offset", &self.stride_byte_offset())
            .field("version", &self.version())
            .field("base_offset", &self.base_offset())
            .field("swizzle", &self.swizzle())
            .finish()
    }
}

/// A shape of `tcgen05.cp` (SMEM -> TMEM copy; PTX ISA, tcgen05 chapter,
/// "tcgen05.cp"): `ROWS x BITS` of the source matrix (rows of the
/// canonical K-major SMEM layout its descriptor describes, `BITS / 32`
/// 32-bit words each) and the TMEM lanes each row lands in (words go to
/// consecutive columns from the destination's column). The `.warpx2` and
/// `.warpx4` shapes multicast a row to the lanes of 2 or 4 warps' lane
/// quarters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpShape {
    /// `.128x256b`: row `r` -> lane `r`, 8 words (e.g. a packed 16-bit A
    /// operand, 16 elements of K per copy).
    S128x256b,
    /// `.128x128b`: row `r` -> lane `r`, 4 words.
    S128x128b,
    /// `.4x256b`: row `r` -> lane `32 r` (one row per lane quarter), 8 words.
    S4x256b,
    /// `.64x128b.warpx2::02_13`: row `r` -> lanes `r` and `r + 64` (warps 0
    /// and 2 receive rows 0..32, warps 1 and 3 rows 32..64), 4 words.
    S64x128bWarpx2_02_13,
    /// `.64x128b.warpx2::01_23`: row `r` -> lanes `64 (r / 32) + r % 32`
    /// and 32 lanes after it (warps 0 and 1 receive rows 0..32, warps 2 and
    /// 3 rows 32..64), 4 words.
    S64x128bWarpx2_01_23,
    /// `.32x128b.warpx4`: row `r` -> lanes `r`, `r + 32`, `r + 64`, `r + 96`
    /// (every lane quarter receives the 32 rows), 4 words.
    S32x128bWarpx4,
}

impl CpShape {
    /// The shape as PTX writes it (`128x256b`, `64x128b.warpx2::02_13`, ..).
    pub const fn ptx(self) -> &'static str {
        match self {
            CpShape::S128x256b => "128x256b",
            CpShape::S128x128b => "128x128b",
            CpShape::S4x256b => "4x256b",
            CpShape::S64x128bWarpx2_02_13 => "64x128b.warpx2::02_13",
            CpShape::S64x128bWarpx2_01_23 => "64x128b.warpx2::01_23",
            CpShape::S32x128bWarpx4 => "32x128b.warpx4",
        }
    }
    /// Rows of the source matrix.
    pub const fn rows(self) -> u32 {
        match self {
            CpShape::S128x256b | CpShape::S128x128b => 128,
            CpShape::S4x256b => 4,
            CpShape::S64x128bWarpx2_02_13 | CpShape::S64x128bWarpx2_01_23 => 64,
            CpShape::S32x128bWarpx4 => 32,
        }
    }
    /// 32-bit words (TMEM columns) per row: 8 for the 256-bit shapes, 4
    /// for the 128-bit ones.
    pub const fn words(self) -> u32 {
        match self {
            CpShape::S128x256b | CpShape::S4x256b => 8,
            _ => 4,
        }
    }
    /// Bytes of one source row (`words * 4`).
    pub const fn row_bytes(self) -> u32 {
        self.words() * 4
    }
    /// The TMEM lanes, relative to the destination's lane, that source row
    /// `r` is written to (`count` of the 4 entries are used).
    pub const fn lanes(self, r: u32) -> ([u32; 4], usize) {
        match self {
            CpShape::S128x256b | CpShape::S128x128b => ([r, 0, 0, 0], 1),
            CpShape::S4x256b => ([32 * r, 0, 0, 0], 1),
            CpShape::S64x128bWarpx2_02_13 => ([r, r + 64, 0, 0], 2),
            CpShape::S64x128bWarpx2_01_23 => {
                let l = 64 * (r / 32) + r % 32;
                ([l, l + 32, 0, 0], 2)
            }
            CpShape::S32x128bWarpx4 => ([r, r + 32, r + 64, r + 96], 4),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values worked out by hand from §9.7.16.4.1.
    #[test]
    fn smem_descriptor_fields_from_the_isa_table() {
        let d = SmemDescriptor::new(0x1_2340, 16, 1024, Swizzle::B128);
        // start 0x12340 >> 4 = 0x1234; LBO 16 >> 4 = 1 at bit 16; SBO 1024 >> 4 = 64 at bit 32;
        // version 0b001 at bit 46; swizzle 128B = 2 at bit 61.
        assert_eq!(d.0, 0x1234 | 1 << 16 | 64 << 32 | 1 << 46 | 2 << 61);
        assert_eq!((d.start_addr(), d.leading_byte_offset(), d.stride_byte_offset()), (0x1_2340, 16, 1024));
        assert_eq!((d.version(), d.base_offset(), d.swizzle()), (1, 0, Swizzle::B128));
        assert_eq!(SmemDescriptor::new(0, 16, 512, Swizzle::B64).0 >> 61, 4);
        assert_eq!(SmemDescriptor::new(0, 16, 256, Swizzle::B32).0 >> 61, 6);
        assert_eq!(SmemDescriptor::new(0, 16, 128, Swizzle::None).0 >> 61, 0);
        // The 18-bit address window: bits above 0x3FFFF are dropped.
        assert_eq!(SmemDescriptor::new(0x4_0010, 0, 0, Swizzle::None).start_addr(), 0x10);
    }

    /// Outputs of an independent encoder: `tests/encodings/tcgen05_desc.py`,
    /// a transcription of the ISA tables (Table 42 and §9.7.16.4.1) written
    /// separately from this module, run with python3 3.11 on 2026-11-22;
    /// its printed lines are pasted here unchanged. (The instruction
    /// descriptors built from element types are checked against the same
    /// encoder in `kernel_device::tcgen05`'s tests; these are the raw codes.)
    #[test]
    fn descriptors_match_the_independent_python_encoder() {
        let idesc: [(InstrDescriptor, u32); 6] = [
            // f16 x f16 -> f32 (dtype 1), K/K, 128 x 128
            (InstrDescriptor::new(1, 0, 0, Major::K, Major::K, 128, 128), 0x08200010),
            // f16 -> f32, B MN-major, 128 x 256
            (InstrDescriptor::new(1, 0, 0, Major::K, Major::MN, 128, 256), 0x08410010),
            // bf16 -> f32, 64 x 64
            (InstrDescriptor::new(1, 1, 1, Major::K, Major::K, 64, 64), 0x04100490),
            // f16 -> f16 (dtype 0), 128 x 16
            (InstrDescriptor::new(0, 0, 0, Major::K, Major::K, 128, 16), 0x08040000),
            // e4m3 -> f32, 128 x 256
            (InstrDescriptor::new(1, 0, 0, Major::K, Major::K, 128, 256), 0x08400010),
            // s8 -> s32 (dtype 2), 128 x 128
            (InstrDescriptor::new(2, 1, 1, Major::K, Major::K, 128, 128), 0x082004a0),
        ];
        for (d, want) in idesc {
            assert_eq!(d.0, want, "{d:?}");
        }
        let sdesc: [(SmemDescriptor, u64); 4] = [
            (SmemDescriptor::new(0x400, 16, 1024, Swizzle::B128), 0x4000404000010040),
            (SmemDescriptor::new(0x1_2340, 8192, 1024, Swizzle::B128), 0x4000404002001234),
            (SmemDescriptor::new(0x800, 16, 512, Swizzle::B64), 0x8000402000010080),
            (SmemDescriptor::new(0x100, 16, 256, Swizzle::B32), 0xc000401000010010),
        ];
        for (d, want) in sdesc {
            assert_eq!(d.0, want, "{d:?}");
        }
    }

    /// Decoding reverses every field of the table.
    #[test]
    fn instr_descriptor_decodes_its_fields() {
        let d = InstrDescriptor::new(2, 1, 0, Major::MN, Major::K, 64, 248).negate_a();
        assert_eq!((d.dtype(), d.atype(), d.btype()), (2, 1, 0));
        assert_eq!((d.a_major(), d.b_major(), d.m(), d.n()), (Major::MN, Major::K, 64, 248));
        assert!(d.negated_a() && !d.negated_b());
    }

    #[test]
    fn element_codes() {
        assert_eq!(Elem::of(Kind::F16, 1), Some(Elem::Bf16));
        assert_eq!(Elem::of(Kind::F8F6F4, 1), Some(Elem::E5M2));
        assert_eq!(Elem::of(Kind::I8, 0), Some(Elem::U8));
        assert_eq!(Elem::of(Kind::F8F6F4, 2), None);
        assert_eq!((Elem::F16.k(), Elem::E4M3.k(), Elem::S8.k()), (16, 32, 32));
    }

    #[test]
    fn fp8_e4m3_decoding() {
        assert_eq!(e4m3_to_f32(0x38), 1.0); // exponent 7 = bias
        assert_eq!(e4m3_to_f32(0xC0), -2.0);
        assert_eq!(e4m3_to_f32(0x7E), 448.0); // largest finite
        assert!(e4m3_to_f32(0x7F).is_nan());
        assert_eq!(e4m3_to_f32(0x01), 1.0 / 512.0); // smallest subnormal, 2^-9
    }

    /// Every shape but `4x256b` writes each of the 128 lanes exactly once
    /// (the multicast shapes replicate 32 or 64 rows over them); `4x256b`
    /// writes one lane per quarter. Worked from the shape table: row 40 of
    /// `01_23` is warp 2's lane 8 and warp 3's lane 8.
    #[test]
    fn copy_shapes_cover_the_lanes() {
        use CpShape::*;
        for s in [S128x256b, S128x128b, S64x128bWarpx2_02_13, S64x128bWarpx2_01_23, S32x128bWarpx4] {
            let mut hit = [0u32; 128];
            for r in 0..s.rows() {
                let (l, n) = s.lanes(r);
                for &lane in &l[..n] {
                    hit[lane as usize] += 1;
                }
            }
            assert!(hit.iter().all(|&h| h == 1), "{s:?}: {hit:?}");
            assert_eq!(s.rows() * s.lanes(0).1 as u32, 128, "{s:?}");
        }
        assert_eq!(S64x128bWarpx2_01_23.lanes(40), ([72, 104, 0, 0], 2));
        assert_eq!(S64x128bWarpx2_02_13.lanes(40), ([40, 104, 0, 0], 2));
        assert_eq!(S4x256b.lanes(3), ([96, 0, 0, 0], 1));
        assert_eq!((S128x256b.words(), S32x128bWarpx4.row_bytes()), (8, 16));
    }

    /// Moving the start address by one add equals encoding the moved
    /// address, everywhere in 228 KB of shared memory (the window's start
    /// addresses and offsets in 16-byte steps, strided to keep it quick),
    /// in both descriptor formats.
    #[test]
    fn add_start_equals_encoding_the_moved_address() {
        use crate::desc_wgmma::SmemDescriptor as Wgmma;
        for swizzle in [Swizzle::B128, Swizzle::B64, Swizzle::B32] {
            for a in (0..228 * 1024u32).step_by(16 * 37) {
                for d in (0..228 * 1024 - a).step_by(16 * 101) {
                    assert_eq!(SmemDescriptor::new(a, 16, 1024, swizzle).add_start(d), SmemDescriptor::new(a + d, 16, 1024, swizzle), "tcgen05 {a:#x} + {d:#x}");
                    assert_eq!(Wgmma::new(a, 16, 1024, swizzle).add_start(d), Wgmma::new(a + d, 16, 1024, swizzle), "wgmma {a:#x} + {d:#x}");
                }
            }
        }
    }
}
