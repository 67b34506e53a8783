#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(9))]
pub fn k(x: *mut f32) {}

fn main() {}
