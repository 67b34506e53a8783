//! f32 math: one function per PTX instruction (PTX ISA §9.7.3
//! "Floating-Point Instructions"), and [`F32Ext`], which gives `f32` the
//! usual method names in `no_std` kernels (`x.exp()`, `x.rsqrt()`,
//! `a.fma(b, c)`).
//!
//! ```
//! use kernel_device::math::F32Ext; // also in the prelude
//! # fn softmax_term(x: f32, max: f32) -> f32 {
//! (x - max).exp()            // ex2.approx.f32 of (x - max) * log2(e)
//! # }
//! ```
//!
//! # Accuracy
//!
//! The approximate forms have the maximum errors the PTX ISA states; the
//! emulator's bodies (`kernel_emu::fmath`) compute the exact result in f64
//! and round it to f32 (half an ulp), so one tolerance covers the GPU and
//! the emulator:
//!
//! | function | PTX | max error (PTX ISA) |
//! |---|---|---|
//! | [`ex2_approx`], [`F32Ext::exp2`] | `ex2.approx.f32` | 2 ulp (relative 2^-22) |
//! | [`F32Ext::exp`] | `mul.f32` by log2(e), `ex2.approx.f32` | relative 2^-22 + \|x\| 2^-24 (the rounding of `x log2 e`) |
//! | [`lg2_approx`], [`F32Ext::log2`] | `lg2.approx.f32` | absolute 2^-22.6 for x in (0.5, 2), else relative 2^-22 |
//! | [`F32Ext::ln`] | `lg2.approx.f32`, `mul.f32` by ln 2 | as `lg2`, times ln 2, plus 1 ulp |
//! | [`rcp_approx_ftz`] | `rcp.approx.ftz.f32` | 1 ulp |
//! | [`rcp_rn`], [`sqrt_rn`], [`fma_rn`] | `rcp.rn.f32`, `sqrt.rn.f32`, `fma.rn.f32` | correctly rounded (IEEE 754) |
//! | [`sqrt_approx`] | `sqrt.approx.f32` | relative 2^-23 |
//! | [`rsqrt_approx`], [`F32Ext::rsqrt`] | `rsqrt.approx.f32` | relative 2^-22.9 |
//! | [`tanh_approx`], [`F32Ext::tanh`] | `tanh.approx.f32` | relative 2^-10.987 |
//! | [`sin_approx`], [`cos_approx`] | `sin.approx.f32`, `cos.approx.f32` | absolute 2^-20.5 for \|x\| <= 100 pi |
//! | [`max`], [`min`] | `max.f32`, `min.f32` | exact; a NaN operand is ignored (the other is returned), NaN only if both are |
//! | [`max_nan`], [`min_nan`] | `max.NaN.f32`, `min.NaN.f32` (sm_80) | exact; NaN if either operand is |
//!
//! `.ftz` forms flush subnormal inputs and results to zero. On the host, the
//! methods whose names `std` also gives `f32` (`exp`, `exp2`, `ln`, `log2`,
//! `tanh`, `sin`, `cos`) resolve to `std`'s (inherent methods win over
//! traits), which are within the same bounds; the instruction-named functions
//! always run the emulator's bodies.

macro_rules! unary {
    ($(#[$doc:meta])* $name:ident, $ptx:literal, |$x:ident| $host:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(x: f32) -> f32 {
            device!($ptx, {
                let d: f32;
                // SAFETY: register-only arithmetic.
                unsafe {
                    core::arch::asm!(concat!($ptx, " {0}, {1};"), out(reg32) d, in(reg32) x,
                        options(pure, nomem, nostack, preserves_flags))
                };
                d
            }, host: { let $x = x; $host })
        }
    };
}

macro_rules! binary {
    ($(#[$doc:meta])* $name:ident, $ptx:literal, |$a:ident, $b:ident| $host:expr) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(a: f32, b: f32) -> f32 {
            device!($ptx, {
                let d: f32;
                // SAFETY: register-only arithmetic.
                unsafe {
                    core::arch::asm!(concat!($ptx, " {0}, {1}, {2};"), out(reg32) d, in(reg32) a, in(reg32) b,
                        options(pure, nomem, nostack, preserves_flags))
                };
                d
            }, host: { let ($a, $b) = (a, b); $host })
        }
    };
}

#[cfg(not(target_arch = "nvptx64"))]
use kernel_emu::fmath as fm;

unary!(/// `ex2.approx.f32 d, a;` (PTX ISA §9.7.3.23): 2^a, max error 2 ulp.
    ex2_approx, "ex2.approx.f32", |x| fm::ex2(x, false));
unary!(/// `ex2.approx.ftz.f32 d, a;` (PTX ISA §9.7.3.23): 2^a, subnormals flushed.
    ex2_approx_ftz, "ex2.approx.ftz.f32", |x| fm::ex2(x, true));
unary!(/// `lg2.approx.f32 d, a;` (PTX ISA §9.7.3.22): log2(a).
    lg2_approx, "lg2.approx.f32", |x| fm::lg2(x, false));
