#![allow(unused)]
use kernel_device::prelude::*;
use kernel_host::{CudaSlice, Kernel};

#[kernel]
pub fn scale(x: *const f32, y: *mut f32, n: u32) {}

fn launch(k: &Kernel<scale>, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) {
    let _ = k.launch(1u32, (x, y));
}

fn main() {}
