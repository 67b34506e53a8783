#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::Tmem;

// Tensor memory needs `arch = sm_100a`: this kernel is also built for sm_90a.
#[kernel]
pub fn k(#[scratch] acc: Tmem<f32, 128, 128>) {}

fn main() {}
