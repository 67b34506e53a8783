#![allow(unused)]
use kernel_device::prelude::*;

// The same instance twice would define its entry point twice.
#[kernel(instances(E = [f32, f32], (2)))]
pub fn k<E: Copy, const S: usize>(x: Gmem<E>) {}

fn main() {}
