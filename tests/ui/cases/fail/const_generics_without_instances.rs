#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k<const TILE: usize>(x: *mut f32) {}

fn main() {}
