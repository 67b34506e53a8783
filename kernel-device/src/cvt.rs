//! Conversions between f32 and f16/bf16, scalar and packed, and packed
//! f16x2/bf16x2 arithmetic (PTX ISA §9.7.9.21 `cvt`, §9.7.4 "Half Precision
//! Floating-Point Instructions").
//!
//! | function | PTX | rounding |
//! |---|---|---|
//! | [`f32_to_f16`], [`f32_to_bf16`] | `cvt.rn.f16.f32`, `cvt.rn.bf16.f32` | nearest even; overflow gives inf |
//! | [`f32_to_f16_satfinite`], [`f32_to_bf16_satfinite`] | `cvt.rn.satfinite.{f16,bf16}.f32` | nearest even; overflow and inf give the largest finite value of the sign; NaN stays NaN |
//! | [`f16_to_f32`], [`bf16_to_f32`] | `cvt.f32.f16`, `cvt.f32.bf16` | exact |
//! | [`pack_f16x2`], [`pack_bf16x2`] (+ `_satfinite`) | `cvt.rn{.satfinite}.{f16x2,bf16x2}.f32 d, hi, lo` | as the scalar forms; `lo` in bits 0..16 |
//! | [`pack_e4m3x2`] | `cvt.rn.satfinite.e4m3x2.f32 d, hi, lo` | nearest even, clamped to ±448; NaN stays NaN; `lo` in bits 0..8 |
//! | [`e4m3x2_to_f16x2`] | `cvt.rn.f16x2.e4m3x2 d, a` | exact (every e4m3 value is an f16; NaN stays NaN); byte 0 of `a` to bits 0..16 |
//! | [`prmt`] | `prmt.b32 d, a, b, sel` | none: byte `i` of `d` is byte `sel[4 i ..+ 3]` of `{b, a}` (packing 8-bit values into 16-bit places before a bit-level conversion) |
//! | [`F16x2`], [`Bf16x2`]: `+`, `-`, `*`, `fma`, `max`, `min` | `{add,sub,mul,fma}.rn.{f16x2,bf16x2}`, `{max,min}.{f16x2,bf16x2}` | nearest even per lane |
//!
//! The emulator's bodies use `half`'s correctly rounded conversions and
//! compute the packed arithmetic exactly in f64 before rounding each lane
//! (an `fma` whose exact result needs more than 53 bits may round twice: at
//! most 1 ulp of f16 apart from the GPU, on ties only).
//!
//! `.satfinite` forms need PTX ISA 8.1: the sm_90a device build targets PTX
//! 8.1 for them (`-Ctarget-feature=+ptx81`).
use half::{bf16, f16};

macro_rules! cvt_to16 {
    ($(#[$doc:meta])* $name:ident, $ptx:literal, $t:ty, |$x:ident| $host:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(x: f32) -> $t {
            device!($ptx, {
                let d: u16;
                // SAFETY: register-only conversion.
                unsafe {
                    core::arch::asm!(concat!($ptx, " {0}, {1};"), out(reg16) d, in(reg32) x,
                        options(pure, nomem, nostack, preserves_flags))
                };
                <$t>::from_bits(d)
            }, host: { let $x = x; $host })
        }
    };
}

fn sat<T: Copy>(v: T, x: f32, is_inf: fn(T) -> bool, max: T, min: T) -> T {
    if x.is_nan() || !is_inf(v) {
        v
    } else if x > 0.0 {
        max
    } else {
        min
    }
}

cvt_to16!(/// `cvt.rn.f16.f32 d, a;`: nearest even, overflow to inf.
    f32_to_f16, "cvt.rn.f16.f32", f16, |x| f16::from_f32(x));
cvt_to16!(/// `cvt.rn.satfinite.f16.f32 d, a;` (PTX 8.1): nearest even, clamped to ±65504; NaN stays NaN.
    f32_to_f16_satfinite, "cvt.rn.satfinite.f16.f32", f16,
    |x| sat(f16::from_f32(x), x, |v: f16| v.is_infinite(), f16::MAX, f16::MIN));
