#![allow(unused)]
use kernel_device::prelude::*;

// Registers are allocated 8 per thread: 36 costs as much as 40.
#[kernel(block = threads(128), max_registers = 36)]
pub fn k(x: Gmem<f32>) {}

fn main() {}
