#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(x: *mut f32, #[scratch(arrivals = 2)] buf: Smem<[f32; 128]>) {}

fn main() {}
