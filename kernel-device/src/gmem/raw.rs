//! One `unsafe fn` per global-memory load and store form, on a raw pointer:
//! the escape hatch for addresses a [`Gmem`](super::Gmem) or
//! [`GmemRef`](super::GmemRef) index cannot express (a `#[unchecked]`
//! pointer parameter, a pointer into a structure of the kernel's own).
//!
//! The value type `V` picks the width, 4, 8 or 16 bytes (anything else is a
//! compile-time error):
//!
//! | `size_of::<V>()` | [`load`] | [`load_nc`] | [`store`] |
//! |---|---|---|---|
//! | 4 (`u32`, `f32`, `[bf16; 2]`, `[E4M3; 4]`) | `ld.global.b32` | `ld.global.nc.b32` | `st.global.b32` |
//! | 8 (`[f32; 2]`, `[f16; 4]`) | `ld.global.v2.b32` | `ld.global.nc.v2.b32` | `st.global.v2.b32` |
//! | 16 (a [`Pack16::Pack`](crate::Pack16): `[bf16; 8]`, `[E4M3; 16]`, `[f32; 4]`) | `ld.global.v4.b32` | `ld.global.nc.v4.b32` | `st.global.v4.b32` |
//!
//! On the CPU emulator every access is reported to the race detector as the
//! calling thread's read or write of those bytes (exactly as `Gmem`'s
//! accessors are, and at the kernel's line), and a misaligned address is
//! reported; the bounds are not checked (a bare pointer carries none: the
//! pointers `Gmem::ptr`/`GmemRef::ptr` give, [`GmemPtr`](crate::ptr::GmemPtr),
//! carry their view's, and their `read_v`/`write_v` are these operations
//! after a bounds check).
//! `Gmem`/`GmemRef`'s vector accessors are these functions after their
//! checks.

#[cfg(target_arch = "nvptx64")]
use crate::pack::{from_words, words};
use crate::pack::width;

/// The body of [`load`] and [`load_nc`]: `ld.global<qual>{,.v2,.v4}.b32`
/// by the width `n` of `V`, the emulator's read beside it (the two forms
/// differ only in the qualifier, a literal of the asm template).
macro_rules! ld_global {
    ($op:literal, $qual:literal, $n:expr, $p:expr) => {{
        let p = $p;
        device!($op, {
            match $n {
                4 => {
                    let d: u32;
                    // SAFETY: the caller's contract; `readonly`: a load.
                    unsafe {
                        core::arch::asm!(concat!("ld.global", $qual, ".b32 {0}, [{1}];"), out(reg32) d, in(reg64) p,
                            options(readonly, nostack, preserves_flags))
                    };
                    from_words::<V, 1>([d])
                }
                8 => {
                    let (a, b): (u32, u32);
                    // SAFETY: the caller's contract; `readonly`: a load.
                    unsafe {
                        core::arch::asm!(concat!("ld.global", $qual, ".v2.b32 {{{0}, {1}}}, [{2}];"), out(reg32) a, out(reg32) b, in(reg64) p,
                            options(readonly, nostack, preserves_flags))
                    };
                    from_words::<V, 2>([a, b])
                }
                _ => {
                    let (a, b, c, d): (u32, u32, u32, u32);
                    // SAFETY: the caller's contract; `readonly`: a load.
                    unsafe {
                        core::arch::asm!(concat!("ld.global", $qual, ".v4.b32 {{{0}, {1}, {2}, {3}}}, [{4}];"),
                            out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) p,
                            options(readonly, nostack, preserves_flags))
                    };
                    from_words::<V, 4>([a, b, c, d])
                }
            }
        }, host |op| {
            // SAFETY: the caller's contract.
            unsafe { emu_load(op, p) }
        })
    }};
}

