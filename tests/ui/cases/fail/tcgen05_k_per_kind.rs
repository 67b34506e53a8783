#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::f16;
use kernel_device::tcgen05::{tcgen05_mma_ts, Cta1};
use kernel_device::tmem::Tmem;

// kind::f16 consumes K = 16 per instruction: an A operand of K = 8 is not one.
#[kernel(arch = sm_100a)]
pub fn k(
    #[scratch] b: Smem<Tile<f16, 128, 8, Unswizzled>>,
    #[scratch] a_tm: Tmem<f16, 128, 8, true>,
    #[scratch] acc: Tmem<f32, 128, 128>,
) {
    tcgen05_mma_ts(&Cta1, &acc, &a_tm, b, false);
}

fn main() {}
