//! The ready matmul's kernels: `C = A · Bᵀ` (A `M x K`, B `N x K`, C
//! `M x N`, row-major f16 or bf16, f32 accumulation): persistent, warp-specialized
//! (one memory warpgroup, two compute warpgroups), `BM x BN` tiles in
//! planar-snake order, an epilogue through double-buffered SMEM sub-tiles
//! whose TMA stores overlap the next tile, and optionally clusters of 2
//! multicasting B. The host entry point is `kernel_ops::matmul`; the
//! `#[kernel(instances(..))]` lists of the two kernels are what it
//! autotunes over.
//!
//! Both kernels are generic over the element type ([`GemmElem`]: f16 and
//! bf16), their instances listed once for both types
//! (`instances(E = [f16, bf16], ..)`): `matmul_persistent_ws<bf16, 128,
//! 256, 4, 8>` is the entry `matmul_persistent_ws__bf16_128_256_4_8`.
//!
//! Any `M`, `N`, `K` with `K % 8 == 0` and `N % 8 == 0` (rows of 16-byte
//! multiples, a TMA rule): loads past the edges are zero-filled, stores
//! clipped.
//!
//! The Hopper GEMM ladder (`examples/kernels/src/hopper_ladder`) teaches
//! how these kernels are built: its steps 4 and 5 are these two kernels,
//! re-exported under the ladder's names (`matmul_epilogue_overlap`,
//! `matmul_cluster_multicast`), and its other steps share this crate's
//! building blocks ([`crate::gemm`]).
pub use crate::gemm::{
    check_tile, store_block_cols, ATile, ATileOf, BTile, EpiTile, GemmElem, BTileOf, EpiTileOf, OTileOf, Sw, WgAcc, COMPUTE_BARRIER, COMPUTE_REGS, COMPUTE_WGS, EPI_N, MEMORY_REGS, TK,
};

mod cluster;
mod persistent;
mod splitk;

pub use cluster::{matmul_persistent_ws_cluster, matmul_persistent_ws_cluster_of, CLUSTER_M};
pub use persistent::{matmul_persistent_ws, matmul_persistent_ws_rows, AllRows, RowSource};
pub use splitk::{matmul_splitk, split_steps, SPLITK_THREADS};
