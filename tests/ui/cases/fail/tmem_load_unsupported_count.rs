#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// tcgen05.ld .32x32b takes x1, x2, x4 .. x64 (x128 not implemented).
#[kernel(arch = sm_100a)]
pub fn k(out: Gmem<f32>, #[scratch] acc: Tmem<f32, 128, 32>) {
    let v = acc.load_f32::<3>(0).wait();
    out.write(0, v[0]);
}

fn main() {}
