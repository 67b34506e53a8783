#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(2))]
pub fn k(x: *mut f32) {
    #[warp_specialize(warpgroups)]
    match thread_idx().x / 128 {
        0 => {}
        _ => {}
    }
}

fn main() {}
