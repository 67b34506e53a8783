#![allow(unused)]
use kernel_device::prelude::*;

// A 384-thread block gets at most 168 registers per thread anyway.
#[kernel(block = warpgroups(3), max_registers = 200)]
pub fn k(x: Gmem<f32>) {}

fn main() {}
