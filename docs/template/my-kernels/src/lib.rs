//! The kernels of the template: `axpy` over global memory, `row_sums`, a
//! warp reduction, and `divide_rows`, which divides each row by its sum
//! into bfloat16 (the second kernel of the Python `normalize_rows`). The same source is compiled twice: for the GPU by
//! `build.rs` (nvptx64), and for the host, where each kernel is a type the
//! host launches (on a GPU or on the CPU emulator).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

use kernel_device::prelude::*;
use kernel_device::{bf16, cvt, reduce};

// `DEVICE_CODE`: the PTX and cubins built by build.rs, one per architecture.
kernel_device::device_code!();

/// Threads per block of both kernels.
pub const BLOCK: u32 = 128;
/// Rows per block of [`row_sums`] and [`divide_rows`]: one per warp.
pub const ROWS_PER_BLOCK: u32 = BLOCK / 32;

/// `y[i] = a * x[i] + y[i]` for `i < n`, one element per thread.
///
/// Constraints: `x` and `y` hold at least `n` elements; launch
/// `n.div_ceil(BLOCK)` blocks.
#[kernel(block = threads(128))]
pub fn axpy(x: GmemRef<f32>, y: Gmem<f32>, a: f32, n: u32) {
    let i = block_idx().x * BLOCK + thread_idx().x;
    if i < n {
        let i = i as usize;
        // Bounds-checked: a trap on the GPU, a report on the emulator.
        y.write(i, a * x.read(i) + y.read(i));
    }
}

/// `sums[r] = x[r * cols] + ... + x[r * cols + cols - 1]` for `r < rows`,
/// one warp per row: each lane adds every 32nd element of the row, then a
/// butterfly of shuffles (`reduce::warp_sum`) adds the 32 partial sums.
///
/// Constraints: `x` holds `rows * cols` elements and `sums` `rows`; launch
/// `rows.div_ceil(ROWS_PER_BLOCK)` blocks.
#[kernel(block = threads(128))]
pub fn row_sums(x: GmemRef<f32>, sums: Gmem<f32>, rows: u32, cols: u32) {
    let row = block_idx().x * ROWS_PER_BLOCK + warp_idx();
    // `row` is the same for the 32 lanes of a warp, so the whole warp
    // takes this branch or none of it does (the shuffles need every lane).
    if row < rows {
        let mut partial = 0.0f32;
        let mut col = lane_id();
        while col < cols {
            partial += x.read((row * cols + col) as usize);
            col += 32;
        }
        let total = reduce::warp_sum(partial);
        if lane_id() == 0 {
            sums.write(row as usize, total);
        }
    }
}

/// `out[r * cols + c] = x[r * cols + c] / sums[r]`, rounded to bf16 (to
/// nearest even), for `r < rows`, `c < cols`: one warp per row, each lane
/// every 32nd element.
///
/// Constraints: `x` and `out` hold `rows * cols` elements and `sums`
/// `rows`; launch `rows.div_ceil(ROWS_PER_BLOCK)` blocks.
#[kernel(block = threads(128))]
pub fn divide_rows(x: GmemRef<f32>, sums: GmemRef<f32>, out: Gmem<bf16>, rows: u32, cols: u32) {
    let row = block_idx().x * ROWS_PER_BLOCK + warp_idx();
    if row < rows {
        let sum = sums.read(row as usize);
        let mut col = lane_id();
        while col < cols {
            let i = (row * cols + col) as usize;
            out.write(i, cvt::f32_to_bf16(x.read(i) / sum));
            col += 32;
        }
    }
}
