//! How a row moves between global memory and registers: the element types
//! ([`Elem`]), the accesses ([`Vec16`], [`Single`]) and what stays in
//! registers between the passes ([`InF32`], [`AsLoaded`]).
//!
//! A group of `G` threads holds a row slice of up to `8 G V` elements as
//! [`RowF32<G, V>`] (`Array<f32, Strided<G, V, 8>>`: `8 V` f32 per
//! thread). The reductions do not care which element a register holds;
//! the access decides it, and loads `x`, `gamma`, `beta` and stores `y`
//! with the same map, so every elementwise step pairs the right elements:
//!
//! | access | types | slices | per access | register `(j, i)` of thread `g` |
//! |---|---|---|---|---|
//! | [`Vec16`] | f16, bf16 | 16-byte aligned start, `len % 8 == 0` | one 16-byte `ld`/`st` per 8 elements | element `(G j + g) 8 + i` |
//! | [`Vec16`] | f32 | 16-byte aligned start, `len % 4 == 0` | one 16-byte access per 4 elements, the slice in 2 parts | element `4 G V s + (G j + g) 4 + i % 4`, `s = i / 4` |
//! | [`Single`] | f16, bf16, f32 | any start, any `len` | one element | element `G V i + G j + g` |
//!
//! In every case one access instruction of the group touches `G`
//! consecutive accesses (coalesced), and accesses at or beyond the slice's
//! `len` are not made (masked: their registers hold a fill value).
//! [`Single`] serves rows whose starts are not 16-byte aligned (an odd
//! width's rows: row `r` starts at element `r * cols`): no access ever
//! crosses the row's end or needs an alignment the row lacks.
use kernel_device::array::regs::{opaque_u32, unroll};
use kernel_device::array::{Array, GmemSrc, Scalar, Strided};
use kernel_device::gmem::GmemRef;
use kernel_device::prelude::*;
use kernel_device::{bf16, f16, GmemPtr};

/// Elements per register piece of a row: 8 (16 bytes of f16 / bf16).
pub const VEC: usize = 8;

/// A row slice's registers in f32: `8 V` per thread of a group of `G`.
pub type RowF32<const G: usize, const V: usize> = Array<f32, Strided<G, V, VEC>>;

/// The element types of the norms: f16, bf16 and f32 (`x`, `y`, `gamma`
/// and `beta` all of one type; statistics and arithmetic in f32).
pub trait Elem: Scalar {}
impl Elem for f16 {}
impl Elem for bf16 {}
impl Elem for f32 {}

/// The 16-bit element types, whose pairs are 32-bit words (the 16-byte
/// accesses of [`Vec16`] and the fused norms move words).
pub trait Pairs: Elem {
    /// The two elements of a word (`lo` in bits 0..16) as f32.
    fn unpack(w: u32) -> [f32; 2];
    /// Two f32 rounded to a word (`cvt.rn.{f16x2,bf16x2}.f32`).
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        Self::pair_word(lo, hi).unwrap_or(0)
    }
}
impl Pairs for f16 {
    #[inline(always)]
    fn unpack(w: u32) -> [f32; 2] {
        [Scalar::to_f32(f16::from_bits(w as u16)), Scalar::to_f32(f16::from_bits((w >> 16) as u16))]
    }
}
impl Pairs for bf16 {
    #[inline(always)]
    fn unpack(w: u32) -> [f32; 2] {
        // A bf16 is the top half of an f32.
        [f32::from_bits(w << 16), f32::from_bits(w & 0xffff_0000)]
    }
}

/// A row's 8-element pieces of a 16-bit type as words: `Strided<G, V, 4>` of `u32`.
pub type Words<const G: usize, const V: usize> = Array<u32, Strided<G, V, 4>>;

/// The words of `src[off .. off + len]` (pieces beyond `len`: `fill`, twice per word).
#[inline(always)]
#[track_caller]
pub(crate) fn load_words<T: Pairs, const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> Words<G, V> {
    // SAFETY: the same memory as 16-bit pairs; `off` and `len` are even.
    let w = unsafe { GmemRef::<u32>::from_ptr(src.ptr().cast(), src.len() / 2) };
    let f = T::pack(fill, fill);
    Words::<G, V>::load_gmem_masked(w, off / 2, len / 2, f)
}

