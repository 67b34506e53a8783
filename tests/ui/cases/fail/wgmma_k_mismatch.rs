#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::f16;
use kernel_device::wgmma::Acc;

#[kernel(arch = sm_90a)]
pub fn k(
    x: *mut f32,
    #[scratch] a: Smem<Tile<f16, 64, 64, Swizzled<128>>>,
    #[scratch] b: Smem<Tile<f16, 128, 32, Swizzled<64>>>,
) {
    let mut acc = Acc::<128>::zeros();
    acc.mma(a, 0, b, 0, false);
}

fn main() {}