unary!(/// `lg2.approx.ftz.f32 d, a;` (PTX ISA §9.7.3.22): log2(a), subnormals flushed.
    lg2_approx_ftz, "lg2.approx.ftz.f32", |x| fm::lg2(x, true));
unary!(/// `rcp.rn.f32 d, a;` (PTX ISA §9.7.3.15): 1/a, correctly rounded.
    rcp_rn, "rcp.rn.f32", |x| 1.0 / x);
unary!(/// `rcp.approx.ftz.f32 d, a;` (PTX ISA §9.7.3.15): 1/a, max error 1 ulp, subnormals flushed.
    rcp_approx_ftz, "rcp.approx.ftz.f32", |x| fm::rcp_approx(x, true));
unary!(/// `sqrt.rn.f32 d, a;` (PTX ISA §9.7.3.17): correctly rounded.
    sqrt_rn, "sqrt.rn.f32", |x| fm::sqrt(x));
unary!(/// `sqrt.approx.f32 d, a;` (PTX ISA §9.7.3.17): relative error 2^-23.
    sqrt_approx, "sqrt.approx.f32", |x| fm::sqrt(x));
unary!(/// `rsqrt.approx.f32 d, a;` (PTX ISA §9.7.3.18): 1/sqrt(a), relative error 2^-22.9.
    rsqrt_approx, "rsqrt.approx.f32", |x| fm::rsqrt(x));
unary!(/// `tanh.approx.f32 d, a;` (PTX ISA §9.7.3.25, sm_75): relative error 2^-10.987.
    tanh_approx, "tanh.approx.f32", |x| fm::tanh(x));
unary!(/// `sin.approx.f32 d, a;` (PTX ISA §9.7.3.19): absolute error 2^-20.5 in [-100 pi, 100 pi].
    sin_approx, "sin.approx.f32", |x| fm::sin(x));
unary!(/// `cos.approx.f32 d, a;` (PTX ISA §9.7.3.20): absolute error 2^-20.5 in [-100 pi, 100 pi].
    cos_approx, "cos.approx.f32", |x| fm::cos(x));
binary!(/// `max.f32 d, a, b;` (PTX ISA §9.7.3.11): a NaN operand is ignored; NaN only if both are.
    max, "max.f32", |a, b| a.max(b));
binary!(/// `min.f32 d, a, b;` (PTX ISA §9.7.3.10): a NaN operand is ignored; NaN only if both are.
    min, "min.f32", |a, b| a.min(b));
binary!(/// `max.NaN.f32 d, a, b;` (PTX ISA §9.7.3.11, sm_80): NaN if either operand is NaN.
    max_nan, "max.NaN.f32", |a, b| if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) });
binary!(/// `min.NaN.f32 d, a, b;` (PTX ISA §9.7.3.10, sm_80): NaN if either operand is NaN.
    min_nan, "min.NaN.f32", |a, b| if a.is_nan() || b.is_nan() { f32::NAN } else { a.min(b) });

/// `fma.rn.f32 d, a, b, c;` (PTX ISA §9.7.3.6): `a * b + c`, rounded once.
#[inline(always)]
pub fn fma_rn(a: f32, b: f32, c: f32) -> f32 {
    device!("fma.rn.f32", {
        let d: f32;
        // SAFETY: register-only arithmetic.
        unsafe {
            core::arch::asm!("fma.rn.f32 {0}, {1}, {2}, {3};", out(reg32) d, in(reg32) a, in(reg32) b, in(reg32) c,
                options(pure, nomem, nostack, preserves_flags))
        };
        d
    }, host: { fm::fma(a, b, c) })
}

/// log2(e).
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;
/// ln(2).
pub const LN_2: f32 = core::f32::consts::LN_2;

/// Math methods on `f32` for `no_std` kernels (`use kernel_device::math::F32Ext`,
/// or the prelude). Each is one PTX instruction or two (see the module's
/// accuracy table).
pub trait F32Ext: Sized {
    /// e^x: `ex2.approx.f32(x * log2 e)`.
    fn exp(self) -> f32;
    /// 2^x: `ex2.approx.f32`.
    fn exp2(self) -> f32;
    /// ln x: `lg2.approx.f32(x) * ln 2`.
    fn ln(self) -> f32;
    /// log2 x: `lg2.approx.f32`.
    fn log2(self) -> f32;
    /// 1/x, correctly rounded: `rcp.rn.f32`.
    fn rcp(self) -> f32;
    /// 1/x, 1 ulp: `rcp.approx.ftz.f32`.
    fn rcp_approx(self) -> f32;
    /// sqrt x, correctly rounded: `sqrt.rn.f32`.
    fn sqrt_rn(self) -> f32;
    /// sqrt x, approximate: `sqrt.approx.f32`.
    fn sqrt_approx(self) -> f32;
    /// 1/sqrt x: `rsqrt.approx.f32`.
    fn rsqrt(self) -> f32;
    /// tanh x: `tanh.approx.f32`.
    fn tanh(self) -> f32;
    /// sin x: `sin.approx.f32`.
    fn sin(self) -> f32;
    /// cos x: `cos.approx.f32`.
    fn cos(self) -> f32;
    /// `self * b + c` rounded once: `fma.rn.f32`.
    fn fma(self, b: f32, c: f32) -> f32;
    /// `max.NaN.f32`: NaN if either is NaN (`f32::max` is `max.f32`, which ignores a NaN).
    fn max_nan(self, b: f32) -> f32;
    /// `min.NaN.f32`: NaN if either is NaN.
    fn min_nan(self, b: f32) -> f32;
}