/// The f32 row of 16-bit words.
#[inline(always)]
pub(crate) fn f32_of_words<T: Pairs, const G: usize, const V: usize>(w: [[u32; 4]; V]) -> RowF32<G, V> {
    let mut out = RowF32::<G, V>::splat(0.0);
    unroll(V, |j| {
        unroll(4, |k| {
            let [a, b] = T::unpack(w[j][k]);
            out.regs.0[j][2 * k] = a;
            out.regs.0[j][2 * k + 1] = b;
        })
    });
    out
}

/// Rounds `a` to `T` by pairs (`cvt.rn.{f16x2,bf16x2}.f32`) and stores
/// its pieces below `len` to `dst[off ..]` as words.
#[inline(always)]
#[track_caller]
fn store_words<T: Pairs, const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize) {
    let mut w = Words::<G, V>::splat(0);
    unroll(V, |j| unroll(4, |k| w.regs.0[j][k] = T::pack(a.regs.0[j][2 * k], a.regs.0[j][2 * k + 1])));
    // SAFETY: the same memory as 16-bit pairs; `off` and `len` are even.
    let d = unsafe { Gmem::<u32>::from_ptr(dst.ptr().cast(), dst.len() / 2) };
    w.store_gmem_masked(d, off / 2, len / 2);
}

/// `P` elements as one access: one 16-byte `ld`/`st` when they make 16
/// bytes (4 f32), else one element.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct A16<X>(X);

/// Reads `P` elements at `p`.
///
/// # Safety
/// `p` is valid for `P` elements and, when they are 16 bytes, 16-byte aligned.
#[inline(always)]
unsafe fn read_p<T: Copy, const P: usize>(p: GmemPtr<T>) -> [T; P] {
    // SAFETY: the caller's contract (bounds, alignment and races checked
    // on the emulator by `Ptr::read`).
    unsafe {
        if P * size_of::<T>() == 16 {
            p.cast::<A16<[T; P]>>().read().0
        } else {
            p.cast::<[T; P]>().read()
        }
    }
}
/// Writes `P` elements at `p`.
///
/// # Safety
/// As [`read_p`], for writing.
#[inline(always)]
unsafe fn write_p<T: Copy, const P: usize>(p: GmemPtr<T>, v: [T; P]) {
    // SAFETY: the caller's contract (checked on the emulator by `Ptr::write`).
    unsafe {
        if P * size_of::<T>() == 16 {
            p.cast::<A16<[T; P]>>().write(A16(v))
        } else {
            p.cast::<[T; P]>().write(v)
        }
    }
}

/// The accesses of a slice of `len` elements with `P` per access (the map
/// of the module docs' table: access `(s, j)` of thread `g` is at element
/// `(G V s + G j + g) P`, into registers `s P .. s P + P` of piece `j`):
/// calls `f(s, j, e)` with `e` the access's element for those below `len`.
#[inline(always)]
fn each_access<const G: usize, const V: usize, const P: usize>(len: usize, mut f: impl FnMut(usize, usize, usize)) {
    let g = thread_linear() as usize % G;
    unroll(VEC / P, |s| {
        unroll(V, |j| {
            let e = (G * V * s + G * j + g) * P;
            if e < len {
                f(s, j, e)
            }
        })
    });
}

/// The start of `src[off .. off + len]` after checking it (a trap on the
/// GPU, a reported misuse on the emulator), and its alignment to `P`
/// elements when they make 16 bytes.
#[inline(always)]
#[track_caller]
fn slice_start<T: Copy, const P: usize>(src: impl GmemSrc<T>, off: usize, len: usize) -> GmemPtr<T> {
    let p = src.checked(off, len);
    assert!(P * size_of::<T>() != 16 || p.addr() % 16 == 0, "norms: a 16-byte access at an address that is not a multiple of 16 (rows of 16-byte accesses must start aligned)");
    p
}

