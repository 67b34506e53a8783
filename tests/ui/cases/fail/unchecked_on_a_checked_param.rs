use kernel_device::prelude::*;

#[kernel(block = threads(32))]
pub fn k(#[unchecked] x: Gmem<f32>) {
    let _ = x;
}

fn main() {}