impl F32Ext for f32 {
    #[inline(always)]
    fn exp(self) -> f32 {
        ex2_approx(self * LOG2_E)
    }
    #[inline(always)]
    fn exp2(self) -> f32 {
        ex2_approx(self)
    }
    #[inline(always)]
    fn ln(self) -> f32 {
        lg2_approx(self) * LN_2
    }
    #[inline(always)]
    fn log2(self) -> f32 {
        lg2_approx(self)
    }
    #[inline(always)]
    fn rcp(self) -> f32 {
        rcp_rn(self)
    }
    #[inline(always)]
    fn rcp_approx(self) -> f32 {
        rcp_approx_ftz(self)
    }
    #[inline(always)]
    fn sqrt_rn(self) -> f32 {
        sqrt_rn(self)
    }
    #[inline(always)]
    fn sqrt_approx(self) -> f32 {
        sqrt_approx(self)
    }
    #[inline(always)]
    fn rsqrt(self) -> f32 {
        rsqrt_approx(self)
    }
    #[inline(always)]
    fn tanh(self) -> f32 {
        tanh_approx(self)
    }
    #[inline(always)]
    fn sin(self) -> f32 {
        sin_approx(self)
    }
    #[inline(always)]
    fn cos(self) -> f32 {
        cos_approx(self)
    }
    #[inline(always)]
    fn fma(self, b: f32, c: f32) -> f32 {
        fma_rn(self, b, c)
    }
    #[inline(always)]
    fn max_nan(self, b: f32) -> f32 {
        max_nan(self, b)
    }
    #[inline(always)]
    fn min_nan(self, b: f32) -> f32 {
        min_nan(self, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f32, b: f64) -> f64 {
        ((a as f64 - b) / b).abs()
    }

    #[test]
    fn approximate_forms_are_within_the_documented_bounds() {
        for i in -200..200 {
            let x = i as f32 * 0.37;
            assert!(rel(ex2_approx(x), (x as f64).exp2()) < 2f64.powf(-22.0), "ex2 {x}");
            let e = F32Ext::exp(x);
            assert!(rel(e, (x as f64).exp()) < 2f64.powf(-22.0) + (x.abs() as f64) * 2f64.powi(-24), "exp {x}");
            assert!((sin_approx(x) as f64 - (x as f64).sin()).abs() < 2f64.powf(-20.5), "sin {x}");
            assert!((cos_approx(x) as f64 - (x as f64).cos()).abs() < 2f64.powf(-20.5), "cos {x}");
            if x != 0.0 {
                assert!(rel(tanh_approx(x), (x as f64).tanh()) < 2f64.powf(-10.987), "tanh {x}");
            }
            let y = (i as f32).abs() * 1.7 + 0.01;
            assert!(rel(rsqrt_approx(y), 1.0 / (y as f64).sqrt()) < 2f64.powf(-22.9), "rsqrt {y}");
            assert_eq!(sqrt_rn(y), ((y as f64).sqrt()) as f32, "sqrt {y}");
            assert_eq!(rcp_rn(y), 1.0 / y);
            assert!((lg2_approx(y) as f64 - (y as f64).log2()).abs() < 2f64.powf(-22.0) * (y as f64).log2().abs().max(1.0), "lg2 {y}");
        }
        assert_eq!(ex2_approx_ftz(-140.0), 0.0, "ex2.ftz flushes a subnormal result");
        assert!(ex2_approx(-140.0) > 0.0, "ex2 keeps it");
        assert_eq!(lg2_approx_ftz(1e-40), f32::NEG_INFINITY, "lg2.ftz flushes a subnormal input");
        assert_eq!(fma_rn(1.0 + f32::EPSILON, 1.0 - f32::EPSILON, -1.0), -f32::EPSILON * f32::EPSILON);
    }

    #[test]
    fn min_max_follow_the_ptx_nan_rules() {
        assert_eq!(max(f32::NAN, 1.0), 1.0);
        assert_eq!(min(2.0, f32::NAN), 2.0);
        assert!(max(f32::NAN, f32::NAN).is_nan());
        assert!(max_nan(f32::NAN, 1.0).is_nan());
        assert!(1.0f32.min_nan(f32::NAN).is_nan());
        assert_eq!(max_nan(-1.0, 3.0), 3.0);
        assert_eq!(min_nan(-1.0, 3.0), -1.0);
    }
}
