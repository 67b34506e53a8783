//! The Tensor Memory Accelerator (TMA): bulk tensor copies between global
//! and shared memory (PTX ISA §9.7.9.25 `cp.async.bulk.tensor`, §9.7.9.26
//! commit/wait groups).
//!
//! A copy is described by a *tensor map* (`CUtensorMap`, 128 bytes) made on
//! the host by `cuTensorMapEncodeTiled` (`kernel_host::TensorMap`), passed as
//! a `__grid_constant__` kernel parameter, and used by address. The kernel
//! parameter type is [`Tma<Tl>`], where `Tl` is the SMEM tile type
//! ([`crate::Tile`]) one copy fills: its box size and swizzle mode come from
//! the same type the kernel addresses SMEM with.
//!
//! | op | issued by | completes |
//! |---|---|---|
//! | [`Tma::load`] GMEM -> SMEM | one thread | on an mbarrier (`complete_tx` of the tile's bytes) |
//! | [`Tma::load_multicast`] | one thread (of any one CTA) | on the mbarrier at the same SMEM offset in every CTA of the mask |
//! | [`Tma::store`] SMEM -> GMEM | one thread | bulk group: [`commit_group`] then [`wait_group`] / [`wait_group_read`] |
//!
//! The barrier that a load completes on must expect the bytes
//! ([`crate::BarrierRef::arrive_expect_tx`] with [`Tma::BYTES`]) in the same
//! phase. SMEM written by ordinary stores and then read by a TMA store needs
//! [`commit_smem`] in every writing thread, then a barrier.
//!
//! On the CPU emulator (host builds) the maps are the emulator's own encoding
//! ([`emu_map`]) and every copy completes when it is issued: a load has
//! written SMEM and completed its bytes on the mbarrier(s) when it returns,
//! a store has written global memory; `commit_group`, `wait_group`,
//! `wait_group_read` and `prefetch` are scheduling points only.
use crate::launch::DeviceParam;
use crate::layout::TileLayout;
use crate::mbarrier::BarrierRef;
use crate::smem::Smem;
use core::marker::PhantomData;

/// Bytes of a `CUtensorMap`.
pub const TENSOR_MAP_BYTES: usize = 128;

/// The 128-byte tensor map as the kernel's parameter bytes (what the host
/// passes). 16-byte aligned here (rustc cannot pass more); the build pipeline
/// raises the PTX parameter to `.align 64`, which TMA requires.
/// `RANK` is the tensor map's rank (2 for a matrix, 3 for a batch of
/// matrices, ...), part of the type so a map of another rank does not fit.
#[repr(C, align(16))]
pub struct TensorMapParam<Tl, const RANK: usize = 2> {
    pub bytes: [u64; TENSOR_MAP_BYTES / 8],
    _tile: PhantomData<fn() -> Tl>,
}

impl<Tl, const RANK: usize> Clone for TensorMapParam<Tl, RANK> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Tl, const RANK: usize> Copy for TensorMapParam<Tl, RANK> {}

impl<Tl, const RANK: usize> TensorMapParam<Tl, RANK> {
    /// Wraps the bytes of an encoded `CUtensorMap` (host side).
    pub const fn from_bytes(bytes: [u64; TENSOR_MAP_BYTES / 8]) -> Self {
        TensorMapParam {
            bytes,
            _tile: PhantomData,
        }
    }
}

/// A TMA tensor map kernel parameter whose copies fill SMEM tiles of type
/// `Tl` (e.g. `Tma<Tile<f16, 128, 64, Swizzled<128>>>`), over a tensor of
/// rank `RANK` (default 2; the box is the tile in the two innermost
/// dimensions and 1 in the others). In the kernel body it holds the generic
/// address of the descriptor in parameter space.
pub struct Tma<Tl: TileLayout, const RANK: usize = 2> {
    desc: u64,
    _tile: PhantomData<fn() -> Tl>,
}

impl<Tl: TileLayout, const RANK: usize> Clone for Tma<Tl, RANK> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Tl: TileLayout, const RANK: usize> Copy for Tma<Tl, RANK> {}

