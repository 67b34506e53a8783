#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::wgmma::Acc;

#[kernel(arch = sm_90a)]
pub fn k(x: *mut f32) {
    let acc = Acc::<96>::zeros();
}

fn main() {}
