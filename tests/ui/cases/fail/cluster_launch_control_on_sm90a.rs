#![allow(unused)]
use kernel_device::clc::{dynamic_scheduling_loop, ClcResponse};
use kernel_device::prelude::*;

// Cluster launch control exists only on sm_100.
#[kernel(block = warpgroups(1), arch = sm_90a)]
pub fn k(x: *mut f32, #[scratch] clc: ClcResponse, #[scratch] bar: Barrier) {
    dynamic_scheduling_loop(&clc, bar.as_ref(), |info| {});
}

fn main() {}
