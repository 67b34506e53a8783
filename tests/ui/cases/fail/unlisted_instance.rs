#![allow(unused)]
use kernel_device::prelude::*;
use kernel_device::KernelSpec;

#[kernel(instances((2), (4)))]
pub fn k<const STAGES: usize>(x: *mut f32, #[scratch] bufs: Smem<[[f32; 128]; STAGES]>) {}

fn entry_name<K: KernelSpec>() -> &'static str {
    K::NAME
}

fn main() {
    let _ = entry_name::<k<2>>();
    // 3 stages were not listed in `instances`: there is no entry point for it.
    let _ = entry_name::<k<3>>();
}