/// `ld.global{,.v2,.v4}.b32 d, [p];` (PTX ISA §9.7.9.8): the `V` at `p`
/// (4, 8 or 16 bytes, one instruction), reported to the emulator's race
/// detector as this thread's read.
///
/// # Safety
/// `p` points to a `V` in global memory, aligned to `size_of::<V>()`; `V`
/// is plain data (no padding: an element type, an array of them, a
/// [`Pack16::Pack`](crate::Pack16)); other threads' writes of those bytes
/// are ordered with this read by the kernel's synchronization (the
/// emulator checks it).
#[inline(always)]
#[track_caller]
pub unsafe fn load<V: Copy>(p: *const V) -> V {
    let n = const { width::<V>() };
    ld_global!("ld.global", "", n, p)
}

/// `ld.global.nc{,.v2,.v4}.b32 d, [p];` (PTX ISA §9.7.9.9): as [`load`],
/// through the read-only (non-coherent, texture) cache.
///
/// # Safety
/// As [`load`], and nothing writes those bytes during the kernel (the
/// non-coherent cache may return stale data otherwise).
#[inline(always)]
#[track_caller]
pub unsafe fn load_nc<V: Copy>(p: *const V) -> V {
    let n = const { width::<V>() };
    ld_global!("ld.global.nc", ".nc", n, p)
}

/// `st.global{,.v2,.v4}.b32 [p], v;` (PTX ISA §9.7.9.10): stores `v` (4, 8
/// or 16 bytes, one instruction), reported to the emulator's race detector
/// as this thread's write.
///
/// # Safety
/// `p` points to a `V` in global memory that the kernel may write, aligned
/// to `size_of::<V>()`; `V` is plain data (as [`load`]); other threads'
/// accesses of those bytes are ordered with this write by the kernel's
/// synchronization (the emulator checks it).
#[inline(always)]
#[track_caller]
pub unsafe fn store<V: Copy>(p: *mut V, v: V) {
    let n = const { width::<V>() };
    device!("st.global", {
        match n {
            4 => {
                let [a] = words::<V, 1>(v);
                // SAFETY: the caller's contract.
                unsafe {
                    core::arch::asm!("st.global.b32 [{0}], {1};", in(reg64) p, in(reg32) a,
                        options(nostack, preserves_flags))
                }
            }
            8 => {
                let [a, b] = words::<V, 2>(v);
                // SAFETY: the caller's contract.
                unsafe {
                    core::arch::asm!("st.global.v2.b32 [{0}], {{{1}, {2}}};", in(reg64) p, in(reg32) a, in(reg32) b,
                        options(nostack, preserves_flags))
                }
            }
            _ => {
                let [a, b, c, d] = words::<V, 4>(v);
                // SAFETY: the caller's contract.
                unsafe {
                    core::arch::asm!("st.global.v4.b32 [{0}], {{{1}, {2}, {3}, {4}}};",
                        in(reg64) p, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) d,
                        options(nostack, preserves_flags))
                }
            }
        }
    }, host |op| {
        emu_check_aligned(op, p as usize, n);
        kernel_emu::gmem_access(p as *const u8, n, true);
        // SAFETY: the caller's contract; one emulated thread runs at a time.
        unsafe { p.write(v) }
    })
}

/// The emulator's load: alignment checked, the read reported, the bytes read.
///
/// # Safety
/// As [`load`].
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
#[track_caller]
unsafe fn emu_load<V: Copy>(op: &'static str, p: *const V) -> V {
    let n = core::mem::size_of::<V>();
    emu_check_aligned(op, p as usize, n);
    kernel_emu::gmem_access(p as *const u8, n, false);
    // SAFETY: the caller's contract.
    unsafe { p.read() }
}

/// A misaligned raw access is a misaligned-address fault on the GPU; the
/// emulator reports it.
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
#[track_caller]
fn emu_check_aligned(op: &'static str, addr: usize, n: usize) {
    if addr % n != 0 {
        kernel_emu::misuse(
            "misaligned global-memory access through a raw pointer (an access of n bytes needs an n-byte aligned address)",
            format_args!(
                "`{op}` of {n} bytes at {addr:#x}, which is not {n}-byte aligned (on the GPU: a misaligned-address fault); \
                 align the pointer, or access the data through `Gmem`/`GmemRef`, whose vector accessors check the index"
            ),
        )
    }
}
