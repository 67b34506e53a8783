#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_cp, Cp128x256b, Cta1};
use kernel_device::tmem::Tmem;

// Cp128x256b copies 128 rows: a 64-row tile does not fit the shape.
#[kernel(arch = sm_100a)]
pub fn k(#[scratch] a: Smem<Tile<kernel_device::f16, 64, 64, Swizzled<128>>>, #[scratch] a_tm: Tmem<kernel_device::f16, 128, 64, true>) {
    if thread_linear() == 0 {
        tcgen05_cp(&Cta1, Cp128x256b, &a_tm, a);
    }
}

fn main() {}
