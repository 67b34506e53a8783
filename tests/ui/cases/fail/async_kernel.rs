#![allow(unused)]
use kernel_device::prelude::*;

#[kernel]
pub async fn k(x: *mut f32) {}

fn main() {}
