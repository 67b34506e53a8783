#![allow(unused)]
use kernel_device::prelude::*;

// setmaxnreg moves registers within the entry count's pool, which a cap lowers.
#[kernel(block = warpgroups(3), arch = sm_90a, max_registers = 128)]
pub fn k(x: Gmem<f32>) {
    #[warp_specialize(warpgroups, registers = [40, 232, 232])]
    match warpgroup_idx() {
        0 => {}
        _ => {}
    }
}

fn main() {}
