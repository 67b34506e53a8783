#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(y: Gmem<f32>, #[scratch] #[global_scratch] flag: Semaphore) {}

fn main() {}
