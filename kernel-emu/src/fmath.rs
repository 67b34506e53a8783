//! Emulator bodies of the approximate PTX math instructions (`ex2.approx`,
//! `lg2.approx`, `rsqrt.approx`, `tanh.approx`, `sin.approx`, ...): the exact
//! result computed in f64 and rounded to f32, with `.ftz` (subnormal inputs
//! and results flushed to sign-preserving zero) where the instruction has it.
//!
//! The GPU's results differ from these by at most the instruction's error
//! bound in the PTX ISA (the emulator's own error is half an f32 ulp), so a
//! test tolerance of that bound plus one ulp covers both; the bounds are
//! listed in `kernel_device::math`.

/// Flush a subnormal to a zero of the same sign (`.ftz`).
pub fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// `ex2.approx{.ftz}.f32`: 2^x.
pub fn ex2(x: f32, flush: bool) -> f32 {
    let x = if flush { ftz(x) } else { x };
    let r = (x as f64).exp2() as f32;
    if flush { ftz(r) } else { r }
}

/// `lg2.approx{.ftz}.f32`: log2(x) (-inf at 0, NaN below).
pub fn lg2(x: f32, flush: bool) -> f32 {
    let x = if flush { ftz(x) } else { x };
    (x as f64).log2() as f32
}

/// `rcp.approx{.ftz}.f32`: 1/x.
pub fn rcp_approx(x: f32, flush: bool) -> f32 {
    let x = if flush { ftz(x) } else { x };
    let r = 1.0 / x;
    if flush { ftz(r) } else { r }
}

/// `sqrt.rn.f32` and `sqrt.approx.f32`: the correctly rounded square root.
pub fn sqrt(x: f32) -> f32 {
    x.sqrt()
}

/// `rsqrt.approx.f32`: 1/sqrt(x).
pub fn rsqrt(x: f32) -> f32 {
    (1.0 / (x as f64).sqrt()) as f32
}

/// `tanh.approx.f32`.
pub fn tanh(x: f32) -> f32 {
    (x as f64).tanh() as f32
}

/// `sin.approx.f32`.
pub fn sin(x: f32) -> f32 {
    (x as f64).sin() as f32
}

/// `cos.approx.f32`.
pub fn cos(x: f32) -> f32 {
    (x as f64).cos() as f32
}

/// `fma.rn.f32`: `a * b + c` rounded once.
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}
