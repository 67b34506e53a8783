#![allow(unused)]
use kernel_device::prelude::*;

pub struct HostOnly {
    pub len: usize,
}

#[kernel]
pub fn k(x: *mut f32, info: HostOnly) {}

fn main() {}
