//! Example kernels, compiled for the GPU (nvptx64) and, for their launch
//! metadata, for the host.
//!
//! | module | kernel | what it shows |
//! |---|---|---|
//! | [`first`] | `increment` | a grid of 2 blocks, global memory |
//! | [`first`] | `producer_consumer` | 2 warpgroups, SMEM queue, mbarrier phases |
//! | [`first`] | `cluster_exchange` | a cluster of 2 CTAs, distributed SMEM, cluster barrier |
//! | [`first`] | `semaphore_signal` | block 0 signals block 1 through a global semaphore |
//! | [`peer`] | `exchange_shards`, `ring_all_gather`, `exchange_tiles` | several GPUs: bulk copies to a peer's memory over NVLink, system-scope semaphores (the seed's shard exchange, a ring all-gather) |
//! | [`first`] | `grid_sum` | grid-wide scratch (`#[global_scratch]`, Pallas's `pl.get_global`): the last block finalizes a sum |
//! | [`first`] | `double_checked` | bounds-checked `Gmem` accesses |
//! | [`hopper`] | `matmul_pipelined` | TMA + wgmma + `emit_pipeline` (pipelining guide) |
//! | [`hopper`] | `matmul_pipelined_kn` | the same with an MN-major (K x N) B |
//! | [`hopper`] | `matmul_warp_specialized` | `emit_pipeline_warp_specialized`: a memory warpgroup, 2 compute warpgroups, grouped rasterization |
//! | [`hopper`] | `multicast_copy` | a cluster of 2 loading one tile with TMA multicast |
//! | [`hopper`] | `wgmma_variants` | wgmma with f16 accumulators, A from registers, 3-D TMA |
//! | [`hopper`] | `wgmma_transposed` | transposed SMEM views (`Smem::transposed`, Pallas's `TransposeTransform`): MN-major A and B wgmma operands |
//! | [`hopper`] | `wgmma_fp8` | FP8 wgmma (`m64n256k32`, e4m3 and e5m2 operands, f32 accumulators) |
//! | [`hopper`] | `warp_roles` | `#[warp_specialize]` roles by warp |
//! | [`attention_ladder`] | `attention_step0`, `attention_step1`, `attention_step2` | the attention ladder, steps 0-2 (step 3 is `kernel_ops_kernels::attention::attention_fwd`, re-exported) |
//! | [`hopper_ladder`] | `matmul_big_tiles`, `matmul_persistent`, `matmul_epilogue_overlap`, `matmul_cluster_multicast`, `matmul_fewer_arrivals`, `matmul_pingpong` | the Hopper GEMM ladder, steps 2-7 (README); steps 4 and 5 are `kernel_ops_kernels`' matmul kernels, re-exported |
//! | [`blackwell`] | `matmul0`, `matmul1`, `matmul2` | the Blackwell tutorial's steps 0-2: tcgen05 MMA into TMEM, warp specialization, double-buffered epilogue (sm_100a only) |
//! | [`blackwell`] | `embedding_gather` | TMA gather4 (Pallas's `x_ref.at[idxs]`): rows of a table picked by token ids (sm_100a only) |
//! | [`blackwell`] | `tcgen05_transposed` | transposed SMEM views as tcgen05 MMA operands (MN-major A, B, both; sm_100a only) |
//! | [`blackwell`] | `matmul3`, `matmul4`, `matmul5`, `matmul6`, `matmul_dynamic` | the tutorial's steps 3-6 (collective 2-CTA MMA, persistent, dedicated epilogue warpgroup, grid tiling) and cluster launch control (sm_100a only) |
//! | [`decode`] | `decode_split`, `decode_combine` | split-KV flash decoding (bf16, GQA, ragged lengths): a K/V ring written with `emit_pipeline` and element-offset block specs (`BlockSpec::at_elements`), and the combine of the splits |
//! | [`simt`] | `warp_collectives` | `shfl`, vote, `redux.sync`, `match`, warp reductions and scans |
//! | [`simt`] | `warpgroup_indices` | the warpgroup index and its warp-uniform form (`warpgroup_idx_sync`) |
//! | [`simt`] | `block_reductions` | block reductions and scans through a 32-slot SMEM scratch |
//! | [`simt`] | `math_ops` | f32 math (`F32Ext`), f16/bf16 conversions and packed arithmetic, a user `device_op!` |
//! | [`simt`] | `gmem_ops` | `GmemRef`, `ld.global.nc.v4`, vector stores, scoped atomics |
//! | [`simt`] | `reduce_adds` | `st.shared.v4`, bulk reductions from SMEM (`cp.reduce.async.bulk .add.f32`), `red.global.add.v2.f32` |
//! | [`simt`] | `softmax_rows` | row softmax with one warp per row, no SMEM |
//! | [`simt`] | `smem_matrices` | `stmatrix` and `ldmatrix` (`.x1`, `.x2`, `.x4`, `.trans`) between registers and shared memory |
//! | [`simt`] | `warp_mma` | the warp-level tensor-core MMA (`mma.sync.m16n8k16`, bf16 and f16 into f32), operands in registers |
//! | [`simt`] | `bf16_vectors` | 16-byte vector memory on bf16 (8 per access): `ld.global.nc.v4`, `ld.global.v4`, `st.global.v4`, `Smem::read_v4`/`write_v4`, a swizzled tile's `get_v4`/`set_v4` |
//! | [`arrays`] | `array_wgmma_ops`, `array_strided_ops` | register arrays in the WGMMA / WGMMA_ROW / WGMMA_COL / WG_STRIDED layouts |
//! | [`fused`] | `matmul_bias_relu` | `matmul_warp_specialized` + a fused bias/ReLU epilogue on the register tile |
//! | [`gated`] | `reglu` | a gated MLP (`relu(X·W1ᵀ) * (X·W3ᵀ)`) in a few lines on the library's multi-operand GEMM |
//! | [`cluster`] | `cluster_allreduce` | a 2 x 2 cluster reducing through DSMEM with `ClusterBarrier<X>`, `<Y>`, `<WholeCluster>` |
//! | [`cluster`] | `cluster_axis_sums` | a 2 x 2 x 2 cluster: `ClusterBarrier<YZ>` and `<X>` peers |
//! | [`cluster`] | `cluster_allreduce16` | a cluster of 16 CTAs (non-portable size, `non_portable_cluster`): reduce-scatter + all-gather through DSMEM with `ClusterBarrier<WholeCluster>` |
//!
//! The deliberately broken kernels the emulator's tests need are in the
//! fixtures crate (`tests/fixtures`, `kernel_fixtures`); the Hopper
//! ladder's steps 4 and 5 are `kernel_ops_kernels`' matmul kernels (in its
//! `DEVICE_CODE`, not in this crate's).
//!
//! `tests/tests/ptx.rs` checks that every kernel of the device code is
//! listed here.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod arrays;
pub mod first;
pub mod peer;
pub mod fused;
pub mod gated;
pub mod hopper;
pub mod attention_ladder;
pub mod hopper_ladder;
pub mod blackwell;
pub mod cluster;
pub mod decode;
pub mod simt;

kernel_device::device_code!();
