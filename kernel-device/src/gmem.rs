//! Bounds-checked views of global memory.
//!
//! A `Gmem<T>` kernel parameter is a device pointer with its length. Its
//! accessors check the index: on the GPU an out-of-bounds access traps (the
//! launch fails, named by the host runtime); on the CPU emulator it is
//! reported as "out-of-bounds global-memory access" with the thread and the
//! kernel's source line. The emulator also checks every `Gmem` access for
//! races (happens-before) against other threads' accesses and TMA copies.
//!
//! The pointer escape hatch, [`Gmem::ptr`] / [`GmemRef::ptr`], gives a
//! [`GmemPtr<T>`](crate::ptr::GmemPtr): a bare pointer on the GPU, which on
//! the emulator carries the view's bounds, so that its `read`/`write`
//! are bounds-, alignment- and race-checked with no call of the kernel's
//! own ([`crate::ptr`]); [`Gmem::from_ptr`] makes a view (of another
//! element type, say) from one, checked against its bounds. The bare
//! pointer is reachable only through the explicitly unchecked
//! [`Ptr::as_raw_unchecked`](crate::ptr::Ptr::as_raw_unchecked). Raw
//! `*const T`/`*mut T` kernel parameters (`#[unchecked]`) are not checked:
//! a plain dereference cannot be hooked; the loads and stores of [`raw`]
//! (4, 8 or 16 bytes at a raw pointer) report themselves to the race
//! detector, without bounds.
//!
//! | access | `GmemRef<T>` | `Gmem<T>` |
//! |---|---|---|
//! | one element | `read`, `read_nc` (32-bit `T`) | `read`, `write`, `write_unchecked` |
//! | 8 bytes, 32-bit `T` ([`Word32`]) | `read_nc_v2` | `read_v2`, `write_v2` |
//! | 16 bytes, any [`Pack16`] `T` (4 f32, 8 f16/bf16, 16 FP8) | `read_v4`, `read_nc_v4` (+ `_unchecked`) | `read_v4`, `write_v4` (+ `_unchecked`) |
//! | atomics ([`Atomic`]) | — | `atomic_add`, `atomic_min`, ..., `red_add_v2` (f32) |
use crate::launch::DeviceParam;
pub use crate::pack::Pack16;

pub mod raw;

/// `len` elements of `T` in global memory. The host passes
/// `&mut CudaSlice<T>` (GPU) or `&mut [T]` (emulator).
#[repr(C)]
pub struct Gmem<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> Clone for Gmem<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Gmem<T> {}

// SAFETY: a device pointer and a length: plain data, the same bytes on the
// host and the device.
unsafe impl<T> DeviceParam for Gmem<T> {
    type Abi = Gmem<T>;
    #[inline(always)]
    fn from_abi(abi: Gmem<T>, _: u64) -> Self {
        abi
    }
}

