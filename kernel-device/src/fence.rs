//! Memory fences (PTX ISA §9.7.13.4 `membar`/`fence`).

/// `fence.mbarrier_init.release.cluster;` (sm_90): makes prior
/// `mbarrier.init`s visible to the cluster (other CTAs arriving remotely,
/// the TMA unit) before a following cluster barrier. `#[kernel]` issues it
/// after initializing scratch barriers.
#[inline(always)]
#[track_caller]
pub fn fence_mbarrier_init() {
    device!("fence.mbarrier_init", {
        // SAFETY: a fence; memory clobber keeps it ordered.
        unsafe { core::arch::asm!("fence.mbarrier_init.release.cluster;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::yield_point("fence.mbarrier_init") })
}

/// `fence.proxy.async.shared::cta;` (sm_90): orders this thread's ordinary
/// (generic-proxy) shared-memory accesses with later async-proxy accesses
/// (TMA stores reading SMEM, wgmma/tcgen05 reading operands). Each thread that
/// wrote the SMEM issues it, before the barrier that hands the SMEM over.
/// Pallas calls this `commit_smem`.
#[inline(always)]
#[track_caller]
pub fn fence_proxy_async_shared_cta() {
    device!("fence.proxy.async.shared::cta", {
        // SAFETY: a fence; memory clobber keeps it ordered.
        unsafe { core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::fence_proxy_async() })
}

/// `fence.acq_rel.gpu;`: orders this thread's memory accesses at GPU scope.
#[inline(always)]
#[track_caller]
pub fn fence_acq_rel_gpu() {
    device!("fence.acq_rel.gpu", {
        // SAFETY: a fence.
        unsafe { core::arch::asm!("fence.acq_rel.gpu;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::yield_point("fence.acq_rel.gpu") })
}

/// `fence.acq_rel.cluster;` (sm_90): orders this thread's memory accesses at
/// cluster scope (distributed shared memory).
#[inline(always)]
#[track_caller]
pub fn fence_acq_rel_cluster() {
    device!("fence.acq_rel.cluster", {
        // SAFETY: a fence.
        unsafe { core::arch::asm!("fence.acq_rel.cluster;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::yield_point("fence.acq_rel.cluster") })
}

/// `fence.proxy.async.global;` (sm_90): orders this thread's async-proxy
/// global-memory accesses (completed bulk and TMA copies, after
/// `cp.async.bulk.wait_group`) with its later generic-proxy accesses, such
/// as the release that tells another device its data arrived
/// (`PeerSemaphores::signal`). The emulator does not model proxies of
/// global memory: there it is a scheduling point.
#[inline(always)]
#[track_caller]
pub fn fence_proxy_async_global() {
    device!("fence.proxy.async.global", {
        // SAFETY: a fence; memory clobber keeps it ordered.
        unsafe { core::arch::asm!("fence.proxy.async.global;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::yield_point("fence.proxy.async.global") })
}
