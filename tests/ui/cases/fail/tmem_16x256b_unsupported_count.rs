#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// tcgen05.ld .16x256b takes x1, x2, x4, x8, x16 (4 N registers; x32 not
// implemented, x3 not a repetition count).
#[kernel(arch = sm_100a)]
pub fn k(out: Gmem<u32>, #[scratch] acc: Tmem<f32, 64, 64>) {
    let v = acc.load_16x256b::<3, _>(0).wait();
    out.write(0, v[0]);
}

fn main() {}
