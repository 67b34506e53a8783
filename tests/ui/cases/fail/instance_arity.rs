#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(instances((128, 64), (256,)))]
pub fn k<const TM: usize, const TK: usize>(x: *mut f32) {}

fn main() {}
