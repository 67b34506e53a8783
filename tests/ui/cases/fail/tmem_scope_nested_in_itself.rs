#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::tmem::{Tmem, TmemScope};

// A nested scope needs its own TmemScope: `run` borrows the scope mutably
// for the whole closure.
#[kernel(arch = sm_100a)]
pub fn k(#[scratch] mut scope: TmemScope) {
    scope.run(|outer: Tmem<f32, 128, 64>| {
        scope.run(|inner: Tmem<f32, 128, 64>| {});
    });
}

fn main() {}
