//! Example kernels, compiled for the GPU (nvptx64) and, for their launch
//! metadata, for the host.
//!
//! | module | kernel | what it shows |
//! |---|---|---|
//! | [`first`] | `increment` | a grid of 2 blocks, global memory |
//! | [`first`] | `producer_consumer` | 2 warpgroups, SMEM queue, mbarrier phases |
//! | [`first`] | `cluster_exchange` | a cluster of 2 CTAs, distributed SMEM, cluster barrier |
//! | [`first`] | `semaphore_signal` | block 0 signals block 1 through a global semaphore |
//! | [`hopper`] | `matmul_pipelined` | TMA + wgmma + `emit_pipeline` (pipelining guide) |
//! | [`hopper`] | `multicast_copy` | a cluster of 2 loading one tile with TMA multicast |
//! | [`planted`] | `skip_barrier`, `missing_arrive`, ... | deliberately broken, for the emulator's checks |
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod first;
pub mod hopper;
pub mod blackwell;
pub mod hopper_ladder;
pub mod planted;

kernel_device::device_code!();
