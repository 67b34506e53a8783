// A raw-pointer parameter is a warning naming the parameter and the fix
// (denied here, so the warning is this case's error); `#[unchecked]`
// silences it per parameter.
#![deny(deprecated)]
use kernel_device::prelude::*;

#[kernel(block = threads(32))]
pub fn k(x: GmemRef<f32>, y: *mut f32, #[unchecked] z: *mut f32) {
    let _ = (x, y, z);
}

fn main() {}
