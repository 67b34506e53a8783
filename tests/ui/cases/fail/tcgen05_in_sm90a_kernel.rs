#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tcgen05::{tcgen05_commit_arrive, Cta1, TcBarrier};

// tcgen05 and tensor memory do not exist on sm_90a.
#[kernel(arch = sm_90a)]
pub fn k(#[scratch] done: TcBarrier) {
    tcgen05_commit_arrive(&Cta1, done.as_ref());
}

fn main() {}
