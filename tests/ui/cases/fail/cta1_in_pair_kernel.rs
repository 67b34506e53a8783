#![allow(unused)]
use kernel_device::collective::TmemPair;
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, Cta1, TensorCore};

// A kernel with collective TMEM is a cta_group::2 kernel: a cta_group::1
// commit (issuer `Cta1`) in it is an error at the name (ptxas rejects a
// kernel with both groups).
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a)]
pub fn k(#[scratch] acc: TmemPair<f32, 128, 128>, #[scratch] done: Barrier<TensorCore>) {
    if elect_one() {
        tcgen05_commit_arrive(&Cta1, done.as_ref());
    }
}

fn main() {}
