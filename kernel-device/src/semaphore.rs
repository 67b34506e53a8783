//! Global-memory semaphores: 32-bit counters that CTAs of one grid use to
//! signal each other (Pallas's `pl.semaphore_signal`/`semaphore_wait`).
//!
//! `signal` is a release atomic add at GPU scope, so every write the
//! signalling thread made before it is visible to a thread whose `wait`
//! observes the signal (acquire). A waiting CTA spins: the CTA it waits for
//! must be resident at the same time (a persistent grid no larger than the
//! GPU can hold), or the kernel deadlocks.

/// A semaphore: a pointer to a zero-initialized `u32` in global memory.
/// It is a kernel parameter (the host passes a `CudaSlice<u32>`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct Semaphore {
    ptr: *mut u32,
}

// SAFETY: a plain device pointer.
unsafe impl crate::launch::DeviceParam for Semaphore {
    type Abi = Semaphore;
    #[inline(always)]
    fn from_abi(abi: Semaphore, _: u64) -> Semaphore {
        abi
    }
}

pub mod raw {
    /// Release add, acquire load and acquire compare-and-swap on a global
    /// `u32` at one scope: `.gpu` (threads of this GPU) or `.sys` (every GPU
    /// of the host and the host: cross-device semaphores, [`crate::peer`]).
    macro_rules! scoped_ops {
        ($scope:literal, $emu_scope:ident, $red:ident = $red_op:literal, $ld:ident = $ld_op:literal, $cas:ident = $cas_op:literal) => {
            #[doc = concat!("`red.release.", $scope, ".global.add.u32 [ptr], n;` (PTX ISA §9.7.12.7, sm_70).")]
            ///
            /// # Safety
            /// `ptr` is a valid, 4-byte-aligned global address (this
            /// device's memory, or with `.sys` a peer's).
            #[inline(always)]
            pub unsafe fn $red(ptr: *mut u32, n: u32) {
                device!($red_op, {
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(concat!("red.release.", $scope, ".global.add.u32 [{0}], {1};"), in(reg64) ptr, in(reg32) n,
                            options(nostack, preserves_flags))
                    }
                }, host: {
                    kernel_emu::yield_point($red_op);
                    kernel_emu::gmem_atomic_scoped(ptr as *const u8, false, true, kernel_emu::AtomicScope::$emu_scope);
                    // SAFETY: caller contract; the emulator runs one thread at a time,
                    // so this read-modify-write is atomic.
                    unsafe { *ptr = (*ptr).wrapping_add(n) }
                })
            }

            #[doc = concat!("`ld.acquire.", $scope, ".global.u32 v, [ptr];` (PTX ISA §9.7.9.8, sm_70).")]
            ///
            /// # Safety
            #[doc = concat!("As [`", stringify!($red), "`].")]
            #[inline(always)]
            pub unsafe fn $ld(ptr: *const u32) -> u32 {
                device!($ld_op, {
                    let v: u32;
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(concat!("ld.acquire.", $scope, ".global.u32 {0}, [{1}];"), out(reg32) v, in(reg64) ptr,
                            options(nostack, preserves_flags))
                    };
                    v
                }, host: {
                    kernel_emu::yield_point($ld_op);
                    kernel_emu::gmem_atomic_scoped(ptr as *const u8, true, false, kernel_emu::AtomicScope::$emu_scope);
                    // SAFETY: caller contract.
                    unsafe { ptr.read_volatile() }
                })
            }

