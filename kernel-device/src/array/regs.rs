//! Register storage indexed only by constants.
//!
//! A per-thread array indexed by a runtime value is moved to local memory
//! by the NVPTX backend (TOOLCHAIN.md). [`unroll`] calls its closure with
//! `0, 1, .., n - 1` through a binary tree of `#[inline(always)]` calls, so
//! after inlining every index is a literal, for any `n` up to 511, without
//! relying on LLVM's loop-unrolling thresholds.

/// Calls `f(0)`, .., `f(n - 1)` in order, fully unrolled once `n` is a
/// constant (it always is here: a layout's register count). `n < 512`.
#[inline(always)]
pub fn unroll(n: usize, mut f: impl FnMut(usize)) {
    assert!(n < 512, "unroll: at most 511 registers per thread");
    let f = &mut f;
    let mut o = 0;
    if n & 256 != 0 {
        u256(o, f);
        o += 256;
    }
    if n & 128 != 0 {
        u128(o, f);
        o += 128;
    }
    if n & 64 != 0 {
        u64(o, f);
        o += 64;
    }
    if n & 32 != 0 {
        u32(o, f);
        o += 32;
    }
    if n & 16 != 0 {
        u16(o, f);
        o += 16;
    }
    if n & 8 != 0 {
        u8(o, f);
        o += 8;
    }
    if n & 4 != 0 {
        u4(o, f);
        o += 4;
    }
    if n & 2 != 0 {
        u2(o, f);
        o += 2;
    }
    if n & 1 != 0 {
        f(o);
    }
}

macro_rules! doubling {
    ($($name:ident = 2 x $half:ident, $n:literal;)*) => {$(
        #[inline(always)]
        fn $name(o: usize, f: &mut impl FnMut(usize)) {
            $half(o, f);
            $half(o + $n / 2, f);
        }
    )*};
}
#[inline(always)]
fn u1(o: usize, f: &mut impl FnMut(usize)) {
    f(o)
}
doubling! {
    u2 = 2 x u1, 2; u4 = 2 x u2, 4; u8 = 2 x u4, 8; u16 = 2 x u8, 16;
    u32 = 2 x u16, 32; u64 = 2 x u32, 64; u128 = 2 x u64, 128; u256 = 2 x u128, 256;
}

/// `x`, which the compiler must treat as a new value computed here (an
/// empty `asm!` with `x` in and out of one register: no instruction): what
/// is computed from the result after this point is not merged with what
/// was computed from `x` before it (common-subexpression elimination would
/// otherwise keep those earlier results live across the point, e.g. a row
/// converted to f32 across a barrier, instead of converting it again).
#[inline(always)]
pub fn opaque_u32(x: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut x = x;
        // SAFETY: no instruction; `x` stays in its register. Not `pure`, so
        // it is neither merged with another nor hoisted.
        unsafe { core::arch::asm!("// opaque {0}", inout(reg32) x, options(nomem, nostack, preserves_flags)) };
        x
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        x
    }
}

/// A thread's registers of an [`Array`](super::Array): `LEN` values of `E`,
/// read and written by constant indices.
pub trait RegStorage<E: Copy>: Copy {
    const LEN: usize;
    /// Every register `v`.
    fn splat(v: E) -> Self;
    fn get(&self, i: usize) -> E;
    fn set(&mut self, i: usize, v: E);
}

impl<E: Copy, const K: usize> RegStorage<E> for [E; K] {
    const LEN: usize = K;
    #[inline(always)]
    fn splat(v: E) -> Self {
        [v; K]
    }
    #[inline(always)]
    fn get(&self, i: usize) -> E {
        self[i]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, v: E) {
        self[i] = v
    }
}

/// `VECS` vectors of `VEC` elements (the registers of a
/// [`WgStrided<VECS, VEC>`](super::WgStrided)); register `i` is element
/// `i % VEC` of vector `i / VEC`.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct VecRegs<E, const VECS: usize, const VEC: usize>(pub [[E; VEC]; VECS]);

impl<E: Copy, const VECS: usize, const VEC: usize> RegStorage<E> for VecRegs<E, VECS, VEC> {
    const LEN: usize = VECS * VEC;
    #[inline(always)]
    fn splat(v: E) -> Self {
        VecRegs([[v; VEC]; VECS])
    }
    #[inline(always)]
    fn get(&self, i: usize) -> E {
        self.0[i / VEC][i % VEC]
    }
    #[inline(always)]
    fn set(&mut self, i: usize, v: E) {
        self.0[i / VEC][i % VEC] = v
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    #[test]
    fn unroll_visits_each_index_once_in_order() {
        for n in [0, 1, 2, 3, 7, 31, 64, 100, 255, 256, 511] {
            let mut seen = Vec::new();
            super::unroll(n, |i| seen.push(i));
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }
}
