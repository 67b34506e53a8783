#![allow(unused)]
use kernel_device::prelude::*;

// `S` is a const parameter: its instance value must be a literal.
#[kernel(instances((f32, u32)))]
pub fn k<E: Copy, const S: usize>(x: Gmem<E>) {}

fn main() {}