impl<T: Copy> Gmem<T> {
    /// # Safety
    /// `ptr` points to `len` valid elements of `T` for the kernel's lifetime.
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        Gmem { ptr, len }
    }
    /// Number of elements.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// A pointer to element 0, bounded by the view
    /// ([`GmemPtr`](crate::ptr::GmemPtr)): on the emulator every access
    /// through it (and through pointers computed from it) is bounds-,
    /// alignment- and race-checked at the kernel's line; on the GPU it is
    /// the bare pointer.
    #[inline(always)]
    pub fn ptr(&self) -> crate::ptr::GmemPtr<T> {
        crate::ptr::Ptr::within(self.ptr, self.ptr as *const u8, self.len.wrapping_mul(core::mem::size_of::<T>()))
    }
    /// The view of `len` elements at `p`, e.g. of another element type
    /// (`Gmem::<u32>::from_ptr(x.ptr().cast(), x.len() / 2)`). On the
    /// emulator the view is checked to lie inside `p`'s bounds (an
    /// out-of-bounds report at the caller's line otherwise).
    ///
    /// # Safety
    /// `p` is aligned for `T` and points to `len` elements of `T` that the
    /// kernel may read and write.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_ptr(p: crate::ptr::GmemPtr<T>, len: usize) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        p.check_view(len);
        // SAFETY: the caller's contract.
        Gmem { ptr: unsafe { p.as_raw_unchecked() }, len }
    }
    /// The start pointer, for the crate's own instructions that take an
    /// address (TMA, atomics).
    #[inline(always)]
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.ptr
    }
    #[inline(always)]
    #[track_caller]
    fn check(&self, i: usize) {
        if i >= self.len {
            out_of_bounds(i, self.len);
        }
    }
    /// Element `i` (checked).
    #[inline(always)]
    #[track_caller]
    pub fn read(&self, i: usize) -> T {
        self.check(i);
        // SAFETY: `i < len`; `from_raw_parts`'s contract. Races between
        // threads are ordered by the kernel's synchronization (checked by
        // the emulator).
        let p = unsafe { self.ptr.add(i) };
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::gmem_access(p as *const u8, core::mem::size_of::<T>(), false);
        // SAFETY: as above.
        unsafe { p.read() }
    }
    /// Store `v` to element `i` (checked).
    #[inline(always)]
    #[track_caller]
    pub fn write(&self, i: usize, v: T) {
        self.check(i);
        // SAFETY: `i < len` (checked).
        unsafe { self.write_unchecked(i, v) }
    }
    /// Store `v` to element `i` without the bounds check, for stores whose
    /// range the caller checked once (a tile's unrolled epilogue, where a
    /// check per store costs registers). The emulator's race detector still
    /// sees the store.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_unchecked(&self, i: usize, v: T) {
        // SAFETY: the caller's `i < len`; `from_raw_parts`'s contract.
        let p = unsafe { self.ptr.add(i) };
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::gmem_access(p as *const u8, core::mem::size_of::<T>(), true);
        // SAFETY: as above.
        unsafe { p.write(v) }
    }
}

/// The bounds-check failure of the views above: element `i` of a view of
/// `len` (a trap on the GPU, a reported misuse on the emulator). Public for
/// code that checks a range once and then stores unchecked
/// ([`Gmem::write_unchecked`]).
#[cold]
#[track_caller]
pub fn out_of_range(i: usize, len: usize) -> ! {
    out_of_bounds(i, len)
}

#[cold]
#[track_caller]
fn out_of_bounds(i: usize, len: usize) -> ! {
    device!("gmem bounds check", {
        let _ = (i, len);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "out-of-bounds global-memory access (Gmem index past its length)",
            format_args!("index {i} of a Gmem of {len} elements"),
        )
    })
}

// ----- read-only views, vector accesses, atomics ------------------------------

/// `len` read-only elements of `T` in global memory. The host passes
/// `&CudaSlice<T>` (GPU) or `&[T]` (emulator): an input needs no `&mut`.
/// Every access is bounds-checked as [`Gmem`]'s are.
#[repr(C)]
pub struct GmemRef<T> {
    ptr: *const T,
    len: usize,
}

impl<T> Clone for GmemRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GmemRef<T> {}

// SAFETY: a device pointer and a length, as `Gmem`.
unsafe impl<T> DeviceParam for GmemRef<T> {
    type Abi = GmemRef<T>;
    #[inline(always)]
    fn from_abi(abi: GmemRef<T>, _: u64) -> Self {
        abi
    }
}

/// The same elements, read-only: what a `GmemRef<T>` parameter of a
/// function takes from a writable view.
impl<T> From<Gmem<T>> for GmemRef<T> {
    #[inline(always)]
    fn from(g: Gmem<T>) -> Self {
        GmemRef { ptr: g.ptr, len: g.len }
    }
}

/// A 32-bit element of an 8-byte vector access (`.v2.b32`): `f32`, `u32`,
/// `i32`. 16-byte accesses take any element type: [`Pack16`].
pub trait Word32: Copy {
    /// The bits.
    fn to_word(self) -> u32;
    /// From the bits.
    fn from_word(w: u32) -> Self;
}
macro_rules! word32 {
    ($($t:ty: |$v:ident| $to:expr, |$w:ident| $from:expr;)*) => {$(
        impl Word32 for $t {
            #[inline(always)]
            fn to_word(self) -> u32 { let $v = self; $to }
            #[inline(always)]
            fn from_word($w: u32) -> Self { $from }
        }
    )*};
}
word32! {
    u32: |v| v, |w| w;
    i32: |v| v as u32, |w| w as i32;
    f32: |v| v.to_bits(), |w| f32::from_bits(w);
}

