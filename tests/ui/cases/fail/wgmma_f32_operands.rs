#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::wgmma::Acc;

type T = Tile<f32, 64, 32, Swizzled<128>>;

#[kernel(arch = sm_90a)]
pub fn k(x: *mut f32, #[scratch] a: Smem<T>, #[scratch] b: Smem<T>) {
    let mut acc = Acc::<64>::zeros();
    acc.mma(a, 0, b, 0, false);
}

fn main() {}
