//! The emulator's tensor maps: the format of the 128 bytes a
//! `kernel_device::Tma<Tl, RANK>` parameter holds on the CPU emulator, and
//! the TMA copies (`cp.async.bulk.tensor`) the device API's host bodies
//! perform with it (tile <-> global, swizzle, out-of-bounds fill and
//! clipping).
//!
//! A GPU `CUtensorMap` is opaque and made by the driver; on the emulator the
//! host builds this plain-data encoding instead (`kernel_host::emulate::EmuTensorMap`)
//! and the host bodies of the TMA operations decode it. Words (`u64`,
//! little-endian, 16 of them):
//!
//! | word | contents |
//! |---|---|
//! | 0 | [`MAGIC`] (`"EMUTMAP1"`): identifies an emulator map |
//! | 1 | global address of element `(0, 0, ..)` (host pointer) |
//! | 2 | bits 0..8 element bytes; 8..16 rank (1..=5); 16..32 swizzle span in bytes (0, 32, 64, 128); bit 32 writable (TMA stores allowed) |
//! | 3..8 | `dims[0..5]`, innermost first (unused dimensions 1) |
//! | 8..13 | byte strides `strides[0..5]` (`strides[0]` = element bytes; unused 0) |
//! | 13 | box dims 0..4, 16 bits each (`box[0]` innermost, in elements) |
//! | 14 | box dim 4 (16 bits) |
//! | 15 | [`MAGIC`] again (a truncated or overwritten map is refused) |
//!
//! Copies are asynchronous operations of the emulator
//! (`kernel_emu::async_issue`): a load moves its bytes and completes them on
//! the mbarrier at a seeded scheduling point before its phase is observed;
//! a store joins the thread's bulk async-group and runs before the
//! `wait_group_read` / `wait_group` that covers it.
use kernel_spec::swizzle::Swizzle;

/// Word 0 and word 15 of an emulator tensor map: `"EMUTMAP1"`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"EMUTMAP1");
/// Most dimensions.
pub use kernel_spec::tensor_map::MAX_RANK;

/// A decoded emulator tensor map (see the module docs for the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmuMap {
    /// Host address of element 0.
    pub global: u64,
    /// Bytes of one element (1, 2, 4 or 8).
    pub elem_bytes: u32,
    /// Dimensions in use (1..=5).
    pub rank: u32,
    /// Extents, innermost first (1 past `rank`).
    pub dims: [u64; MAX_RANK],
    /// Byte strides, innermost first (`strides[0]` = `elem_bytes`).
    pub strides: [u64; MAX_RANK],
    /// Box extents in elements, innermost first (1 past `rank`).
    pub box_dims: [u32; MAX_RANK],
    /// Swizzle of the SMEM side.
    pub swizzle: Swizzle,
    /// Whether TMA stores may write the global tensor.
    pub writable: bool,
}

impl EmuMap {
    /// The 16 words of this map.
    pub fn encode(&self) -> [u64; 16] {
        let mut w = [0u64; 16];
        w[0] = MAGIC;
        w[1] = self.global;
        w[2] = (self.elem_bytes as u64 & 0xFF)
            | ((self.rank as u64 & 0xFF) << 8)
            | ((self.swizzle.bytes() as u64 & 0xFFFF) << 16)
            | ((self.writable as u64) << 32);
        for d in 0..MAX_RANK {
            w[3 + d] = self.dims[d];
            w[8 + d] = self.strides[d];
        }
        w[13] = (0..4).fold(0u64, |acc, d| {
            acc | ((self.box_dims[d] as u64 & 0xFFFF) << (16 * d))
        });
        w[14] = self.box_dims[4] as u64 & 0xFFFF;
        w[15] = MAGIC;
        w
    }

    /// Decodes 16 words; `None` if they are not an emulator map.
    pub fn decode(w: &[u64; 16]) -> Option<EmuMap> {
        if w[0] != MAGIC || w[15] != MAGIC {
            return None;
        }
        let swizzle = match (w[2] >> 16) & 0xFFFF {
            0 => Swizzle::None,
            32 => Swizzle::B32,
            64 => Swizzle::B64,
            128 => Swizzle::B128,
            _ => return None,
        };
        let mut m = EmuMap {
            global: w[1],
            elem_bytes: (w[2] & 0xFF) as u32,
            rank: ((w[2] >> 8) & 0xFF) as u32,
            dims: [1; MAX_RANK],
            strides: [0; MAX_RANK],
            box_dims: [1; MAX_RANK],
            swizzle,
            writable: (w[2] >> 32) & 1 == 1,
        };
        for d in 0..MAX_RANK {
            m.dims[d] = w[3 + d];
            m.strides[d] = w[8 + d];
            m.box_dims[d] = if d < 4 {
                ((w[13] >> (16 * d)) & 0xFFFF) as u32
            } else {
                (w[14] & 0xFFFF) as u32
            };
        }
        Some(m)
    }

