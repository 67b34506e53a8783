#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(x: *mut f32, #[scratch(arrivals = 0)] ready: Barrier) {}

fn main() {}
