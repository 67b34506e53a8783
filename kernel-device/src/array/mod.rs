//! Register arrays of the warpgroup with named layouts (Pallas:MGPU's
//! arrays: `plgpu.Layout.WGMMA`, `WGMMA_ROW`, `WGMMA_COL`, `WG_STRIDED`,
//! `WG_SPLAT`).
//!
//! An [`Array<T, L>`] is one logical array held by the 128 threads of a
//! warpgroup: each thread keeps `L::REGS` elements of `T` in registers, at
//! the positions the layout `L` gives (the [`layout`] module's table). Its
//! operations are warpgroup-collective in the sense that every thread of
//! the warpgroup calls them with its own registers; elementwise operations
//! need no communication, reductions use warp shuffles (and SMEM across the
//! 4 warps), loads and stores read and write each thread's own elements.
//!
//! ```text
//! Acc<N> --into_array--> Array<f32, Wgmma<N>> --row_sum--> Array<f32, WgmmaRow>
//!                             ^   + - * / max map ...           |
//!                             +---------- broadcast ------------+
//! ```
//!
//! * elementwise: `+ - * /` between arrays of the same layout (a different
//!   layout is a compile error naming both) and with a scalar, `map`, `zip`,
//!   `max`/`min`, [`Array::cast`] between f32, f16 and bf16;
//! * [`Array::broadcast`]: `WgmmaRow`/`WgmmaCol<N>`/`WgSplat` to `Wgmma<N>`,
//!   free (no data moves);
//! * memory ([`mem`]): `Wgmma<N>` to and from swizzled or plain SMEM tiles,
//!   `WgmmaCol<N>` from a `Gmem` vector, `WgStrided` to and from `Gmem` and
//!   SMEM with vector accesses;
//! * the Hopper accumulator [`crate::wgmma::Acc<N>`] is an `Array<f32,
//!   Wgmma<N>>` ([`Acc::into_array`](crate::wgmma::Acc::into_array),
//!   [`Acc::array`](crate::wgmma::Acc::array)): the same registers.
//!
//! Every per-register loop is unrolled ([`regs::unroll`]): the registers are
//! only ever indexed by constants, so they stay in registers (a runtime
//! index would move the array to local memory).
pub mod layout;
pub mod mem;
pub mod reduce;
pub mod regs;
pub mod tile;

use crate::ptr::{Memory, Ptr};
use core::ops::{Add, Div, Mul, Neg, Sub};
pub use layout::{ArrayLayout, BroadcastTo, SameLayout, Strided, WgSplat, WgStrided, Wgmma, WgmmaCol, WgmmaRow};
pub use mem::GmemSrc;
pub use tile::{AccTile, Epilogue, Prefetch, TileAt};
use regs::{unroll, RegStorage};

/// A register array of the warpgroup: logical shape `L::SHAPE`, this
/// thread's `L::REGS` elements in registers. See the [module docs](self).
#[repr(transparent)]
pub struct Array<T: Copy, L: ArrayLayout> {
    /// This thread's registers, in the layout's order.
    pub regs: L::Regs<T>,
}

impl<T: Copy, L: ArrayLayout> Clone for Array<T, L> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Copy, L: ArrayLayout> Copy for Array<T, L> {}

impl<T: Copy, L: ArrayLayout> Array<T, L> {
    /// Elements per thread.
    pub const REGS: usize = L::REGS;