/// `src[off .. off + len]` in f32, `P` elements per access (one bounds
/// check for the slice; elements beyond `len`: `fill`, not read). For
/// [`Vec16`] of f32.
#[inline(always)]
#[track_caller]
fn load_parts<T: Elem, const G: usize, const V: usize, const P: usize>(src: impl GmemSrc<T>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
    let mut out = RowF32::<G, V>::splat(fill);
    if len > 0 {
        let p = slice_start::<T, P>(src, off, len);
        each_access::<G, V, P>(len, |s, j, e| {
            // SAFETY: `e + P <= len` (`len` is a multiple of `P`), inside the checked slice; aligned (checked).
            let v = unsafe { read_p::<T, P>(p.add(e)) };
            unroll(P, |i| out.regs.0[j][s * P + i] = v[i].to_f32());
        });
    }
    out
}

/// Rounds `a` to `T` (`cvt.rn`) and stores its elements below `len` to
/// `dst[off ..]` (the map of [`load_parts`]).
#[inline(always)]
#[track_caller]
fn store_parts<T: Elem, const G: usize, const V: usize, const P: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize) {
    if len > 0 {
        let p = slice_start::<T, P>(dst, off, len);
        each_access::<G, V, P>(len, |s, j, e| {
            let mut v = [T::default(); P];
            unroll(P, |i| v[i] = T::from_f32(a.regs.0[j][s * P + i]));
            // SAFETY: as in `load_parts`.
            unsafe { write_p::<T, P>(p.add(e), v) };
        });
    }
}

/// As [`store_parts`], only the pieces `j0 .. j1` (one chunk of a store:
/// see [`Access::store_pieces`]).
#[inline(always)]
#[track_caller]
fn store_piece_range<T: Elem, const G: usize, const V: usize, const P: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize, j0: usize, j1: usize) {
    if len > 0 {
        let p = slice_start::<T, P>(dst, off, len);
        each_access::<G, V, P>(len, |s, j, e| {
            if j0 <= j && j < j1 {
                let mut v = [T::default(); P];
                unroll(P, |i| v[i] = T::from_f32(a.regs.0[j][s * P + i]));
                // SAFETY: as in `load_parts`.
                unsafe { write_p::<T, P>(p.add(e), v) };
            }
        });
    }
}

/// Elements of part `s` of a slice of `len` split into parts of `P G V`
/// elements (`Strided<G, V, P>` each): 0 for a part wholly beyond `len`.
#[inline(always)]
const fn part_len<const G: usize, const V: usize, const P: usize>(s: usize, len: usize) -> usize {
    let n = P * G * V;
    let l = len.saturating_sub(s * n);
    if l < n {
        l
    } else {
        n
    }
}

/// As [`load_parts`], as `8 / P` arrays `Strided<G, V, P>` (each part's
/// range checked on its own; a part wholly beyond `len` is not read: its
/// range may lie past `src`). For [`Single`]: ptxas keeps these in fewer
/// registers than [`load_parts`]'s one check (a full part reads without
/// per-element predicates).
#[inline(always)]
#[track_caller]
fn load_by_parts<T: Elem, const G: usize, const V: usize, const P: usize>(src: impl GmemSrc<T>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
    let mut out = RowF32::<G, V>::splat(fill);
    unroll(VEC / P, |s| {
        let l = part_len::<G, V, P>(s, len);
        if l > 0 {
            let a = Array::<T, Strided<G, V, P>>::load_gmem_masked(src, off + s * P * G * V, l, T::from_f32(fill));
            unroll(V, |j| unroll(P, |i| out.regs.0[j][s * P + i] = a.regs.0[j][i].to_f32()));
        }
    });
    out
}

/// As [`store_parts`], by parts (see [`load_by_parts`]).
#[inline(always)]
#[track_caller]
fn store_by_parts<T: Elem, const G: usize, const V: usize, const P: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize) {
    unroll(VEC / P, |s| {
        let l = part_len::<G, V, P>(s, len);
        if l > 0 {
            let mut p = Array::<T, Strided<G, V, P>>::splat(T::default());
            unroll(V, |j| unroll(P, |i| p.regs.0[j][i] = T::from_f32(a.regs.0[j][s * P + i])));
            p.store_gmem_masked(dst, off + s * P * G * V, l);
        }
    });
}

