//! One `unsafe fn` per shared-memory load and store form, on a raw pointer:
//! the escape hatch for addresses [`Smem`](super::Smem)'s accessors cannot
//! express (a fragment at an offset the kernel computed, a view of a tile
//! as another type).
//!
//! The value type `V` picks the width, 4, 8 or 16 bytes (anything else is a
//! compile-time error); the pointer is converted to its `.shared::cta`
//! address (`cvta.to.shared`, [`shared_addr`](super::shared_addr)):
//!
//! | `size_of::<V>()` | [`load`] | [`store`] |
//! |---|---|---|
//! | 4 (`u32`, `f32`, `[bf16; 2]`, `[E4M3; 4]`) | `ld.shared.b32` | `st.shared.b32` |
//! | 8 (`[f32; 2]`, `[f16; 4]`) | `ld.shared.v2.b32` | `st.shared.v2.b32` |
//! | 16 (a [`Pack16::Pack`](crate::Pack16): `[bf16; 8]`, `[E4M3; 16]`, `[f32; 4]`) | `ld.shared.v4.b32` | `st.shared.v4.b32` |
//!
//! On the CPU emulator every access is checked (the pointer lies in this
//! CTA's shared memory with the whole access, aligned to its size) and
//! reported to the race detector as the calling thread's read or write of
//! those bytes, at the kernel's line: exactly what `Smem::read`/`write` and
//! the tile accessors do, without calling the emulator by hand. (The
//! pointers the handles give, [`SmemPtr`](crate::ptr::SmemPtr), also check
//! that the access lies inside their allocation: `read_v`/`write_v` are
//! these operations after that check.)
//! `Smem`'s and `Tile`'s 16-byte accessors are these operations after their
//! checks.

#[cfg(target_arch = "nvptx64")]
use crate::pack::{from_words, words};
use crate::pack::width;

/// `ld.shared{,.v2,.v4}.b32 d, [a];` (PTX ISA §9.7.9.8): the `V` at `p`
/// (4, 8 or 16 bytes, one instruction), reported to the emulator's race
/// detector as this thread's read.
///
/// # Safety
/// `p` points to a `V` in this CTA's shared memory, aligned to
/// `size_of::<V>()`; `V` is plain data (no padding: an element type, an
/// array of them, a [`Pack16::Pack`](crate::Pack16)); other threads' writes
/// of those bytes are ordered with this read by the kernel's barriers (the
/// emulator checks it).
#[inline(always)]
#[track_caller]
pub unsafe fn load<V: Copy>(p: *const V) -> V {
    let addr = super::shared_addr(p);
    #[cfg(not(target_arch = "nvptx64"))]
    emu_check("ld.shared", addr, core::mem::size_of::<V>());
    // SAFETY: the caller's contract; `addr` is `p`'s shared address.
    unsafe { load_at(addr, p) }
}

/// `st.shared{,.v2,.v4}.b32 [a], v;` (PTX ISA §9.7.9.10): stores `v` (4, 8
/// or 16 bytes, one instruction), reported to the emulator's race detector
/// as this thread's write.
///
/// # Safety
/// `p` points to a `V` in this CTA's shared memory, aligned to
/// `size_of::<V>()`; `V` is plain data (as [`load`]); other threads'
/// accesses of those bytes are ordered with this write by the kernel's
/// barriers (the emulator checks it).
#[inline(always)]
#[track_caller]
pub unsafe fn store<V: Copy>(p: *mut V, v: V) {
    let addr = super::shared_addr(p);
    #[cfg(not(target_arch = "nvptx64"))]
    emu_check("st.shared", addr, core::mem::size_of::<V>());
    // SAFETY: the caller's contract; `addr` is `p`'s shared address.
    unsafe { store_at(addr, p, v) }
}