// SAFETY: the host passes the encoded descriptor bytes; the body keeps only
// the parameter's address, valid for the whole kernel.
unsafe impl<Tl: TileLayout, const RANK: usize> DeviceParam for Tma<Tl, RANK> {
    type Abi = TensorMapParam<Tl, RANK>;
    const BY_ADDRESS: bool = true;
    #[inline(always)]
    fn from_abi(_abi: TensorMapParam<Tl, RANK>, param_addr: u64) -> Self {
        Tma {
            desc: param_addr,
            _tile: PhantomData,
        }
    }
}

pub mod raw {
    //! One `unsafe fn` per form. `tmap` is the generic address of a tensor
    //! map; `dst`/`src`/`bar` are `.shared::cta` addresses; coordinates are
    //! in elements, innermost dimension first.

    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst], [tmap, {c0, c1}], [bar];` (sm_90)
    ///
    /// # Safety
    /// One thread issues it; `dst` is aligned as the swizzle needs (1024 B
    /// for 128B) and holds the box; `bar` expects the box's bytes this phase.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_2d(dst: u32, tmap: u64, c0: i32, c1: i32, bar: u32) {
        device!("cp.async.bulk.tensor.2d (load)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}}}], [{4}];",
                    in(reg32) dst, in(reg64) tmap, in(reg32) c0, in(reg32) c1, in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host: {
            super::emu_map::load(dst, tmap, &[c0, c1], bar, "cp.async.bulk.tensor.2d (load)")
        })
    }

    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [dst], [tmap, {c0, c1}], [bar], mask;` (sm_90)
    ///
    /// # Safety
    /// As [`load_2d`], for every CTA in `mask` (same SMEM offsets there).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_2d_multicast(dst: u32, tmap: u64, c0: i32, c1: i32, bar: u32, mask: u16) {
        device!("cp.async.bulk.tensor.2d (multicast load)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{0}], [{1}, {{{2}, {3}}}], [{4}], {5};",
                    in(reg32) dst, in(reg64) tmap, in(reg32) c0, in(reg32) c1, in(reg32) bar, in(reg16) mask,
                    options(nostack, preserves_flags))
            }
        }, host: {
            kernel_emu::mbarrier_note_multicast(bar, mask);
            super::emu_map::load_multicast(dst, tmap, &[c0, c1], bar, mask, "cp.async.bulk.tensor.2d (multicast load)")
        })
    }

    /// `cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {c0, c1}], [src];` (sm_90)
    ///
    /// # Safety
    /// One thread; `src` holds the box, written before with ordinary stores
    /// followed by `fence.proxy.async.shared::cta` and a barrier; `src` stays
    /// unmodified until a `wait_group_read` covers this copy.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn store_2d(tmap: u64, c0: i32, c1: i32, src: u32) {
        device!("cp.async.bulk.tensor.2d (store)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [{0}, {{{1}, {2}}}], [{3}];",
                    in(reg64) tmap, in(reg32) c0, in(reg32) c1, in(reg32) src,
                    options(nostack, preserves_flags))
            }
        }, host: {
            super::emu_map::store(tmap, &[c0, c1], src, "cp.async.bulk.tensor.2d (store)")
        })
    }

    macro_rules! tensor_nd {
        ($load:ident, $store:ident, $dim:literal, [$($c:ident),+], $tpl:literal) => {
            #[doc = concat!("`cp.async.bulk.tensor.", $dim, "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst], [tmap, {c0, ..}], [bar];` (sm_90)")]
            ///
            /// # Safety
            /// As [`load_2d`].
            #[inline(always)]
            #[track_caller]
            pub unsafe fn $load(dst: u32, tmap: u64, $($c: i32,)+ bar: u32) {
                device!("cp.async.bulk.tensor (load)", {
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(
                            concat!("cp.async.bulk.tensor.", $dim, "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{dst}], [{tmap}, {{", $tpl, "}}], [{bar}];"),
                            dst = in(reg32) dst, tmap = in(reg64) tmap, $($c = in(reg32) $c,)+ bar = in(reg32) bar,
                            options(nostack, preserves_flags))
                    }
                }, host: {
                    super::emu_map::load(dst, tmap, &[$($c),+], bar, "cp.async.bulk.tensor (load)")
                })
            }
            #[doc = concat!("`cp.async.bulk.tensor.", $dim, "d.global.shared::cta.tile.bulk_group [tmap, {c0, ..}], [src];` (sm_90)")]
            ///
            /// # Safety
            /// As [`store_2d`].
            #[inline(always)]
            #[track_caller]
            pub unsafe fn $store(tmap: u64, $($c: i32,)+ src: u32) {
                device!("cp.async.bulk.tensor (store)", {
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(
                            concat!("cp.async.bulk.tensor.", $dim, "d.global.shared::cta.tile.bulk_group [{tmap}, {{", $tpl, "}}], [{src}];"),
                            tmap = in(reg64) tmap, $($c = in(reg32) $c,)+ src = in(reg32) src,
                            options(nostack, preserves_flags))
                    }
                }, host: {
                    super::emu_map::store(tmap, &[$($c),+], src, "cp.async.bulk.tensor (store)")
                })
            }
        };
    }
    tensor_nd!(load_3d, store_3d, 3, [c0, c1, c2], "{c0}, {c1}, {c2}");
    tensor_nd!(
        load_4d,
        store_4d,
        4,
        [c0, c1, c2, c3],
        "{c0}, {c1}, {c2}, {c3}"
    );
    tensor_nd!(
        load_5d,
        store_5d,
        5,
        [c0, c1, c2, c3, c4],
        "{c0}, {c1}, {c2}, {c3}, {c4}"
    );

    /// `prefetch.tensormap [tmap];` (sm_90): warms the descriptor cache.
    ///
    /// # Safety
    /// `tmap` is the address of a valid tensor map.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn prefetch_tensormap(tmap: u64) {
        device!("prefetch.tensormap", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("prefetch.tensormap [{0}];", in(reg64) tmap, options(nostack, preserves_flags)) }
        }, host: {
            // SAFETY: caller contract (a valid map): decoding checks it is an emulator map.
            let _ = unsafe { super::emu_map::EmuMap::read(tmap, "prefetch.tensormap") };
            kernel_emu::yield_point("prefetch.tensormap")
        })
    }
}

