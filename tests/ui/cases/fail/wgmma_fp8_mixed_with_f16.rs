#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::{f16, E4M3};
use kernel_device::wgmma::Acc;

// An FP8 A with an f16 B: wgmma's operands have one element type.
#[kernel(arch = sm_90a)]
pub fn k(
    x: Gmem<f32>,
    #[scratch] a: Smem<Tile<E4M3, 64, 128, Swizzled<128>>>,
    #[scratch] b: Smem<Tile<f16, 128, 64, Swizzled<128>>>,
) {
    let mut acc = Acc::<128>::zeros();
    acc.mma(a, 0, b, 0, false);
}

fn main() {}
