//! [`Peel`]: 16-byte accesses for row slices at any alignment (the rows
//! of a width that is not a multiple of 16 bytes: row `r` starts at
//! element `r * cols`), the body by 16-byte accesses, the head and tail
//! pieces by element.
//!
//! A slice `src[off .. off + len]` is seen through its *window*: the
//! 16-byte chunks from the aligned address at or below its start, so that
//! window position `p` is slice element `p - m`, with `m = off % P` (`P`
//! elements per chunk: 8 f16 / bf16, 4 f32; the buffers start 16-byte
//! aligned). The registers hold the window with [`Vec16`]'s map (chunk
//! `c = G V s + G j + g` of thread `g` in registers `s P .. s P + P` of
//! piece `j`), so a slice of `len` elements needs `8 G V >= len + m`
//! (the host's shapes leave `P - 1` elements of slack). A chunk wholly
//! inside the slice moves in one 16-byte access; a chunk across an end
//! (at most the first and the last of the slice) element by element, its
//! elements outside the slice not accessed (registers: the fill value).
//!
//! The weights (`gamma`, `beta`: `src[start .. start + len]`, starting at
//! their own alignment `m_w`, 0 in practice) pair with the row's registers
//! ([`Access::load_weights`]): register `p` needs weight window position
//! `p + m_w - m`, so each chunk is two 16-byte chunks of the weights'
//! window (L1 hits: the neighbours' chunks) shifted by `m_w - m` elements
//! with selects (a word shift of at most 3, and a 16-bit funnel shift for
//! an odd shift of 16-bit elements). Loading them element by element would
//! take 8 access instructions per chunk, each touching 4 L1 lines.
//!
//! [`Vec16`]: super::Vec16
use super::access::{f32_of_words, Access, Elem, Pairs, RowF32, VEC};
use kernel_device::array::regs::{opaque_u32, unroll};
use kernel_device::array::GmemSrc;
use kernel_device::gmem::GmemRef;
use kernel_device::prelude::*;
use kernel_device::GmemPtr;

/// 16-byte accesses at any alignment: the slice's body in 16-byte
/// accesses, the chunks across its ends by element (module docs).
pub struct Peel;

/// A chunk: 16 bytes as 4 words (2 elements of 16 bits, or 1 f32, per word).
type Chunk = [u32; 4];

/// A slice seen through its window (module docs): `p` its first element
/// (bounded by the slice on the emulator), `m` its misalignment.
#[derive(Clone, Copy)]
struct Window<T> {
    p: GmemPtr<T>,
    len: usize,
    m: usize,
}

/// The window of `src[off .. off + len]`, after checking the
/// slice (a trap on the GPU, a reported misuse on the emulator) and that
/// its window is 16-byte aligned (the buffer starts 16-byte aligned).
#[inline(always)]
#[track_caller]
fn window<T: Copy>(src: impl GmemSrc<T>, off: usize, len: usize) -> Window<T> {
    let per = 16 / size_of::<T>();
    let m = off % per;
    if len == 0 {
        // Nothing is accessed (a cluster's slice past the row's end).
        return Window { p: src.checked(0, 0), len, m };
    }
    let p = src.checked(off, len);
    assert!((p.addr() - m * size_of::<T>()) % 16 == 0, "norms: a peeled row slice whose buffer does not start 16-byte aligned");
    Window { p, len, m }
}

/// The window's chunk `c` (`c` may be -1: wholly before the slice):
/// elements outside the slice are `fill` (16 or 32 bits). (One result
/// array written element by element on both paths: an array returned
/// from two paths is a selected pointer, which keeps it in local memory.)
#[inline(always)]
fn read_chunk<T: Copy>(w: Window<T>, c: isize, fill: u32) -> Chunk {
    let per = (16 / size_of::<T>()) as isize;
    let e = c * per - w.m as isize;
    let mut out = [0u32; 4];
    if e >= 0 && e as usize + per as usize <= w.len {
        // SAFETY: the 16 bytes lie in the checked slice; 16-byte aligned (checked window).
        let v = unsafe { w.p.add(e as usize).cast::<Aligned>().read().0 };
        unroll(4, |k| out[k] = v[k]);
    } else if size_of::<T>() == 2 {
        unroll(8, |i| {
            let k = e + i as isize;
            // SAFETY: element `k` lies in the checked slice.
            let h = if k >= 0 && (k as usize) < w.len { u32::from(unsafe { w.p.add(k as usize).cast::<u16>().read() }) } else { fill & 0xffff };
            out[i / 2] |= h << (16 * (i % 2));
        });
    } else {
        unroll(4, |i| {
            let k = e + i as isize;
            // SAFETY: as above.
            out[i] = if k >= 0 && (k as usize) < w.len { unsafe { w.p.add(k as usize).cast::<u32>().read() } } else { fill };
        });
    }
    out
}