/// The memory scope of an atomic (PTX ISA §8.5 "Scope"): which threads it
/// is atomic with respect to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `.cta`: threads of the same CTA.
    Cta,
    /// `.gpu`: every thread of the device (the default).
    Gpu,
    /// `.sys`: the device and the host (mapped memory).
    Sys,
}

impl<T: Copy> GmemRef<T> {
    /// # Safety
    /// `ptr` points to `len` valid elements of `T`, not written during the kernel.
    pub const unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Self {
        GmemRef { ptr, len }
    }
    /// Number of elements.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// A pointer to element 0, bounded by the view (as [`Gmem::ptr`]).
    /// The data must not be written during the kernel (what `GmemRef`
    /// promises): write only through a [`Gmem`].
    #[inline(always)]
    pub fn ptr(&self) -> crate::ptr::GmemPtr<T> {
        crate::ptr::Ptr::within(self.ptr as *mut T, self.ptr as *const u8, self.len.wrapping_mul(core::mem::size_of::<T>()))
    }
    /// The read-only view of `len` elements at `p` (as [`Gmem::from_ptr`]).
    ///
    /// # Safety
    /// `p` is aligned for `T` and points to `len` elements of `T` not
    /// written during the kernel.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn from_ptr(p: crate::ptr::GmemPtr<T>, len: usize) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        p.check_view(len);
        // SAFETY: the caller's contract.
        GmemRef { ptr: unsafe { p.as_raw_unchecked() }, len }
    }
    /// The start pointer, for the crate's own instructions that take an
    /// address (TMA).
    #[inline(always)]
    pub(crate) fn as_ptr(&self) -> *const T {
        self.ptr
    }
    /// Element `i` (checked), an ordinary load (`ld.global`).
    #[inline(always)]
    #[track_caller]
    pub fn read(&self, i: usize) -> T {
        check_range(i, 1, self.len);
        // SAFETY: `i < len`; `from_raw_parts`'s contract.
        let p = unsafe { self.ptr.add(i) };
        emu_access(p as *const u8, core::mem::size_of::<T>(), false);
        // SAFETY: as above.
        unsafe { p.read() }
    }
}

impl<T: Word32> GmemRef<T> {
    /// `ld.global.nc.b32 d, [a];` (PTX ISA §9.7.9.9): element `i` through the
    /// read-only (texture) cache, checked. The data must not be written
    /// during the kernel (what `GmemRef` promises).
    #[inline(always)]
    #[track_caller]
    pub fn read_nc(&self, i: usize) -> T {
        check_range(i, 1, self.len);
        // SAFETY: `i < len`, checked above.
        unsafe { self.read_nc_unchecked(i) }
    }
    /// As [`GmemRef::read_nc`] without the bounds check on the GPU (the
    /// emulator still checks and reports), for loads issued while wgmmas
    /// are in flight: the check's trap is a branch, and ptxas serializes
    /// every wgmma of a kernel that can leave the warpgroup's path between
    /// a wgmma's issue and its wait (C7518, C7520).
    ///
    /// # Safety
    /// `i < self.len()`: the caller proved it (e.g. the host checked the
    /// buffer's length against the indices the kernel computes).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_nc_unchecked(&self, i: usize) -> T {
        // `wrapping_add`: on the emulator a broken contract is reported
        // below, not undefined behaviour here.
        let p = self.ptr.wrapping_add(i);
        #[cfg(not(target_arch = "nvptx64"))]
        check_range(i, 1, self.len);
        // SAFETY: in bounds (the caller's contract), 4-byte aligned; not
        // written during the kernel (`from_raw_parts`'s contract).
        T::from_word(unsafe { raw::load_nc(p as *const u32) })
    }
    /// `ld.global.nc.v2.b32 {d0, d1}, [a];`: elements `i, i + 1`, checked;
    /// `i` even and the address 8-byte aligned (checked).
    #[inline(always)]
    #[track_caller]
    pub fn read_nc_v2(&self, i: usize) -> [T; 2] {
        let p = checked_vec(self.ptr, i, 2, self.len);
        // SAFETY: in bounds and aligned (checked above); read-only data.
        unsafe { raw::load_nc::<[u32; 2]>(p.cast()) }.map(T::from_word)
    }
}

