//! The register layouts of [`Array`](super::Array): which thread of the
//! warpgroup holds which element in which register (Pallas:MGPU's
//! `plgpu.Layout`, seeds/mosaic_gpu_reference.md "Array layouts").
//!
//! Thread `t` of the warpgroup (`0..128`), warp `w = t / 32`, lane
//! `l = t % 32`; register `i` of `0..REGS`:
//!
//! | layout | logical shape | `REGS` | register `i` of thread `t` holds |
//! |---|---|---|---|
//! | [`Wgmma<N>`] | `64 x N` | `N / 2` | `(16 w + l / 4 + 8 (p % 2), 8 (p / 2) + 2 (l % 4) + i % 2)`, `p = i / 2` |
//! | [`WgmmaRow`] | `64` (one per row of a `Wgmma`) | 2 | row `16 w + l / 4 + 8 i` |
//! | [`WgmmaCol<N>`] | `N` (one per column of a `Wgmma<N>`) | `N / 4` | column `8 (i / 2) + 2 (l % 4) + i % 2` |
//! | [`WgStrided<VECS, VEC>`] | `128 * VECS * VEC` | `VECS * VEC` | element `(128 (i / VEC) + t) * VEC + i % VEC` |
//! | [`Strided<THREADS, VECS, VEC>`] | `THREADS * VECS * VEC` | `VECS * VEC` | element `(THREADS (i / VEC) + g) * VEC + i % VEC`, `g` the thread's index in its group of `THREADS` |
//! | [`WgSplat`] | any | 1 | the one value every thread holds |
//!
//! `Wgmma<N>` is the wgmma accumulator's fragment (PTX ISA §9.7.15.5.1,
//! "Matrix fragments for wgmma .m64nNk16", D) and the layout of
//! [`crate::wgmma::Acc`]. Reducing a `Wgmma<N>` along its columns gives a
//! `WgmmaRow` (one value per row: the 4 lanes of a quad hold the same
//! rows), along its rows a `WgmmaCol<N>`; broadcasting either back to
//! `Wgmma<N>` moves no data (each thread already holds the values for its
//! own elements). `WgStrided` spreads a vector over the 128 threads in
//! `VEC`-element pieces, round-robin, for elementwise work with coalesced
//! (16-byte when `VEC * size_of::<T>() == 16`) memory accesses. `Strided`
//! is the same over a group of `THREADS` consecutive threads of the CTA (a
//! warp: 32; a warpgroup: 128, which is `WgStrided`; several warpgroups: a
//! multiple of 128 up to 1024): thread `g = thread_linear() % THREADS` of
//! the group holds pieces `g, g + THREADS, ..`.
use super::regs::{RegStorage, VecRegs};

/// A register layout of the warpgroup. See the [module docs](self) for the
/// table of layouts.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a register-array layout (or not for this shape)",
    note = "layouts: Wgmma<N>, WgmmaRow, WgmmaCol<N> (N a multiple of 8 from 8 to 256), WgStrided<VECS, VEC>, WgSplat"
)]
pub trait ArrayLayout: 'static {
    /// The layout's name in messages.
    const NAME: &'static str;
    /// Elements (registers) per thread.
    const REGS: usize;
    /// Logical shape `(rows, cols)`; vectors are `(1, len)`, a splat `(1, 1)`.
    const SHAPE: (usize, usize);
    /// This thread's registers.
    type Regs<E: Copy>: RegStorage<E>;
    /// `(row, col)` of register `i` of thread `t` of the warpgroup (of its
    /// group, for [`Strided`]).
    fn coords(t: usize, i: usize) -> (usize, usize);
    /// This thread's `t` in [`ArrayLayout::coords`]: its index in the
    /// warpgroup (in its group of `THREADS`, for [`Strided`]).
    #[inline(always)]
    fn thread() -> usize {
        crate::index::thread_in_warpgroup() as usize
    }
}

/// `WGMMA`: a `64 x N` block in the wgmma accumulator's fragment layout.
#[derive(Clone, Copy, Debug)]
pub struct Wgmma<const N: usize>;
/// `WGMMA_ROW`: 64 values, one per row of a [`Wgmma`] block.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaRow;
/// `WGMMA_COL`: `N` values, one per column of a [`Wgmma<N>`] block.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaCol<const N: usize>;
/// `WG_STRIDED`: `128 * VECS * VEC` values, in pieces of `VEC` consecutive
/// elements dealt round-robin to the 128 threads of the warpgroup.
pub type WgStrided<const VECS: usize, const VEC: usize> = Strided<128, VECS, VEC>;
/// `THREADS * VECS * VEC` values, in pieces of `VEC` consecutive elements
/// dealt round-robin to a group of `THREADS` consecutive threads of the CTA
/// (`THREADS` 32, or a multiple of 128 up to 1024: a warp, a warpgroup,
/// several warpgroups): one row of a row-wise op per group.
#[derive(Clone, Copy, Debug)]
pub struct Strided<const THREADS: usize, const VECS: usize, const VEC: usize>;
/// `WG_SPLAT`: one value, the same in every thread.
#[derive(Clone, Copy, Debug)]
pub struct WgSplat;