/// `a` with the registers of elements at or beyond `len` set to `fill`
/// (the map of [`load_parts`]; `len` a multiple of `P`).
#[inline(always)]
fn mask_parts<const G: usize, const V: usize, const P: usize>(a: RowF32<G, V>, len: usize, fill: f32) -> RowF32<G, V> {
    let mut out = RowF32::<G, V>::splat(fill);
    each_access::<G, V, P>(len, |s, j, _| unroll(P, |i| out.regs.0[j][s * P + i] = a.regs.0[j][s * P + i]));
    out
}

/// How a row slice of `T` is read and written (the module docs' table).
pub trait Access<T: Elem>: 'static {
    /// Elements per access: 8 (16-bit [`Vec16`]), 4 (f32 [`Vec16`]), 1 ([`Single`]).
    const PER_ACCESS: usize;
    /// Whether the 512-thread rows store `y` by pieces
    /// ([`Access::store_pieces`] with the weights loaded per piece, to save
    /// registers): not for [`Peel`](super::Peel), whose shifted weights
    /// per piece stay calls (LLVM does not inline the closures), their
    /// registers in local memory.
    const STORE_BY_PIECES: bool = true;
    /// The registers of a slice as loaded: 16-bit words for [`Vec16`] of
    /// f16 / bf16 (half the registers of f32), f32 otherwise.
    type Raw<const G: usize, const V: usize>: Copy;
    /// `src[off .. off + len]` (elements beyond `len`: `fill`).
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> Self::Raw<G, V>;
    /// The loaded registers in f32.
    fn f32<const G: usize, const V: usize>(r: Self::Raw<G, V>) -> RowF32<G, V>;
    /// The registers as a new value ([`opaque_u32`]) where later
    /// conversions must not be merged with earlier ones; the identity for
    /// f32 registers.
    fn refresh<const G: usize, const V: usize>(r: Self::Raw<G, V>) -> Self::Raw<G, V>;
    /// Rounds `a` to `T` and stores its elements below `len` to `dst[off ..]`.
    fn store<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize);
    /// `src[off .. off + len]` (weights: elements beyond `len` are 0)
    /// with the map of the row slice at `row_off` of `x`, so that they
    /// pair with its registers; the same as [`Access::load`] for the
    /// accesses whose map does not depend on the slice's alignment.
    #[inline(always)]
    #[track_caller]
    fn load_weights<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, row_off: usize) -> Self::Raw<G, V> {
        let _ = row_off;
        Self::load::<G, V>(src, off, len, 0.0)
    }
    /// `a` with the elements outside the slice (at `off`, `len` long) set
    /// to `fill`.
    fn mask_beyond<const G: usize, const V: usize>(a: RowF32<G, V>, off: usize, len: usize, fill: f32) -> RowF32<G, V>;
    /// As [`Access::store`], only the pieces `j0 .. j1` of `a` (`j0 <= j1 <=
    /// V`, constants after inlining): the other pieces of `a` are not
    /// needed, so what computes them is dead code.
    fn store_pieces<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize, j0: usize, j1: usize);
    /// `src[off .. off + len]` of an f32 buffer with this access's map (the
    /// backward's f32 partial sums, which pair with the row's registers):
    /// elements beyond `len` are 0.
    fn load_f32<const G: usize, const V: usize>(src: Gmem<f32>, off: usize, len: usize) -> RowF32<G, V>;
    /// Stores `a`'s elements below `len` to the f32 buffer `dst[off ..]`
    /// with this access's map.
    fn store_f32<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize);
}

/// 16-byte vector accesses: 8 f16 / bf16 or 4 f32 per access. The slice
/// starts 16-byte aligned and its length is a multiple of 8 (16-bit) or 4
/// (f32) elements.
pub struct Vec16;
/// One element per access: any start, any length.
pub struct Single;

