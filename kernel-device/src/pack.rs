//! 16-byte packs: the unit of a vector memory access, for every element
//! type.
//!
//! A thread moves at most 16 bytes with one load or store: `ld`/`st` with
//! `.v4.b32` (PTX ISA §9.7.9.8 `ld`, §9.7.9.10 `st`, "vector data types").
//! [`Pack16`] names, per element type, what those 16 bytes hold:
//!
//! | element type | [`Pack16::Pack`] | [`Pack16::LANES`] |
//! |---|---|---|
//! | `f64`, `u64`, `i64` | `[T; 2]` | 2 |
//! | `f32`, `u32`, `i32` | `[T; 4]` | 4 |
//! | [`f16`](struct@crate::f16), [`bf16`], `u16`, `i16` | `[T; 8]` | 8 |
//! | [`E4M3`], [`E5M2`], `u8`, `i8` | `[T; 16]` | 16 |
//!
//! The 16-byte accesses that take a pack, each bounds- and alignment-checked
//! and seen by the emulator's race detector:
//!
//! | memory | read | write |
//! |---|---|---|
//! | global, [`GmemRef<T>`](crate::GmemRef) | `read_v4` (`ld.global.v4.b32`), `read_nc_v4` (`ld.global.nc.v4.b32`) | — |
//! | global, [`Gmem<T>`](crate::Gmem) | `read_v4` | `write_v4` (`st.global.v4.b32`) |
//! | shared, [`Smem<[T; N]>`](crate::Smem) | `read_v4` (`ld.shared.v4.b32`) | `write_v4` (`st.shared.v4.b32`) |
//! | shared, [`Smem<Tile<T, ..>>`](crate::Tile) | `get_v4(row, col)` | `set_v4(row, col, v)` |
//! | a raw pointer | [`gmem::raw::load`](crate::gmem::raw::load), [`gmem::raw::load_nc`](crate::gmem::raw::load_nc), [`smem::raw::load`](crate::smem::raw::load) | [`gmem::raw::store`](crate::gmem::raw::store), [`smem::raw::store`](crate::smem::raw::store) |
//!
//! Element `k` of a pack is the element at index `i + k` (byte order is
//! memory order: lane 0 in the low bytes of the first 32-bit word).
use crate::{bf16, f16, E4M3, E5M2};

/// An element type of a 16-byte vector access: [`Pack16::LANES`] elements
/// of `Self` make 16 bytes, [`Pack16::Pack`] (`[Self; LANES]`).
///
/// # Safety
/// `Pack` is `[Self; LANES]`, 16 bytes, and `Self` is plain data: no padding,
/// no pointers, every value's bytes may be copied as 32-bit words.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no 16-byte pack",
    label = "not a Pack16 element type",
    note = "16-byte vector accesses (`read_v4`, `read_nc_v4`, `write_v4`, `get_v4`, `set_v4`) take f64, u64, i64 (2 per pack), f32, u32, i32 (4), f16, bf16, u16, i16 (8), E4M3, E5M2, u8, i8 (16)"
)]
pub unsafe trait Pack16: Copy + 'static {
    /// Elements per 16 bytes.
    const LANES: usize;
    /// `[Self; LANES]`.
    type Pack: Copy;
}

macro_rules! pack16 {
    ($($lanes:literal: $($t:ty),+;)*) => {$($(
        // SAFETY: `[T; LANES]` of a plain-data type of `16 / LANES` bytes.
        unsafe impl Pack16 for $t {
            const LANES: usize = $lanes;
            type Pack = [$t; $lanes];
        }
        const _: () = assert!(core::mem::size_of::<<$t as Pack16>::Pack>() == 16);
    )+)*};
}
pack16! {
    2: f64, u64, i64;
    4: f32, u32, i32;
    8: f16, bf16, u16, i16;
    16: E4M3, E5M2, u8, i8;
}

/// A pack's 16 bytes as four 32-bit words (word `i` = bytes `4 i ..`, little
/// endian): for bit-level work on a vector load, such as pairing 16-bit
/// values as MMA fragments or unpacking FP8 bytes.
#[inline(always)]
pub fn pack_words<T: Pack16>(p: T::Pack) -> [u32; 4] {
    // SAFETY: `Pack16`'s contract: `T::Pack` is 16 bytes of plain data.
    unsafe { core::mem::transmute_copy(&p) }
}

/// The inverse of [`pack_words`]: four 32-bit words as a pack (word `i` =
/// bytes `4 i ..`, little endian), such as four packed `f16x2` conversions
/// ([`crate::cvt::pack_f16x2`]) as the 8 f16 of one 16-byte store.
#[inline(always)]
pub fn words_pack<T: Pack16>(w: [u32; 4]) -> T::Pack {
    // SAFETY: `Pack16`'s contract: `T::Pack` is 16 bytes of plain data, for
    // which every bit pattern is a value.
    unsafe { core::mem::transmute_copy(&w) }
}

// ----- the raw accesses' width and words (`gmem::raw`, `smem::raw`) -----------

/// Compile-time check of the access width.
#[inline(always)]
pub(crate) const fn width<V>() -> usize {
    let n = core::mem::size_of::<V>();
    assert!(
        n == 4 || n == 8 || n == 16,
        "a raw global or shared access moves 4, 8 or 16 bytes (.b32, .v2.b32, .v4.b32): V must be one of those sizes"
    );
    n
}

/// `V` as the 32-bit words of its bytes (`W = size_of::<V>() / 4`).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn words<V: Copy, const W: usize>(v: V) -> [u32; W] {
    // SAFETY: `V` is `4 W` bytes of plain data (the callers' contract).
    unsafe { core::mem::transmute_copy(&v) }
}

/// The inverse of [`words`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn from_words<V: Copy, const W: usize>(w: [u32; W]) -> V {
    // SAFETY: as `words`: the bytes of a `V` the memory held.
    unsafe { core::mem::transmute_copy(&w) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_fill_16_bytes() {
        fn lanes<T: Pack16>() -> usize {
            assert_eq!(core::mem::size_of::<T::Pack>(), 16);
            T::LANES
        }
        assert_eq!([lanes::<f32>(), lanes::<bf16>(), lanes::<f16>(), lanes::<E4M3>(), lanes::<E5M2>(), lanes::<u64>()], [4, 8, 8, 16, 16, 2]);
    }

    #[test]
    fn pack_words_are_little_endian() {
        let p: [u16; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(pack_words::<u16>(p), [0x0002_0001, 0x0004_0003, 0x0006_0005, 0x0008_0007]);
        assert_eq!(words_pack::<u16>([0x0002_0001, 0x0004_0003, 0x0006_0005, 0x0008_0007]), p);
        let h = [1.5f32, -2.0, 0.25, 3.0, 0.0, -0.5, 8.0, 65504.0].map(f16::from_f32);
        assert_eq!(words_pack::<f16>(pack_words::<f16>(h)), h);
    }
}
