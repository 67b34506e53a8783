#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::{bf16, f16};
use kernel_device::tcgen05::{tcgen05_mma, Cta1};
use kernel_device::tmem::Tmem;

// bf16 inputs accumulate only into f32.
#[kernel(arch = sm_100a)]
pub fn k(
    #[scratch] a: Smem<Tile<bf16, 128, 64, Swizzled<128>>>,
    #[scratch] b: Smem<Tile<bf16, 128, 64, Swizzled<128>>>,
    #[scratch] acc: Tmem<f16, 128, 128>,
) {
    tcgen05_mma(&Cta1, &acc, a, b, false);
}

fn main() {}
