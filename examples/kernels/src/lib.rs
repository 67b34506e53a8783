//! Example kernels, compiled for the GPU (nvptx64) and, for their launch
//! metadata, for the host.
//!
//! | module | kernel | what it shows |
//! |---|---|---|
//! | [`arrays`] | `array_wgmma_ops`, `array_strided_ops` | register arrays in the WGMMA / WGMMA_ROW / WGMMA_COL / WG_STRIDED layouts |
//! | [`first`] | `increment` | a grid of 2 blocks, global memory |
//! | [`first`] | `producer_consumer` | 2 warpgroups, SMEM queue, mbarrier phases |
//! | [`first`] | `cluster_exchange` | a cluster of 2 CTAs, distributed SMEM, cluster barrier |
//! | [`first`] | `semaphore_signal` | block 0 signals block 1 through a global semaphore |
//! | [`first`] | `double_checked` | bounds-checked `Gmem` accesses |
//! | [`hopper`] | `matmul_pipelined` | TMA + wgmma + `emit_pipeline` (pipelining guide) |
//! | [`hopper`] | `matmul_pipelined_kn` | the same with an MN-major (K x N) B |
//! | [`hopper`] | `matmul_warp_specialized` | `emit_pipeline_warp_specialized`: a memory warpgroup, 2 compute warpgroups, grouped rasterization |
//! | [`hopper`] | `multicast_copy` | a cluster of 2 loading one tile with TMA multicast |
//! | [`hopper`] | `wgmma_variants` | wgmma with f16 accumulators, A from registers, 3-D TMA |
//! | [`hopper`] | `warp_roles` | `#[warp_specialize]` roles by warp |
//! | [`simt`] | `warp_collectives` | `shfl`, vote, `redux.sync`, `match`, warp reductions and scans |
//! | [`simt`] | `block_reductions` | block reductions and scans through a 32-slot SMEM scratch |
//! | [`simt`] | `math_ops` | f32 math (`F32Ext`), f16/bf16 conversions and packed arithmetic, a user `device_op!` |
//! | [`simt`] | `gmem_ops` | `GmemRef`, `ld.global.nc.v4`, vector stores, scoped atomics |
//! | [`simt`] | `softmax_rows` | row softmax with one warp per row, no SMEM |
//! | [`fused`] | `matmul_bias_relu` | `matmul_warp_specialized` + a fused bias/ReLU epilogue on the register tile |
//! | [`planted`] | `skip_barrier`, `missing_arrive`, `extra_arrive`, `missing_copy`, `store_without_commit`, `release_too_early`, `skip_phase`, `pending_at_exit`, `smem_out_of_bounds`, `multicast_one_sided`, `gmem_out_of_bounds`, `divergent_shuffle`, `reduce_after_exit` | deliberately broken, for the emulator's checks |
//!
//! `tests/tests/ptx.rs` checks that every kernel of the device code is
//! listed here.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod arrays;
pub mod first;
pub mod fused;
pub mod hopper;
pub mod planted;
pub mod simt;

kernel_device::device_code!();
