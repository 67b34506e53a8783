#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::f16;

type T = Tile<f16, 12, 64, Swizzled<128>>;

#[kernel]
pub fn k(t: Tma<T>, #[scratch] tile: Smem<T>, #[scratch] bar: Barrier) {
    t.load(tile, 0, 0, bar.as_ref());
}

fn main() {}
