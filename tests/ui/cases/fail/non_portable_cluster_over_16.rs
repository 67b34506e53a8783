#![allow(unused)]
use kernel_device::prelude::*;

// Even with the non-portable opt-in, a cluster has at most 16 CTAs.
#[kernel(block = threads(32), cluster = (4, 4, 2), non_portable_cluster)]
pub fn k(x: *mut f32) {}

fn main() {}
