#![allow(unused)]
use kernel_device::f16;
use kernel_device::prelude::*;

// Rows of 8 f16 = 16 bytes: a group of 4 rows is 64 bytes, so group 1 would
// start at a 64-byte offset (TMA's SMEM destination is 128-byte aligned).
type Row = GatherRow<f16, 8, Unswizzled>;

#[kernel(block = threads(32), arch = sm_100a)]
pub fn k(table: Tma<Row>, #[scratch] rows: Smem<Tile<f16, 8, 8, Unswizzled>>, #[scratch] full: Barrier) {
    if thread_linear() == 0 {
        full.arrive_expect_tx(2 * Tma::<Row>::GATHER4_BYTES);
        table.gather4(rows, 0, 0, [1, 2, 3, 4], full.as_ref());
        table.gather4(rows, 1, 0, [5, 6, 7, 8], full.as_ref());
    }
    full.wait();
}

fn main() {}
