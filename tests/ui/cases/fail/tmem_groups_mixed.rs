#![allow(unused)]
use kernel_device::collective::TmemPair;
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// Every tcgen05 op of a kernel uses one CTA group: collective TMEM (a
// cta_group::2 allocation) and one CTA's Tmem (cta_group::1) do not mix.
#[kernel(block = warpgroups(1), cluster = (2, 1, 1), arch = sm_100a)]
pub fn k(x: *mut f32, #[scratch] acc: TmemPair<f32, 128, 128>, #[scratch] extra: Tmem<f32, 128, 32>) {}

fn main() {}