/// The emulator's tensor maps (host builds only): the format of the 128
/// bytes a `Tma<Tl, RANK>` parameter holds on the CPU emulator, and the
/// copies the host bodies of [`raw`] perform with it.
///
/// A GPU `CUtensorMap` is opaque and made by the driver; on the emulator the
/// host builds this plain-data encoding instead (`kernel_host::emulate::EmuTensorMap`)
/// and the host bodies of the TMA operations decode it. Words (`u64`,
/// little-endian, 16 of them):
///
/// | word | contents |
/// |---|---|
/// | 0 | [`MAGIC`](emu_map::MAGIC) (`"EMUTMAP1"`): identifies an emulator map |
/// | 1 | global address of element `(0, 0, ..)` (host pointer) |
/// | 2 | bits 0..8 element bytes; 8..16 rank (1..=5); 16..32 swizzle span in bytes (0, 32, 64, 128); bit 32 writable (TMA stores allowed) |
/// | 3..8 | `dims[0..5]`, innermost first (unused dimensions 1) |
/// | 8..13 | byte strides `strides[0..5]` (`strides[0]` = element bytes; unused 0) |
/// | 13 | box dims 0..4, 16 bits each (`box[0]` innermost, in elements) |
/// | 14 | box dim 4 (16 bits) |
/// | 15 | [`MAGIC`](emu_map::MAGIC) again (a truncated or overwritten map is refused) |
///
/// Copies are asynchronous operations of the emulator
/// (`kernel_emu::async_issue`): a load moves its bytes and completes them on
/// the mbarrier at a seeded scheduling point before its phase is observed;
/// a store joins the thread's bulk async-group and runs before the
/// `wait_group_read` / `wait_group` that covers it.
#[cfg(not(target_arch = "nvptx64"))]
pub mod emu_map {
    extern crate alloc;
    use crate::layout::Swizzle;
    use alloc::vec::Vec;