impl<T: Pack16> GmemRef<T> {
    /// `ld.global.v4.b32 {d0, d1, d2, d3}, [a];` (PTX ISA §9.7.9.8): the 16
    /// bytes of elements `i .. i + T::LANES` (4 f32, 8 f16/bf16, 16 FP8:
    /// [`Pack16`]) in one load. Checked: in bounds, `i` a multiple of
    /// `T::LANES`, the view 16-byte aligned (a trap on the GPU, a reported
    /// misuse on the emulator, which also sees the read).
    #[inline(always)]
    #[track_caller]
    pub fn read_v4(&self, i: usize) -> T::Pack {
        let p = checked_pack(self.ptr, i, self.len);
        // SAFETY: in bounds and aligned (checked above).
        unsafe { raw::load(p) }
    }
    /// `ld.global.nc.v4.b32 {d0, d1, d2, d3}, [a];` (PTX ISA §9.7.9.9): as
    /// [`GmemRef::read_v4`], through the read-only (texture) cache: the
    /// data must not be written during the kernel (what `GmemRef` promises).
    #[inline(always)]
    #[track_caller]
    pub fn read_nc_v4(&self, i: usize) -> T::Pack {
        let p = checked_pack(self.ptr, i, self.len);
        // SAFETY: in bounds and aligned (checked above); read-only data.
        unsafe { raw::load_nc(p) }
    }
    /// As [`GmemRef::read_nc_v4`] without the checks on the GPU (the
    /// emulator still checks and reports), for loads issued while wgmmas
    /// are in flight (see [`GmemRef::read_nc_unchecked`]).
    ///
    /// # Safety
    /// `i + T::LANES <= self.len()` and `i` is a multiple of `T::LANES` (the
    /// view's start is 16-byte aligned, as every host buffer is).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_nc_v4_unchecked(&self, i: usize) -> T::Pack {
        #[cfg(not(target_arch = "nvptx64"))]
        checked_pack(self.ptr, i, self.len);
        // SAFETY: the caller's contract; read-only data.
        unsafe { raw::load_nc(self.ptr.wrapping_add(i) as *const T::Pack) }
    }
}

impl<T: Word32> Gmem<T> {
    /// `ld.global.v2.b32 {d0, d1}, [a];`: elements `i, i + 1`, checked; the
    /// address 8-byte aligned (checked).
    #[inline(always)]
    #[track_caller]
    pub fn read_v2(&self, i: usize) -> [T; 2] {
        let p = checked_vec(self.as_ptr() as *const T, i, 2, self.len());
        // SAFETY: in bounds and aligned (checked above).
        unsafe { raw::load::<[u32; 2]>(p.cast()) }.map(T::from_word)
    }
    /// `st.global.v2.b32 [a], {v0, v1};`: elements `i, i + 1`, checked; the
    /// address 8-byte aligned (checked).
    #[inline(always)]
    #[track_caller]
    pub fn write_v2(&self, i: usize, v: [T; 2]) {
        let p = checked_vec(self.as_ptr() as *const T, i, 2, self.len()) as *mut T;
        // SAFETY: in bounds and aligned (checked above).
        unsafe { raw::store::<[u32; 2]>(p.cast(), v.map(T::to_word)) }
    }
}