/// Writes the elements of chunk `c` (`c >= 0`) of the window that lie in the slice.
#[inline(always)]
fn write_chunk<T: Copy>(w: Window<T>, c: usize, v: Chunk) {
    let per = 16 / size_of::<T>();
    let e = (c * per) as isize - w.m as isize;
    if e >= 0 && e as usize + per <= w.len {
        // SAFETY: as in `read_chunk`.
        unsafe { w.p.add(e as usize).cast::<Aligned>().write(Aligned(v)) };
        return;
    }
    unroll(per, |i| {
        let k = e + i as isize;
        if k >= 0 && (k as usize) < w.len {
            // SAFETY: element `k` lies in the checked slice.
            unsafe {
                if size_of::<T>() == 2 {
                    w.p.add(k as usize).cast::<u16>().write((v[i / 2] >> (16 * (i % 2))) as u16)
                } else {
                    w.p.add(k as usize).cast::<u32>().write(v[i])
                }
            }
        }
    });
}

/// A 16-byte access.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Aligned(Chunk);

/// Elements `s .. s + P` of the chunks `a`, `b` side by side (`s < P`, the
/// same in every thread of a row): `P` per chunk of `T`.
#[inline(always)]
fn shift<T>(a: Chunk, b: Chunk, s: usize) -> Chunk {
    let x = [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
    let (ws, half) = if size_of::<T>() == 2 { (s / 2, s % 2 == 1) } else { (s, false) };
    // Selects of opaque values: a select of two elements of one array
    // becomes (InstCombine) an element at a selected index, which puts the
    // array in local memory.
    let sel = |c: bool, a: u32, b: u32| {
        let (a, b) = (opaque_u32(a), opaque_u32(b));
        if c {
            a
        } else {
            b
        }
    };
    let (mut y, mut z, mut out) = ([0u32; 6], [0u32; 5], [0u32; 4]);
    unroll(6, |i| y[i] = sel(ws & 2 != 0, x[i + 2], x[i]));
    unroll(5, |i| z[i] = sel(ws & 1 != 0, y[i + 1], y[i]));
    unroll(4, |i| out[i] = if half { (z[i] >> 16) | (z[i + 1] << 16) } else { z[i] });
    out
}

/// Calls `f(s, j, c)` for each chunk `c` of the thread's registers
/// (`s P .. s P + P` of piece `j`).
#[inline(always)]
fn each_chunk<T, const G: usize, const V: usize>(mut f: impl FnMut(usize, usize, usize)) {
    // One level of closures (LLVM inlines a closure's calls one by one,
    // each against its cost: a closure over all `V` chunks was too big and
    // stayed a call, its registers in local memory).
    let g = thread_linear() as usize % G;
    unroll(size_of::<T>() / 2 * V, |k| {
        let (s, j) = (k / V, k % V);
        f(s, j, G * V * s + G * j + g)
    });
}

/// The fill value's bits: twice for 16-bit elements.
#[inline(always)]
fn fill_bits<T: Elem>(fill: f32) -> u32 {
    let b = T::from_f32(fill);
    if size_of::<T>() == 2 {
        // SAFETY: a 16-bit element's bits.
        let h = unsafe { core::mem::transmute_copy::<T, u16>(&b) } as u32;
        h | (h << 16)
    } else {
        fill.to_bits()
    }
}

/// The thread's chunks of `src[off .. off + len]` (`load` of the module
/// docs' map) as `f(s, j, chunk)`.
#[inline(always)]
#[track_caller]
fn load_chunks<T: Elem, const G: usize, const V: usize>(src: impl GmemSrc<T>, off: usize, len: usize, fill: f32, mut f: impl FnMut(usize, usize, Chunk)) {
    let fb = fill_bits::<T>(fill);
    let w = window(src, off, len);
    each_chunk::<T, G, V>(|s, j, c| f(s, j, read_chunk(w, c as isize, fb)));
}

/// The thread's chunks of the weights `src[off .. off + len]` with the map
/// of the row slice at `row_off` (module docs), as `f(s, j, chunk)`
/// (elements outside the slice: 0).
#[inline(always)]
#[track_caller]
fn load_weight_chunks<T: Elem, const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, row_off: usize, mut f: impl FnMut(usize, usize, Chunk)) {
    let per = 16 / size_of::<T>();
    let w = window(src, off, len);
    // Row window position `p` is weight window position `p + d`.
    let d = w.m as isize - (row_off % per) as isize;
    let (q, s) = (d.div_euclid(per as isize), d.rem_euclid(per as isize) as usize);
    each_chunk::<T, G, V>(|sp, j, c| {
        let a = read_chunk(w, c as isize + q, 0);
        let mut b = a;
        if s != 0 {
            let r = read_chunk(w, c as isize + q + 1, 0);
            unroll(4, |k| b[k] = r[k]);
        }
        f(sp, j, shift::<T>(a, b, s))
    });
}

