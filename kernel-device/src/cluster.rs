//! Thread-block clusters (sm_90): the cluster barrier (PTX ISA §9.7.13.2
//! `barrier.cluster`) and distributed shared memory addressing (§9.7.9.20
//! `mapa`).
//!
//! A cluster's CTAs run at the same time on one GPC and can read and write
//! each other's shared memory. The cluster barrier is the one barrier that
//! spans them; it also orders distributed-shared-memory accesses (release on
//! arrive, acquire on wait).

pub mod raw {
    /// `barrier.cluster.arrive.release;` (sm_90; non-`.aligned`: LLVM may
    /// duplicate inline asm into both sides of a branch, see
    /// [`crate::sync_threads`]).
    ///
    /// # Safety
    /// Every thread of every CTA in the cluster arrives once per phase.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn barrier_cluster_arrive() {
        device!("barrier.cluster.arrive", {
            // SAFETY: caller contract; orders memory (no `nomem`).
            unsafe { core::arch::asm!("barrier.cluster.arrive.release;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::cluster_arrive() })
    }

    /// `barrier.cluster.arrive.relaxed;` (sm_90): arrive without
    /// release semantics (no ordering of this thread's prior accesses).
    ///
    /// # Safety
    /// As [`barrier_cluster_arrive`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn barrier_cluster_arrive_relaxed() {
        device!("barrier.cluster.arrive.relaxed", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("barrier.cluster.arrive.relaxed;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::cluster_arrive_relaxed() })
    }

    /// `barrier.cluster.wait.acquire;` (sm_90): waits until every
    /// thread of the cluster arrived in the current phase.
    ///
    /// # Safety
    /// Preceded by this thread's arrive for the same phase.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn barrier_cluster_wait() {
        device!("barrier.cluster.wait", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("barrier.cluster.wait.acquire;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::cluster_wait() })
    }

    /// `mapa.u64 d, a, rank;` (sm_90): the generic address of the variable at
    /// generic shared-memory address `a` in CTA `rank` of this cluster.
    ///
    /// # Safety
    /// `a` is a generic address into this CTA's shared memory; `rank` is
    /// below the cluster size. Dereferencing the result is valid only while
    /// the target CTA is running.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn mapa(a: u64, rank: u32) -> u64 {
        device!("mapa.u64", {
            let d: u64;
            // SAFETY: address arithmetic only.
            unsafe {
                core::arch::asm!("mapa.u64 {0}, {1}, {2};", out(reg64) d, in(reg64) a, in(reg32) rank,
                    options(pure, nomem, nostack, preserves_flags))
            };
            d
        }, host: { kernel_emu::map_rank_ptr(a as *mut u8, rank) as u64 })
    }

    /// `mapa.shared::cluster.u32 d, a, rank;` (sm_90): the `.shared::cluster`
    /// address of `.shared::cta` address `a` in CTA `rank`.
    ///
    /// # Safety
    /// As [`mapa`].
    #[inline(always)]
    #[track_caller]
    pub unsafe fn mapa_shared(a: u32, rank: u32) -> u32 {
        device!("mapa.shared::cluster.u32", {
            let d: u32;
            // SAFETY: address arithmetic only.
            unsafe {
                core::arch::asm!("mapa.shared::cluster.u32 {0}, {1}, {2};", out(reg32) d, in(reg32) a, in(reg32) rank,
                    options(pure, nomem, nostack, preserves_flags))
            };
            d
        }, host: { kernel_emu::map_rank_addr(a, rank) })
    }
}

/// Arrive on the cluster barrier (release). Pair with [`cluster_wait`];
/// work between the two overlaps the wait.
///
/// Collective: every thread of every CTA in the cluster.
#[inline(always)]
#[track_caller]
pub fn cluster_arrive() {
    // SAFETY: collective contract documented above.
    unsafe { raw::barrier_cluster_arrive() }
}

/// Wait on the cluster barrier (acquire) after [`cluster_arrive`].
///
/// Collective: every thread of every CTA in the cluster.
#[inline(always)]
#[track_caller]
pub fn cluster_wait() {
    // SAFETY: collective contract documented above.
    unsafe { raw::barrier_cluster_wait() }
}

/// `cluster_arrive(); cluster_wait();`: all threads of the cluster meet, and
/// shared-memory writes (local or distributed) before it are visible after it.
#[inline(always)]
#[track_caller]
pub fn cluster_sync() {
    cluster_arrive();
    cluster_wait();
}

/// The address of `*ptr` (this CTA's shared memory) in CTA `rank` of the
/// cluster, as a generic pointer usable with ordinary loads and stores.
///
/// # Safety
/// `ptr` points into this CTA's shared memory; `rank < cluster_size()`; the
/// result may be dereferenced only while CTA `rank` runs (end the kernel with
/// a cluster barrier when other CTAs access your shared memory).
#[inline(always)]
#[track_caller]
pub unsafe fn map_shared_rank<T>(ptr: *mut T, rank: u32) -> *mut T {
    // SAFETY: forwarded contract.
    unsafe { raw::mapa(ptr as u64, rank) as *mut T }
}