impl<T: Pack16> Gmem<T> {
    /// `ld.global.v4.b32 {d0, d1, d2, d3}, [a];` (PTX ISA §9.7.9.8): the 16
    /// bytes of elements `i .. i + T::LANES` in one load, checked as
    /// [`GmemRef::read_v4`].
    #[inline(always)]
    #[track_caller]
    pub fn read_v4(&self, i: usize) -> T::Pack {
        let p = checked_pack(self.as_ptr() as *const T, i, self.len());
        // SAFETY: in bounds and aligned (checked above).
        unsafe { raw::load(p) }
    }
    /// `st.global.v4.b32 [a], {v0, v1, v2, v3};` (PTX ISA §9.7.9.10): `v` to
    /// elements `i .. i + T::LANES` (4 f32, 8 f16/bf16, 16 FP8: [`Pack16`])
    /// in one store. Checked: in bounds, `i` a multiple of `T::LANES`, the
    /// view 16-byte aligned (a trap on the GPU, a reported misuse on the
    /// emulator, which also sees the write).
    #[inline(always)]
    #[track_caller]
    pub fn write_v4(&self, i: usize, v: T::Pack) {
        let p = checked_pack(self.as_ptr() as *const T, i, self.len()) as *mut T::Pack;
        // SAFETY: in bounds and aligned (checked above).
        unsafe { raw::store(p, v) }
    }
    /// As [`Gmem::read_v4`] without the checks on the GPU (the emulator
    /// still checks, and sees the read), for loads whose range the caller
    /// checked once (a whole tile's, when the per-access checks' registers
    /// would spill).
    ///
    /// # Safety
    /// `i + T::LANES <= self.len()` and `i` is a multiple of `T::LANES` (the
    /// view's start is 16-byte aligned, as every host buffer is).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_v4_unchecked(&self, i: usize) -> T::Pack {
        #[cfg(not(target_arch = "nvptx64"))]
        checked_pack(self.as_ptr() as *const T, i, self.len());
        // SAFETY: the caller's contract.
        unsafe { raw::load(self.as_ptr().wrapping_add(i) as *const T::Pack) }
    }
    /// As [`Gmem::write_v4`] without the checks on the GPU (the emulator
    /// still checks and reports), for stores whose range the caller checked
    /// once (see [`Gmem::write_unchecked`]).
    ///
    /// # Safety
    /// `i + T::LANES <= self.len()` and `i` is a multiple of `T::LANES` (the
    /// view's start is 16-byte aligned, as every host buffer is).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_v4_unchecked(&self, i: usize, v: T::Pack) {
        #[cfg(not(target_arch = "nvptx64"))]
        checked_pack(self.as_ptr() as *const T, i, self.len());
        // SAFETY: the caller's contract.
        unsafe { raw::store(self.as_ptr().wrapping_add(i) as *mut T::Pack, v) }
    }
}

/// Element type of an atomic on [`Gmem`]: the PTX type suffixes and the
/// emulator's read-modify-write.
pub trait Atomic: Copy {
    #[doc(hidden)]
    fn rmw(p: *mut Self, scope: Scope, op: AtomicOp, v: Self, cmp: Self) -> Self;
}

/// The operation of an atomic (the `.op` of `atom`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// `.add`.
    Add,
    /// `.min`.
    Min,
    /// `.max`.
    Max,
    /// `.exch`.
    Exch,
    /// `.cas` (compare with `cmp`, then store `v`).
    Cas,
}

#[allow(unused_macros)] // used in the nvptx64 bodies only
/// One `asm!` per (op, scope) with a literal template: `$reg` is the
/// register class, `$ty` the PTX type of each op (`-` where the type has no
/// such op: never reached, the trait bounds exclude it).
macro_rules! atom_asm {
    ($p:ident, $v:ident, $cmp:ident, $scope:ident, $op:ident, $reg:ident, $ut:ty,
     add: $add:literal, min: $min:literal, max: $max:literal, bits: $bits:literal) => {{
        let (v, c) = ($v, $cmp);
        let d: $ut;
        macro_rules! one {
            ($sc:literal, $o:literal, $t:literal) => {
                // SAFETY: `p` is an in-bounds, aligned global address (checked
                // by the caller); atomics order memory, so no `nomem`.
                unsafe {
                    core::arch::asm!(concat!("atom.relaxed.", $sc, ".global.", $o, ".", $t, " {0}, [{1}], {2};"),
                        out($reg) d, in(reg64) $p, in($reg) v, options(nostack, preserves_flags))
                }
            };
        }
        macro_rules! cas {
            ($sc:literal) => {
                // SAFETY: as above.
                unsafe {
                    core::arch::asm!(concat!("atom.relaxed.", $sc, ".global.cas.", $bits, " {0}, [{1}], {2}, {3};"),
                        out($reg) d, in(reg64) $p, in($reg) c, in($reg) v, options(nostack, preserves_flags))
                }
            };
        }
        macro_rules! scopes {
            ($o:literal, $t:literal) => {
                match $scope {
                    Scope::Cta => one!("cta", $o, $t),
                    Scope::Gpu => one!("gpu", $o, $t),
                    Scope::Sys => one!("sys", $o, $t),
                }
            };
        }
        match $op {
            AtomicOp::Add => scopes!("add", $add),
            AtomicOp::Min => scopes!("min", $min),
            AtomicOp::Max => scopes!("max", $max),
            AtomicOp::Exch => scopes!("exch", $bits),
            AtomicOp::Cas => match $scope {
                Scope::Cta => cas!("cta"),
                Scope::Gpu => cas!("gpu"),
                Scope::Sys => cas!("sys"),
            },
        }
        d
    }};
}