            #[doc = concat!("`atom.acquire.", $scope, ".global.cas.b32 old, [ptr], cmp, new;` (PTX ISA §9.7.12.5, sm_70). Returns the old value.")]
            ///
            /// # Safety
            #[doc = concat!("As [`", stringify!($red), "`].")]
            #[inline(always)]
            pub unsafe fn $cas(ptr: *mut u32, cmp: u32, new: u32) -> u32 {
                device!($cas_op, {
                    let old: u32;
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(concat!("atom.acquire.", $scope, ".global.cas.b32 {0}, [{1}], {2}, {3};"), out(reg32) old, in(reg64) ptr,
                            in(reg32) cmp, in(reg32) new, options(nostack, preserves_flags))
                    };
                    old
                }, host: {
                    kernel_emu::yield_point("atom.cas");
                    kernel_emu::gmem_atomic_scoped(ptr as *const u8, true, false, kernel_emu::AtomicScope::$emu_scope);
                    // SAFETY: caller contract; one emulated thread runs at a time.
                    unsafe {
                        let old = *ptr;
                        if old == cmp {
                            *ptr = new;
                        }
                        old
                    }
                })
            }
        };
    }
    scoped_ops!("gpu", Gpu, red_release_gpu_add = "red.release.gpu.global.add.u32",
        ld_acquire_gpu = "ld.acquire.gpu.global.u32", atom_cas_acquire_gpu = "atom.acquire.gpu.global.cas.b32");
    scoped_ops!("sys", Sys, red_release_sys_add = "red.release.sys.global.add.u32",
        ld_acquire_sys = "ld.acquire.sys.global.u32", atom_cas_acquire_sys = "atom.acquire.sys.global.cas.b32");

    /// `atom.acq_rel.gpu.global.add.u32 old, [ptr], n;` (PTX ISA §9.7.12.5,
    /// sm_70): adds `n`, returns the old value; a release of the caller's
    /// earlier writes and an acquire of every earlier release on `ptr`.
    ///
    /// # Safety
    /// As [`red_release_gpu_add`].
    #[inline(always)]
    pub unsafe fn atom_add_acq_rel_gpu(ptr: *mut u32, n: u32) -> u32 {
        device!("atom.acq_rel.gpu.global.add.u32", {
            let old: u32;
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("atom.acq_rel.gpu.global.add.u32 {0}, [{1}], {2};", out(reg32) old, in(reg64) ptr, in(reg32) n,
                    options(nostack, preserves_flags))
            };
            old
        }, host: {
            kernel_emu::yield_point("atom.acq_rel.gpu.global.add.u32");
            kernel_emu::gmem_atomic_scoped(ptr as *const u8, true, true, kernel_emu::AtomicScope::Gpu);
            // SAFETY: caller contract; one emulated thread runs at a time, so
            // this read-modify-write is atomic.
            unsafe {
                let old = *ptr;
                *ptr = old.wrapping_add(n);
                old
            }
        })
    }

    /// `nanosleep.u32 ns;` (sm_70): back off while spinning.
    #[inline(always)]
    pub fn nanosleep(ns: u32) {
        device!("nanosleep", {
            // SAFETY: no memory effects.
            unsafe { core::arch::asm!("nanosleep.u32 {0};", in(reg32) ns, options(nomem, nostack, preserves_flags)) }
        }, host: { kernel_emu::yield_point("nanosleep") })
    }
}

/// Spins until flag `i` of `flags` (this device's memory) equals `value`,
/// with a system-scope acquire (`ld.acquire.sys.global.u32`): for a flag
/// that the host, or a copy engine queued by the host, writes (a call's
/// epoch, say) rather than a kernel's release. What was written to memory
/// before the flag in the writer's order (a copy queued before it on the
/// same stream) is visible once it is seen. An index out of range is a
/// trap on the GPU and a reported misuse on the emulator.
#[inline(always)]
#[track_caller]
pub fn wait_flag_sys(flags: crate::GmemRef<u32>, i: usize, value: u32) {
    crate::gmem::check_range(i, 1, flags.len());
    let w = flags.ptr().wrapping_add(i);
    // SAFETY: in bounds (checked): an aligned u32 of global memory.
    while unsafe { raw::ld_acquire_sys(w.as_raw_unchecked()) } != value {
        raw::nanosleep(64);
    }
}

impl Semaphore {
    /// # Safety
    /// `ptr` is a valid, 4-byte-aligned pointer to a `u32` in global memory,
    /// used only as a semaphore for the kernel's lifetime.
    pub const unsafe fn from_ptr(ptr: *mut u32) -> Self {
        Semaphore { ptr }
    }
    /// The counter's address.
    pub const fn as_ptr(self) -> *mut u32 {
        self.ptr
    }
    /// Atomically add `n` (release, GPU scope). One thread signals once per
    /// event; writes before it are visible to the waiter that consumes it.
    #[inline(always)]
    pub fn signal(self, n: u32) {
        // SAFETY: `from_ptr`'s contract.
        unsafe { raw::red_release_gpu_add(self.ptr, n) }
    }
    /// Spin until the value is at least `n`, then atomically subtract `n`
    /// (acquire, GPU scope).
    #[inline(always)]
    pub fn wait(self, n: u32) {
        loop {
            // SAFETY: `from_ptr`'s contract.
            let v = unsafe { raw::ld_acquire_gpu(self.ptr) };
            // SAFETY: as above.
            if v >= n && unsafe { raw::atom_cas_acquire_gpu(self.ptr, v, v - n) } == v {
                return;
            }
            raw::nanosleep(32);
        }
    }
    /// Atomically add `n` and return the value before (acquire and
    /// release, GPU scope: `atom.acq_rel.gpu.global.add.u32`). The caller's
    /// earlier writes are published, and every write published by an
    /// earlier `signal`/`fetch_signal` on this semaphore is visible to it:
    /// the "last CTA finalizes" pattern, where the CTA that sees `CTAs - 1`
    /// reads what all the others wrote, without waiting for anyone.
    #[inline(always)]
    pub fn fetch_signal(self, n: u32) -> u32 {
        // SAFETY: `from_ptr`'s contract.
        unsafe { raw::atom_add_acq_rel_gpu(self.ptr, n) }
    }
    /// Spin until the value is at least `n`, without consuming it (acquire).
    #[inline(always)]
    pub fn wait_no_decrement(self, n: u32) {
        // SAFETY: `from_ptr`'s contract.
        while unsafe { raw::ld_acquire_gpu(self.ptr) } < n {
            raw::nanosleep(32);
        }
    }
}
