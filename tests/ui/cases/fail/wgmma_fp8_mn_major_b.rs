#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::E4M3;
use kernel_device::wgmma::Acc;

// FP8 operands must both be K-major: no transposed (K x N) B.
#[kernel(arch = sm_90a)]
pub fn k(
    x: Gmem<f32>,
    #[scratch] a: Smem<Tile<E4M3, 64, 128, Swizzled<128>>>,
    #[scratch] b: Smem<Tile<E4M3, 128, 128, Swizzled<128>>>,
) {
    let mut acc = Acc::<128>::zeros();
    acc.mma_kn(a, 0, b, 0, false);
}

fn main() {}
