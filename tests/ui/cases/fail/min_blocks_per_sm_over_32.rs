#![allow(unused)]
use kernel_device::prelude::*;

// An SM holds at most 32 blocks; ptxas ignores `.minnctapersm 40`.
#[kernel(block = threads(32), min_blocks_per_sm = 40)]
pub fn k(x: Gmem<f32>) {}

fn main() {}
