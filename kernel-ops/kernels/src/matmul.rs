//! The ready matmul's kernels: `C = A · Bᵀ` (A `M x K`, B `N x K`, C
//! `M x N`, row-major f16, f32 accumulation) — the last two steps of the
//! Hopper ladder (`examples/kernels/src/hopper_ladder`, steps 4 and 5) as a
//! library: persistent, warp-specialized (one memory warpgroup, two compute
//! warpgroups), `BM x BN` tiles in planar-snake order, an epilogue through
//! double-buffered SMEM sub-tiles whose TMA stores overlap the next tile,
//! and optionally clusters of 2 multicasting B. The host entry point is
//! `kernel_ops::matmul`; the instances listed here are what it autotunes
//! over.
//!
//! Any `M`, `N`, `K` with `K % 8 == 0` and `N % 8 == 0` (rows of 16-byte
//! multiples, a TMA rule): loads past the edges are zero-filled, stores
//! clipped.
//!
//! One definition: the kernels' source is the ladder's
//! (`examples/kernels/src/hopper_ladder/step4_epilogue_overlap.rs` and
//! `step5_cluster_multicast.rs`, whose "This kernel works as follows"
//! headers describe them), compiled into this crate as well under the
//! library's names; the ladder lists every instance autotuned here.
pub use kernel_device::gemm::{
    check_tile, store_block_cols, ATileOf, BTileOf, EpiTileOf, OTileOf, Sw, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, COMPUTE_WGS, EPI_N, MEMORY_REGS, TK,
};

#[path = "../../../examples/kernels/src/hopper_ladder/step4_epilogue_overlap.rs"]
mod step4;
#[path = "../../../examples/kernels/src/hopper_ladder/step5_cluster_multicast.rs"]
mod step5;

/// `C = A · Bᵀ`, persistent, warp-specialized, with an overlapped,
/// sub-tiled epilogue: the ladder's step 4 (`matmul_epilogue_overlap`).
pub use step4::matmul_epilogue_overlap as matmul_persistent_ws;
/// As [`matmul_persistent_ws`] in clusters of 2 along M with B multicast:
/// the ladder's step 5 (`matmul_cluster_multicast`).
pub use step5::matmul_cluster_multicast as matmul_persistent_ws_cluster;
/// CTAs per cluster of [`matmul_persistent_ws_cluster`].
pub use step5::CLUSTER_M;
