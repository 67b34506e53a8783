#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::wgmma::{wgmma_commit_group, wgmma_wait};

// wgmma does not exist on sm_100a.
#[kernel(arch = sm_100a)]
pub fn k(x: *mut f32) {
    wgmma_commit_group();
    wgmma_wait::<0>();
}

fn main() {}
