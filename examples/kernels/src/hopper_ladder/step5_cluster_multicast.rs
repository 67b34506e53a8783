//! Step 5: clusters of 2 CTAs share B through TMA multicast.
//!
//! Diff from step 4 (`step4_epilogue_overlap::matmul_epilogue_overlap`):
//! CTAs run in clusters of 2 that compute vertically adjacent tiles (the
//! same B columns, M tiles `2 i` and `2 i + 1`). Each CTA loads its own A
//! tile and HALF of the shared `BN x 64` B tile (`BH = BN / 2` rows),
//! multicast into both CTAs' slot: B's L2->SMEM traffic per CTA halves. A
//! slot may be refilled only when the consumers of BOTH CTAs are done with
//! it, so each compute thread arrives on its own `consumed` barrier and on
//! its peer's (`mapa` + `mbarrier.arrive.shared::cluster`, release at CTA
//! scope as CUTLASS's `ClusterBarrier::arrive`): 512 arrivals per phase.
//! (The first version used `.release.cluster` for the remote arrive: each
//! arriving warp then waited on a cluster-scope memory barrier and the
//! kernel ran at 440 TFLOP/s instead of step 4's 746; see RESULTS.md.)
//! The tile scheduler runs over cluster tiles (`nd_loop` with
//! `Collective::Clusters`).
//!
//! Step 5 is the library's kernel: see
//! [`kernel_ops_kernels::matmul::matmul_persistent_ws_cluster`] (its "This
//! kernel works as follows" header, constraints and instance list), at
//! f16, here under the ladder's name. It is compiled into
//! `kernel-ops-kernels`, not into this crate: the host loads
//! `kernel_ops_kernels::DEVICE_CODE` to launch it.
pub use kernel_ops_kernels::matmul::CLUSTER_M;

/// The library's [`matmul_persistent_ws_cluster`](kernel_ops_kernels::matmul::matmul_persistent_ws_cluster) on f16.
#[allow(non_camel_case_types)]
pub type matmul_cluster_multicast<const BM: usize, const BN: usize, const BH: usize, const STAGES: usize, const GRID_W: u32> =
    kernel_ops_kernels::matmul::matmul_persistent_ws_cluster<kernel_device::f16, BM, BN, BH, STAGES, GRID_W>;
