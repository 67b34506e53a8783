#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k<T: Copy>(x: *mut T) {}

fn main() {}
