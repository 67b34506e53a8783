#![allow(unused)]
use kernel_device::collective::TmemPair;
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_mma_kn, Cta1};
use kernel_device::f16;

type A = Tile<f16, 128, 64, Swizzled<128>>;
type B = Tile<f16, 64, 64, Swizzled<128>>;

// Collective TMEM is written by the pair's MMAs only (cta_group::2, issued
// by the leader): a cta_group::1 MMA into it does not compile, also from a
// helper function (where `#[kernel]` does not see the `Cta1`).
fn mma(acc: &TmemPair<f32, 128, 128>, a: Smem<A>, b: Smem<B>) {
    tcgen05_mma_kn(&Cta1, acc, a, b, false);
}

#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a)]
pub fn k(#[scratch] a: Smem<A>, #[scratch] b: Smem<B>, #[scratch] acc: TmemPair<f32, 128, 128>) {
    if elect_one() {
        mma(&acc, a, b);
    }
}

fn main() {}
