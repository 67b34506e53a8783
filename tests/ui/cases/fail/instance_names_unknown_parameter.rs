#![allow(unused)]
use kernel_device::prelude::*;

// `instances(T = [..])` names a parameter the kernel does not have.
#[kernel(instances(T = [f32, u16], (2)))]
pub fn k<E: Copy, const S: usize>(x: Gmem<E>) {}

fn main() {}
