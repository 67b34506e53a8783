//! TMA gather on Blackwell (`tile::gather4`): an embedding lookup.
use kernel_device::prelude::*;
use kernel_device::f16;

/// Width of one embedding row: 128 f16 (two 128-byte swizzle blocks, so
/// every gather4 is two instructions, one per column block).
pub const EMBED_DIM: usize = 128;
/// Tokens one CTA gathers: two groups of 4 rows.
pub const GATHER_TOKENS: usize = 8;
/// The gather map's box: one table row (`Tma<GatherRow<..>>`).
pub type EmbedRow = GatherRow<f16, EMBED_DIM, super::Sw>;
/// The SMEM tile the 8 gathered rows land in.
pub type EmbedTile = Tile<f16, GATHER_TOKENS, EMBED_DIM, super::Sw>;

/// Embedding lookup with TMA gather4 (Pallas's
/// `copy_gmem_to_smem(table.at[idxs], ..)` with `Layout.TMA_GATHER_INDICES`):
/// `out[t] = table[ids[t]]` for every token `t`, a row of zeros where
/// `ids[t]` is not a row of the table (TMA's out-of-bounds fill).
///
/// This kernel works as follows:
/// 1. thread 0 of block `b` reads the 8 ids of tokens `8b .. 8b + 8`,
///    announces `2 * GATHER4_BYTES` on the barrier and issues two gathers:
///    tokens `8b .. 8b + 4` into rows 0-3 of the tile, `8b + 4 .. 8b + 8`
///    into rows 4-7 (each one `tile::gather4` per 64-column block);
/// 2. every thread waits on the barrier, then copies 8 of the tile's 1024
///    elements (read through the tile's swizzled layout) to `out`.
///
/// Constraints: `arch = sm_100a` (gather4 is Blackwell TMA); grid =
/// `tokens / 8`; `table` is a `vocab x 128` f16 map built for
/// [`EmbedRow`]; `ids` holds `tokens` entries, `out` `tokens x 128` f16.
#[kernel(block = threads(128), arch = sm_100a)]
pub fn embedding_gather(
    table: Tma<EmbedRow>,
    ids: GmemRef<u32>,
    out: Gmem<f16>,
    #[scratch] rows: Smem<EmbedTile>,
    #[scratch] full: Barrier,
) {
    let b = block_idx().x as usize;
    let t0 = GATHER_TOKENS * b;
    if thread_linear() == 0 {
        let id = |i: usize| ids.read(t0 + i);
        full.arrive_expect_tx(2 * Tma::<EmbedRow>::GATHER4_BYTES);
        table.gather4(rows, 0, 0, [id(0), id(1), id(2), id(3)], full.as_ref());
        table.gather4(rows, 1, 0, [id(4), id(5), id(6), id(7)], full.as_ref());
    }
    full.wait();
    let t = thread_linear() as usize;
    for k in 0..GATHER_TOKENS * EMBED_DIM / 128 {
        let i = t + 128 * k;
        let (r, c) = (i / EMBED_DIM, i % EMBED_DIM);
        out.write((t0 + r) * EMBED_DIM + c, rows.get(r, c));
    }
}
