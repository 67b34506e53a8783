#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(3))]
pub fn k(x: *mut f32) {
    #[warp_specialize(warpgroups)]
    match warpgroup_idx() {
        0 | 1 => {}
        1 | 2 => {}
        _ => {}
    }
}

fn main() {}
