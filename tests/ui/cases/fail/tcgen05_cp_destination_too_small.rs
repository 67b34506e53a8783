#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_cp, Cp128x256b, Cta1};
use kernel_device::tmem::Tmem;

// A 128 x 64 f16 row is 128 bytes (32 TMEM columns); the destination has 16.
#[kernel(arch = sm_100a)]
pub fn k(#[scratch] a: Smem<Tile<kernel_device::f16, 128, 64, Swizzled<128>>>, #[scratch] a_tm: Tmem<kernel_device::f16, 128, 32, true>) {
    if thread_linear() == 0 {
        tcgen05_cp(&Cta1, Cp128x256b, &a_tm, a);
    }
}

fn main() {}
