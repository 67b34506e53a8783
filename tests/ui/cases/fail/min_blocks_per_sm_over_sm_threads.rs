#![allow(unused)]
use kernel_device::prelude::*;

// 3 blocks of 1024 threads: 3072 threads, over the 2048 an SM holds.
#[kernel(block = threads(1024), min_blocks_per_sm = 3)]
pub fn k(x: Gmem<f32>) {}

fn main() {}
