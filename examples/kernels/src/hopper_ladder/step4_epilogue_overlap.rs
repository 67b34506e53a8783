//! Step 4: the epilogue's stores overlap the next tile's mainloop.
//!
//! Diff from step 3 (`step3_persistent::matmul_persistent`): the
//! output tile leaves through two `BM x 64` SMEM sub-tiles (`EPI_N = 64`
//! columns, double-buffered) instead of one `BM x BN` tile: the compute
//! warpgroups write sub-tile `j` while the TMA store of sub-tile `j - 1`
//! reads the other buffer, and nobody waits for the last stores: they run
//! while the next tile's wgmmas do (the issuing thread only waits, before
//! reusing a buffer, for the store that read it two sub-tiles ago). The
//! SMEM saved (32 KB instead of 64 KB at `BM = 128`) buys a 4th stage.
//! This is the "cooperative kernel with a dedicated store path" of the
//! issue; the ping-pong variant is step 7.
//!
//! Step 4 is the library's kernel: see
//! [`kernel_ops_kernels::matmul::matmul_persistent_ws`] (its "This kernel
//! works as follows" header, constraints and instance list), at f16, here
//! under the ladder's name. It is compiled into `kernel-ops-kernels`,
//! not into this crate: the host loads `kernel_ops_kernels::DEVICE_CODE` to
//! launch it.
/// The library's [`matmul_persistent_ws`](kernel_ops_kernels::matmul::matmul_persistent_ws) on f16.
#[allow(non_camel_case_types)]
pub type matmul_epilogue_overlap<const BM: usize, const BN: usize, const STAGES: usize, const GRID_W: u32> =
    kernel_ops_kernels::matmul::matmul_persistent_ws<kernel_device::f16, BM, BN, STAGES, GRID_W>;
