//! Checked pointers into global and shared memory: what the escape hatches
//! of the typed handles hand out, and what the library's own fragment and
//! vector accesses go through.
//!
//! | escape hatch | gives |
//! |---|---|
//! | [`Gmem::ptr`](crate::Gmem::ptr), [`GmemRef::ptr`](crate::GmemRef::ptr) | a [`GmemPtr<T>`] bounded by the view |
//! | [`Smem::ptr`](crate::Smem::ptr), [`Smem::elem_ptr`](crate::Smem::elem_ptr), a tile's [`elem_ptr_2d`](crate::Smem::elem_ptr_2d) | an [`SmemPtr<T>`] bounded by the scratch allocation (or the slot: [`Smem::at`](crate::Smem::at)) |
//! | [`Smem::map_rank`](crate::Smem::map_rank) | the same allocation in another CTA of the cluster, as an [`Smem`](crate::Smem) |
//! | [`Ptr::as_raw_unchecked`] (`unsafe`) | the bare `*mut T`: nothing checked on the emulator either |
//!
//! On the GPU a [`Ptr<T, M>`] is the bare pointer (`#[repr(transparent)]`),
//! and [`Ptr::read`] / [`Ptr::write`] / [`Ptr::add`] compile to exactly
//! what `*const T::read`, `*mut T::write` and `ptr.add` do: one `ld`/`st`,
//! no check. On the CPU emulator the pointer also carries the bounds of the
//! allocation it was derived from (a `Gmem` view, a scratch region, a slot
//! of one), like a capability, and every `read`/`write` is
//!
//! * bounds-checked: an access not wholly inside those bounds is reported
//!   ("out-of-bounds global-memory access" / "out-of-bounds shared-memory
//!   access", through a pointer) with the thread and the kernel's line;
//! * alignment-checked against `T` (on the GPU a misaligned access faults);
//! * reported to the race detector as the calling thread's read or write of
//!   those bytes (`kernel_emu::gmem_access` / `smem_access`), at the
//!   kernel's line.
//!
//! So a kernel that reaches memory through these pointers needs no call of
//! its own to the emulator: the plain dereference of a raw pointer, which
//! the emulator cannot see, is reachable only through the explicitly
//! unchecked [`Ptr::as_raw_unchecked`] (and raw `*const T`/`*mut T` kernel
//! parameters, which `#[kernel]` asks to be marked `#[unchecked]`).
//!
//! Arithmetic ([`Ptr::add`], [`Ptr::byte_add`], [`Ptr::cast`]) keeps the
//! bounds: a pointer walked past its allocation is reported where it is
//! dereferenced, not where it is computed (on the emulator the arithmetic
//! wraps instead of being undefined).
//!
//! ```
//! use kernel_device::prelude::*;
//!
//! /// `y[i] = x[i] + x[i + 1]` through pointers (the last thread reads one
//! /// past the end: the emulator reports it at this line).
//! #[kernel(block = threads(32))]
//! pub fn pair_sums(x: GmemRef<f32>, y: Gmem<f32>) {
//!     let t = thread_idx().x as usize;
//!     let p = x.ptr();
//!     // SAFETY: deliberately wrong for t = 31 (x holds 32 values).
//!     let v = unsafe { p.add(t).read() + p.add(t + 1).read() };
//!     y.write(t, v);
//! }
//! ```
use core::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// The memory a [`Ptr`] points into: [`Global`] or [`Shared`]. Gives the
/// emulator's access hook and the names its reports use.
pub trait Memory: sealed::Sealed + 'static {
    /// What a pointer's bounds are, in reports.
    const REGION: &'static str;
    /// The rule of an access outside a pointer's bounds.
    const OOB_RULE: &'static str;
    /// The rule of a misaligned access through a pointer.
    const MISALIGNED_RULE: &'static str;
    /// Reports an ordinary access to the emulator's race detector.
    #[cfg(not(target_arch = "nvptx64"))]
    #[doc(hidden)]
    #[track_caller]
    fn access(p: *const u8, len: usize, write: bool);
}

/// Global memory (a [`Gmem`](crate::Gmem) or [`GmemRef`](crate::GmemRef)
/// view, a device allocation).
#[derive(Clone, Copy, Debug)]
pub enum Global {}
/// The shared memory of a CTA (a scratch allocation, or another CTA's of
/// the cluster).
#[derive(Clone, Copy, Debug)]
pub enum Shared {}
impl sealed::Sealed for Global {}
impl sealed::Sealed for Shared {}

