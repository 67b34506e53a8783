#![allow(unused)]
use kernel_device::prelude::*;

// `E` is a type parameter: its instance value must be a type.
#[kernel(instances((128, 4)))]
pub fn k<E: Copy, const S: usize>(x: Gmem<E>) {}

fn main() {}
