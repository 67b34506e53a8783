#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(2))]
pub fn k(x: *mut f32) {
    #[warp_specialize(warpgroups)]
    match warpgroup_idx() {
        0 => {}
        2 => {}
        _ => {}
    }
}

fn main() {}
