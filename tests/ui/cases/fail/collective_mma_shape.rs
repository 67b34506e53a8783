#![allow(unused)]
use kernel_device::collective::{pair_role, TmemPair};
use kernel_device::tcgen05::tcgen05_mma_kn;
use kernel_device::prelude::*;
use kernel_device::f16;

type A = Tile<f16, 128, 64, Swizzled<128>>;
type B = Tile<f16, 64, 64, Swizzled<128>>;

// N = 136 is not a multiple of 16 (and B's half does not match it).
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a)]
pub fn k(x: *mut f32, #[scratch] a: Smem<A>, #[scratch] b: Smem<B>, #[scratch] acc: TmemPair<f32, 128, 136>) {
    if let Some(leader) = pair_role().leader() {
        tcgen05_mma_kn(&leader, &acc, a, b, false);
    }
}

fn main() {}
