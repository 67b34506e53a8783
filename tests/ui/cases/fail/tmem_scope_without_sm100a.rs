#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::{Tmem, TmemScope};

// TmemScope allocates tensor memory: sm_100a only.
#[kernel]
pub fn k(#[scratch] mut scope: TmemScope) {
    scope.run(|t: Tmem<f32, 128, 64>| {});
}

fn main() {}