    /// Word 0 and word 15 of an emulator tensor map: `"EMUTMAP1"`.
    pub const MAGIC: u64 = u64::from_le_bytes(*b"EMUTMAP1");
    /// Most dimensions (`kernel_spec`'s tensor-map rank limit).
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
            mut f: impl FnMut(u32, &[Option<u64>]),
        ) {
            const CLUSTER_BIT: u32 = 1 << 31;
            const OFFSET_MASK: u32 = (1 << 24) - 1;
            assert!(
                coords.len() == self.rank as usize,
                "{op}: {} coordinates for a map of rank {}",
                coords.len(),
                self.rank
            );
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
            let rows = b[1] * b[2] * b[3] * b[4];
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
                    let g = coords[d] as i64 + idx[d] as i64;
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
        pub fn load_copies(&self, dst: u32, coords: &[i32], op: &str) -> Vec<kernel_emu::AsyncCopy> {
            let e = self.elem_bytes as usize;
            let mut copies = Vec::new();
            self.for_each_chunk(dst, coords, op, |addr, globals| {
                let p = kernel_emu::smem_ptr_range(addr, 16);
                for (i, g) in globals.iter().enumerate() {
                    let copy = kernel_emu::AsyncCopy {
                        dst: p.wrapping_add(i * e),
                        src: g.map(|g| g as *const u8),
                        len: e,
                    };
                    kernel_emu::push_copy(&mut copies, copy);
                }
            });
            copies
        }

        /// The store's byte moves: SMEM at `src` (swizzled) to the box at
        /// `coords`, skipping out-of-bounds elements.
        #[track_caller]
        pub fn store_copies(&self, src: u32, coords: &[i32], op: &str) -> Vec<kernel_emu::AsyncCopy> {
            assert!(
                self.writable,
                "{op}: the tensor map is read-only; build the destination of TMA stores with `EmuTensorMap::new_2d_mut` (or another `_mut` constructor)"
            );
            let e = self.elem_bytes as usize;
            let mut copies = Vec::new();
            self.for_each_chunk(src, coords, op, |addr, globals| {
                let p = kernel_emu::smem_ptr_range(addr, 16);
                for (i, g) in globals.iter().enumerate() {
                    if let Some(g) = g {
                        let copy = kernel_emu::AsyncCopy {
                            dst: *g as *mut u8,
                            src: Some(p.wrapping_add(i * e) as *const u8),
                            len: e,
                        };
                        kernel_emu::push_copy(&mut copies, copy);
                    }
                }
            });
            copies
        }
    }

    /// Host body of the loads: decode, then issue the copy as an
    /// asynchronous operation completing its bytes on `bar` when it runs.
    #[track_caller]
    pub(crate) fn load(dst: u32, tmap: u64, coords: &[i32], bar: u32, op: &str) {
        // SAFETY: `tmap` is a `Tma` parameter's address (the parameter tuple
        // lives for the whole run).
        let m = unsafe { EmuMap::read(tmap, op) };
        let copies = m.load_copies(dst, coords, op);
        let done = kernel_emu::Completion::MBarrierTx { bar, bytes: m.box_bytes() };
        kernel_emu::async_issue(kernel_emu::AsyncOp::copies(op, copies, done));
    }

    /// Host body of the multicast load: one asynchronous copy per CTA of
    /// `mask`, landing at the same offsets and completing on its barrier at
    /// `bar`.
    #[track_caller]
    pub(crate) fn load_multicast(
        dst: u32,
        tmap: u64,
        coords: &[i32],
        bar: u32,
        mask: u16,
        op: &str,
    ) {
        // SAFETY: as in `load`.
        let m = unsafe { EmuMap::read(tmap, op) };
        for rank in 0..16u32 {
            if mask & (1 << rank) != 0 {
                let copies = m.load_copies(kernel_emu::map_rank_addr(dst, rank), coords, op);
                let done = kernel_emu::Completion::MBarrierTx {
                    bar: kernel_emu::map_rank_addr(bar, rank),
                    bytes: m.box_bytes(),
                };
                kernel_emu::async_issue(kernel_emu::AsyncOp::copies(op, copies, done));
            }
        }
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

    /// Host body of the stores: the async proxy must see what ordinary
    /// stores wrote to the source (checked now by value, and by
    /// happens-before when the copy runs); the copy joins the thread's open
    /// bulk async-group.
    #[track_caller]
    pub(crate) fn store(tmap: u64, coords: &[i32], src: u32, op: &str) {
        // SAFETY: as in `load`.
        let m = unsafe { EmuMap::read(tmap, op) };
        let copies = m.store_copies(src, coords, op);
        kernel_emu::async_proxy_read(src, m.box_bytes() as usize, op);
        let done = kernel_emu::Completion::BulkGroup;
        kernel_emu::async_issue(kernel_emu::AsyncOp::copies(op, copies, done));
    }
}

