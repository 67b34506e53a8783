//! Cluster launch control (sm_100): a running cluster **cancels** a cluster
//! of the same grid that has not started yet and does its work instead
//! (dynamic scheduling / work stealing), Pallas's `dynamic_scheduling_loop`.
//!
//! | op | issued by |
//! |---|---|
//! | [`try_cluster_cancel`] | one thread of the cluster's first CTA (rank 0); the response goes to every CTA of the cluster |
//! | [`query_cluster_cancel`] | any thread, after waiting on the response's barrier |
//! | [`dynamic_scheduling_loop`] | every thread of every CTA of the cluster (it contains cluster barriers) |
//!
//! The response is 16 opaque bytes in SMEM ([`ClcResponse`]), written
//! asynchronously; its arrival completes 16 bytes (`complete_tx`) on an
//! mbarrier that each CTA expects. Only in `arch = sm_100a` kernels (a
//! compile error in `arch = sm_90a` ones: Hopper has no cluster launch
//! control).
//!
//! Emulator: clusters past the emulated device's residency (`Emulator::sms`)
//! are pending; a try_cancel cancels a pending cluster chosen by the seeded
//! scheduler or fails (see `kernel_emu::clc`), so both paths run.
use crate::launch::Dim3;
use crate::mbarrier::BarrierRef;
use crate::smem::Scratch;

/// The 16-byte, 16-aligned SMEM slot a `try_cancel` response lands in
/// (kernel scratch: `#[scratch] clc: ClcResponse`).
pub struct ClcResponse(*mut u8);

// SAFETY: 16 bytes aligned to 16, nothing to initialize.
unsafe impl Scratch for ClcResponse {
    const BYTES: usize = 16;
    const ALIGN: usize = 16;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        ClcResponse(ptr)
    }
}

impl ClcResponse {
    /// The slot's `.shared::cta` address.
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        crate::smem::shared_addr(self.0)
    }
}

pub mod raw {
    //! One `unsafe fn` per PTX form.

    /// `clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [resp], [bar];`
    ///
    /// # Safety
    /// One thread; `resp` a 16-byte aligned `.shared::cta` slot and `bar` an
    /// initialized mbarrier, both at the same offsets in every CTA of the
    /// cluster, each CTA's barrier expecting 16 bytes in this phase; no CTA
    /// of the cluster reads its `resp` until its barrier completes, and none
    /// still reads a previous response. Not after a failed response.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn try_cancel_multicast(resp: u32, bar: u32) {
        device!("clusterlaunchcontrol.try_cancel (multicast)", {
            // SAFETY: caller contract; writes SMEM asynchronously (memory clobber).
            unsafe {
                core::arch::asm!(
                    "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [{0}], [{1}];",
                    in(reg32) resp, in(reg32) bar, options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::clc::try_cancel(resp, bar, true) })
    }

    /// `clusterlaunchcontrol.query_cancel.is_canceled.pred.b128` and
    /// `.get_first_ctaid::{x,y,z}.b32.b128` on the response loaded with
    /// `ld.shared.b128`: `Some(first CTA id of the canceled cluster)`.
    ///
    /// # Safety
    /// `resp` a slot whose try_cancel response this thread observed complete
    /// (a wait on its barrier).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn query(resp: u32) -> Option<[u32; 3]> {
        device!("clusterlaunchcontrol.query_cancel", {
            let (ok, x, y, z): (u32, u32, u32, u32);
            // SAFETY: caller contract; reads SMEM.
            unsafe {
                core::arch::asm!(
                    "{{ .reg .b128 r; .reg .pred p; ld.shared.b128 r, [{a}]; clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r; selp.u32 {ok}, 1, 0, p; \
                     clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 {x}, r; clusterlaunchcontrol.query_cancel.get_first_ctaid::y.b32.b128 {y}, r; \
                     clusterlaunchcontrol.query_cancel.get_first_ctaid::z.b32.b128 {z}, r; }}",
                    a = in(reg32) resp, ok = out(reg32) ok, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z,
                    options(nostack, preserves_flags, readonly))
            }
            if ok != 0 { Some([x, y, z]) } else { None }
        }, host: { kernel_emu::clc::query(resp) })
    }
}

/// Pallas's `try_cluster_cancel`: one thread of the cluster's rank-0 CTA
/// asks to cancel a not-yet-started cluster; the response lands in `resp`
/// of **every** CTA of the cluster, completing 16 bytes on each CTA's `bar`
/// (each CTA's barrier must expect them: `bar.arrive_expect_tx(16)` by one
/// of its threads).
#[inline(always)]
#[track_caller]
pub fn try_cluster_cancel(resp: &ClcResponse, bar: BarrierRef<'_>) {
    // SAFETY: scratch slot and barrier at the same offsets in every CTA
    // (same kernel); the rest is the documented protocol.
    unsafe { raw::try_cancel_multicast(resp.smem_addr(), bar.smem_addr()) }
}

/// Pallas's `query_cluster_cancel`: after the wait on the response's
/// barrier, the first CTA index of the canceled cluster, or `None` (no
/// cluster was canceled: do not try again).
#[inline(always)]
#[track_caller]
pub fn query_cluster_cancel(resp: &ClcResponse) -> Option<Dim3> {
    // SAFETY: the documented protocol (called after the barrier wait).
    unsafe { raw::query(resp.smem_addr()) }.map(|[x, y, z]| Dim3::new(x, y, z))
}

/// What the body of a [`dynamic_scheduling_loop`] learns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynLoopInfo {
    /// The cluster index whose work this iteration does (this cluster's
    /// own first, then those of canceled clusters).
    pub index: Dim3,
    /// Iterations this cluster ran before this one.
    pub local_index: u32,
}

/// Pallas's `dynamic_scheduling_loop` over the cluster grid: runs `body`
/// for this cluster's own index, then, as long as a `try_cancel` succeeds,
/// for the index of the cluster it canceled. Called by **every thread of
/// every CTA** of the cluster (the loop synchronizes the cluster once per
/// iteration); `bar` is a barrier with 1 arrival per phase, `resp` the
/// response slot.
///
/// Per iteration: one thread per CTA expects the 16 response bytes on its
/// `bar`, a cluster barrier orders that (and every read of the previous
/// response) before the rank-0 CTA's thread 0 issues the multicast
/// `try_cancel`, the body runs while the response is in flight, then every
/// thread waits on `bar` and decodes the response.
#[inline(always)]
#[track_caller]
pub fn dynamic_scheduling_loop(resp: &ClcResponse, bar: BarrierRef<'_>, mut body: impl FnMut(DynLoopInfo)) {
    let first = crate::index::thread_linear() == 0;
    let mut index = crate::index::cluster_idx();
    let cdim = crate::index::cluster_dim();
    let mut local_index = 0;
    loop {
        if first {
            bar.arrive_expect_tx(16);
        }
        crate::cluster::cluster_sync();
        if first && crate::index::cluster_ctarank() == 0 {
            try_cluster_cancel(resp, bar);
        }
        body(DynLoopInfo { index, local_index });
        bar.wait();
        match query_cluster_cancel(resp) {
            Some(cta) => {
                index = Dim3::new(cta.x / cdim.x, cta.y / cdim.y, cta.z / cdim.z);
                local_index += 1;
            }
            None => break,
        }
    }
}