    /// From this thread's registers.
    #[inline(always)]
    pub fn from_regs(regs: L::Regs<T>) -> Self {
        Array { regs }
    }
    /// Every element `v`.
    #[inline(always)]
    pub fn splat(v: T) -> Self {
        Array { regs: RegStorage::splat(v) }
    }
    /// Register `i` of this thread (`i` a constant; see [`regs::unroll`]).
    #[inline(always)]
    pub fn get(&self, i: usize) -> T {
        self.regs.get(i)
    }
    #[inline(always)]
    pub fn set(&mut self, i: usize, v: T) {
        self.regs.set(i, v)
    }
    /// `f(register)` for every register, unrolled.
    #[inline(always)]
    pub fn from_fn(mut f: impl FnMut(usize) -> T) -> Self
    where
        T: Default,
    {
        let mut a = Self::splat(T::default());
        unroll(L::REGS, |i| a.regs.set(i, f(i)));
        a
    }
    /// `(row, col)` of this thread's register `i` in the logical shape.
    #[inline(always)]
    pub fn coords(i: usize) -> (usize, usize) {
        L::coords(L::thread(), i)
    }
    /// `f(row, col, x)` for each of this thread's elements, unrolled.
    #[inline(always)]
    pub fn for_each_indexed(&self, mut f: impl FnMut(usize, usize, T)) {
        let t = L::thread();
        unroll(L::REGS, |i| {
            let (r, c) = L::coords(t, i);
            f(r, c, self.regs.get(i))
        });
    }
    /// `f(x)` elementwise.
    #[inline(always)]
    pub fn map<U: Copy + Default>(self, mut f: impl FnMut(T) -> U) -> Array<U, L> {
        let mut out = Array::<U, L>::splat(U::default());
        unroll(L::REGS, |i| out.regs.set(i, f(self.regs.get(i))));
        out
    }
    /// `f(row, col, x)` elementwise, with each element's logical coordinates.
    #[inline(always)]
    pub fn map_indexed<U: Copy + Default>(self, mut f: impl FnMut(usize, usize, T) -> U) -> Array<U, L> {
        let t = L::thread();
        let mut out = Array::<U, L>::splat(U::default());
        unroll(L::REGS, |i| {
            let (r, c) = L::coords(t, i);
            out.regs.set(i, f(r, c, self.regs.get(i)))
        });
        out
    }
    /// `f(x, y)` elementwise with an array of the same layout.
    #[inline(always)]
    pub fn zip<U: Copy, V: Copy + Default, L2: ArrayLayout>(self, other: Array<U, L2>, mut f: impl FnMut(T, U) -> V) -> Array<V, L>
    where
        L: SameLayout<L2>,
    {
        let o: L::Regs<U> = L::same(other.regs);
        let mut out = Array::<V, L>::splat(V::default());
        unroll(L::REGS, |i| out.regs.set(i, f(self.regs.get(i), o.get(i))));
        out
    }
    /// `f(x, y)` with `y` the element of `other` (a `WgmmaRow`, a
    /// `WgmmaCol<N>` or a `WgSplat`) at this element's row or column: a
    /// broadcast fused into the operation.
    #[inline(always)]
    pub fn zip_broadcast<U: Copy, V: Copy + Default, L2: BroadcastTo<L>>(self, other: Array<U, L2>, f: impl FnMut(T, U) -> V) -> Array<V, L> {
        self.zip(other.broadcast::<L>(), f)
    }
    /// Converts every element (`cvt.rn` to 16-bit types, exact to f32).
    #[inline(always)]
    pub fn cast<U: Scalar>(self) -> Array<U, L>
    where
        T: Scalar,
    {
        self.map(|x| U::from_f32(x.to_f32()))
    }
    /// The array in layout `To`, each thread repeating its own registers
    /// (see [`BroadcastTo`]): no data moves.
    #[inline(always)]
    pub fn broadcast<To: ArrayLayout>(self) -> Array<T, To>
    where
        L: BroadcastTo<To>,
    {
        let mut out = Array::<T, To>::splat(self.regs.get(0));
        unroll(To::REGS, |i| out.regs.set(i, self.regs.get(L::source(i))));
        out
    }
    /// The elementwise maximum (`max.f32`: NaN only if both are NaN).
    #[inline(always)]
    pub fn max<L2: ArrayLayout>(self, other: Array<T, L2>) -> Self
    where
        T: Scalar,
        L: SameLayout<L2>,
    {
        self.zip(other, T::max)
    }
    /// The elementwise minimum.
    #[inline(always)]
    pub fn min<L2: ArrayLayout>(self, other: Array<T, L2>) -> Self
    where
        T: Scalar,
        L: SameLayout<L2>,
    {
        self.zip(other, T::min)
    }
    /// `max(x, 0)` elementwise.
    #[inline(always)]
    pub fn relu(self) -> Self
    where
        T: Scalar,
    {
        self.map(|x| x.max(T::from_f32(0.0)))
    }
    /// The logistic sigmoid `1 / (1 + e^-x)` elementwise, in f32 (see
    /// [`sigmoid`]).
    #[inline(always)]
    pub fn sigmoid(self) -> Self
    where
        T: Scalar,
    {
        self.map(|x| T::from_f32(sigmoid(x.to_f32())))
    }
    /// SiLU (swish) `x · sigmoid(x)` elementwise, in f32 (see [`silu`]): the
    /// gate of a SwiGLU, `silu(x W1ᵀ) * (x W3ᵀ)`.
    #[inline(always)]
    pub fn silu(self) -> Self
    where
        T: Scalar,
    {
        self.map(|x| T::from_f32(silu(x.to_f32())))
    }
}

