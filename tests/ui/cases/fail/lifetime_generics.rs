#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k<'a>(x: *mut f32) {}

fn main() {}
