//! Bounds-checked views of global memory.
//!
//! A `Gmem<T>` kernel parameter is a device pointer with its length. Its
//! accessors check the index: on the GPU an out-of-bounds access traps (the
//! launch fails, named by the host runtime); on the CPU emulator it is
//! reported as "out-of-bounds global-memory access" with the thread and the
//! kernel's source line. Raw `*const T`/`*mut T` parameters are not checked
//! (dereferencing them is the kernel's `unsafe`). The emulator also checks
//! every `Gmem` access for races (happens-before) against other threads'
//! accesses and TMA copies; raw pointer dereferences cannot be hooked.
use crate::launch::DeviceParam;

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
    /// The start pointer (unchecked accesses are the caller's `unsafe`).
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
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
        // SAFETY: as `read`.
        let p = unsafe { self.ptr.add(i) };
        #[cfg(not(target_arch = "nvptx64"))]
        kernel_emu::gmem_access(p as *const u8, core::mem::size_of::<T>(), true);
        // SAFETY: as `read`.
        unsafe { p.write(v) }
    }
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
