#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(x: *mut f32, #[scratch(arrival = 2)] ready: Barrier) {}

fn main() {}