    /// Reads the map at generic address `tmap` (a `Tma` parameter's
    /// address on the emulator); panics, naming `op`, if it is not an
    /// emulator map.
    ///
    /// # Safety
    /// `tmap` is the address of 128 readable bytes, 8-byte aligned.
    #[track_caller]
    pub unsafe fn read(tmap: u64, op: &str) -> EmuMap {
        assert!(
            tmap != 0 && tmap % 8 == 0,
            "{op}: tensor map address {tmap:#x} is null or misaligned"
        );
        // SAFETY: caller contract.
        let w = unsafe { (tmap as *const [u64; 16]).read() };
        match EmuMap::decode(&w) {
            Some(m) => m,
            None => panic!(
                "{op}: the tensor map at {tmap:#x} is not an emulator tensor map; on the CPU emulator pass \
                 `kernel_host::emulate::EmuTensorMap` (a GPU `TensorMap` is made by the driver)"
            ),
        }
    }

    /// Bytes of one box.
    pub fn box_bytes(&self) -> u32 {
        self.box_dims.iter().product::<u32>() * self.elem_bytes
    }

    /// Bytes of one box row (the inner dimension).
    fn row_bytes(&self) -> usize {
        self.box_dims[0] as usize * self.elem_bytes as usize
    }

    /// Calls `f(chunk_smem_addr, chunk_box_offset_elems, global_addrs)`
    /// for every 16-byte SMEM chunk of the box at `coords`, where `dst`
    /// is the box's SMEM address (`.shared::cta` offset or
    /// `.shared::cluster` address) and the chunk address has the swizzle
    /// applied; `global` gives, per element of the chunk, its global
    /// address or `None` out of bounds.
    fn for_each_chunk(
        &self,
        dst: u32,
        coords: &[i32],
        op: &str,
        f: impl FnMut(u32, &[Option<u64>]),
    ) {
        assert!(
            coords.len() == self.rank as usize,
            "{op}: {} coordinates for a map of rank {}",
            coords.len(),
            self.rank
        );
        self.for_each_chunk_rows(dst, coords, None, op, f)
    }

    /// [`EmuMap::for_each_chunk`] with, if `gather` is given, box row `i`
    /// (of 4) read from tensor row `gather[i]` instead of `coords[1] + i`
    /// (`tile::gather4`: a rank-2 map whose box is one row high; the 4
    /// rows land one after another, swizzled as one 4-row box).
    fn for_each_chunk_rows(
        &self,
        dst: u32,
        coords: &[i32],
        gather: Option<[i32; 4]>,
        op: &str,
        mut f: impl FnMut(u32, &[Option<u64>]),
    ) {
        const CLUSTER_BIT: u32 = 1 << 31;
        const OFFSET_MASK: u32 = (1 << 24) - 1;
        let (hi, off) = if dst & CLUSTER_BIT != 0 {
            (dst & !OFFSET_MASK, dst & OFFSET_MASK)
        } else {
            (0, dst)
        };
        assert!(
            off % 128 == 0,
            "{op}: SMEM address {dst:#x} is not 128-byte aligned"
        );
        let e = self.elem_bytes as usize;
        let row_bytes = self.row_bytes();
        let per_chunk = 16 / e;
        let b = self.box_dims.map(|x| x as usize);
        let rows = match gather {
            Some(_) => 4,
            None => b[1] * b[2] * b[3] * b[4],
        };
        let mut globals = [None; 16];
        for row in 0..rows {
            // Outer box indices of this row.
            let idx = [
                0,
                row % b[1],
                (row / b[1]) % b[2],
                (row / (b[1] * b[2])) % b[3],
                row / (b[1] * b[2] * b[3]),
            ];
            let mut outer_ok = true;
            let mut outer_addr = self.global as i128;
            for d in 1..self.rank as usize {
                let g = match gather {
                    Some(g) => g[row] as i64,
                    None => coords[d] as i64 + idx[d] as i64,
                };
                outer_ok &= g >= 0 && (g as u64) < self.dims[d];
                outer_addr += g as i128 * self.strides[d] as i128;
            }
            for chunk in 0..row_bytes / 16 {
                for (i, slot) in globals[..per_chunk].iter_mut().enumerate() {
                    let g = coords[0] as i64 + (chunk * per_chunk + i) as i64;
                    *slot = (outer_ok && g >= 0 && (g as u64) < self.dims[0])
                        .then(|| (outer_addr + g as i128 * e as i128) as u64);
                }
                let linear = off as usize + row * row_bytes + chunk * 16;
                let swizzled = self.swizzle.apply(linear) as u32;
                f(hi | swizzled, &globals[..per_chunk]);
            }
        }
    }

