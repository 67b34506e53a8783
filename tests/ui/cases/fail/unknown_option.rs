#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(blocks = threads(128))]
pub fn k(x: *mut f32) {}

fn main() {}
