//! Thread, warp, warpgroup, block and cluster indices and sizes
//! (PTX ISA §10, "Special Registers").
//!
//! All of these are pure reads of special registers, safe to call from any
//! thread. Warp and warpgroup numbers are *logical* (from the linear thread
//! index), not `%warpid`, which names a physical slot and may change.
use crate::launch::Dim3;

/// Threads per warp.
pub use kernel_spec::limits::WARP_SIZE;
/// Warps per warpgroup (the unit that issues `wgmma`).
pub const WARPGROUP_WARPS: u32 = 4;
/// Threads per warpgroup.
pub const WARPGROUP_SIZE: u32 = WARP_SIZE * WARPGROUP_WARPS;

/// Reads one 32-bit special register: `mov.u32 %r, %<reg>;`.
macro_rules! sreg {
    ($(#[$m:meta])* $name:ident, $reg:literal, $host:expr) => {
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
            }, host: { $host })
        }
    };
}

/// The emulator's view of the cluster registers: CTA `b` of a grid in
/// clusters of `c` is CTA `b % c` of cluster `b / c` in each dimension.
#[cfg(not(target_arch = "nvptx64"))]
mod emu_cluster {
    pub fn ctaid(d: usize) -> u32 {
        kernel_emu::block_idx()[d] % kernel_emu::cluster_dim()[d]
    }
    pub fn clusterid(d: usize) -> u32 {
        kernel_emu::block_idx()[d] / kernel_emu::cluster_dim()[d]
    }
    pub fn nclusterid(d: usize) -> u32 {
        kernel_emu::grid_dim()[d] / kernel_emu::cluster_dim()[d]
    }
    pub fn size() -> u32 {
        kernel_emu::cluster_dim().iter().product()
    }
}

sreg!(/// `%tid.x`.
    tid_x, "%tid.x", kernel_emu::thread_idx()[0]);
sreg!(/// `%tid.y`.
    tid_y, "%tid.y", kernel_emu::thread_idx()[1]);
sreg!(/// `%tid.z`.
    tid_z, "%tid.z", kernel_emu::thread_idx()[2]);
sreg!(/// `%ntid.x`.
    ntid_x, "%ntid.x", kernel_emu::block_dim()[0]);
sreg!(/// `%ntid.y`.
    ntid_y, "%ntid.y", kernel_emu::block_dim()[1]);
sreg!(/// `%ntid.z`.
    ntid_z, "%ntid.z", kernel_emu::block_dim()[2]);
sreg!(/// `%ctaid.x`.
    ctaid_x, "%ctaid.x", kernel_emu::block_idx()[0]);
sreg!(/// `%ctaid.y`.
    ctaid_y, "%ctaid.y", kernel_emu::block_idx()[1]);
sreg!(/// `%ctaid.z`.
    ctaid_z, "%ctaid.z", kernel_emu::block_idx()[2]);
sreg!(/// `%nctaid.x`.
    nctaid_x, "%nctaid.x", kernel_emu::grid_dim()[0]);
sreg!(/// `%nctaid.y`.
    nctaid_y, "%nctaid.y", kernel_emu::grid_dim()[1]);
sreg!(/// `%nctaid.z`.
    nctaid_z, "%nctaid.z", kernel_emu::grid_dim()[2]);
sreg!(/// `%laneid`: this thread's lane in its warp, 0..32.
    lane_id, "%laneid", kernel_emu::lane_id());
sreg!(/// `%cluster_ctarank`: this CTA's rank in its cluster, 0..cluster_size() (sm_90).
    cluster_ctarank, "%cluster_ctarank", kernel_emu::cluster_ctarank());
sreg!(/// `%cluster_nctarank`: CTAs in this cluster (sm_90).
    cluster_size, "%cluster_nctarank", emu_cluster::size());
sreg!(/// `%cluster_ctaid.x`.
    cluster_ctaid_x, "%cluster_ctaid.x", emu_cluster::ctaid(0));
sreg!(/// `%cluster_ctaid.y`.
    cluster_ctaid_y, "%cluster_ctaid.y", emu_cluster::ctaid(1));
sreg!(/// `%cluster_ctaid.z`.
    cluster_ctaid_z, "%cluster_ctaid.z", emu_cluster::ctaid(2));
sreg!(/// `%cluster_nctaid.x`.
    cluster_nctaid_x, "%cluster_nctaid.x", kernel_emu::cluster_dim()[0]);
sreg!(/// `%cluster_nctaid.y`.
    cluster_nctaid_y, "%cluster_nctaid.y", kernel_emu::cluster_dim()[1]);
sreg!(/// `%cluster_nctaid.z`.
    cluster_nctaid_z, "%cluster_nctaid.z", kernel_emu::cluster_dim()[2]);
sreg!(/// `%clusterid.x`.
    clusterid_x, "%clusterid.x", emu_cluster::clusterid(0));
sreg!(/// `%clusterid.y`.
    clusterid_y, "%clusterid.y", emu_cluster::clusterid(1));
sreg!(/// `%clusterid.z`.
    clusterid_z, "%clusterid.z", emu_cluster::clusterid(2));
sreg!(/// `%nclusterid.x`.
    nclusterid_x, "%nclusterid.x", emu_cluster::nclusterid(0));
sreg!(/// `%nclusterid.y`.
    nclusterid_y, "%nclusterid.y", emu_cluster::nclusterid(1));
sreg!(/// `%nclusterid.z`.
    nclusterid_z, "%nclusterid.z", emu_cluster::nclusterid(2));

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
/// [`warpgroup_idx`] broadcast from lane 0 of the warp
/// ([`shfl_idx`](crate::warp::shfl_idx)): the same value, which ptxas then
/// knows to be the same in every lane, so values derived from it (a
/// warpgroup's rows of a tile, its wgmma descriptors) live in uniform
/// registers instead of being moved into them (`R2UR`) before every
/// wgmma. CUTLASS's `canonical_warp_group_idx` does the same. Measured in
/// the f16 GEMM's K loop: 77 -> 69 instructions per warp and step, the
/// descriptors' 16 vector instructions replaced by 8 uniform ones.
///
/// Collective: every lane of the warp calls it, converged (e.g. at the
/// kernel's start, before any branch on the lane).
#[inline(always)]
#[track_caller]
pub fn warpgroup_idx_sync() -> u32 {
    crate::warp::shfl_idx(warpgroup_idx(), 0)
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
