#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::f16;
use kernel_device::tcgen05::{tcgen05_mma, Cta1};
use kernel_device::tmem::Tmem;

// M = 64 takes N a multiple of 8 up to 256: N = 264 is not a cta_group::1 shape.
#[kernel(arch = sm_100a)]
pub fn k(
    #[scratch] a: Smem<Tile<f16, 64, 64, Swizzled<128>>>,
    #[scratch] b: Smem<Tile<f16, 264, 64, Swizzled<128>>>,
    #[scratch] acc: Tmem<f32, 64, 264>,
) {
    tcgen05_mma(&Cta1, &acc, a, b, false);
}

fn main() {}
