#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(3))]
pub fn k(x: *mut f32) {
    // 3 x 128 threads x 240 registers = 92160 > 65536.
    #[warp_specialize(warpgroups, registers = [240, 240, 240])]
    match warpgroup_idx() {
        0 | 1 => {}
        _ => {}
    }
}

fn main() {}
