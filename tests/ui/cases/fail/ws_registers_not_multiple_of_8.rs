#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(3))]
pub fn k(x: *mut f32) {
    #[warp_specialize(warpgroups, registers = [232, 232, 42])]
    match warpgroup_idx() {
        0 | 1 => {}
        _ => {}
    }
}

fn main() {}
