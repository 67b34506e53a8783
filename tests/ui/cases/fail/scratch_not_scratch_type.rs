#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub fn k(x: *mut f32, #[scratch] counter: u32) {}

fn main() {}
