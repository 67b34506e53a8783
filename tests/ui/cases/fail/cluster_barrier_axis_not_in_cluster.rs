#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = threads(64), cluster = (2, 1, 1))]
pub fn k(y: Gmem<f32>, #[scratch] col_done: ClusterBarrier<Y>) {}

fn main() {}