/// [`load`] with the shared address computed by the caller: the GPU uses
/// `addr`, the emulator `p` (so that a typed accessor converts its base
/// once and adds offsets to both).
///
/// # Safety
/// As [`load`]; `addr == shared_addr(p)`.
#[inline(always)]
#[track_caller]
pub(crate) unsafe fn load_at<V: Copy>(addr: u32, p: *const V) -> V {
    let n = const { width::<V>() };
    device!("ld.shared", {
        match n {
            4 => {
                let d: u32;
                // SAFETY: the caller's contract; `readonly`: a load.
                unsafe {
                    core::arch::asm!("ld.shared.b32 {0}, [{1}];", out(reg32) d, in(reg32) addr,
                        options(readonly, nostack, preserves_flags))
                };
                from_words::<V, 1>([d])
            }
            8 => {
                let (a, b): (u32, u32);
                // SAFETY: the caller's contract; `readonly`: a load.
                unsafe {
                    core::arch::asm!("ld.shared.v2.b32 {{{0}, {1}}}, [{2}];", out(reg32) a, out(reg32) b, in(reg32) addr,
                        options(readonly, nostack, preserves_flags))
                };
                from_words::<V, 2>([a, b])
            }
            _ => {
                let (a, b, c, d): (u32, u32, u32, u32);
                // SAFETY: the caller's contract; `readonly`: a load.
                unsafe {
                    core::arch::asm!("ld.shared.v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];",
                        out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg32) addr,
                        options(readonly, nostack, preserves_flags))
                };
                from_words::<V, 4>([a, b, c, d])
            }
        }
    }, host: {
        kernel_emu::smem_access(p as *const u8, n, false);
        // SAFETY: the caller's contract.
        unsafe { p.read() }
    })
}

/// [`store`] with the shared address computed by the caller (as
/// [`load_at`]).
///
/// # Safety
/// As [`store`]; `addr == shared_addr(p)`.
#[inline(always)]
#[track_caller]
pub(crate) unsafe fn store_at<V: Copy>(addr: u32, p: *mut V, v: V) {
    let n = const { width::<V>() };
    device!("st.shared", {
        match n {
            4 => {
                let [a] = words::<V, 1>(v);
                // SAFETY: the caller's contract.
                unsafe {
                    core::arch::asm!("st.shared.b32 [{0}], {1};", in(reg32) addr, in(reg32) a,
                        options(nostack, preserves_flags))
                }
            }
            8 => {
                let [a, b] = words::<V, 2>(v);
                // SAFETY: the caller's contract.
                unsafe {
                    core::arch::asm!("st.shared.v2.b32 [{0}], {{{1}, {2}}};", in(reg32) addr, in(reg32) a, in(reg32) b,
                        options(nostack, preserves_flags))
                }
            }
            _ => {
                let [a, b, c, d] = words::<V, 4>(v);
                // SAFETY: the caller's contract.
                unsafe {
                    core::arch::asm!("st.shared.v4.b32 [{0}], {{{1}, {2}, {3}, {4}}};",
                        in(reg32) addr, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) d,
                        options(nostack, preserves_flags))
                }
            }
        }
    }, host: {
        kernel_emu::smem_access(p as *const u8, n, true);
        // SAFETY: the caller's contract; one emulated thread runs at a time.
        unsafe { p.write(v) }
    })
}

/// The emulator's checks of a raw access of `n` bytes at shared address
/// `addr` (already known to be this CTA's: `shared_addr` reports any other
/// pointer): the whole access inside the buffer, aligned to `n` (on the GPU
/// a misaligned address faults).
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
#[track_caller]
fn emu_check(op: &'static str, addr: u32, n: usize) {
    kernel_emu::smem_ptr_range(addr, n);
    if addr as usize % n != 0 {
        kernel_emu::misuse(
            "misaligned shared-memory access through a raw pointer (an access of n bytes needs an n-byte aligned address)",
            format_args!(
                "`{op}` of {n} bytes at shared address {addr:#x}, which is not {n}-byte aligned (on the GPU: a \
                 misaligned-address fault); align the pointer, or use Smem's read_v4/write_v4 or a tile's get_v4/set_v4, \
                 which check the index"
            ),
        )
    }
}
