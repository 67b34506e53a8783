#![allow(unused)]
use kernel_device::prelude::*;

// 4 stages of 128 x 128 f32: 256 KB, over the 227 KB one CTA may use.
#[kernel(block = warpgroups(1))]
pub fn k(x: *mut f32, #[scratch] stages: Smem<[[[f32; 128]; 128]; 4]>) {}

fn main() {}
