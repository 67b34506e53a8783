#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(x: *const f32) -> f32 {
    0.0
}

fn main() {}
