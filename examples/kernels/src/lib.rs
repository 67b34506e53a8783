//! Example kernels, compiled for the GPU (nvptx64) and, for their launch
//! metadata, for the host.
//!
//! | module | kernel | what it shows |
//! |---|---|---|
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
//! | [`hopper_ladder`] | `matmul_big_tiles`, `matmul_persistent`, `matmul_epilogue_overlap`, `matmul_cluster_multicast`, `matmul_fewer_arrivals`, `matmul_pingpong` | the Hopper GEMM ladder, steps 2-7 (README) |
//! | [`blackwell`] | `matmul0`, `matmul1`, `matmul2` | the Blackwell tutorial's steps 0-2: tcgen05 MMA into TMEM, warp specialization, double-buffered epilogue (sm_100a only) |
//! | [`blackwell`] | `matmul3`, `matmul4`, `matmul5`, `matmul6`, `matmul_dynamic` | the tutorial's steps 3-6 (collective 2-CTA MMA, persistent, dedicated epilogue warpgroup, grid tiling) and cluster launch control (sm_100a only) |
//! | [`blackwell::planted_collective`] | `collective_copy`, `store_done_skipped` | collective (2-CTA) bugs and their twins for the emulator's checks |
//! | [`blackwell::planted`] | `tmem_protocol`, `tmem_alloc_misuse` | tensor-memory bugs (and their race-free twins) for the emulator's checks |
//! | [`simt`] | `warp_collectives` | `shfl`, vote, `redux.sync`, `match`, warp reductions and scans |
//! | [`simt`] | `block_reductions` | block reductions and scans through a 32-slot SMEM scratch |
//! | [`simt`] | `math_ops` | f32 math (`F32Ext`), f16/bf16 conversions and packed arithmetic, a user `device_op!` |
//! | [`simt`] | `gmem_ops` | `GmemRef`, `ld.global.nc.v4`, vector stores, scoped atomics |
//! | [`simt`] | `softmax_rows` | row softmax with one warp per row, no SMEM |
//! | [`arrays`] | `array_wgmma_ops`, `array_strided_ops` | register arrays in the WGMMA / WGMMA_ROW / WGMMA_COL / WG_STRIDED layouts |
//! | [`fused`] | `matmul_bias_relu` | `matmul_warp_specialized` + a fused bias/ReLU epilogue on the register tile |
//! | [`cluster`] | `cluster_allreduce` | a 2 x 2 cluster reducing through DSMEM with `ClusterBarrier<X>`, `<Y>`, `<WholeCluster>` |
//! | [`cluster`] | `cluster_axis_sums` | a 2 x 2 x 2 cluster: `ClusterBarrier<YZ>` and `<X>` peers |
//! | [`cluster`] | `cluster_allreduce16` | a cluster of 16 CTAs (non-portable size, `non_portable_cluster`): reduce-scatter + all-gather through DSMEM with `ClusterBarrier<WholeCluster>` |
//! | [`races`] | `tma_read_before_wait`, `tma_only_issuer_waits`, `tma_sync_instead_of_wait`, `tma_wait_wrong_slot`, `tma_refill_before_consumed`, `tma_two_loads_one_slot`, `tma_load_over_unsynced_writes`, `tma_overfetch_never_waited`, `multicast_peer_skips_wait`, `multicast_reuse_without_cluster_barrier`, `multicast_reuse_hand_rolled_no_wait`, `cluster_barrier_wait_dropped`, `hand_rolled_cluster_wait_dropped`, `cluster_arrive_on_wrong_cta`, `cluster_arrive_before_remote_write`, `cluster_read_before_wait`, `cluster_inbox_reused_too_early`, `tma_store_source_reused`, `tma_store_wait_read_one_too_many`, `stream_k_fixup_read_only_wait`, `two_ctas_store_one_tile`, `tma_store_twice_same_tile`, `bulk_group_pending_at_exit`, `tma_store_never_committed`, `tma_store_without_commit_smem`, `commit_smem_before_writes`, `relu_in_place_without_commit_smem`, `wgmma_operands_without_commit_smem`, `wgmma_operand_overwritten_in_flight`, `reduction_missing_last_sync`, `warp_reduction_without_sync_warp`, `smem_transpose_without_sync`, `staging_loop_missing_trailing_sync`, `smem_counter_without_atomics`, `gmem_same_index_in_two_ctas`, `semaphore_signal_before_write`, `semaphore_signal_without_cta_barrier`, `semaphore_wait_without_cta_barrier`, `mbarrier_consumer_skips_wait`, `mbarrier_arrive_before_write`, `mbarrier_refill_without_consumed`, `named_barrier_arrive_before_write`, `tma_store_without_cta_barrier`, `cluster_barrier_wrong_axis`, `named_barrier_count_too_small`, `cluster_arrive_relaxed_publishes_nothing`, `block_stats_partials_reused` | the bug-class suite: each kernel's `<true>` instance has a classic synchronization bug, `<false>` is its race-free twin (`tests/tests/races.rs`) |
//! | [`planted`] | `skip_barrier`, `missing_arrive`, `extra_arrive`, `missing_copy`, `store_without_commit`, `release_too_early`, `skip_phase`, `pending_at_exit`, `smem_out_of_bounds`, `multicast_one_sided`, `gmem_out_of_bounds`, `tma_read_without_wait`, `tma_store_source_reused`, `reduction_missing_sync`, `gmem_two_ctas_write_one_element`, `divergent_shuffle`, `reduce_after_exit` | deliberately broken, for the emulator's checks |
//! | [`planted_arrivals`] | `consumed_count_missing`, `consumed_count_256`, `consumed_count_too_large` | a warp-specialized pipeline's `consumed` barrier with the wrong arrival count (and the right one), for the emulator's arrival-count report |
//!
//! `tests/tests/ptx.rs` checks that every kernel of the device code is
//! listed here.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod arrays;
pub mod first;
pub mod fused;
pub mod hopper;
pub mod hopper_ladder;
pub mod blackwell;
pub mod planted;
pub mod planted_arrivals;
pub mod cluster;
pub mod races;
pub mod simt;

kernel_device::device_code!();
