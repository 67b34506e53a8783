#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = threads(64), cluster = 2)]
pub fn k(y: Gmem<f32>, #[scratch(arrivals = 2)] done: ClusterBarrier) {}

fn main() {}