macro_rules! atomic_int {
    ($t:ty, $ut:ty, $reg:ident, add: $add:literal, min: $min:literal, max: $max:literal, bits: $bits:literal) => {
        impl Atomic for $t {
            #[inline(always)]
            fn rmw(p: *mut $t, scope: Scope, op: AtomicOp, v: $t, cmp: $t) -> $t {
                device!("atom.global", {
                    let (v, cmp) = (v as $ut, cmp as $ut);
                    atom_asm!(p, v, cmp, scope, op, $reg, $ut, add: $add, min: $min, max: $max, bits: $bits) as $t
                }, host: {
                    emu_rmw(p, |old| match op {
                        AtomicOp::Add => old.wrapping_add(v),
                        AtomicOp::Min => old.min(v),
                        AtomicOp::Max => old.max(v),
                        AtomicOp::Exch => v,
                        AtomicOp::Cas => if old == cmp { v } else { old },
                    })
                })
            }
        }
    };
}
atomic_int!(u32, u32, reg32, add: "u32", min: "u32", max: "u32", bits: "b32");
atomic_int!(i32, u32, reg32, add: "s32", min: "s32", max: "s32", bits: "b32");
atomic_int!(u64, u64, reg64, add: "u64", min: "u64", max: "u64", bits: "b64");

impl Atomic for f32 {
    /// `add` is `atom.add.f32`; `min`/`max` are a `cas` loop (PTX has no
    /// f32 `atom.min`/`max` before sm_90's `.bf16`/`.f16` forms); `exch`
    /// and `cas` compare and move the bits (`.b32`).
    #[inline(always)]
    fn rmw(p: *mut f32, scope: Scope, op: AtomicOp, v: f32, cmp: f32) -> f32 {
        match op {
            AtomicOp::Add => device!("atom.global.add.f32", {
                let v = v.to_bits();
                let d: u32;
                macro_rules! add {
                    ($sc:literal) => {
                        // SAFETY: in bounds and aligned (checked by the caller).
                        unsafe {
                            core::arch::asm!(concat!("atom.relaxed.", $sc, ".global.add.f32 {0}, [{1}], {2};"),
                                out(reg32) d, in(reg64) p, in(reg32) v, options(nostack, preserves_flags))
                        }
                    };
                }
                match scope {
                    Scope::Cta => add!("cta"),
                    Scope::Gpu => add!("gpu"),
                    Scope::Sys => add!("sys"),
                }
                f32::from_bits(d)
            }, host: { emu_rmw(p, |old| old + v) }),
            AtomicOp::Min | AtomicOp::Max => {
                let mut old = f32::from_bits(u32::rmw(p as *mut u32, scope, AtomicOp::Add, 0, 0));
                loop {
                    let new = if op == AtomicOp::Min { crate::math::min(old, v) } else { crate::math::max(old, v) };
                    if new.to_bits() == old.to_bits() {
                        return old;
                    }
                    let seen = u32::rmw(p as *mut u32, scope, AtomicOp::Cas, new.to_bits(), old.to_bits());
                    if seen == old.to_bits() {
                        return old;
                    }
                    old = f32::from_bits(seen);
                }
            }
            AtomicOp::Exch | AtomicOp::Cas => {
                f32::from_bits(u32::rmw(p as *mut u32, scope, op, v.to_bits(), cmp.to_bits()))
            }
        }
    }
}