/// `cp.async.bulk.commit_group;`: closes the group of this thread's bulk
/// stores issued since the last commit.
#[inline(always)]
#[track_caller]
pub fn commit_group() {
    device!("cp.async.bulk.commit_group", {
        // SAFETY: no operands.
        unsafe { core::arch::asm!("cp.async.bulk.commit_group;", options(nostack, preserves_flags)) }
    }, host: {
        kernel_emu::bulk_commit_group()
    })
}

/// `cp.async.bulk.wait_group N;`: waits until at most `N` of this thread's
/// bulk groups are pending (their writes to global memory done).
#[inline(always)]
#[track_caller]
pub fn wait_group<const N: u32>() {
    device!("cp.async.bulk.wait_group", {
        // SAFETY: waits only.
        unsafe { core::arch::asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack, preserves_flags)) }
    }, host: {
        kernel_emu::bulk_wait_group(N, false)
    })
}

/// `cp.async.bulk.wait_group.read N;`: waits until at most `N` groups are
/// still *reading* their SMEM source (the SMEM may then be reused; the
/// global writes may still be in flight). Pallas's
/// `wait_smem_to_gmem(n, wait_read_only=True)`.
#[inline(always)]
#[track_caller]
pub fn wait_group_read<const N: u32>() {
    device!("cp.async.bulk.wait_group.read", {
        // SAFETY: waits only.
        unsafe { core::arch::asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack, preserves_flags)) }
    }, host: {
        kernel_emu::bulk_wait_group(N, true)
    })
}

/// Pallas's `commit_smem`: `fence.proxy.async.shared::cta`. Every thread
/// that wrote SMEM with ordinary stores calls it before the barrier after
/// which TMA or the tensor cores read that SMEM.
#[inline(always)]
#[track_caller]
pub fn commit_smem() {
    crate::fence::fence_proxy_async_shared_cta()
}

impl<Tl: TileLayout, const RANK: usize> Tma<Tl, RANK> {
    /// Bytes one load delivers (the tile): what the barrier must expect.
    pub const BYTES: u32 = Tl::BYTES as u32;

    /// Copy the tile at element coordinates `coords` (innermost first:
    /// `[col, row, d2, ..]`) into `dst`, completing `Tma::BYTES` on `bar`;
    /// one copy per column block. One thread; `bar` expects the bytes.
    #[inline(always)]
    #[track_caller]
    pub fn load_at(&self, dst: Smem<Tl>, coords: [u32; RANK], bar: BarrierRef<'_>) {
        const {
            assert!(
                RANK >= 2 && RANK <= 5,
                "Tma<Tl, RANK>: tile copies need a rank in 2..=5"
            )
        };
        let base = dst.smem_addr();
        let c = coords.map(|x| x as i32);
        for j in 0..Tl::BLOCKS {
            let (d, c0) = (
                base + (j * Tl::BLOCK_BYTES) as u32,
                c[0] + (j * Tl::BLOCK_COLS) as i32,
            );
            let b = bar.smem_addr();
            // SAFETY: as `load`; the rank matches the map's (type parameter).
            unsafe {
                match RANK {
                    2 => raw::load_2d(d, self.desc, c0, c[1], b),
                    3 => raw::load_3d(d, self.desc, c0, c[1], c[2 % RANK], b),
                    4 => raw::load_4d(d, self.desc, c0, c[1], c[2 % RANK], c[3 % RANK], b),
                    _ => raw::load_5d(
                        d,
                        self.desc,
                        c0,
                        c[1],
                        c[2 % RANK],
                        c[3 % RANK],
                        c[4 % RANK],
                        b,
                    ),
                }
            }
        }
    }

