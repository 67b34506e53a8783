#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, Cta1, TensorCore};

// tcgen05 and tensor memory do not exist on sm_90a.
#[kernel(arch = sm_90a)]
pub fn k(#[scratch] done: Barrier<TensorCore>) {
    tcgen05_commit_arrive(&Cta1, done.as_ref());
}

fn main() {}