impl<const THREADS: usize, const VECS: usize, const VEC: usize> Strided<THREADS, VECS, VEC> {
    /// Elements of the vector (`THREADS * VECS * VEC`).
    pub const LEN: usize = THREADS * VECS * VEC;
    /// The group size rule, checked where the layout is used.
    pub(crate) const GROUP_OK: () = assert!(
        THREADS == 32 || (THREADS % 128 == 0 && THREADS <= 1024),
        "Strided<THREADS, ..>: THREADS is 32 (a warp) or a multiple of 128 up to 1024 (warpgroups)"
    );
}

macro_rules! wgmma_layouts {
    ($($n:literal => $half:literal, $quarter:literal;)*) => {$(
        impl ArrayLayout for Wgmma<$n> {
            const NAME: &'static str = concat!("Wgmma<", $n, ">");
            const REGS: usize = $half;
            const SHAPE: (usize, usize) = (64, $n);
            type Regs<E: Copy> = [E; $half];
            #[inline(always)]
            fn coords(t: usize, i: usize) -> (usize, usize) {
                let (w, l, p) = (t / 32, t % 32, i / 2);
                (16 * w + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4) + i % 2)
            }
        }
        impl ArrayLayout for WgmmaCol<$n> {
            const NAME: &'static str = concat!("WgmmaCol<", $n, ">");
            const REGS: usize = $quarter;
            const SHAPE: (usize, usize) = (1, $n);
            type Regs<E: Copy> = [E; $quarter];
            #[inline(always)]
            fn coords(t: usize, i: usize) -> (usize, usize) {
                (0, 8 * (i / 2) + 2 * (t % 4) + i % 2)
            }
        }
    )*};
}

wgmma_layouts! {
    8 => 4, 2; 16 => 8, 4; 24 => 12, 6; 32 => 16, 8; 40 => 20, 10; 48 => 24, 12; 56 => 28, 14; 64 => 32, 16;
    72 => 36, 18; 80 => 40, 20; 88 => 44, 22; 96 => 48, 24; 104 => 52, 26; 112 => 56, 28; 120 => 60, 30; 128 => 64, 32;
    136 => 68, 34; 144 => 72, 36; 152 => 76, 38; 160 => 80, 40; 168 => 84, 42; 176 => 88, 44; 184 => 92, 46; 192 => 96, 48;
    200 => 100, 50; 208 => 104, 52; 216 => 108, 54; 224 => 112, 56; 232 => 116, 58; 240 => 120, 60; 248 => 124, 62; 256 => 128, 64;
}

impl ArrayLayout for WgmmaRow {
    const NAME: &'static str = "WgmmaRow";
    const REGS: usize = 2;
    const SHAPE: (usize, usize) = (64, 1);
    type Regs<E: Copy> = [E; 2];
    #[inline(always)]
    fn coords(t: usize, i: usize) -> (usize, usize) {
        (16 * (t / 32) + (t % 32) / 4 + 8 * i, 0)
    }
}

impl<const THREADS: usize, const VECS: usize, const VEC: usize> ArrayLayout for Strided<THREADS, VECS, VEC> {
    const NAME: &'static str = if THREADS == 128 { "WgStrided" } else { "Strided" };
    const REGS: usize = VECS * VEC;
    const SHAPE: (usize, usize) = (1, THREADS * VECS * VEC);
    type Regs<E: Copy> = VecRegs<E, VECS, VEC>;
    #[inline(always)]
    fn coords(t: usize, i: usize) -> (usize, usize) {
        (0, (THREADS * (i / VEC) + t) * VEC + i % VEC)
    }
    #[inline(always)]
    fn thread() -> usize {
        crate::index::thread_linear() as usize % THREADS
    }
}

impl ArrayLayout for WgSplat {
    const NAME: &'static str = "WgSplat";
    const REGS: usize = 1;
    const SHAPE: (usize, usize) = (1, 1);
    type Regs<E: Copy> = [E; 1];
    #[inline(always)]
    fn coords(_: usize, _: usize) -> (usize, usize) {
        (0, 0)
    }
}

/// `Self` and `Other` are the same layout: what elementwise operations on
/// two arrays require.
#[diagnostic::on_unimplemented(
    message = "register arrays of different layouts: `{Self}` and `{Other}`",
    label = "elementwise operations need both arrays in the same layout",
    note = "broadcast a WgmmaRow / WgmmaCol<N> / WgSplat to Wgmma<N> with `.broadcast::<Wgmma<N>>()` (free), or store one array to SMEM and load it back in the other layout"
)]
pub trait SameLayout<Other: ArrayLayout>: ArrayLayout {
    /// The identity, seen by the type checker.
    fn same<E: Copy>(regs: Other::Regs<E>) -> Self::Regs<E>;
}
impl<L: ArrayLayout> SameLayout<L> for L {
    #[inline(always)]
    fn same<E: Copy>(regs: L::Regs<E>) -> L::Regs<E> {
        regs
    }
}

