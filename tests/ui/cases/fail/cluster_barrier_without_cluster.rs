#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = threads(64))]
pub fn k(y: Gmem<f32>, #[scratch] done: ClusterBarrier) {}

fn main() {}