cvt_to16!(/// `cvt.rn.bf16.f32 d, a;` (sm_80): nearest even, overflow to inf.
    f32_to_bf16, "cvt.rn.bf16.f32", bf16, |x| bf16::from_f32(x));
cvt_to16!(/// `cvt.rn.satfinite.bf16.f32 d, a;` (PTX 8.1): nearest even, clamped to the largest finite bf16; NaN stays NaN.
    f32_to_bf16_satfinite, "cvt.rn.satfinite.bf16.f32", bf16,
    |x| sat(bf16::from_f32(x), x, |v: bf16| v.is_infinite(), bf16::MAX, bf16::MIN));

/// `cvt.f32.f16 d, a;`: exact.
#[inline(always)]
pub fn f16_to_f32(h: f16) -> f32 {
    device!("cvt.f32.f16", {
        let d: f32;
        // SAFETY: register-only conversion.
        unsafe {
            core::arch::asm!("cvt.f32.f16 {0}, {1};", out(reg32) d, in(reg16) h.to_bits(),
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: { h.to_f32() })
}

/// `cvt.f32.bf16 d, a;` (sm_90): exact.
#[inline(always)]
pub fn bf16_to_f32(h: bf16) -> f32 {
    device!("cvt.f32.bf16", {
        let d: f32;
        // SAFETY: register-only conversion.
        unsafe {
            core::arch::asm!("cvt.f32.bf16 {0}, {1};", out(reg32) d, in(reg16) h.to_bits(),
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: { h.to_f32() })
}

macro_rules! pack {
    ($(#[$doc:meta])* $name:ident, $ptx:literal, |$lo:ident, $hi:ident| $host:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(lo: f32, hi: f32) -> u32 {
            device!($ptx, {
                let d: u32;
                // SAFETY: register-only conversion.
                unsafe {
                    core::arch::asm!(concat!($ptx, " {0}, {1}, {2};"), out(reg32) d, in(reg32) hi, in(reg32) lo,
                        options(pure, nomem, nostack, preserves_flags))
                };
                d
            }, host: { let ($lo, $hi) = (lo, hi); $host })
        }
    };
}

pack!(/// `cvt.rn.f16x2.f32 d, hi, lo;`: two f32 to a packed f16x2 (`lo` in bits 0..16).
    pack_f16x2, "cvt.rn.f16x2.f32",
    |lo, hi| (u32::from(f16::from_f32(hi).to_bits()) << 16) | u32::from(f16::from_f32(lo).to_bits()));
pack!(/// `cvt.rn.satfinite.f16x2.f32 d, hi, lo;` (PTX 8.1): as [`pack_f16x2`], clamped to ±65504.
    pack_f16x2_satfinite, "cvt.rn.satfinite.f16x2.f32",
    |lo, hi| {
        let c = |x: f32| sat(f16::from_f32(x), x, |v: f16| v.is_infinite(), f16::MAX, f16::MIN).to_bits();
        (u32::from(c(hi)) << 16) | u32::from(c(lo))
    });
pack!(/// `cvt.rn.bf16x2.f32 d, hi, lo;` (sm_80): two f32 to a packed bf16x2 (`lo` in bits 0..16).
    pack_bf16x2, "cvt.rn.bf16x2.f32",
    |lo, hi| (u32::from(bf16::from_f32(hi).to_bits()) << 16) | u32::from(bf16::from_f32(lo).to_bits()));
pack!(/// `cvt.rn.satfinite.bf16x2.f32 d, hi, lo;` (PTX 8.1): as [`pack_bf16x2`], clamped to the largest finite bf16.
    pack_bf16x2_satfinite, "cvt.rn.satfinite.bf16x2.f32",
    |lo, hi| {
        let c = |x: f32| sat(bf16::from_f32(x), x, |v: bf16| v.is_infinite(), bf16::MAX, bf16::MIN).to_bits();
        (u32::from(c(hi)) << 16) | u32::from(c(lo))
    });

/// `cvt.rn.satfinite.e4m3x2.f32 d, hi, lo;` (PTX ISA 7.8, sm_89+; §9.7.9.21):
/// two f32 to a packed pair of e4m3 (`lo` in bits 0..8, `hi` in 8..16),
/// nearest even, clamped to ±448 (e4m3 has no infinity); NaN gives NaN.
#[inline(always)]
pub fn pack_e4m3x2(lo: f32, hi: f32) -> u16 {
    device!("cvt.rn.satfinite.e4m3x2.f32", {
        let d: u16;
        // SAFETY: register-only conversion.
        unsafe {
            core::arch::asm!("cvt.rn.satfinite.e4m3x2.f32 {0}, {1}, {2};", out(reg16) d, in(reg32) hi, in(reg32) lo,
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: {
        // float8's conversion is nearest even and saturating (`SatFinite`).
        let c = |x: f32| u16::from(crate::E4M3::from_f32(x).to_bits());
        (c(hi) << 8) | c(lo)
    })
}

/// `cvt.rn.f16x2.e4m3x2 d, a;` (PTX ISA 7.8, sm_89+; §9.7.9.21): two e4m3
/// values (byte 0 of `x` to bits 0..16 of the result, byte 1 to 16..32) as
/// a packed f16x2, exactly: every e4m3 value is an f16, subnormals
/// included; NaN gives NaN. One instruction per pair: the FP8 operands of
/// f16 tensor-core MMAs, dequantized in registers.
#[inline(always)]
pub fn e4m3x2_to_f16x2(x: u16) -> u32 {
    device!("cvt.rn.f16x2.e4m3x2", {
        let d: u32;
        // SAFETY: register-only conversion.
        unsafe {
            core::arch::asm!("cvt.rn.f16x2.e4m3x2 {0}, {1};", out(reg32) d, in(reg16) x,
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: {
        let c = |b: u16| u32::from(f16::from_f32(crate::E4M3::from_bits(b as u8).to_f32()).to_bits());
        c(x & 0xFF) | c(x >> 8) << 16
    })
}

/// `prmt.b32 d, a, b, sel;` (PTX ISA §9.7.8.7, the default mode): byte
/// `i` of `d` is byte `sel >> (4 i) & 7` of the eight bytes `{b, a}`
/// (0-3 are `a`'s, 4-7 `b`'s); bit 3 of each selector nibble (the sign
/// replicate) is not used here and must be 0 (checked on the emulator).
/// One instruction: the byte moves of FP8 unpacking.
#[inline(always)]
#[track_caller]
pub fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    device!("prmt.b32", {
        let d: u32;
        // SAFETY: register-only byte permute.
        unsafe {
            core::arch::asm!("prmt.b32 {0}, {1}, {2}, {3};", out(reg32) d, in(reg32) a, in(reg32) b, in(reg32) sel,
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: {
        assert!(sel & 0x8888 == 0, "prmt: selector {sel:#x} uses the sign-replicate bit (bit 3 of a nibble), which this wrapper does not model");
        let bytes = (u64::from(b) << 32 | u64::from(a)).to_le_bytes();
        (0..4).fold(0u32, |d, i| d | u32::from(bytes[((sel >> (4 * i)) & 7) as usize]) << (8 * i))
    })
}

/// The two halves of a packed pair: `(bits 0..16, bits 16..32)`.
#[inline(always)]
fn halves(v: u32) -> (u16, u16) {
    (v as u16, (v >> 16) as u16)
}

/// Two f16 in one 32-bit register (`lo` in bits 0..16), the operand of the
/// `.f16x2` instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct F16x2(pub u32);
/// Two bf16 in one 32-bit register (`lo` in bits 0..16), the operand of the
/// `.bf16x2` instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Bf16x2(pub u32);

macro_rules! packed_ops {
    ($ty:ident, $h:ty, $sfx:literal, $pack:ident, $to32:ident) => {
        impl $ty {
            /// From two f32 (nearest even).
            #[inline(always)]
            pub fn from_f32(lo: f32, hi: f32) -> Self {
                $ty($pack(lo, hi))
            }
            /// Both lanes as f32 `(lo, hi)` (exact).
            #[inline(always)]
            pub fn to_f32(self) -> (f32, f32) {
                let (l, h) = halves(self.0);
                ($to32(<$h>::from_bits(l)), $to32(<$h>::from_bits(h)))
            }
            #[cfg(not(target_arch = "nvptx64"))]
            fn map2(self, o: Self, f: impl Fn(f64, f64) -> f64) -> Self {
                let (a, b) = (self.lanes(), o.lanes());
                Self::from_lanes(f(a.0, b.0), f(a.1, b.1))
            }
            #[cfg(not(target_arch = "nvptx64"))]
            fn lanes(self) -> (f64, f64) {
                let (l, h) = halves(self.0);
                (<$h>::from_bits(l).to_f64(), <$h>::from_bits(h).to_f64())
            }
            #[cfg(not(target_arch = "nvptx64"))]
            fn from_lanes(l: f64, h: f64) -> Self {
                $ty((u32::from(<$h>::from_f64(h).to_bits()) << 16) | u32::from(<$h>::from_f64(l).to_bits()))
            }
            /// `fma.rn` per lane: `self * b + c`.
            #[doc = concat!("PTX: `fma.rn", $sfx, " d, a, b, c;`.")]
            #[inline(always)]
            pub fn fma(self, b: Self, c: Self) -> Self {
                device!("fma.rn.f16x2/bf16x2", {
                    let d: u32;
                    // SAFETY: register-only arithmetic.
                    unsafe {
                        core::arch::asm!(concat!("fma.rn", $sfx, " {0}, {1}, {2}, {3};"),
                            out(reg32) d, in(reg32) self.0, in(reg32) b.0, in(reg32) c.0,
                            options(pure, nomem, nostack, preserves_flags))
                    };
                    $ty(d)
                }, host: {
                    let (a, b2, c2) = (self.lanes(), b.lanes(), c.lanes());
                    Self::from_lanes(a.0 * b2.0 + c2.0, a.1 * b2.1 + c2.1)
                })
            }
            packed_ops!(@bin $ty, max, concat!("max", $sfx), |a, b| if a.is_nan() { b } else if b.is_nan() { a } else { a.max(b) });
            packed_ops!(@bin $ty, min, concat!("min", $sfx), |a, b| if a.is_nan() { b } else if b.is_nan() { a } else { a.min(b) });
            packed_ops!(@bin $ty, add_rn, concat!("add.rn", $sfx), |a, b| a + b);
            packed_ops!(@bin $ty, sub_rn, concat!("sub.rn", $sfx), |a, b| a - b);
            packed_ops!(@bin $ty, mul_rn, concat!("mul.rn", $sfx), |a, b| a * b);
        }
        impl core::ops::Add for $ty {
            type Output = $ty;
            #[inline(always)]
            fn add(self, o: $ty) -> $ty {
                self.add_rn(o)
            }
        }
        impl core::ops::Sub for $ty {
            type Output = $ty;
            #[inline(always)]
            fn sub(self, o: $ty) -> $ty {
                self.sub_rn(o)
            }
        }
        impl core::ops::Mul for $ty {
            type Output = $ty;
            #[inline(always)]
            fn mul(self, o: $ty) -> $ty {
                self.mul_rn(o)
            }
        }
    };
    (@bin $ty:ident, $name:ident, $ptx:expr, |$a:ident, $b:ident| $host:expr) => {
        #[doc = "Per lane; PTX in the module table (`"]
        #[doc = stringify!($name)]
        #[doc = "`)."]
        #[inline(always)]
        pub fn $name(self, o: Self) -> Self {
            device!("packed f16x2/bf16x2 op", {
                let d: u32;
                // SAFETY: register-only arithmetic.
                unsafe {
                    core::arch::asm!(concat!($ptx, " {0}, {1}, {2};"),
                        out(reg32) d, in(reg32) self.0, in(reg32) o.0,
                        options(pure, nomem, nostack, preserves_flags))
                };
                $ty(d)
            }, host: { self.map2(o, |$a, $b| $host) })
        }
    };
}
packed_ops!(F16x2, f16, ".f16x2", pack_f16x2, f16_to_f32);
packed_ops!(Bf16x2, bf16, ".bf16x2", pack_bf16x2, bf16_to_f32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_pairs_convert_exactly_to_f16() {
        // 1.0 (0x38), -448 (0xFE), the smallest subnormal 2^-9 (0x01), 0.
        let one_neg448 = e4m3x2_to_f16x2(0xFE38);
        assert_eq!(one_neg448, 0xDF00_3C00);
        assert_eq!(e4m3x2_to_f16x2(0x0001), 0x0000_1800);
        assert!(f16::from_bits((e4m3x2_to_f16x2(0x7F00) >> 16) as u16).is_nan());
    }

    #[test]
    fn prmt_picks_bytes_of_b_a() {
        let (a, b) = (0x4433_2211, 0x8877_6655);
        assert_eq!(prmt(a, b, 0x3210), a);
        assert_eq!(prmt(a, b, 0x7654), b);
        assert_eq!(prmt(a, b, 0x4051), 0x5511_6622);
    }

    #[test]
    fn scalar_conversions_round_to_nearest_even_and_saturate() {
        // 1 + 2^-11 is halfway between f16 1.0 and 1 + 2^-10: ties to even (1.0).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)).to_bits(), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)).to_bits(), 0x3c02);
        assert!(f32_to_f16(70000.0).is_infinite());
        assert_eq!(f32_to_f16_satfinite(70000.0), f16::MAX);
        assert_eq!(f32_to_f16_satfinite(f32::NEG_INFINITY), f16::MIN);
        assert!(f32_to_f16_satfinite(f32::NAN).is_nan());
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)).to_bits(), 0x3f80);
        assert!(f32_to_bf16(3.4e38).is_infinite());
        assert_eq!(f32_to_bf16_satfinite(3.4e38), bf16::MAX);
        assert_eq!(f16_to_f32(f16::from_bits(0x3c01)), 1.0 + 2f32.powi(-10));
        assert_eq!(bf16_to_f32(bf16::from_bits(0x4049)), 3.140625);
    }

    #[test]
    fn packed_pairs_keep_lo_in_the_low_half_and_compute_per_lane() {
        assert_eq!(pack_f16x2(1.0, -2.0), 0xc000_3c00);
        assert_eq!(pack_bf16x2(1.0, -2.0), 0xc000_3f80);
        assert_eq!(pack_f16x2_satfinite(1e6, -1e6), 0xfbff_7bff);
        let (a, b) = (F16x2::from_f32(1.5, -3.0), F16x2::from_f32(2.0, 0.25));
        assert_eq!((a + b).to_f32(), (3.5, -2.75));
        assert_eq!((a - b).to_f32(), (-0.5, -3.25));
        assert_eq!((a * b).to_f32(), (3.0, -0.75));
        assert_eq!(a.fma(b, b).to_f32(), (5.0, -0.5));
        assert_eq!(a.max(b).to_f32(), (2.0, 0.25));
        assert_eq!(a.min(b).to_f32(), (1.5, -3.0));
        let (c, d) = (Bf16x2::from_f32(1.5, 256.0), Bf16x2::from_f32(2.0, 1.0));
        // 257 is not a bf16 (8 bits of mantissa): ties to even, 256.
        assert_eq!((c + d).to_f32(), (3.5, 256.0));
        assert_eq!(c.fma(d, d).to_f32(), (5.0, 256.0));
    }
}