    /// Copy `src` to the tile at element coordinates `coords` (innermost
    /// first) as bulk-group stores. One thread, after `commit_smem` and a
    /// barrier.
    #[inline(always)]
    #[track_caller]
    pub fn store_at(&self, src: Smem<Tl>, coords: [u32; RANK]) {
        const {
            assert!(
                RANK >= 2 && RANK <= 5,
                "Tma<Tl, RANK>: tile copies need a rank in 2..=5"
            )
        };
        let base = src.smem_addr();
        let c = coords.map(|x| x as i32);
        for j in 0..Tl::BLOCKS {
            let (s, c0) = (
                base + (j * Tl::BLOCK_BYTES) as u32,
                c[0] + (j * Tl::BLOCK_COLS) as i32,
            );
            // SAFETY: as `store`.
            unsafe {
                match RANK {
                    2 => raw::store_2d(self.desc, c0, c[1], s),
                    3 => raw::store_3d(self.desc, c0, c[1], c[2 % RANK], s),
                    4 => raw::store_4d(self.desc, c0, c[1], c[2 % RANK], c[3 % RANK], s),
                    _ => raw::store_5d(
                        self.desc,
                        c0,
                        c[1],
                        c[2 % RANK],
                        c[3 % RANK],
                        c[4 % RANK],
                        s,
                    ),
                }
            }
        }
    }

    /// The descriptor's generic address.
    #[inline(always)]
    pub fn desc_addr(&self) -> u64 {
        self.desc
    }

    /// Prefetch the descriptor (one thread, early in the kernel).
    #[inline(always)]
    #[track_caller]
    pub fn prefetch(&self) {
        // SAFETY: the descriptor is this kernel's parameter.
        unsafe { raw::prefetch_tensormap(self.desc) }
    }
}

impl<Tl: TileLayout> Tma<Tl, 2> {
    /// Copy the tile whose top-left element is `(row, col)` of the global
    /// tensor into `dst`, completing `Tma::BYTES` on `bar`. One copy per
    /// column block of the tile (a box of `BLOCK_COLS x ROWS`). Rows or
    /// columns past the tensor's edge are filled with zeros.
    ///
    /// Issued by one thread; `bar` must expect the bytes in this phase.
    #[inline(always)]
    #[track_caller]
    pub fn load(&self, dst: Smem<Tl>, row: u32, col: u32, bar: BarrierRef<'_>) {
        self.load_at(dst, [col, row], bar)
    }

    /// As [`Tma::load`], delivered to the same SMEM offset and barrier offset
    /// in every CTA of the cluster whose rank bit is set in `cta_mask`.
    #[inline(always)]
    #[track_caller]
    pub fn load_multicast(
        &self,
        dst: Smem<Tl>,
        row: u32,
        col: u32,
        bar: BarrierRef<'_>,
        cta_mask: u16,
    ) {
        let base = dst.smem_addr();
        for j in 0..Tl::BLOCKS {
            // SAFETY: as `load`; every CTA in the mask runs the same kernel,
            // so `dst` and `bar` are at the same offsets there.
            unsafe {
                raw::load_2d_multicast(
                    base + (j * Tl::BLOCK_BYTES) as u32,
                    self.desc,
                    (col as usize + j * Tl::BLOCK_COLS) as i32,
                    row as i32,
                    bar.smem_addr(),
                    cta_mask,
                )
            }
        }
    }

    /// Copy `src` to the tile of the global tensor whose top-left element is
    /// `(row, col)`, as bulk-group stores (then [`commit_group`] and a wait).
    /// Out-of-bounds parts are not written.
    ///
    /// Issued by one thread, after every writer of `src` did [`commit_smem`]
    /// and a barrier.
    #[inline(always)]
    #[track_caller]
    pub fn store(&self, src: Smem<Tl>, row: u32, col: u32) {
        self.store_at(src, [col, row])
    }
}
