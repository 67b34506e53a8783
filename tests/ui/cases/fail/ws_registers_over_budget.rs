#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(3))]
pub fn k(x: *mut f32) {
    // 384 threads start with 168 registers each: the CTA's pool is
    // 3 x 168 = 504 per thread, and 240 + 240 + 32 = 512 is over it (on an
    // H100 a consumer's setmaxnreg.inc 240 waited forever).
    #[warp_specialize(warpgroups, registers = [240, 240, 32])]
    match warpgroup_idx() {
        0 | 1 => {}
        _ => {}
    }
}

fn main() {}