impl<T: Pairs> Access<T> for Vec16 {
    const PER_ACCESS: usize = VEC;
    type Raw<const G: usize, const V: usize> = [[u32; 4]; V];
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> Self::Raw<G, V> {
        load_words::<T, G, V>(src, off, len, fill).regs.0
    }
    #[inline(always)]
    fn f32<const G: usize, const V: usize>(r: Self::Raw<G, V>) -> RowF32<G, V> {
        f32_of_words::<T, G, V>(r)
    }
    #[inline(always)]
    fn refresh<const G: usize, const V: usize>(r: Self::Raw<G, V>) -> Self::Raw<G, V> {
        let mut out = r;
        unroll(V, |j| unroll(4, |k| out[j][k] = opaque_u32(r[j][k])));
        out
    }
    #[inline(always)]
    #[track_caller]
    fn store<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize) {
        store_words::<T, G, V>(a, dst, off, len)
    }
    #[inline(always)]
    fn mask_beyond<const G: usize, const V: usize>(a: RowF32<G, V>, _off: usize, len: usize, fill: f32) -> RowF32<G, V> {
        a.mask_beyond(len, fill)
    }
    #[inline(always)]
    #[track_caller]
    fn store_pieces<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize, j0: usize, j1: usize) {
        if len == 0 {
            return;
        }
        // SAFETY: the same memory as 16-bit pairs; `off` and `len` are even.
        let d = unsafe { Gmem::<u32>::from_ptr(dst.ptr().cast(), dst.len() / 2) };
        let p = slice_start::<u32, 4>(d, off / 2, len / 2);
        let g = thread_linear() as usize % G;
        unroll(V, |j| {
            let e = (G * j + g) * VEC;
            if j0 <= j && j < j1 && e < len {
                let w: [u32; 4] = core::array::from_fn(|k| T::pack(a.regs.0[j][2 * k], a.regs.0[j][2 * k + 1]));
                // SAFETY: the piece's 8 elements lie in the checked slice (`len % 8 == 0`); 16-byte aligned (checked start, `e % 8 == 0`).
                unsafe { write_p::<u32, 4>(p.add(e / 2), w) };
            }
        });
    }
    #[inline(always)]
    #[track_caller]
    fn load_f32<const G: usize, const V: usize>(src: Gmem<f32>, off: usize, len: usize) -> RowF32<G, V> {
        // The 16-bit map (element `(G j + g) 8 + i`) is `Strided<G, V, 8>`'s own.
        if len == 0 {
            return RowF32::<G, V>::splat(0.0);
        }
        RowF32::<G, V>::load_gmem_masked(src, off, len, 0.0)
    }
    #[inline(always)]
    #[track_caller]
    fn store_f32<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize) {
        if len > 0 {
            a.store_gmem_masked(dst, off, len);
        }
    }
}

/// The accesses whose registers are f32 as loaded: `P` elements per
/// access, loaded and stored by `$load` / `$store`.
macro_rules! f32_access {
    ($(impl$(<$t:ident: Elem>)? Access<$ty:ty> for $a:ty, $p:literal, $load:ident, $store:ident;)*) => {$(
        impl$(<$t: Elem>)? Access<$ty> for $a {
            const PER_ACCESS: usize = $p;
            type Raw<const G: usize, const V: usize> = RowF32<G, V>;
            #[inline(always)]
            #[track_caller]
            fn load<const G: usize, const V: usize>(src: GmemRef<$ty>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
                $load::<$ty, G, V, $p>(src, off, len, fill)
            }
            #[inline(always)]
            fn f32<const G: usize, const V: usize>(r: RowF32<G, V>) -> RowF32<G, V> {
                r
            }
            #[inline(always)]
            fn refresh<const G: usize, const V: usize>(r: RowF32<G, V>) -> RowF32<G, V> {
                r
            }
            #[inline(always)]
            #[track_caller]
            fn store<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<$ty>, off: usize, len: usize) {
                $store::<$ty, G, V, $p>(a, dst, off, len)
            }
            #[inline(always)]
            fn mask_beyond<const G: usize, const V: usize>(a: RowF32<G, V>, _off: usize, len: usize, fill: f32) -> RowF32<G, V> {
                mask_parts::<G, V, $p>(a, len, fill)
            }
            #[inline(always)]
            #[track_caller]
            fn store_pieces<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<$ty>, off: usize, len: usize, j0: usize, j1: usize) {
                store_piece_range::<$ty, G, V, $p>(a, dst, off, len, j0, j1)
            }
            #[inline(always)]
            #[track_caller]
            fn load_f32<const G: usize, const V: usize>(src: Gmem<f32>, off: usize, len: usize) -> RowF32<G, V> {
                $load::<f32, G, V, $p>(src, off, len, 0.0)
            }
            #[inline(always)]
            #[track_caller]
            fn store_f32<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize) {
                $store::<f32, G, V, $p>(a, dst, off, len)
            }
        }
    )*};
}
f32_access! {
    impl Access<f32> for Vec16, 4, load_parts, store_parts;
    impl<T: Elem> Access<T> for Single, 1, load_by_parts, store_by_parts;
}

