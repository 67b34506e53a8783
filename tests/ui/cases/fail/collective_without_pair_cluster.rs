#![allow(unused)]
use kernel_device::collective::TmemPair;
use kernel_device::prelude::*;

// Collective TMEM (and so the collective MMA and commit that take it) in a
// kernel whose cluster has no CTA pairs.
#[kernel(block = warpgroups(1), cluster = (1, 2, 1), arch = sm_100a)]
pub fn k(x: *mut f32, #[scratch] acc: TmemPair<f32, 128, 256>) {}

fn main() {}
