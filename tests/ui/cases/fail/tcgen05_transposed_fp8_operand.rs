#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tcgen05::{Cta1, TensorCore};
use kernel_device::tcgen05_view::tcgen05_mma_view;
use kernel_device::tmem::Tmem;
use kernel_device::E4M3;

// A transposed (MN-major) tcgen05 operand is for 16-bit elements here.
#[kernel(block = warpgroups(1), arch = sm_100a)]
pub fn k(
    #[scratch] a_km: Smem<Tile<E4M3, 64, 128, Swizzled<128>>>,
    #[scratch] b: Smem<Tile<E4M3, 128, 64, Swizzled<64>>>,
    #[scratch] acc: Tmem<f32, 128, 128>,
) {
    if thread_linear() == 0 {
        tcgen05_mma_view(&Cta1, &acc, a_km.transposed(), b, false);
    }
}

fn main() {}