impl<T: Atomic> Gmem<T> {
    #[inline(always)]
    #[track_caller]
    fn atomic_ptr(&self, i: usize) -> *mut T {
        check_range(i, 1, self.len());
        // SAFETY: `i < len`.
        unsafe { self.as_ptr().add(i) }
    }
    /// `atom.relaxed.gpu.global.add` on element `i` (checked): adds `v`,
    /// returns the old value. `f32`, `i32`, `u32`, `u64` (integers wrap).
    #[inline(always)]
    #[track_caller]
    pub fn atomic_add(&self, i: usize, v: T) -> T {
        T::rmw(self.atomic_ptr(i), Scope::Gpu, AtomicOp::Add, v, v)
    }
    /// `atom.relaxed.gpu.global.min` (f32: a `cas` loop with `min.f32`).
    #[inline(always)]
    #[track_caller]
    pub fn atomic_min(&self, i: usize, v: T) -> T {
        T::rmw(self.atomic_ptr(i), Scope::Gpu, AtomicOp::Min, v, v)
    }
    /// `atom.relaxed.gpu.global.max` (f32: a `cas` loop with `max.f32`).
    #[inline(always)]
    #[track_caller]
    pub fn atomic_max(&self, i: usize, v: T) -> T {
        T::rmw(self.atomic_ptr(i), Scope::Gpu, AtomicOp::Max, v, v)
    }
    /// `atom.relaxed.gpu.global.exch.b32/b64`: stores `v`, returns the old value.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_exch(&self, i: usize, v: T) -> T {
        T::rmw(self.atomic_ptr(i), Scope::Gpu, AtomicOp::Exch, v, v)
    }
    /// `atom.relaxed.gpu.global.cas.b32/b64`: stores `new` if the element
    /// equals `expected` (bitwise); returns the old value either way.
    #[inline(always)]
    #[track_caller]
    pub fn atomic_cas(&self, i: usize, expected: T, new: T) -> T {
        T::rmw(self.atomic_ptr(i), Scope::Gpu, AtomicOp::Cas, new, expected)
    }
    /// Any of the above with an explicit scope: `atom.relaxed.{cta,gpu,sys}.global.{op}`
    /// (`cmp` is used by `Cas` only).
    #[inline(always)]
    #[track_caller]
    pub fn atomic(&self, scope: Scope, op: AtomicOp, i: usize, v: T, cmp: T) -> T {
        T::rmw(self.atomic_ptr(i), scope, op, v, cmp)
    }
}

impl Gmem<u32> {
    /// Element `i` as a [`Semaphore`](crate::Semaphore) (checked: a trap
    /// on the GPU, a reported misuse on the emulator): a buffer of
    /// counters, one per group of CTAs. The element is then used only
    /// through the semaphore (atomics) during the launch.
    #[inline(always)]
    #[track_caller]
    pub fn semaphore(&self, i: usize) -> crate::Semaphore {
        check_range(i, 1, self.len);
        // SAFETY: in bounds (checked), 4-byte aligned (a `u32` of a device
        // allocation); the caller uses the element only as a semaphore.
        unsafe { crate::Semaphore::from_ptr(self.ptr.add(i)) }
    }
}

impl Gmem<f32> {
    /// `red.relaxed.gpu.global.add.v2.f32`: adds `v[0]` and `v[1]` to
    /// elements `i` and `i + 1` (checked; `i` even, so the pair is 8-byte
    /// aligned), returning nothing: one reduction of two lanes' worth per
    /// instruction, the form dQ accumulation of attention's backward uses
    /// (PTX ISA §9.7.12.7, vector `red` needs sm_90). Each element's add is
    /// atomic; the pair is not one atomic unit.
    #[inline(always)]
    #[track_caller]
    pub fn red_add_v2(&self, i: usize, v: [f32; 2]) {
        check_range(i, 2, self.len());
        if i % 2 != 0 {
            misaligned_pair(i);
        }
        // SAFETY: `i + 1 < len` (checked above).
        let p = unsafe { self.as_ptr().add(i) };
        device!("red.global.add.v2.f32", {
            // SAFETY: in bounds and 8-byte aligned (checked above).
            unsafe {
                core::arch::asm!("red.relaxed.gpu.global.add.v2.f32 [{0}], {{{1}, {2}}};",
                    in(reg64) p, in(reg32) v[0].to_bits(), in(reg32) v[1].to_bits(), options(nostack, preserves_flags))
            }
        }, host: {
            emu_rmw(p, |old| old + v[0]);
            // SAFETY: `i + 1 < len` (checked above).
            emu_rmw(unsafe { p.add(1) }, |old| old + v[1]);
        })
    }
}

#[cold]
#[track_caller]
fn misaligned_pair(i: usize) -> ! {
    device!("gmem pair alignment", {
        let _ = i;
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse("Gmem::red_add_v2 at an odd index", format_args!("index {i} is odd: a pair of f32 must be 8-byte aligned; start the pair at an even index"))
    })
}

/// Bounds check of `n` elements at `i` of a view of `len` (traps on the
/// GPU, a reported misuse on the emulator).
#[inline(always)]
#[track_caller]
pub(crate) fn check_range(i: usize, n: usize, len: usize) {
    if i >= len || len - i < n {
        out_of_bounds(i + n - 1, len);
    }
}