    /// The load's byte moves: the box at `coords` (elements, innermost
    /// first) to SMEM at `dst` (swizzled), zeros out of bounds.
    #[track_caller]
    pub fn load_copies(&self, dst: u32, coords: &[i32], op: &str) -> Vec<crate::AsyncCopy> {
        self.load_chunks(dst, coords, None, op)
    }

    /// The byte moves of `tile::gather4`: tensor rows `rows` (columns
    /// `col..col + box[0]`) to SMEM at `dst` as 4 consecutive box rows,
    /// swizzled as one 4-row box; a row index out of `0..dims[1]` (or a
    /// column past the edge) reads zeros, as TMA's out-of-bounds fill does.
    /// The map must be rank 2 with a box one row high (what the PTX ISA
    /// requires of a gather4 map; `op` names the instruction when not).
    #[track_caller]
    pub fn gather4_copies(&self, dst: u32, col: i32, rows: [i32; 4], op: &str) -> Vec<crate::AsyncCopy> {
        if self.rank != 2 || self.box_dims[1] != 1 {
            crate::misuse(
                "tile::gather4 needs a rank-2 tensor map whose box is one row high",
                format_args!(
                    "{op}: the map has rank {} and box {:?} (innermost first): build it for a one-row tile \
                     (`Tma<GatherRow<T, C, L>>`, box [C or the swizzle span, 1])",
                    self.rank,
                    &self.box_dims[..self.rank as usize]
                ),
            );
        }
        self.load_chunks(dst, &[col, 0], Some(rows), op)
    }

    /// The byte moves of a load into SMEM at `dst`: each 16-byte chunk of
    /// the box at `coords` (the rows `rows` for gather4) from its elements'
    /// global addresses, zeros out of bounds.
    #[track_caller]
    fn load_chunks(&self, dst: u32, coords: &[i32], rows: Option<[i32; 4]>, op: &str) -> Vec<crate::AsyncCopy> {
        let e = self.elem_bytes as usize;
        let mut copies = Vec::new();
        let mut chunk = |addr: u32, globals: &[Option<u64>]| {
            let p = crate::smem_ptr_range(addr, 16);
            for (i, g) in globals.iter().enumerate() {
                let copy = crate::AsyncCopy {
                    dst: p.wrapping_add(i * e),
                    src: g.map(|g| g as *const u8),
                    len: e,
                };
                crate::push_copy(&mut copies, copy);
            }
        };
        match rows {
            None => self.for_each_chunk(dst, coords, op, &mut chunk),
            Some(_) => self.for_each_chunk_rows(dst, coords, rows, op, &mut chunk),
        }
        copies
    }

    /// The store's byte moves: SMEM at `src` (swizzled) to the box at
    /// `coords`, skipping out-of-bounds elements.
    #[track_caller]
    pub fn store_copies(&self, src: u32, coords: &[i32], op: &str) -> Vec<crate::AsyncCopy> {
        assert!(
            self.writable,
            "{op}: the tensor map is read-only; build the destination of TMA stores with `EmuTensorMap::new_2d_mut` (or another `_mut` constructor)"
        );
        let e = self.elem_bytes as usize;
        let mut copies = Vec::new();
        self.for_each_chunk(src, coords, op, |addr, globals| {
            let p = crate::smem_ptr_range(addr, 16);
            for (i, g) in globals.iter().enumerate() {
                if let Some(g) = g {
                    let copy = crate::AsyncCopy {
                        dst: *g as *mut u8,
                        src: Some(p.wrapping_add(i * e) as *const u8),
                        len: e,
                    };
                    crate::push_copy(&mut copies, copy);
                }
            }
        });
        copies
    }
}

