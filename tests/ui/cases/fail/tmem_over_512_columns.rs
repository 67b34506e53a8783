#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// 256 + 256 + 32 columns: more than the 512 a CTA has.
#[kernel(arch = sm_100a)]
pub fn k(
    #[scratch] acc0: Tmem<f32, 128, 256>,
    #[scratch] acc1: Tmem<f32, 128, 256>,
    #[scratch] extra: Tmem<f32, 128, 32>,
) {}

fn main() {}
