#![allow(unused)]
use kernel_device::prelude::*;

// A type parameter needs `instances(..)` listing the types to compile.
#[kernel]
pub fn k<T: Copy>(x: *mut T) {}

fn main() {}
