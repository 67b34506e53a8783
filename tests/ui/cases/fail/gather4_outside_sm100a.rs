#![allow(unused)]
use kernel_device::f16;
use kernel_device::prelude::*;

type Row = GatherRow<f16, 64, Swizzled<128>>;

// TMA gather4 exists only on sm_100a; a kernel without `arch` is also built
// for sm_90a.
#[kernel(block = threads(32))]
pub fn k(table: Tma<Row>, #[scratch] rows: Smem<Tile<f16, 8, 64, Swizzled<128>>>, #[scratch] full: Barrier) {
    if thread_linear() == 0 {
        full.arrive_expect_tx(Tma::<Row>::GATHER4_BYTES);
        table.gather4(rows, 0, 0, [1, 2, 3, 4], full.as_ref());
    }
    full.wait();
}

fn main() {}
