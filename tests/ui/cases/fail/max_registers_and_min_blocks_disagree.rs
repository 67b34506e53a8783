#![allow(unused)]
use kernel_device::prelude::*;

// At 128 registers only 1 block of 384 threads fits; 2 need at most 80.
#[kernel(block = warpgroups(3), min_blocks_per_sm = 2, max_registers = 128)]
pub fn k(x: Gmem<f32>) {}

fn main() {}
