#![allow(unused)]
use kernel_device::prelude::*;
use kernel_host::{CudaSlice, Kernel};

#[kernel]
pub fn scale(x: *const f32, y: *mut f32, n: u32) {}

// `y` must be `&mut` (the kernel writes through `*mut f32`), and `n` a `u32`.
fn launch(k: &Kernel<scale>, x: &CudaSlice<f32>, y: &CudaSlice<f32>, n: usize) {
    let _ = k.launch(1u32, (x, y, n));
}

fn main() {}