/// `1 / (1 + e^-x)` with the fast math of [`crate::math`]: e^-x is
/// `ex2.approx.ftz.f32(-x log2 e)`, the reciprocal `rcp.approx.ftz.f32`
/// (3 instructions besides the add; each has its PTX body and its emulator
/// body there). The `.ftz` of `ex2` changes no result: it flushes e^-x only
/// where it is below 2^-126, and `1 + e^-x` rounds to 1 there either way;
/// without it ptxas wraps every `ex2` in a subnormal range check (a compare
/// and two predicated multiplies). Relative error at most `2^-21 + |x| 2^-23`: the error of
/// `exp` (`ex2`'s 2 ulp, and `|x|` times the rounding of `x log2 e` and of
/// `log2 e` itself in f32), scaled by `1 - sigmoid(x)`, plus the rounding
/// of the add and 1 ulp of `rcp`. Saturates cleanly: below `x = -87.3` the result
/// would be subnormal and is flushed to 0 (`.ftz`; from `x < -88.7`
/// `e^-x = inf` and `rcp(inf) = 0`); a NaN stays NaN.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    use crate::math::F32Ext;
    (1.0 + crate::math::ex2_approx_ftz(-x * crate::math::LOG2_E)).rcp_approx()
}

/// SiLU (swish) `x · sigmoid(x)` (see [`sigmoid`] for the instructions and
/// the error; one more `mul.f32`). Where the sigmoid is flushed to 0
/// (`x < -87.3`) the result is 0, off by less than `|x| 2^-126`.
/// `silu(-inf)` is NaN (`-inf · 0`), as in IEEE arithmetic.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// Element types with f32 arithmetic: f32 itself, and the 16-bit floats,
/// which are converted to f32 for math and back (`cvt.rn`).
pub trait Scalar: Copy + Default + 'static {
    fn to_f32(self) -> f32;
    /// Round to nearest even.
    fn from_f32(x: f32) -> Self;
    /// Two f32 as a pair of `Self` in one word (4 bytes for 16-bit types,
    /// one `cvt.rn.f16x2.f32`), written to `dst` (aligned to the pair; on
    /// the emulator checked and race-recorded as every [`Ptr`] access).
    ///
    /// # Safety
    /// `dst` is valid for writing two `Self`, aligned to `2 * size_of::<Self>()`.
    #[track_caller]
    unsafe fn write_pair<M: Memory>(dst: Ptr<Self, M>, a: f32, b: f32);
    /// The pair at `src` (aligned to the pair) as f32.
    ///
    /// # Safety
    /// `src` is valid for reading two `Self`, aligned to `2 * size_of::<Self>()`.
    #[track_caller]
    unsafe fn read_pair<M: Memory>(src: Ptr<Self, M>) -> (f32, f32);
    /// Two f32 as the one 4-byte word of a pair of `Self` (lower element in
    /// bits 0..16) for the 16-bit types; `None` for f32, whose pair is 8
    /// bytes (the test [`Array::store_tile`] takes its `stmatrix` path on).
    #[inline(always)]
    fn pair_word(_a: f32, _b: f32) -> Option<u32> {
        None
    }
    /// The pair at `src` (aligned to the pair) unconverted: one 4-byte load
    /// for 16-bit types.
    ///
    /// # Safety
    /// As [`Scalar::read_pair`].
    #[inline(always)]
    #[track_caller]
    unsafe fn read_pair_raw<M: Memory>(src: Ptr<Self, M>) -> [Self; 2] {
        // SAFETY: the caller's contract.
        unsafe { src.cast::<[Self; 2]>().checked(false).read() }
    }
    /// `max.f32` semantics (a NaN operand is ignored).
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        Self::from_f32(self.to_f32().max(o.to_f32()))
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        Self::from_f32(self.to_f32().min(o.to_f32()))
    }
}

