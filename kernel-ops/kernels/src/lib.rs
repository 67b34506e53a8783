//! Device code of the ready kernels of `kernel-ops`: the kernels behind
//! its host entry points, compiled for the GPU (nvptx64) and, for their
//! launch metadata and the CPU emulator, for the host.
//!
//! | module | kernels | host entry point |
//! |---|---|---|
//! | [`norms`] | `softmax`, `layer_norm`, `rms_norm` (`<T, A, V>`: f16, bf16 or f32, any width up to 65536: 16-byte accesses (`Vec16`), or for widths not a multiple of 16 bytes peeled ones (`Peel`: each row's body in 16-byte accesses, its ends by element; `Single`, one element per access, where a cluster slice has no room for the peel); one row per warp (`_warp`), per warpgroup, per 4 warpgroups (`_wide`), or per cluster of 4 CTAs (`_cluster`)), `add_rms_norm`, `add_layer_norm` (`<T, V>`: f16 or bf16, multiples of 8 up to 16384, optionally FP8 e4m3 out), `fp8_tensor_scale`; the backwards `rms_norm_bwd`, `layer_norm_bwd` (`_warp`, `_wide`; `<T, A, V>`: dx and per-group f32 partials of dgamma/dbeta, rows of a multiple of 16 bytes up to 16384 columns, 8192 in f32, other widths up to 4096) and `norm_bwd_reduce` (the partials summed in a fixed order) | `kernel_ops::norms` |
//! | [`matmul`] | `matmul_persistent_ws`, `matmul_persistent_ws_cluster` (the Hopper ladder's steps 4 and 5 re-export them as `matmul_epilogue_overlap` and `matmul_cluster_multicast`), each generic over the element type (f16, bf16) | `kernel_ops::matmul` |
//! | [`gemm`] | none: the building blocks of the warp-specialized Hopper GEMMs (tile types, per-warpgroup accumulators [`gemm::WgAcc`], the sub-tile epilogue store, role constants), shared with the Hopper ladder | |
//! | [`gemm_multi`] | none: the multi-operand GEMM (`gemm_multi`, a generic function kernels call with their register-array epilogue) | |
//! | [`matmul_fp8`] | `matmul_fp8` (`(scale_a scale_b) A Bᵀ`, e4m3 in, f16 out: `gemm_multi_of` on FP8 tiles), `matmul_fp8_rowwise` (a scale per row of A and of B), `matmul_fp8_blockscaled` (1 x 128 and 128 x 128 scales, promoted every 128 of K) | `kernel_ops::fp8` |
//! | [`attention`] | `attention_fwd` (f16 or bf16: `softmax(scale Q Kᵀ) V` and the log-sum-exp, head_dim 64/128/256, causal or not, GQA; FlashAttention-3's producer/consumer schedule with P in registers) | `kernel_ops::attention` |
//! | [`grouped`] | `grouped_matmul` (f16 or bf16; mixture of experts: `C_g = A_g B_gᵀ` over groups of ragged rows, sizes on the device, tiles scheduled in the kernel; `128 x 256` and `128 x 128`), `grouped_matmul_fp8_blockscaled` (the same in FP8 with 1 x 128 / 128 x 128 block scales) | `kernel_ops::grouped` |
//! | [`collective`] | `allgather_matmul_ws` (the ready matmul over an `A` all-gathered while it runs: shards visited in arrival order, each gated on its arrival flag) | `kernel_ops::collective` |
//! | [`swiglu`] | `swiglu` (`silu(X W1ᵀ) * (X W3ᵀ)`: `gemm_multi` with two operands) | `kernel_ops::swiglu` |
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod attention;
pub mod attention_bwd;
pub mod collective;
pub mod decode;
pub mod gemm;
pub mod gemm_multi;
pub mod grouped;
pub mod matmul;
pub mod norms;
pub mod matmul_fp8;
pub mod reduce_scatter;
pub mod swiglu;

kernel_device::device_code!();