/// `cp.async.bulk.tensor.Nd...mbarrier::complete_tx::bytes [dst], [tmap, coords], [bar]`
/// on the emulator: decodes the map, then issues the copy of the box at
/// `coords` (elements, innermost first) to SMEM at `dst` as an asynchronous
/// operation completing its bytes on `bar` when it runs. `op` names the
/// instruction in reports.
///
/// # Safety
/// `tmap` is the address of 128 readable bytes, 8-byte aligned (a `Tma`
/// parameter's address: the parameter tuple lives for the whole run).
#[track_caller]
pub unsafe fn load(dst: u32, tmap: u64, coords: &[i32], bar: u32, op: &str) {
    // SAFETY: caller contract.
    let m = unsafe { EmuMap::read(tmap, op) };
    let copies = m.load_copies(dst, coords, op);
    let done = crate::Completion::MBarrierTx { bar, bytes: m.box_bytes() };
    crate::async_issue(crate::AsyncOp::copies(op, copies, done));
}

/// `cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes [dst], [tmap, {col, r0, r1, r2, r3}], [bar]`
/// on the emulator (sm_100a): decodes the map (rank 2, box one row high),
/// then issues the copy of rows `rows` (columns from `col`) to SMEM at
/// `dst` as one asynchronous operation completing 4 box rows' bytes on
/// `bar` when it runs; tracked by the race detector like every TMA load.
///
/// # Safety
/// As [`load`].
#[track_caller]
pub unsafe fn gather4(dst: u32, tmap: u64, col: i32, rows: [i32; 4], bar: u32, op: &str) {
    // SAFETY: caller contract.
    let m = unsafe { EmuMap::read(tmap, op) };
    let copies = m.gather4_copies(dst, col, rows, op);
    let done = crate::Completion::MBarrierTx { bar, bytes: 4 * m.box_bytes() };
    crate::async_issue(crate::AsyncOp::copies(op, copies, done));
}

/// The multicast load (`.multicast::cluster`) on the emulator: one
/// asynchronous copy per CTA of `mask`, landing at the same offsets and
/// completing on its barrier at `bar` (each barrier first notes the
/// multicast, [`crate::mbarrier_note_multicast`]).
///
/// # Safety
/// As [`load`].
#[track_caller]
pub unsafe fn load_multicast(
    dst: u32,
    tmap: u64,
    coords: &[i32],
    bar: u32,
    mask: u16,
    op: &str,
) {
    crate::mbarrier_note_multicast(bar, mask);
    // SAFETY: caller contract.
    let m = unsafe { EmuMap::read(tmap, op) };
    for rank in 0..16u32 {
        if mask & (1 << rank) != 0 {
            let copies = m.load_copies(crate::map_rank_addr(dst, rank), coords, op);
            let done = crate::Completion::MBarrierTx {
                bar: crate::map_rank_addr(bar, rank),
                bytes: m.box_bytes(),
            };
            crate::async_issue(crate::AsyncOp::copies(op, copies, done));
        }
    }
}

/// `cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group [tmap, coords], [src]`
/// on the emulator: the async proxy must see what ordinary stores wrote to
/// the source (checked now by value, and by happens-before when the copy
/// runs); the copy joins the thread's open bulk async-group.
///
/// # Safety
/// As [`load`].
#[track_caller]
pub unsafe fn store(tmap: u64, coords: &[i32], src: u32, op: &str) {
    // SAFETY: caller contract.
    let m = unsafe { EmuMap::read(tmap, op) };
    let copies = m.store_copies(src, coords, op);
    crate::async_proxy_read(src, m.box_bytes() as usize, op);
    let done = crate::Completion::BulkGroup;
    crate::async_issue(crate::AsyncOp::copies(op, copies, done));
}

/// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], bytes, [bar]`
/// (a bulk copy, no tensor map) on the emulator: `bytes` from global
/// address `src` (this device's memory or a peer's) to SMEM at `dst`, an
/// asynchronous operation completing `bytes` on the mbarrier at `bar`.
///
/// # Safety
/// `src..src + bytes` is host memory lent to the run.
#[track_caller]
pub unsafe fn bulk_load(dst: u32, src: *const u8, bytes: u32, bar: u32, op: &str) {
    let p = crate::smem_ptr_range(dst, bytes as usize);
    let mut copies = Vec::new();
    crate::push_copy(&mut copies, crate::AsyncCopy { dst: p, src: Some(src), len: bytes as usize });
    let done = crate::Completion::MBarrierTx { bar, bytes };
    crate::async_issue(crate::AsyncOp::copies(op, copies, done));
}

