//! `#[warp_specialize]` roles that must compile: by warpgroup with register
//! counts, and by warp inside a warpgroup.
use kernel_device::prelude::*;

#[kernel(block = warpgroups(3))]
pub fn by_warpgroup(out: *mut u32) {
    #[warp_specialize(warpgroups, registers = [232, 232, 40])]
    match warpgroup_idx() {
        0 | 1 => {
            let _ = out;
        }
        2 => {}
        _ => {}
    }
}

/// Counts that fill the register pool exactly: 384 threads start with 168
/// each, 3 x 168 = 504 = 240 + 240 + 24.
#[kernel(block = warpgroups(3))]
pub fn at_the_pool(out: *mut u32) {
    #[warp_specialize(warpgroups, registers = [240, 240, 24])]
    match warpgroup_idx() {
        0 | 1 => {
            let _ = out;
        }
        _ => {}
    }
}

#[kernel(block = warpgroups(1))]
pub fn by_warp(out: *mut u32) {
    #[warp_specialize(warps)]
    match warp_in_warpgroup() {
        0 => {
            if elect_one() {
                let _ = out;
            }
        }
        1 => {}
        _ => {}
    }
}

fn main() {
    use kernel_device::KernelSpec;
    assert_eq!(<by_warpgroup as KernelSpec>::BLOCK.x, 384);
    assert_eq!(<by_warp as KernelSpec>::NAME, "by_warp");
}