impl Memory for Global {
    const REGION: &'static str = "Gmem view";
    const OOB_RULE: &'static str =
        "out-of-bounds global-memory access through a pointer (outside the Gmem view it was derived from)";
    const MISALIGNED_RULE: &'static str =
        "misaligned global-memory access through a pointer (an access of `T` needs `align_of::<T>()`)";
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    #[track_caller]
    fn access(p: *const u8, len: usize, write: bool) {
        kernel_emu::gmem_access(p, len, write)
    }
}

impl Memory for Shared {
    const REGION: &'static str = "shared-memory allocation";
    const OOB_RULE: &'static str =
        "out-of-bounds shared-memory access through a pointer (outside the shared-memory allocation it was derived from)";
    const MISALIGNED_RULE: &'static str =
        "misaligned shared-memory access through a pointer (an access of `T` needs `align_of::<T>()`)";
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    #[track_caller]
    fn access(p: *const u8, len: usize, write: bool) {
        kernel_emu::smem_access(p, len, write)
    }
}

/// A pointer to a `T` in global memory, checked on the emulator (module docs).
pub type GmemPtr<T> = Ptr<T, Global>;
/// A pointer to a `T` in shared memory, checked on the emulator (module docs).
pub type SmemPtr<T> = Ptr<T, Shared>;

/// A pointer to a `T` in memory `M`: the bare pointer on the GPU; on the
/// emulator also the bounds of the allocation it came from, so that every
/// [`read`](Ptr::read) and [`write`](Ptr::write) is bounds-, alignment- and
/// race-checked (module docs).
#[cfg_attr(target_arch = "nvptx64", repr(transparent))]
pub struct Ptr<T, M: Memory> {
    p: *mut T,
    /// The byte range `[lo, hi)` it may access (host addresses).
    #[cfg(not(target_arch = "nvptx64"))]
    lo: usize,
    #[cfg(not(target_arch = "nvptx64"))]
    hi: usize,
    _m: PhantomData<M>,
}

impl<T, M: Memory> Clone for Ptr<T, M> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, M: Memory> Copy for Ptr<T, M> {}

impl<T, M: Memory> core::fmt::Debug for Ptr<T, M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        #[cfg(not(target_arch = "nvptx64"))]
        return write!(f, "Ptr<{}>({:p} in {:#x}..{:#x})", core::any::type_name::<T>(), self.p, self.lo, self.hi);
        #[cfg(target_arch = "nvptx64")]
        write!(f, "Ptr<{}>({:p})", core::any::type_name::<T>(), self.p)
    }
}

impl<T, M: Memory> Ptr<T, M> {
    /// `p`, which may access the `bytes` bytes at `base` (its allocation).
    #[inline(always)]
    pub(crate) fn within(p: *mut T, base: *const u8, bytes: usize) -> Self {
        #[cfg(target_arch = "nvptx64")]
        let _ = (base, bytes);
        Ptr {
            p,
            #[cfg(not(target_arch = "nvptx64"))]
            lo: base as usize,
            #[cfg(not(target_arch = "nvptx64"))]
            hi: (base as usize).wrapping_add(bytes),
            _m: PhantomData,
        }
    }

    /// The same address as a `U` (the bounds stay).
    #[inline(always)]
    pub fn cast<U>(self) -> Ptr<U, M> {
        Ptr {
            p: self.p.cast(),
            #[cfg(not(target_arch = "nvptx64"))]
            lo: self.lo,
            #[cfg(not(target_arch = "nvptx64"))]
            hi: self.hi,
            _m: PhantomData,
        }
    }

    #[inline(always)]
    fn with(self, p: *mut T) -> Self {
        Ptr { p, ..self }
    }

    /// `count` elements further (`ptr.add`; the bounds stay: an access
    /// outside them is reported where it happens).
    ///
    /// # Safety
    /// As `<*mut T>::add`: the result lies in (or one past) the allocation.
    /// On the emulator the arithmetic wraps and the access is checked.
    #[inline(always)]
    pub unsafe fn add(self, count: usize) -> Self {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        return self.with(unsafe { self.p.add(count) });
        #[cfg(not(target_arch = "nvptx64"))]
        self.with(self.p.wrapping_add(count))
    }

