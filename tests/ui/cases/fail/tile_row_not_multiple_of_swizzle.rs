#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::f16;

// 32 f16 = 64 bytes per row: too narrow for a 128-byte swizzle.
type T = Tile<f16, 64, 32, Swizzled<128>>;

#[kernel]
pub fn k(t: Tma<T>, #[scratch] tile: Smem<T>, #[scratch] bar: Barrier) {
    t.load(tile, 0, 0, bar.as_ref());
}

fn main() {}
