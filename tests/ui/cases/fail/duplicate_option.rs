#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = threads(128), block = warpgroups(1))]
pub fn k(x: *mut f32) {}

fn main() {}
