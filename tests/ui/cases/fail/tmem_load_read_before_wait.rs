#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// tcgen05.ld's registers are valid only after tcgen05.wait::ld: a load
// yields a TmemLoad, whose registers come out only through `.wait()`.
#[kernel(arch = sm_100a)]
pub fn k(out: Gmem<f32>, #[scratch] acc: Tmem<f32, 128, 32>) {
    let v = acc.load_f32::<32>(0);
    out.write(0, v[0]);
}

fn main() {}
