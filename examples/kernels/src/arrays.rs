//! Register arrays in Pallas's layouts (`kernel_device::array`): small
//! kernels that exercise each layout's loads, stores, broadcasts and
//! elementwise operations, checked against CPU references on the emulator
//! (tests/tests/emulator.rs) and built for sm_90a / sm_100a (tests/tests/ptx.rs).
use kernel_device::array::{Array, WgStrided, Wgmma, WgmmaCol, WgmmaRow};
use kernel_device::f16;
use kernel_device::gmem::GmemRef;
use kernel_device::reduce::Max;
use kernel_device::prelude::*;

/// The f16 input tile of [`array_wgmma_ops`]: `64 x 64`, 128-byte swizzle.
pub type ArrIn = Tile<f16, 64, 64, Swizzled<128>>;
/// The f32 output tile of [`array_wgmma_ops`]: `64 x 64`, row-major.
pub type ArrOut = Tile<f32, 64, 64, Unswizzled>;

/// `y[r][c] = relu(2 x[r][c] + col[c]) - row[r] + (64 r + c) / 1024` on a
/// `64 x 64` block, through the WGMMA layouts.
///
/// This kernel works as follows: the warpgroup copies `x` (row-major f16)
/// into a swizzled SMEM tile; loads it as an `Array<f32, Wgmma<64>>`
/// (`load_tile`, f16 pairs converted); loads `col` as a `WgmmaCol<64>` and
/// `row` as a `WgmmaRow` from global memory; computes with broadcasts,
/// scalar and array arithmetic, `relu` and `map_indexed`; stores the result
/// to a row-major f32 SMEM tile (`store_tile`), and copies it to `y`; stores
/// it to `y2` as f16 straight from registers (`store_gmem`); writes its row
/// sums (`row_sum`) to `sums[0..64]` and its column maxima (`col_reduce`)
/// to `sums[64..128]`.
///
/// Constraints: grid 1; `x` 64 x 64 f16, `col` 64 f16, `row` 64 f32, `y`
/// 64 x 64 f32, `y2` 64 x 64 f16, `sums` 128 f32.
#[kernel(block = warpgroups(1))]
pub fn array_wgmma_ops(
    x: GmemRef<f16>,
    col: GmemRef<f16>,
    row: GmemRef<f32>,
    y: Gmem<f32>,
    y2: Gmem<f16>,
    sums: Gmem<f32>,
    #[scratch] xs: Smem<ArrIn>,
    #[scratch] ys: Smem<ArrOut>,
    #[scratch] red: Smem<[[f32; 64]; 4]>,
) {
    let t = thread_linear() as usize;
    for i in 0..32 {
        let e = 32 * t + i;
        xs.set(e / 64, e % 64, x.read(e));
    }
    sync_threads();
    let a = Array::<f32, Wgmma<64>>::load_tile(xs, 0, 0);
    let c = Array::<f32, WgmmaCol<64>>::load_cols(col, 0);
    let r = Array::<f32, WgmmaRow>::load_rows(row, 0);
    let z = (a * 2.0 + c.broadcast::<Wgmma<64>>()).relu() - r.broadcast::<Wgmma<64>>();
    let z = z.map_indexed(|row, col, v| v + (64 * row + col) as f32 / 1024.0);
    z.store_tile(ys, 0, 0);
    // The same block straight to global memory, as f16 (pair stores).
    z.store_gmem(y2, 64, 0, 0);
    // Row sums (quad shuffles) and column maxima (shuffles + SMEM across warps).
    let rs = z.row_sum();
    let cm = z.col_reduce::<Max>(red, NamedBarrier::new(1, 128));
    let (w, l) = (t / 32, t % 32);
    if l % 4 == 0 {
        // One lane of each quad writes its two rows.
        rs.for_each_indexed(|r, _, v| sums.write(r, v));
    }
    if w == 0 && l < 4 {
        // Lanes 0..4 of warp 0 hold all 64 columns between them.
        cm.for_each_indexed(|_, c, v| sums.write(64 + c, v));
    }
    sync_threads();
    for i in 0..32 {
        let e = 32 * t + i;
        y.write(e, ys.get(e / 64, e % 64));
    }
}

/// Vectors per thread and elements per vector of [`array_strided_ops`].
pub const STRIDED_VECS: usize = 2;
pub const STRIDED_VEC: usize = 8;
/// Elements of [`array_strided_ops`]'s vector: `128 * 2 * 8 = 2048`.
pub const STRIDED_LEN: usize = WgStrided::<STRIDED_VECS, STRIDED_VEC>::LEN;

/// `y = f16(3 f32(x) - 1)` over `STRIDED_LEN` elements per block, in the
/// WG_STRIDED layout with 16-byte vector accesses (8 f16 per access), and
/// the same through SMEM into `z`.
///
/// Constraints: grid `blocks`; `x`, `y`, `z` hold `blocks * STRIDED_LEN` f16.
#[kernel(block = warpgroups(1))]
pub fn array_strided_ops(x: Gmem<f16>, y: Gmem<f16>, z: Gmem<f16>, #[scratch] s: Smem<[f16; STRIDED_LEN]>) {
    type L = WgStrided<STRIDED_VECS, STRIDED_VEC>;
    let off = block_idx().x as usize * STRIDED_LEN;
    let v = Array::<f16, L>::load_gmem(x, off);
    let w = (v.cast::<f32>() * 3.0 - 1.0).cast::<f16>();
    w.store_gmem(y, off);
    w.store_smem(s, 0);
    sync_threads();
    Array::<f16, L>::load_smem(s, 0).store_gmem(z, off);
}
