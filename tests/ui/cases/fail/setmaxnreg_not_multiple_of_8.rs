#![allow(unused)]
use kernel_device::prelude::*;

#[kernel(block = warpgroups(2), arch = sm_90a)]
pub fn k(x: *mut f32) {
    kernel_device::wgmma::setmaxnreg_dec::<36>();
}

fn main() {}
