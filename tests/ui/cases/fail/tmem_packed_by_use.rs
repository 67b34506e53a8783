#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::f16;
use kernel_device::tcgen05::{tcgen05_mma_ts, Cta1};
use kernel_device::tmem::Tmem;

// An A operand in TMEM must be packed (two f16 per 32-bit column);
// 32-bit data cannot be packed at all.
#[kernel(arch = sm_100a)]
pub fn k(
    #[scratch] b: Smem<Tile<f16, 128, 64, Swizzled<128>>>,
    #[scratch] a_tm: Tmem<f16, 128, 64>,
    #[scratch] acc: Tmem<f32, 128, 128>,
    #[scratch] bad: Tmem<f32, 128, 64, true>,
) {
    tcgen05_mma_ts(&Cta1, &acc, &a_tm, b, false);
}

fn main() {}