/// `cp.async.bulk.global.shared::cta.bulk_group [dst], [src], bytes` on the
/// emulator: the async proxy must see what ordinary stores wrote to `src`
/// (`commit_smem`), then `bytes` move to global address `dst` (this
/// device's memory or a peer's) as a bulk-group operation.
///
/// # Safety
/// `dst..dst + bytes` is host memory lent to the run, writable.
#[track_caller]
pub unsafe fn bulk_store(dst: *mut u8, src: u32, bytes: u32, op: &str) {
    let p = crate::smem_ptr_range(src, bytes as usize);
    crate::async_proxy_read(src, bytes as usize, op);
    let mut copies = Vec::new();
    crate::push_copy(&mut copies, crate::AsyncCopy { dst, src: Some(p as *const u8), len: bytes as usize });
    crate::async_issue(crate::AsyncOp::copies(op, copies, crate::Completion::BulkGroup));
}

/// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes`
/// on the emulator: the async proxy must see what ordinary stores wrote to
/// `src` (`commit_smem`); when the operation runs (a bulk-group member, as
/// [`bulk_store`]) each of the `bytes / 4` f32 at `src` is added to the one
/// at `dst` (this device's memory or a peer's). Each element's add is
/// atomic, as the hardware's: the global side is not a race with other
/// reductions, like `red.global.add` (atomics are not race-checked); the SMEM
/// source is read by the async proxy (a store to it before a
/// `wait_group_read` covers the reduction is a race).
///
/// # Safety
/// `dst..dst + bytes` is host memory lent to the run, writable, 4-byte aligned.
#[track_caller]
pub unsafe fn bulk_reduce_add_f32(dst: *mut f32, src: u32, bytes: u32, op: &str) {
    let p = crate::smem_ptr_range(src, bytes as usize) as *const f32;
    crate::async_proxy_read(src, bytes as usize, op);
    let (e, tid) = crate::ctx("bulk_reduce_add_f32");
    let (cta, off) = e.decode_or_misuse(tid, std::panic::Location::caller(), src);
    let reads = vec![(crate::Space::Smem { cta }, u64::from(off), u64::from(off) + u64::from(bytes))];
    let (from, to, n) = (p as usize, dst as usize, bytes as usize / 4);
    let effect = move || {
        for k in 0..n {
            // SAFETY: `src` is in the CTA's buffer (checked), `dst` the
            // caller's; the engine runs effects one at a time.
            unsafe {
                let d = (to as *mut f32).add(k);
                d.write(d.read() + (from as *const f32).add(k).read());
            }
        }
    };
    crate::async_issue(crate::AsyncOp {
        kind: op.to_string(),
        copies: Vec::new(),
        reads,
        writes: Vec::new(),
        effect: Some(Box::new(effect)),
        completion: crate::Completion::BulkGroup,
    });
}

/// `prefetch.tensormap [tmap]` on the emulator: checks that `tmap` is an
/// emulator map; a scheduling point.
///
/// # Safety
/// As [`load`].
#[track_caller]
pub unsafe fn prefetch(tmap: u64, op: &'static str) {
    // SAFETY: caller contract.
    let _ = unsafe { EmuMap::read(tmap, op) };
    crate::yield_point(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EmuMap {
        EmuMap {
            global: 0x7f00_1234_5670,
            elem_bytes: 2,
            rank: 3,
            dims: [64, 128, 3, 1, 1],
            strides: [2, 128, 16384, 0, 0],
            box_dims: [64, 128, 1, 1, 1],
            swizzle: Swizzle::B128,
            writable: true,
        }
    }

    #[test]
    fn encoding_round_trips() {
        let m = sample();
        let w = m.encode();
        assert_eq!(w[0], MAGIC);
        assert_eq!(w[15], MAGIC);
        // Worked by hand: 2 | 3 << 8 | 128 << 16 | 1 << 32.
        assert_eq!(w[2], 2 | (3 << 8) | (128 << 16) | (1 << 32));
        assert_eq!(w[13], 64 | (128 << 16) | (1 << 32) | (1 << 48));
        assert_eq!(EmuMap::decode(&w), Some(m));
        assert_eq!(m.box_bytes(), 64 * 128 * 2);
    }

    #[test]
    fn other_bytes_are_not_an_emulator_map() {
        assert_eq!(EmuMap::decode(&[0; 16]), None);
        let mut w = sample().encode();
        w[15] = 0;
        assert_eq!(EmuMap::decode(&w), None);
        let mut w = sample().encode();
        w[2] = (w[2] & !(0xFFFF << 16)) | (48 << 16);
        assert_eq!(EmuMap::decode(&w), None, "48 is not a swizzle span");
    }
}
