#![allow(unused)]
use kernel_device::collective::{PairTma, PartitionedTma};
use kernel_device::prelude::*;
use kernel_device::f16;

type A = Tile<f16, 128, 64, Swizzled<128>>;

// A 2-D tile splits along axis 0 (rows) or 1 (columns) only.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a)]
pub fn k(a: Tma<A>, #[scratch] s: Smem<A>, #[scratch] bar: Barriers<1, PairTma>) {
    a.load_partitioned::<2>(s, 0, 0, bar.at(0));
}

fn main() {}
