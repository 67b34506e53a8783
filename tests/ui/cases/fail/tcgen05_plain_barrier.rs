#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, Cta1};

// tcgen05.commit arrives only on a tensor-core barrier (Barrier<TensorCore>).
#[kernel(arch = sm_100a)]
pub fn k(#[scratch] done: Barrier) {
    tcgen05_commit_arrive(&Cta1, done.as_ref());
}

fn main() {}
