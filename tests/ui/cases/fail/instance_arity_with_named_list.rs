#![allow(unused)]
use kernel_device::prelude::*;

// With `E` given by name, each tuple lists the other parameters only.
#[kernel(instances(E = [f32, u16], (f32, 2)))]
pub fn k<E: Copy, const S: usize>(x: Gmem<E>) {}

fn main() {}
