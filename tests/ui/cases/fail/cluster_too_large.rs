#![allow(unused)]
use kernel_device::prelude::*;

// More than 8 CTAs without `non_portable_cluster`.
#[kernel(cluster = (4, 4, 1))]
pub fn k(x: *mut f32) {}

fn main() {}
