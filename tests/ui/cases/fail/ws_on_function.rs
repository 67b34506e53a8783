#![allow(unused)]
use kernel_device::prelude::*;

#[warp_specialize(warpgroups)]
fn producer() {}

fn main() {}
