// Elementwise operations on register arrays need one layout: adding a
// WGMMA-layout block and a WGMMA_ROW vector without a broadcast is an error
// naming both layouts.
use kernel_device::array::{Array, Wgmma, WgmmaRow};

fn main() {
    let block = Array::<f32, Wgmma<64>>::splat(1.0);
    let rows = Array::<f32, WgmmaRow>::splat(2.0);
    let _ = block + rows;
}
