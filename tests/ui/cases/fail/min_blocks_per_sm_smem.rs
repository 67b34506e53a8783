#![allow(unused)]
use kernel_device::prelude::*;

// Two blocks of 128 KB of shared memory do not fit an SM's 228 KB.
#[kernel(block = warpgroups(1), min_blocks_per_sm = 2)]
pub fn k(x: Gmem<f32>, #[scratch] stage: Smem<[[f32; 256]; 128]>) {}

fn main() {}
