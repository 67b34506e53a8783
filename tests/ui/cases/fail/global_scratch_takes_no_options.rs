#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(y: Gmem<f32>, #[global_scratch(bytes = 64)] flag: Semaphore) {}

fn main() {}