/// Registers whose window position is outside `m .. m + len` (the
/// slice at `off`) set to `fill`; `regs(s, j)` the chunk's registers.
#[inline(always)]
fn mask_window<const G: usize, const V: usize, const P: usize>(a: RowF32<G, V>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
    let m = off % P;
    let mut out = a;
    let g = thread_linear() as usize % G;
    unroll(VEC / P, |s| {
        unroll(V, |j| {
            let c = G * V * s + G * j + g;
            unroll(P, |i| {
                let p = c * P + i;
                if p < m || p >= m + len {
                    out.regs.0[j][s * P + i] = fill;
                }
            })
        })
    });
    out
}

impl<T: Pairs> Access<T> for Peel {
    const PER_ACCESS: usize = VEC;
    const STORE_BY_PIECES: bool = false;
    type Raw<const G: usize, const V: usize> = [[u32; 4]; V];
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, fill: f32) -> Self::Raw<G, V> {
        let mut out = [[0u32; 4]; V];
        load_chunks::<T, G, V>(src, off, len, fill, |_, j, c| out[j] = c);
        out
    }
    #[inline(always)]
    #[track_caller]
    fn load_weights<const G: usize, const V: usize>(src: GmemRef<T>, off: usize, len: usize, row_off: usize) -> Self::Raw<G, V> {
        let mut out = [[0u32; 4]; V];
        load_weight_chunks::<T, G, V>(src, off, len, row_off, |_, j, c| out[j] = c);
        out
    }
    #[inline(always)]
    fn f32<const G: usize, const V: usize>(r: Self::Raw<G, V>) -> RowF32<G, V> {
        f32_of_words::<T, G, V>(r)
    }
    #[inline(always)]
    fn refresh<const G: usize, const V: usize>(r: Self::Raw<G, V>) -> Self::Raw<G, V> {
        <super::Vec16 as Access<T>>::refresh::<G, V>(r)
    }
    #[inline(always)]
    #[track_caller]
    fn store<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize) {
        <Self as Access<T>>::store_pieces(a, dst, off, len, 0, V)
    }
    #[inline(always)]
    fn mask_beyond<const G: usize, const V: usize>(a: RowF32<G, V>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
        mask_window::<G, V, VEC>(a, off, len, fill)
    }
    #[inline(always)]
    #[track_caller]
    fn store_pieces<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<T>, off: usize, len: usize, j0: usize, j1: usize) {
        if len == 0 {
            return;
        }
        let w = window(dst, off, len);
        each_chunk::<T, G, V>(|_, j, c| {
            if j0 <= j && j < j1 {
                let mut v: Chunk = [0; 4];
                unroll(4, |k| v[k] = T::pack(a.regs.0[j][2 * k], a.regs.0[j][2 * k + 1]));
                write_chunk(w, c, v);
            }
        });
    }
    #[inline(always)]
    #[track_caller]
    fn load_f32<const G: usize, const V: usize>(src: Gmem<f32>, off: usize, len: usize) -> RowF32<G, V> {
        by_element::<G, V, VEC>(src, off, len)
    }
    #[inline(always)]
    #[track_caller]
    fn store_f32<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize) {
        store_by_element::<G, V, VEC>(a, dst, off, len)
    }
}