/// The address of a vector access of `n` 32-bit elements at `i`: in bounds
/// and aligned to `4 n` bytes, or a trap / reported misuse.
#[inline(always)]
#[track_caller]
fn checked_vec<T>(ptr: *const T, i: usize, n: usize, len: usize) -> *const T {
    check_range(i, n, len);
    // SAFETY: `i + n <= len`.
    let p = unsafe { ptr.add(i) };
    if (p as usize) % (4 * n) != 0 {
        misaligned(p as usize, 4 * n);
    }
    p
}

#[cold]
#[track_caller]
fn misaligned(addr: usize, align: usize) -> ! {
    device!("gmem alignment check", {
        let _ = (addr, align);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "misaligned vector global-memory access (a v2/v4 access needs its whole size's alignment)",
            format_args!(
                "address {addr:#x} is not {align}-byte aligned: start the vector at an element index that is a \
                 multiple of {} from an aligned buffer",
                align / 4
            ),
        )
    })
}

/// The address of the 16-byte pack of `T` at element `i` of a view of
/// `len` elements at `ptr`: in bounds, `i` a multiple of `T::LANES` and the
/// address 16-byte aligned, or a trap / reported misuse (one branch on the
/// GPU).
#[inline(always)]
#[track_caller]
fn checked_pack<T: Pack16>(ptr: *const T, i: usize, len: usize) -> *const T::Pack {
    check_range(i, T::LANES, len);
    let p = ptr.wrapping_add(i);
    if (i % T::LANES) | (p as usize % 16) != 0 {
        misaligned_pack::<T>(i, p as usize);
    }
    p.cast()
}

#[cold]
#[track_caller]
fn misaligned_pack<T: Pack16>(i: usize, addr: usize) -> ! {
    device!("gmem pack alignment check", {
        let _ = (i, addr);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        let (lanes, t) = (T::LANES, core::any::type_name::<T>());
        if i % lanes != 0 {
            kernel_emu::misuse(
                "misaligned vector global-memory access (the index of a 16-byte access, read_v4/read_nc_v4/write_v4, must be a multiple of the pack's lanes)",
                format_args!(
                    "index {i} of a view of {t}: 16 bytes hold {lanes} {t}, so the index must be a multiple of {lanes}; \
                     start the pack at {} or {}, or access single elements with read/write",
                    i - i % lanes,
                    i - i % lanes + lanes
                ),
            )
        }
        kernel_emu::misuse(
            "misaligned vector global-memory access (a 16-byte access, read_v4/read_nc_v4/write_v4, needs a 16-byte aligned address)",
            format_args!(
                "element {i} of a view of {t} is at {addr:#x}, not 16-byte aligned: the view itself does not start on \
                 16 bytes (every host buffer does; a view built by from_raw_parts at an offset may not)"
            ),
        )
    })
}

// ----- emulator access points ---------------------------------------------------
//
// Every emulated access of the views above goes through `emu_access`
// (scalar reads and writes), the emulator bodies of [`raw`] (vector
// accesses: `kernel_emu::gmem_access` too) or `emu_rmw` (atomics): the
// places where the emulator's happens-before (race) checks hook in.

/// An ordinary emulated access of `len` bytes at `p` (not a scheduling
/// point): checked and recorded by the emulator's race detector
/// (`kernel_emu::gmem_access`); nothing on the device.
#[inline(always)]
#[track_caller]
fn emu_access(p: *const u8, len: usize, write: bool) {
    #[cfg(not(target_arch = "nvptx64"))]
    kernel_emu::gmem_access(p, len, write);
    #[cfg(target_arch = "nvptx64")]
    let _ = (p, len, write);
}

/// An emulated relaxed atomic on `p` (not a scheduling point).
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn emu_atomic(p: *const u8) {
    let _ = p;
}

/// An emulated atomic read-modify-write of `*p`: a scheduling point, then
/// the update as one step (no other emulated thread runs in between).
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn emu_rmw<T: Copy>(p: *mut T, f: impl FnOnce(T) -> T) -> T {
    kernel_emu::yield_point("atom.global");
    emu_atomic(p as *const u8);
    // SAFETY: in bounds and aligned (checked by the caller); one emulated
    // thread runs at a time.
    unsafe {
        let old = p.read();
        p.write(f(old));
        old
    }
}
