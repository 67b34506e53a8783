//! The Hopper GEMM ladder: `C = A · Bᵀ` (A `M x K`, B `N x K`, both
//! row-major f16; f32 accumulation; C `M x N` f16), one technique per step,
//! each kernel a small diff from the previous one.
//!
//! | step | kernel | what it adds |
//! |---|---|---|
//! | 0 | [`crate::hopper::matmul_pipelined`] | TMA + wgmma + `emit_pipeline` (one warpgroup) |
//! | 1 | [`crate::hopper::matmul_warp_specialized`] | a memory warpgroup and 2 compute warpgroups, `setmaxnreg` |
//! | 2 | [`step2_big_tiles::matmul_big_tiles`] | 128 x 256 (one m64n256 wgmma per k16) or 256 x 128 CTA tiles; tile and stages are instance parameters |
//! | 3 | [`step3_persistent::matmul_persistent`] | persistent grid (one CTA per SM), `nd_loop` + `planar_snake` tile order |
//! | 4 | [`step4_epilogue_overlap::matmul_epilogue_overlap`] (the library's `matmul_persistent_ws`) | epilogue through double-buffered SMEM sub-tiles whose TMA stores overlap the next tile's mainloop; frees SMEM for a 4th stage |
//! | 5 | [`step5_cluster_multicast::matmul_cluster_multicast`] (the library's `matmul_persistent_ws_cluster`) | clusters of 2 along M; each CTA loads half of the shared B tile and multicasts it to both |
//! | 6 | [`step6_fewer_arrivals::matmul_fewer_arrivals`] | one elected lane per warp releases a slot (16 arrivals instead of 512: 32x fewer local and remote mbarrier arrives) |
//! | 7 | [`step7_pingpong::matmul_pingpong`] | ping-pong compute warpgroups (from step 4): each owns whole `BM x BN` tiles (128 x 128 or 64 x 256), one ring of stages shared in tile order, an order barrier alternates their mainloops so one's epilogue runs under the other's MMAs |
//!
//! Shapes: every kernel from step 2 on takes `m_tiles = ceil(M / BM)`,
//! `n_tiles = ceil(N / BN)`, `k_steps = ceil(K / 64)`: TMA fills loads past
//! the matrices' edges with zeros and clips stores, so any `M`, `N`, `K`
//! works as long as the tensor maps can be made (rows a multiple of 16
//! bytes: `K % 8 == 0`, `N % 8 == 0`).
pub mod step2_big_tiles;
pub mod step3_persistent;
pub mod step4_epilogue_overlap;
pub mod step5_cluster_multicast;
pub mod step6_fewer_arrivals;
pub mod step7_pingpong;

/// The building blocks every step from 2 on shares, owned by the library
/// (`kernel_ops_kernels::gemm`), re-exported for the ladder's host side.
pub use kernel_ops_kernels::gemm::{
    check_tile, store_block_cols, ATileOf, BTileOf, EpiTileOf, OTileOf, Sw, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, COMPUTE_WGS, EPI_N, MEMORY_REGS, TK,
};