impl Access<f32> for Peel {
    const PER_ACCESS: usize = 4;
    const STORE_BY_PIECES: bool = false;
    type Raw<const G: usize, const V: usize> = RowF32<G, V>;
    #[inline(always)]
    #[track_caller]
    fn load<const G: usize, const V: usize>(src: GmemRef<f32>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
        let mut out = RowF32::<G, V>::splat(fill);
        load_chunks::<f32, G, V>(src, off, len, fill, |s, j, c| unroll(4, |i| out.regs.0[j][4 * s + i] = f32::from_bits(c[i])));
        out
    }
    #[inline(always)]
    #[track_caller]
    fn load_weights<const G: usize, const V: usize>(src: GmemRef<f32>, off: usize, len: usize, row_off: usize) -> RowF32<G, V> {
        let mut out = RowF32::<G, V>::splat(0.0);
        load_weight_chunks::<f32, G, V>(src, off, len, row_off, |s, j, c| unroll(4, |i| out.regs.0[j][4 * s + i] = f32::from_bits(c[i])));
        out
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
    fn store<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize) {
        <Self as Access<f32>>::store_pieces(a, dst, off, len, 0, V)
    }
    #[inline(always)]
    fn mask_beyond<const G: usize, const V: usize>(a: RowF32<G, V>, off: usize, len: usize, fill: f32) -> RowF32<G, V> {
        mask_window::<G, V, 4>(a, off, len, fill)
    }
    #[inline(always)]
    #[track_caller]
    fn store_pieces<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize, j0: usize, j1: usize) {
        if len == 0 {
            return;
        }
        let w = window(dst, off, len);
        each_chunk::<f32, G, V>(|s, j, c| {
            if j0 <= j && j < j1 {
                let mut v: Chunk = [0; 4];
                unroll(4, |i| v[i] = a.regs.0[j][4 * s + i].to_bits());
                write_chunk(w, c, v);
            }
        });
    }
    #[inline(always)]
    #[track_caller]
    fn load_f32<const G: usize, const V: usize>(src: Gmem<f32>, off: usize, len: usize) -> RowF32<G, V> {
        by_element::<G, V, 4>(src, off, len)
    }
    #[inline(always)]
    #[track_caller]
    fn store_f32<const G: usize, const V: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize) {
        store_by_element::<G, V, 4>(a, dst, off, len)
    }
}

/// The window position of register `(j, s P + i)` of thread `g`'s minus
/// the misalignment `m`: the element it holds (negative: none).
#[inline(always)]
fn elem<const G: usize, const V: usize, const P: usize>(s: usize, j: usize, i: usize, m: usize) -> isize {
    let g = thread_linear() as usize % G;
    ((G * V * s + G * j + g) * P + i) as isize - m as isize
}

/// An f32 buffer's `src[off .. off + len]` with the map of the row slice
/// at `off` of `P`-element chunks, element by element (the backward's
/// partial sums; the backward uses [`Single`](super::Single), not this).
#[inline(always)]
#[track_caller]
fn by_element<const G: usize, const V: usize, const P: usize>(src: Gmem<f32>, off: usize, len: usize) -> RowF32<G, V> {
    let mut out = RowF32::<G, V>::splat(0.0);
    if len > 0 {
        let p = src.checked(off, len);
        unroll(VEC / P, |s| {
            unroll(V, |j| {
                unroll(P, |i| {
                    let e = elem::<G, V, P>(s, j, i, off % P);
                    if e >= 0 && (e as usize) < len {
                        // SAFETY: in the checked slice.
                        out.regs.0[j][s * P + i] = unsafe { p.add(e as usize).read() };
                    }
                })
            })
        });
    }
    out
}

/// Stores `a` to an f32 buffer with the map of [`by_element`].
#[inline(always)]
#[track_caller]
fn store_by_element<const G: usize, const V: usize, const P: usize>(a: RowF32<G, V>, dst: Gmem<f32>, off: usize, len: usize) {
    if len > 0 {
        let p = dst.checked(off, len);
        unroll(VEC / P, |s| {
            unroll(V, |j| {
                unroll(P, |i| {
                    let e = elem::<G, V, P>(s, j, i, off % P);
                    if e >= 0 && (e as usize) < len {
                        // SAFETY: in the checked slice.
                        unsafe { p.add(e as usize).write(a.regs.0[j][s * P + i]) };
                    }
                })
            })
        });
    }
}