/// `Self` broadcasts to `To` without moving data: every thread already holds
/// the values its `To` elements need.
#[diagnostic::on_unimplemented(
    message = "a `{Self}` array does not broadcast to `{To}`",
    note = "free broadcasts: WgmmaRow -> Wgmma<N> (along the columns), WgmmaCol<N> -> Wgmma<N> (along the rows), WgSplat -> any layout"
)]
pub trait BroadcastTo<To: ArrayLayout>: ArrayLayout {
    /// The register of `Self` that register `i` of `To` repeats.
    fn source(i: usize) -> usize;
}

impl<L: ArrayLayout> BroadcastTo<L> for WgSplat {
    #[inline(always)]
    fn source(_: usize) -> usize {
        0
    }
}

macro_rules! wgmma_broadcasts {
    ($($n:literal)*) => {$(
        impl BroadcastTo<Wgmma<$n>> for WgmmaRow {
            #[inline(always)]
            fn source(i: usize) -> usize {
                // Pair p = i / 2 lies on row half p % 2.
                (i / 2) % 2
            }
        }
        impl BroadcastTo<Wgmma<$n>> for WgmmaCol<$n> {
            #[inline(always)]
            fn source(i: usize) -> usize {
                // Pair p = i / 2 is column pair p / 2; i % 2 the column in it.
                2 * (i / 4) + i % 2
            }
        }
    )*};
}
wgmma_broadcasts!(8 16 24 32 40 48 56 64 72 80 88 96 104 112 120 128 136 144 152 160 168 176 184 192 200 208 216 224 232 240 248 256);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    /// Every element of the logical shape is held exactly once.
    fn covers_once<L: ArrayLayout>() {
        let (r, c) = L::SHAPE;
        let mut seen = vec![0u32; r * c];
        // A `Strided` group other than a warpgroup has LEN / REGS threads.
        let threads = if L::NAME == "Strided" { c / L::REGS } else { 128 };
        for t in 0..threads {
            for i in 0..L::REGS {
                let (row, col) = L::coords(t, i);
                assert!(row < r && col < c, "{}: ({row}, {col}) outside {r} x {c}", L::NAME);
                seen[row * c + col] += 1;
            }
        }
        // Reduced layouts are replicated: each element is held by the
        // threads that share its row (4 lanes... ) or column.
        let copies = match L::NAME {
            "WgmmaRow" => 4,
            n if n.starts_with("WgmmaCol") => 32,
            _ => 1,
        };
        assert!(seen.iter().all(|&n| n == copies), "{}: {seen:?}", L::NAME);
    }

    #[test]
    fn layouts_cover_their_shapes() {
        covers_once::<Wgmma<8>>();
        covers_once::<Wgmma<64>>();
        covers_once::<Wgmma<128>>();
        covers_once::<Wgmma<256>>();
        covers_once::<WgmmaRow>();
        covers_once::<WgmmaCol<64>>();
        covers_once::<WgmmaCol<128>>();
        covers_once::<WgStrided<1, 1>>();
        covers_once::<WgStrided<4, 8>>();
        covers_once::<WgStrided<2, 4>>();
        covers_once::<Strided<32, 3, 8>>();
        covers_once::<Strided<512, 2, 8>>();
    }

    /// A broadcast register holds the value of the element's row / column.
    #[test]
    fn broadcasts_pick_the_row_and_the_column() {
        for t in 0..128 {
            for i in 0..64 {
                let (row, col) = Wgmma::<128>::coords(t, i);
                assert_eq!(WgmmaRow::coords(t, <WgmmaRow as BroadcastTo<Wgmma<128>>>::source(i)).0, row);
                assert_eq!(WgmmaCol::<128>::coords(t, <WgmmaCol<128> as BroadcastTo<Wgmma<128>>>::source(i)).1, col);
            }
        }
    }

    #[test]
    fn wgmma_layout_is_the_accumulator_fragment() {
        // Acc's documented formula for pair p: (16 w + l/4 + 8 (p%2), 8 (p/2) + 2 (l%4)).
        for t in 0..128usize {
            let (w, l) = (t / 32, t % 32);
            for p in 0..64usize {
                assert_eq!(Wgmma::<256>::coords(t, 2 * p), (16 * w + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4)));
                assert_eq!(Wgmma::<256>::coords(t, 2 * p + 1).1, 8 * (p / 2) + 2 * (l % 4) + 1);
            }
        }
    }
}
