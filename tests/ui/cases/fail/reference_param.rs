#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(x: &[f32], y: *mut f32) {}

fn main() {}