    /// `count` bytes further (`ptr.byte_add`).
    ///
    /// # Safety
    /// As [`Ptr::add`].
    #[inline(always)]
    pub unsafe fn byte_add(self, count: usize) -> Self {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        return self.with(unsafe { self.p.byte_add(count) });
        #[cfg(not(target_arch = "nvptx64"))]
        self.with(self.p.wrapping_byte_add(count))
    }

    /// `count` elements further, wrapping (`ptr.wrapping_add`): safe to
    /// compute, checked when dereferenced.
    #[inline(always)]
    pub fn wrapping_add(self, count: usize) -> Self {
        self.with(self.p.wrapping_add(count))
    }

    /// The address (for alignment arithmetic).
    #[inline(always)]
    pub fn addr(self) -> usize {
        self.p as usize
    }

    /// The bare pointer. Nothing checks what is done through it, on the
    /// emulator either: no bounds, no alignment, no race detection (a
    /// plain dereference on the host cannot be hooked). Use it only to hand
    /// the address to an instruction that takes one (an atomic, a TMA
    /// copy, a spin-load through `semaphore::raw`).
    ///
    /// # Safety
    /// The caller takes over what the emulator checked: every access
    /// through the result stays inside the allocation, is aligned, and is
    /// ordered with other threads' accesses by the kernel's
    /// synchronization, with no tool to say otherwise.
    #[inline(always)]
    pub unsafe fn as_raw_unchecked(self) -> *mut T {
        self.p
    }

    /// The emulator's checks of a `size_of::<T>()`-byte access (bounds,
    /// alignment), then the race detector's record of it.
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    #[track_caller]
    fn emu_check(&self, write: bool) {
        let (a, n) = (self.p as usize, core::mem::size_of::<T>());
        if a < self.lo || a > self.hi || self.hi - a < n {
            self.out_of_bounds(write);
        }
        if a % core::mem::align_of::<T>() != 0 {
            self.misaligned(write);
        }
        M::access(self.p as *const u8, n, write);
    }

    /// The emulator's check of a view of `len` elements made from this
    /// pointer (`Gmem::from_ptr`): inside the bounds, aligned.
    #[cfg(not(target_arch = "nvptx64"))]
    #[track_caller]
    pub(crate) fn check_view(&self, len: usize) {
        let (a, n) = (self.p as usize, len.saturating_mul(core::mem::size_of::<T>()));
        if a < self.lo || a > self.hi || self.hi - a < n {
            let what = core::any::type_name::<T>();
            kernel_emu::misuse(
                M::OOB_RULE,
                format_args!(
                    "a view of {len} `{what}` ({n} bytes) at {a:#x}, byte offset {} of a {}-byte {} ({:#x}..{:#x}): \
                     the view reaches past the allocation of the pointer it was made from",
                    a as i128 - self.lo as i128,
                    self.hi.wrapping_sub(self.lo),
                    M::REGION,
                    self.lo,
                    self.hi
                ),
            )
        }
        if a % core::mem::align_of::<T>() != 0 {
            self.misaligned(false);
        }
    }

    #[cfg(not(target_arch = "nvptx64"))]
    #[cold]
    #[track_caller]
    fn out_of_bounds(&self, write: bool) -> ! {
        let (a, n, len) = (self.p as usize, core::mem::size_of::<T>(), self.hi.wrapping_sub(self.lo));
        let off = a as i128 - self.lo as i128;
        let what = if write { "write" } else { "read" };
        kernel_emu::misuse(
            M::OOB_RULE,
            format_args!(
                "a {n}-byte {what} of `{}` at {a:#x}, byte offset {off} of a {len}-byte {} ({:#x}..{:#x}): the pointer \
                 was moved past its allocation (check the index arithmetic before `add`/`byte_add`)",
                core::any::type_name::<T>(),
                M::REGION,
                self.lo,
                self.hi
            ),
        )
    }

    #[cfg(not(target_arch = "nvptx64"))]
    #[cold]
    #[track_caller]
    fn misaligned(&self, write: bool) -> ! {
        let (a, align) = (self.p as usize, core::mem::align_of::<T>());
        let what = if write { "write" } else { "read" };
        kernel_emu::misuse(
            M::MISALIGNED_RULE,
            format_args!(
                "a {what} of `{}` at {a:#x}, which is not {align}-byte aligned (on the GPU: a misaligned-address fault)",
                core::any::type_name::<T>()
            ),
        )
    }

