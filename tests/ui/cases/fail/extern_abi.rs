#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub extern "C" fn k(x: *mut f32) {}

fn main() {}
