// A WGMMA_COL vector broadcasts only to the WGMMA block of its own width.
use kernel_device::array::{Array, Wgmma, WgmmaCol};

fn main() {
    let cols = Array::<f32, WgmmaCol<64>>::splat(1.0);
    let _ = cols.broadcast::<Wgmma<128>>();
}
