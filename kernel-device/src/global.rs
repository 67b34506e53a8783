//! Grid-wide scratch in global memory (Pallas's `pl.get_global`): a
//! semaphore or a buffer that every CTA of one launch shares, declared by
//! the kernel and never passed by the caller.
//!
//! ```
//! use kernel_device::prelude::*;
//! use kernel_device::global::GlobalBuf;
//!
//! /// Block 1 waits for block 0's value (the Pallas reference's example).
//! #[kernel(block = threads(32))]
//! pub fn handoff(out: Gmem<u32>,
//!                #[global_scratch] ready: Semaphore,
//!                #[global_scratch] value: GlobalBuf<u32, 1>) {
//!     if thread_idx().x == 0 {
//!         if block_idx().x == 0 {
//!             value.write(0, 42);
//!             ready.signal(1); // release: the write above is published
//!         } else {
//!             ready.wait(1); // acquire
//!             out.write(0, value.read(0));
//!         }
//!     }
//! }
//! assert_eq!(<handoff as kernel_device::KernelSpec>::GLOBAL_SCRATCH_BYTES, 8);
//! ```
//!
//! What the launch does (GPU and emulator alike, `kernel_host`):
//!
//! 1. before the launch, allocate [`KernelSpec::GLOBAL_SCRATCH_BYTES`]
//!    (the `#[global_scratch]` parameters laid out in order, each at its
//!    alignment) of global memory and zero it (`cuMemAllocAsync` +
//!    `cuMemsetD8Async` on the launch stream; a zeroed host buffer on the
//!    emulator);
//! 2. pass its address as one hidden trailing kernel parameter (the PTX
//!    entry's last `.param .u64`), which the prologue splits into the
//!    typed handles;
//! 3. free it after the launch (stream-ordered on the GPU, so after the
//!    kernel finished).
//!
//! The memory lives for one launch: it starts at zero every time, so a
//! counter needs no reset, and nothing survives to the next launch. Every
//! access goes through [`Semaphore`] or [`crate::Gmem`] (through
//! [`GlobalBuf`]'s `Deref`), so the emulator's race detector sees them.
//!
//! [`KernelSpec::GLOBAL_SCRATCH_BYTES`]: crate::KernelSpec::GLOBAL_SCRATCH_BYTES
use crate::gmem::Gmem;
use crate::semaphore::Semaphore;

/// A type that can be a `#[global_scratch]` kernel parameter: a handle to
/// `BYTES` of zeroed global memory that the host allocates per launch.
///
/// # Safety
/// `from_global` must only use `ptr..ptr + BYTES`, and `ALIGN` must be a
/// power of two no larger than 256 (the alignment of a device allocation).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[global_scratch]` parameter",
    label = "not a GlobalScratch type",
    note = "grid-wide scratch is a `Semaphore`, `[Semaphore; N]` or `GlobalBuf<T, N>` (N elements of T in global memory)"
)]
pub unsafe trait GlobalScratch: Sized {
    /// Bytes reserved in the launch's global scratch.
    const BYTES: usize;
    /// Alignment of the start, a power of two (at most 256).
    const ALIGN: usize;
    /// Builds the handle for the allocation at `ptr` (aligned to `ALIGN`).
    ///
    /// # Safety
    /// `ptr..ptr + BYTES` is zero-initialized global memory that lives for
    /// the launch and is used by nothing but this handle.
    unsafe fn from_global(ptr: *mut u8) -> Self;
}

// SAFETY: one `u32`.
unsafe impl GlobalScratch for Semaphore {
    const BYTES: usize = 4;
    const ALIGN: usize = 4;
    #[inline(always)]
    unsafe fn from_global(ptr: *mut u8) -> Self {
        // SAFETY: a zeroed, 4-byte-aligned `u32` for the launch (caller).
        unsafe { Semaphore::from_ptr(ptr.cast()) }
    }
}

// SAFETY: `N` consecutive `u32`s.
unsafe impl<const N: usize> GlobalScratch for [Semaphore; N] {
    const BYTES: usize = 4 * N;
    const ALIGN: usize = 4;
    #[inline(always)]
    unsafe fn from_global(ptr: *mut u8) -> Self {
        // SAFETY: element `i` is the `i`-th zeroed `u32` of the allocation.
        core::array::from_fn(|i| unsafe { Semaphore::from_ptr(ptr.cast::<u32>().add(i)) })
    }
}

/// `N` elements of `T` in global memory shared by every CTA of the launch,
/// zeroed before it: a `#[global_scratch]` parameter. It dereferences to
/// a [`Gmem<T>`] of `N` elements (checked `read`/`write`, vector accesses,
/// atomics), so the emulator's race detector sees every access.
#[derive(Clone, Copy)]
pub struct GlobalBuf<T, const N: usize> {
    gmem: Gmem<T>,
}

impl<T: Copy, const N: usize> GlobalBuf<T, N> {
    /// The buffer as a bounds-checked [`Gmem<T>`] view.
    #[inline(always)]
    pub fn gmem(&self) -> Gmem<T> {
        self.gmem
    }
}

impl<T, const N: usize> core::ops::Deref for GlobalBuf<T, N> {
    type Target = Gmem<T>;
    #[inline(always)]
    fn deref(&self) -> &Gmem<T> {
        &self.gmem
    }
}

// SAFETY: `N` elements of `T` at `T`'s alignment.
unsafe impl<T: Copy, const N: usize> GlobalScratch for GlobalBuf<T, N> {
    const BYTES: usize = {
        assert!(N > 0, "GlobalBuf<T, N>: N (the element count) must be at least 1");
        assert!(core::mem::align_of::<T>() <= 256, "GlobalBuf<T, N>: T's alignment is above the 256 bytes of a device allocation");
        N * core::mem::size_of::<T>()
    };
    const ALIGN: usize = core::mem::align_of::<T>();
    #[inline(always)]
    unsafe fn from_global(ptr: *mut u8) -> Self {
        // SAFETY: `N` zeroed elements (all-zero bits are the caller's
        // initial value) for the launch.
        GlobalBuf { gmem: unsafe { Gmem::from_raw_parts(ptr.cast(), N) } }
    }
}

/// The address of `#[global_scratch]` item `offset` of the launch's
/// allocation at `base`, or a trap (GPU) / reported misuse (emulator) when
/// the launcher passed none (a host path that does not know the kernel's
/// `GLOBAL_SCRATCH_BYTES`). Called by `#[kernel]`'s prologue.
///
/// # Safety
/// `base` is null or the start of the launch's global scratch, and
/// `offset` is inside it (an offset of the kernel's layout).
#[inline(always)]
#[track_caller]
pub unsafe fn global_scratch_ptr(base: *mut u8, offset: usize) -> *mut u8 {
    if base.is_null() {
        missing_global_scratch();
    }
    // SAFETY: the caller's contract.
    unsafe { base.add(offset) }
}

#[cold]
#[track_caller]
fn missing_global_scratch() -> ! {
    device!("global scratch check", {
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "a kernel with #[global_scratch] parameters launched without its global scratch",
            format_args!(
                "the launcher passed a null global-scratch address: launch through kernel_host \
                 (Device/Launcher, Kernel or Emulator), which allocates KernelSpec::GLOBAL_SCRATCH_BYTES"
            ),
        )
    })
}
