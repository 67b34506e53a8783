#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// TMEM tiles span 128 or 64 lanes.
#[kernel(arch = sm_100a)]
pub fn k(#[scratch] acc: Tmem<f32, 96, 128>) {}

fn main() {}