    /// The emulator's checks and race record of one access of a `T` here
    /// (as [`Ptr::read`] / [`Ptr::write`] make), then the bare pointer, for
    /// the crate's own loads and stores of aggregates (`[u32; 4]`, a
    /// 16-byte pack): a load written in place keeps the value out of a
    /// function's return (the Rust ABI returns a 16-byte aggregate as one
    /// integer, which the NVPTX backend then splits in another register
    /// order: the same instructions, renumbered).
    ///
    /// # Safety
    /// The access made through the result is the one checked.
    #[inline(always)]
    #[track_caller]
    pub(crate) unsafe fn checked(self, write: bool) -> *mut T {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_check(write);
        #[cfg(target_arch = "nvptx64")]
        let _ = write;
        self.p
    }

    /// `*p`: one load (`ld`), the width of `T`. On the emulator: checked
    /// (bounds, alignment) and recorded by the race detector as this
    /// thread's read, at the caller's line.
    ///
    /// # Safety
    /// `p` points to a valid `T` (in bounds and aligned: the emulator
    /// checks, the GPU does not), and other threads' writes of it are
    /// ordered with this read by the kernel's synchronization (the
    /// emulator checks).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(self) -> T
    where
        T: Copy,
    {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_check(false);
        // SAFETY: the caller's contract (checked above on the emulator).
        unsafe { self.p.read() }
    }

    /// `*p = v`: one store (`st`), the width of `T`. On the emulator:
    /// checked and recorded as this thread's write (as [`Ptr::read`]).
    ///
    /// # Safety
    /// `p` points to a `T` the kernel may write (in bounds and aligned),
    /// and other threads' accesses of it are ordered with this write by
    /// the kernel's synchronization (the emulator checks).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(self, v: T) {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_check(true);
        // SAFETY: the caller's contract (checked above on the emulator).
        unsafe { self.p.write(v) }
    }
}

/// The bounds of a [`Ptr`] with its memory as a value (nothing on the GPU,
/// a zero-sized type there): for code that keeps the bare pointer on the
/// GPU path, so that its generated code stays exactly what it was, and
/// checks each access on the emulator ([`Bounds::check`]).
#[derive(Clone, Copy)]
pub(crate) struct Bounds {
    #[cfg(not(target_arch = "nvptx64"))]
    lo: usize,
    #[cfg(not(target_arch = "nvptx64"))]
    hi: usize,
    #[cfg(not(target_arch = "nvptx64"))]
    shared: bool,
}

impl<T, M: Memory> Ptr<T, M> {
    /// The bare pointer and the bounds (see [`Bounds`]).
    #[inline(always)]
    pub(crate) fn split(self) -> (*mut T, Bounds) {
        #[cfg(not(target_arch = "nvptx64"))]
        let b = Bounds { lo: self.lo, hi: self.hi, shared: core::any::TypeId::of::<M>() == core::any::TypeId::of::<Shared>() };
        #[cfg(target_arch = "nvptx64")]
        let b = Bounds {};
        (self.p, b)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl Bounds {
    /// The emulator's checks and race record of an access of a `U` at `p`,
    /// as [`Ptr::read`] / [`Ptr::write`] make them.
    #[inline(always)]
    #[track_caller]
    pub(crate) fn check<U>(self, p: *const U, write: bool) {
        let q = Ptr::<U, Global> { p: p as *mut U, lo: self.lo, hi: self.hi, _m: PhantomData };
        if self.shared {
            // SAFETY: only the checks run.
            let _ = unsafe { q.cast::<U>().retag::<Shared>().checked(write) };
        } else {
            // SAFETY: as above.
            let _ = unsafe { q.checked(write) };
        }
    }
}

impl<T, M: Memory> Ptr<T, M> {
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    fn retag<N: Memory>(self) -> Ptr<T, N> {
        Ptr { p: self.p, lo: self.lo, hi: self.hi, _m: PhantomData }
    }
}

impl<V: Copy> Ptr<V, Global> {
    /// `ld.global{,.v2,.v4}.b32 d, [p];`: the `V` here in one instruction
    /// of its width, 4, 8 or 16 bytes ([`gmem::raw::load`](crate::gmem::raw::load),
    /// e.g. a `[bf16; 8]`, whose own alignment would split a plain read).
    /// On the emulator bounds-, alignment- (to `size_of::<V>()`) and
    /// race-checked at the caller's line.
    ///
    /// # Safety
    /// As [`gmem::raw::load`](crate::gmem::raw::load) (which the emulator checks).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_v(self) -> V {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_bounds(false);
        // SAFETY: the caller's contract.
        unsafe { crate::gmem::raw::load(self.p) }
    }
    /// `ld.global.nc{,.v2,.v4}.b32`: as [`Ptr::read_v`] through the
    /// read-only cache ([`gmem::raw::load_nc`](crate::gmem::raw::load_nc)).
    ///
    /// # Safety
    /// As [`gmem::raw::load_nc`](crate::gmem::raw::load_nc): nothing writes
    /// the bytes during the kernel.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_nc_v(self) -> V {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_bounds(false);
        // SAFETY: the caller's contract.
        unsafe { crate::gmem::raw::load_nc(self.p) }
    }
    /// `st.global{,.v2,.v4}.b32 [p], v;`: `v` in one instruction of its
    /// width ([`gmem::raw::store`](crate::gmem::raw::store)), checked as
    /// [`Ptr::read_v`].
    ///
    /// # Safety
    /// As [`gmem::raw::store`](crate::gmem::raw::store).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_v(self, v: V) {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_bounds(true);
        // SAFETY: the caller's contract.
        unsafe { crate::gmem::raw::store(self.p, v) }
    }
}