impl Scalar for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> f32 {
        x
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn write_pair<M: Memory>(dst: Ptr<f32, M>, a: f32, b: f32) {
        // SAFETY: the caller's contract (8-byte aligned pair).
        unsafe { dst.cast::<[f32; 2]>().checked(true).write([a, b]) }
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn read_pair<M: Memory>(src: Ptr<f32, M>) -> (f32, f32) {
        // SAFETY: the caller's contract.
        let [a, b] = unsafe { src.cast::<[f32; 2]>().checked(false).read() };
        (a, b)
    }
    #[inline(always)]
    fn max(self, o: f32) -> f32 {
        crate::math::max(self, o)
    }
    #[inline(always)]
    fn min(self, o: f32) -> f32 {
        crate::math::min(self, o)
    }
}

impl Scalar for half::f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        cvt::f16_to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        cvt::f32_to_f16(x)
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn write_pair<M: Memory>(dst: Ptr<Self, M>, a: f32, b: f32) {
        // SAFETY: the caller's contract (4-byte aligned pair).
        unsafe { dst.cast::<u32>().write(crate::cvt::pack_f16x2(a, b)) }
    }
    #[inline(always)]
    fn pair_word(a: f32, b: f32) -> Option<u32> {
        Some(crate::cvt::pack_f16x2(a, b))
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn read_pair<M: Memory>(src: Ptr<Self, M>) -> (f32, f32) {
        // SAFETY: the caller's contract (4-byte aligned pair): one 32-bit load.
        let w = unsafe { src.cast::<u32>().read() };
        (Scalar::to_f32(Self::from_bits(w as u16)), Scalar::to_f32(Self::from_bits((w >> 16) as u16)))
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn read_pair_raw<M: Memory>(src: Ptr<Self, M>) -> [Self; 2] {
        // SAFETY: the caller's contract (4-byte aligned pair): one 32-bit load.
        let w = unsafe { src.cast::<u32>().read() };
        [Self::from_bits(w as u16), Self::from_bits((w >> 16) as u16)]
    }
}

impl Scalar for half::bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        crate::cvt::bf16_to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        cvt::f32_to_bf16(x)
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn write_pair<M: Memory>(dst: Ptr<Self, M>, a: f32, b: f32) {
        // SAFETY: the caller's contract (4-byte aligned pair).
        unsafe { dst.cast::<u32>().write(crate::cvt::pack_bf16x2(a, b)) }
    }
    #[inline(always)]
    fn pair_word(a: f32, b: f32) -> Option<u32> {
        Some(crate::cvt::pack_bf16x2(a, b))
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn read_pair<M: Memory>(src: Ptr<Self, M>) -> (f32, f32) {
        // SAFETY: the caller's contract (4-byte aligned pair): one 32-bit load.
        let w = unsafe { src.cast::<u32>().read() };
        (Scalar::to_f32(Self::from_bits(w as u16)), Scalar::to_f32(Self::from_bits((w >> 16) as u16)))
    }
    #[inline(always)]
    #[track_caller]
    unsafe fn read_pair_raw<M: Memory>(src: Ptr<Self, M>) -> [Self; 2] {
        // SAFETY: the caller's contract (4-byte aligned pair): one 32-bit load.
        let w = unsafe { src.cast::<u32>().read() };
        [Self::from_bits(w as u16), Self::from_bits((w >> 16) as u16)]
    }
}

/// Scalar conversions: `crate::cvt` (`cvt.f32.f16`, `cvt.rn.f16.f32`, `cvt.rn.bf16.f32`).
mod cvt {
    pub use crate::cvt::{f16_to_f32, f32_to_bf16, f32_to_f16};
}

macro_rules! binop {
    ($tr:ident, $f:ident) => {
        impl<T: Copy + Default + $tr<Output = T>, L: ArrayLayout, L2: ArrayLayout> $tr<Array<T, L2>> for Array<T, L>
        where
            L: SameLayout<L2>,
        {
            type Output = Array<T, L>;
            #[inline(always)]
            fn $f(self, o: Array<T, L2>) -> Array<T, L> {
                self.zip(o, |a, b| a.$f(b))
            }
        }
        impl<T: Copy + Default + $tr<Output = T>, L: ArrayLayout> $tr<T> for Array<T, L> {
            type Output = Array<T, L>;
            #[inline(always)]
            fn $f(self, o: T) -> Array<T, L> {
                self.map(|a| a.$f(o))
            }
        }
    };
}
binop!(Add, add);
binop!(Sub, sub);
binop!(Mul, mul);
binop!(Div, div);

impl<T: Copy + Default + Neg<Output = T>, L: ArrayLayout> Neg for Array<T, L> {
    type Output = Array<T, L>;
    #[inline(always)]
    fn neg(self) -> Array<T, L> {
        self.map(|a| -a)
    }
}

impl<T: Copy + core::fmt::Debug, L: ArrayLayout> core::fmt::Debug for Array<T, L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Array<{}>[", L::NAME)?;
        for i in 0..L::REGS {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{:?}", self.regs.get(i))?;
        }
        write!(f, "]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relative-error bound of [`sigmoid`] documented above.
    fn bound(x: f32) -> f64 {
        2f64.powi(-21) + x.abs() as f64 * 2f64.powi(-23)
    }

    #[test]
    fn sigmoid_and_silu_match_f64_within_the_documented_bound() {
        for i in -4000..=4000 {
            let x = i as f32 * 0.025; // -100 .. 100, through 0
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            let got = sigmoid(x) as f64;
            assert!((got - s).abs() <= bound(x) * s + f64::from(f32::MIN_POSITIVE), "sigmoid({x}) = {got}, f64: {s}");
            let si = x as f64 * s;
            let got = silu(x) as f64;
            assert!((got - si).abs() <= (bound(x) + 2f64.powi(-24)) * si.abs() + f64::from(x.abs() * f32::MIN_POSITIVE), "silu({x}) = {got}, f64: {si}");
        }
        // `.ftz` on the exponential changes no result (the doc's claim).
        for i in -4000..=4000 {
            let x = i as f32 * 0.05; // -200 .. 200: e^-x subnormal from x = 87.4
            let no_ftz = crate::math::F32Ext::rcp_approx(1.0 + crate::math::F32Ext::exp(-x));
            assert_eq!(sigmoid(x).to_bits(), no_ftz.to_bits(), "sigmoid({x})");
        }
        assert_eq!(sigmoid(-100.0), 0.0, "e^100 overflows to inf, rcp(inf) = 0");
        assert_eq!(sigmoid(100.0), 1.0);
        assert_eq!(silu(0.0), 0.0);
        assert!(sigmoid(f32::NAN).is_nan() && silu(f32::NAN).is_nan());
    }

    #[test]
    fn array_sigmoid_and_silu_are_elementwise_and_round_16_bit_elements_once() {
        let a = Array::<f32, Wgmma<64>>::from_fn(|i| i as f32 * 0.5 - 8.0);
        let (s, si) = (a.sigmoid(), a.silu());
        for i in 0..Wgmma::<64>::REGS {
            assert_eq!(s.get(i), sigmoid(a.get(i)));
            assert_eq!(si.get(i), silu(a.get(i)));
        }
        let h = a.cast::<half::f16>().silu();
        for i in 0..Wgmma::<64>::REGS {
            assert_eq!(h.get(i), half::f16::from_f32(silu(a.get(i))), "f16 silu computes in f32 and rounds once");
        }
    }
}
