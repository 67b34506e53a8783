#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(cluster = (4, 4, 1))]
pub fn k(x: *mut f32) {}

fn main() {}