/// How a row stays in registers between its passes.
pub trait Keep<T: Elem, A: Access<T>>: 'static {
    /// The registers of a row slice of `Strided<G, V, 8>`.
    type Row<const G: usize, const V: usize>: Copy;
    /// The slice, loaded (elements beyond `len`: `fill`).
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> Self::Row<G, V>;
    /// The slice in f32.
    fn f32<const G: usize, const V: usize>(r: Self::Row<G, V>) -> RowF32<G, V>;
    /// The slice as a new value ([`Access::refresh`]).
    fn refresh<const G: usize, const V: usize>(r: Self::Row<G, V>) -> Self::Row<G, V>;
}
/// Converted to f32 at the load: no conversion at the later uses.
pub struct InF32;
/// As loaded ([`Access::Raw`]): for 16-bit [`Vec16`] rows, 32-bit words of
/// two elements, half the registers of f32, converted at each use; the
/// same as [`InF32`] for the others.
pub struct AsLoaded;
impl<T: Elem, A: Access<T>> Keep<T, A> for InF32 {
    type Row<const G: usize, const V: usize> = RowF32<G, V>;
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
        A::f32::<G, V>(A::load::<G, V>(src, off, len, fill))
    }
    #[inline(always)]
    fn f32<const G: usize, const V: usize>(r: RowF32<G, V>) -> RowF32<G, V> {
        r
    }
    #[inline(always)]
    fn refresh<const G: usize, const V: usize>(r: RowF32<G, V>) -> RowF32<G, V> {
        r
    }
}
impl<T: Elem, A: Access<T>> Keep<T, A> for AsLoaded {
    type Row<const G: usize, const V: usize> = A::Raw<G, V>;
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> A::Raw<G, V> {
        A::load::<G, V>(src, off, len, fill)
    }
    #[inline(always)]
    fn f32<const G: usize, const V: usize>(r: A::Raw<G, V>) -> RowF32<G, V> {
        A::f32::<G, V>(r)
    }
    #[inline(always)]
    fn refresh<const G: usize, const V: usize>(r: A::Raw<G, V>) -> A::Raw<G, V> {
        A::refresh::<G, V>(r)
    }
}

/// The fused norms' rows (16-bit [`Vec16`]), made from the words of `x + residual`.
pub trait FromWords<T: Pairs>: Keep<T, Vec16> {
    fn from_words<const G: usize, const V: usize>(w: Words<G, V>) -> Self::Row<G, V>;
}
impl<T: Pairs> FromWords<T> for InF32 {
    #[inline(always)]
    fn from_words<const G: usize, const V: usize>(w: Words<G, V>) -> RowF32<G, V> {
        f32_of_words::<T, G, V>(w.regs.0)
    }
}
impl<T: Pairs> FromWords<T> for AsLoaded {
    #[inline(always)]
    fn from_words<const G: usize, const V: usize>(w: Words<G, V>) -> [[u32; 4]; V] {
        w.regs.0
    }
}
