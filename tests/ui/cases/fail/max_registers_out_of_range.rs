#![allow(unused)]
use kernel_device::prelude::*;

// ptxas raises a cap below 24 and ignores one above 255.
#[kernel(block = threads(128), max_registers = 16)]
pub fn k(x: Gmem<f32>) {}

fn main() {}