impl<V: Copy> Ptr<V, Shared> {
    /// `ld.shared{,.v2,.v4}.b32 d, [a];`: the `V` here in one instruction
    /// of its width, 4, 8 or 16 bytes ([`smem::raw::load`](crate::smem::raw::load)).
    /// On the emulator bounds-, alignment- (to `size_of::<V>()`) and
    /// race-checked at the caller's line.
    ///
    /// # Safety
    /// As [`smem::raw::load`](crate::smem::raw::load) (which the emulator checks).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read_v(self) -> V {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_bounds(false);
        // SAFETY: the caller's contract.
        unsafe { crate::smem::raw::load(self.p) }
    }
    /// `st.shared{,.v2,.v4}.b32 [a], v;`: `v` in one instruction of its
    /// width ([`smem::raw::store`](crate::smem::raw::store)), checked as
    /// [`Ptr::read_v`].
    ///
    /// # Safety
    /// As [`smem::raw::store`](crate::smem::raw::store).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write_v(self, v: V) {
        #[cfg(not(target_arch = "nvptx64"))]
        self.emu_bounds(true);
        // SAFETY: the caller's contract.
        unsafe { crate::smem::raw::store(self.p, v) }
    }
}

impl<T, M: Memory> Ptr<T, M> {
    /// The emulator's bounds check alone (the vector forms' raw operation
    /// checks the alignment and records the access).
    #[cfg(not(target_arch = "nvptx64"))]
    #[inline(always)]
    #[track_caller]
    fn emu_bounds(&self, write: bool) {
        let (a, n) = (self.p as usize, core::mem::size_of::<T>());
        if a < self.lo || a > self.hi || self.hi - a < n {
            self.out_of_bounds(write);
        }
    }
}

impl<T> Ptr<T, Shared> {
    /// A pointer into this CTA's shared memory made from a bare one, with
    /// no allocation known: on the emulator its bounds are the whole
    /// dynamic shared memory of the CTA that holds it (an access outside
    /// every CTA's shared memory is reported).
    ///
    /// # Safety
    /// `p` points into shared memory for the kernel's lifetime.
    #[inline(always)]
    pub unsafe fn from_raw(p: *mut T) -> Self {
        #[cfg(not(target_arch = "nvptx64"))]
        let (base, bytes) = kernel_emu::smem_buffer_of(p as *const u8).unwrap_or((core::ptr::null(), 0));
        #[cfg(target_arch = "nvptx64")]
        let (base, bytes) = (core::ptr::null::<u8>(), 0);
        Ptr::within(p, base, bytes)
    }

    /// The 32-bit `.shared::cta` address (`cvta.to.shared`), for the
    /// instructions that take one (`ldmatrix`, mbarriers, TMA).
    #[inline(always)]
    #[track_caller]
    pub fn smem_addr(self) -> u32 {
        crate::smem::shared_addr(self.p)
    }
}
