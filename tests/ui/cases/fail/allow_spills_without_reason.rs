#![allow(unused)]
use kernel_device::prelude::*;

// The opt-out from the build's local-memory warning says why.
#[kernel(block = threads(128), allow_spills)]
pub fn k(x: Gmem<f32>) {}

#[kernel(block = threads(128), allow_spills = "")]
pub fn h(x: Gmem<f32>) {}

fn main() {}
