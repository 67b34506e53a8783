//! Thread, warp, warpgroup, block and cluster indices and sizes
//! (PTX ISA §10, "Special Registers").
//!
//! All of these are pure reads of special registers, safe to call from any
//! thread. Warp and warpgroup numbers are *logical* (from the linear thread
//! index), not `%warpid`, which names a physical slot and may change.
use crate::launch::Dim3;

/// Threads per warp.
pub const WARP_SIZE: u32 = 32;
/// Warps per warpgroup (the unit that issues `wgmma`).
pub const WARPGROUP_WARPS: u32 = 4;
/// Threads per warpgroup.
pub const WARPGROUP_SIZE: u32 = WARP_SIZE * WARPGROUP_WARPS;

/// Reads one 32-bit special register: `mov.u32 %r, %<reg>;`.
macro_rules! sreg {
    ($(#[$m:meta])* $name:ident, $reg:literal) => {
        $(#[$m])*
        #[inline(always)]
        pub fn $name() -> u32 {
            device!($reg, {
                let r: u32;
                // SAFETY: reading a special register has no side effects.
                unsafe {
                    core::arch::asm!(concat!("mov.u32 {0}, ", $reg, ";"), out(reg32) r,
                        options(pure, nomem, nostack, preserves_flags))
                };
                r
            })
        }
    };
}

sreg!(/// `%tid.x`.
    tid_x, "%tid.x");
sreg!(/// `%tid.y`.
    tid_y, "%tid.y");
sreg!(/// `%tid.z`.
    tid_z, "%tid.z");
sreg!(/// `%ntid.x`.
    ntid_x, "%ntid.x");
sreg!(/// `%ntid.y`.
    ntid_y, "%ntid.y");
sreg!(/// `%ntid.z`.
    ntid_z, "%ntid.z");
sreg!(/// `%ctaid.x`.
    ctaid_x, "%ctaid.x");
sreg!(/// `%ctaid.y`.
    ctaid_y, "%ctaid.y");
sreg!(/// `%ctaid.z`.
    ctaid_z, "%ctaid.z");
sreg!(/// `%nctaid.x`.
    nctaid_x, "%nctaid.x");
sreg!(/// `%nctaid.y`.
    nctaid_y, "%nctaid.y");
sreg!(/// `%nctaid.z`.
    nctaid_z, "%nctaid.z");
sreg!(/// `%laneid`: this thread's lane in its warp, 0..32.
    lane_id, "%laneid");
sreg!(/// `%cluster_ctarank`: this CTA's rank in its cluster, 0..cluster_size() (sm_90).
    cluster_ctarank, "%cluster_ctarank");
sreg!(/// `%cluster_nctarank`: CTAs in this cluster (sm_90).
    cluster_size, "%cluster_nctarank");
sreg!(/// `%cluster_ctaid.x`.
    cluster_ctaid_x, "%cluster_ctaid.x");
sreg!(/// `%cluster_ctaid.y`.
    cluster_ctaid_y, "%cluster_ctaid.y");
sreg!(/// `%cluster_ctaid.z`.
    cluster_ctaid_z, "%cluster_ctaid.z");
sreg!(/// `%cluster_nctaid.x`.
    cluster_nctaid_x, "%cluster_nctaid.x");
sreg!(/// `%cluster_nctaid.y`.
    cluster_nctaid_y, "%cluster_nctaid.y");
sreg!(/// `%cluster_nctaid.z`.
    cluster_nctaid_z, "%cluster_nctaid.z");
sreg!(/// `%clusterid.x`.
    clusterid_x, "%clusterid.x");
sreg!(/// `%clusterid.y`.
    clusterid_y, "%clusterid.y");
sreg!(/// `%clusterid.z`.
    clusterid_z, "%clusterid.z");
sreg!(/// `%nclusterid.x`.
    nclusterid_x, "%nclusterid.x");
sreg!(/// `%nclusterid.y`.
    nclusterid_y, "%nclusterid.y");
sreg!(/// `%nclusterid.z`.
    nclusterid_z, "%nclusterid.z");

/// `threadIdx`: this thread's index in its CTA.
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    Dim3::new(tid_x(), tid_y(), tid_z())
}
/// `blockDim`: threads per CTA.
#[inline(always)]
pub fn block_dim() -> Dim3 {
    Dim3::new(ntid_x(), ntid_y(), ntid_z())
}
/// `blockIdx`: this CTA's index in the grid.
#[inline(always)]
pub fn block_idx() -> Dim3 {
    Dim3::new(ctaid_x(), ctaid_y(), ctaid_z())
}
/// `gridDim`: CTAs in the grid.
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    Dim3::new(nctaid_x(), nctaid_y(), nctaid_z())
}
/// This CTA's index inside its cluster.
#[inline(always)]
pub fn cluster_cta_idx() -> Dim3 {
    Dim3::new(cluster_ctaid_x(), cluster_ctaid_y(), cluster_ctaid_z())
}
/// CTAs per cluster, per dimension.
#[inline(always)]
pub fn cluster_dim() -> Dim3 {
    Dim3::new(cluster_nctaid_x(), cluster_nctaid_y(), cluster_nctaid_z())
}
/// This cluster's index in the grid of clusters.
#[inline(always)]
pub fn cluster_idx() -> Dim3 {
    Dim3::new(clusterid_x(), clusterid_y(), clusterid_z())
}
/// Clusters in the grid.
#[inline(always)]
pub fn cluster_grid_dim() -> Dim3 {
    Dim3::new(nclusterid_x(), nclusterid_y(), nclusterid_z())
}

/// Linear thread index in the CTA: `x + y * ntid.x + z * ntid.x * ntid.y`.
#[inline(always)]
pub fn thread_linear() -> u32 {
    let (t, n) = (thread_idx(), block_dim());
    t.x + n.x * (t.y + n.y * t.z)
}
/// Linear CTA index in the grid.
#[inline(always)]
pub fn block_linear() -> u32 {
    let (b, n) = (block_idx(), grid_dim());
    b.x + n.x * (b.y + n.y * b.z)
}
/// Logical warp index in the CTA (`thread_linear() / 32`).
#[inline(always)]
pub fn warp_idx() -> u32 {
    thread_linear() / WARP_SIZE
}
/// Warpgroup index in the CTA (`thread_linear() / 128`).
#[inline(always)]
pub fn warpgroup_idx() -> u32 {
    thread_linear() / WARPGROUP_SIZE
}
/// Warp index inside this thread's warpgroup, 0..4.
#[inline(always)]
pub fn warp_in_warpgroup() -> u32 {
    warp_idx() % WARPGROUP_WARPS
}
/// Thread index inside this thread's warpgroup, 0..128.
#[inline(always)]
pub fn thread_in_warpgroup() -> u32 {
    thread_linear() % WARPGROUP_SIZE
}
