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
//! | [`Tma::gather4`] 4 GMEM rows picked by index -> SMEM (sm_100a) | one thread | on an mbarrier (`complete_tx` of [`Tma::GATHER4_BYTES`]) |
//!
//! The barrier that a load completes on must expect the bytes
//! ([`crate::BarrierRef::arrive_expect_tx`] with [`Tma::BYTES`]) in the same
//! phase. SMEM written by ordinary stores and then read by a TMA store needs
//! [`commit_smem`] in every writing thread, then a barrier.
//!
//! On the CPU emulator (host builds) the maps are the emulator's own encoding
//! and the copies are the emulator's (`kernel_emu::tma`: format, tile <->
//! global with swizzle, out-of-bounds fill and clipping), run as
//! asynchronous operations with lifetimes: a load completes its bytes on
//! the mbarrier(s), a store joins the bulk group that `commit_group` closes
//! and `wait_group` / `wait_group_read` wait for.
use crate::launch::DeviceParam;
use crate::layout::{Layout, Swizzle, Tile, TileLayout};
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
        }, host |op| {
            // SAFETY: caller contract (`tmap` a `Tma` parameter's address).
            unsafe { kernel_emu::tma::load(dst, tmap, &[c0, c1], bar, op) }
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
        }, host |op| {
            // SAFETY: caller contract.
            unsafe { kernel_emu::tma::load_multicast(dst, tmap, &[c0, c1], bar, mask, op) }
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
        }, host |op| {
            // SAFETY: caller contract.
            unsafe { kernel_emu::tma::store(tmap, &[c0, c1], src, op) }
        })
    }

    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes [dst], [tmap, {col, r0, r1, r2, r3}], [bar];`
    /// (sm_100a, PTX ISA 8.6): rows `r0..r3` of a rank-2 map whose box is
    /// one row high, columns from `col`, land at `dst` as 4 consecutive box
    /// rows (swizzled as one 4-row box); rows out of range read zeros.
    ///
    /// # Safety
    /// One thread issues it, in an sm_100a kernel; `tmap` is a rank-2 map
    /// with box height 1; `dst` is 128-byte aligned (and at its offset in
    /// the swizzle pattern) and holds 4 box rows; `bar` expects their bytes
    /// this phase.
    #[inline(always)]
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gather4_2d(dst: u32, tmap: u64, col: i32, r0: i32, r1: i32, r2: i32, r3: i32, bar: u32) {
        device!("cp.async.bulk.tensor.2d.tile::gather4 (load)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes [{0}], [{1}, {{{2}, {3}, {4}, {5}, {6}}}], [{7}];",
                    in(reg32) dst, in(reg64) tmap, in(reg32) col, in(reg32) r0, in(reg32) r1, in(reg32) r2, in(reg32) r3, in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host |op| {
            // SAFETY: caller contract (`tmap` a `Tma` parameter's address).
            unsafe { kernel_emu::tma::gather4(dst, tmap, col, [r0, r1, r2, r3], bar, op) }
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
                }, host |op| {
                    // SAFETY: caller contract.
                    unsafe { kernel_emu::tma::load(dst, tmap, &[$($c),+], bar, op) }
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
                }, host |op| {
                    // SAFETY: caller contract.
                    unsafe { kernel_emu::tma::store(tmap, &[$($c),+], src, op) }
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
        }, host |op| {
            // SAFETY: caller contract (a valid map): decoding checks it is an emulator map.
            unsafe { kernel_emu::tma::prefetch(tmap, op) }
        })
    }
}

/// Bulk copies: contiguous bytes between global memory (this device's or a
/// peer's, [`crate::peer`]) and shared memory, no tensor map
/// (`cp.async.bulk`, sm_90). Sizes and both addresses are multiples of 16
/// bytes.
pub mod bulk {
    use crate::gmem::{check_range, Gmem, GmemRef};
    use crate::mbarrier::BarrierRef;
    use crate::smem::Smem;

    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], bytes, [bar];` (sm_90)
    ///
    /// # Safety
    /// One thread; `src..src + bytes` is global memory; `dst`, `src` and
    /// `bytes` are multiples of 16; `bar` expects the bytes this phase.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn load_raw(dst: u32, src: *const u8, bytes: u32, bar: u32) {
        device!("cp.async.bulk (global -> shared)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{0}], [{1}], {2}, [{3}];",
                    in(reg32) dst, in(reg64) src, in(reg32) bytes, in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host |op| {
            // SAFETY: caller contract.
            unsafe { kernel_emu::tma::bulk_load(dst, src, bytes, bar, op) }
        })
    }

    /// `cp.async.bulk.global.shared::cta.bulk_group [dst], [src], bytes;` (sm_90)
    ///
    /// # Safety
    /// One thread, after `commit_smem` and a barrier; `dst..dst + bytes` is
    /// writable global memory; `dst`, `src` and `bytes` are multiples of
    /// 16; `src` stays unmodified until a `wait_group_read` covers the copy.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn store_raw(dst: *mut u8, src: u32, bytes: u32) {
        device!("cp.async.bulk (shared -> global)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.async.bulk.global.shared::cta.bulk_group [{0}], [{1}], {2};",
                    in(reg64) dst, in(reg32) src, in(reg32) bytes,
                    options(nostack, preserves_flags))
            }
        }, host |op| {
            // SAFETY: caller contract.
            unsafe { kernel_emu::tma::bulk_store(dst, src, bytes, op) }
        })
    }

    /// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes;` (sm_90)
    ///
    /// # Safety
    /// One thread, after `commit_smem` and a barrier; `dst..dst + bytes` is
    /// writable global memory; `dst`, `src` and `bytes` are multiples of
    /// 16; `src` stays unmodified until a `wait_group_read` covers the
    /// reduction.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn reduce_add_f32_raw(dst: *mut f32, src: u32, bytes: u32) {
        device!("cp.reduce.async.bulk .add.f32 (shared -> global)", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!(
                    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{0}], [{1}], {2};",
                    in(reg64) dst, in(reg32) src, in(reg32) bytes,
                    options(nostack, preserves_flags))
            }
        }, host |op| {
            // SAFETY: caller contract.
            unsafe { kernel_emu::tma::bulk_reduce_add_f32(dst, src, bytes, op) }
        })
    }

    /// Bytes one copy of `N` elements of `T` moves, checked at compile time:
    /// a multiple of 16.
    const fn copy_bytes<T, const N: usize>() -> u32 {
        let b = N * core::mem::size_of::<T>();
        assert!(b % 16 == 0 && b > 0, "a bulk copy moves a non-zero multiple of 16 bytes: N * size_of::<T>() must be one");
        assert!(b < (1 << 20), "a bulk copy moves less than 2^20 bytes (an mbarrier's transaction count)");
        b as u32
    }

    #[inline(always)]
    #[track_caller]
    fn global_at<T>(base: *const T, len: usize, at: usize, n: usize) -> *const u8 {
        check_range(at, n, len);
        // SAFETY: `at + n <= len`.
        let p = unsafe { base.add(at) } as *const u8;
        if (p as usize) % 16 != 0 {
            misaligned(p as usize);
        }
        p
    }

    #[cold]
    #[track_caller]
    fn misaligned(addr: usize) -> ! {
        device!("bulk copy alignment check", {
            let _ = addr;
            // SAFETY: aborts the kernel.
            unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
        }, host: {
            kernel_emu::misuse(
                "bulk copy global address not 16-byte aligned",
                format_args!("global address {addr:#x}: cp.async.bulk needs a multiple of 16; copy at an element index whose byte offset is a multiple of 16"),
            )
        })
    }

    /// Bytes [`load`] and [`store`] move for `Smem<[T; N]>`: what the
    /// barrier of a load must expect.
    pub const fn bytes<T, const N: usize>() -> u32 {
        copy_bytes::<T, N>()
    }

    /// Copies `src[at..at + N]` (global memory: this device's or a peer's)
    /// into `dst`, completing [`bytes::<T, N>()`](bytes) on `bar`. One thread;
    /// `bar` expects the bytes (`arrive_expect_tx`).
    #[inline(always)]
    #[track_caller]
    pub fn load<T: Copy, const N: usize>(dst: Smem<[T; N]>, src: GmemRef<T>, at: usize, bar: BarrierRef<'_>) {
        let bytes = const { copy_bytes::<T, N>() };
        let p = global_at(src.as_ptr(), src.len(), at, N);
        // SAFETY: in bounds and aligned (checked); `dst` is a whole SMEM
        // allocation of `bytes`; the barrier contract is the caller's.
        unsafe { load_raw(dst.smem_addr(), p, bytes, bar.smem_addr()) }
    }

    /// Copies `src` to `dst[at..at + N]` (global memory: this device's or a
    /// peer's) as a bulk-group store: close the group with
    /// [`super::commit_group`], wait with [`super::wait_group_read`] before
    /// reusing `src` and [`super::wait_group`] before signalling that the
    /// data arrived. One thread, after `commit_smem` and a barrier.
    #[inline(always)]
    #[track_caller]
    pub fn store<T: Copy, const N: usize>(src: Smem<[T; N]>, dst: Gmem<T>, at: usize) {
        let bytes = const { copy_bytes::<T, N>() };
        let p = global_at(dst.as_ptr() as *const T, dst.len(), at, N);
        // SAFETY: in bounds and aligned (checked), `dst` is writable; the
        // SMEM source contract is the caller's (documented above).
        unsafe { store_raw(p as *mut u8, src.smem_addr(), bytes) }
    }

    /// Adds `src` element by element into `dst[at..at + N]` (global memory:
    /// this device's or a peer's) as a bulk-group operation, each element's
    /// add atomic (`cp.reduce.async.bulk .add.f32`): many CTAs may reduce
    /// into the same elements, as with `red.global.add`, one instruction
    /// for the whole buffer. Close the group with [`super::commit_group`],
    /// wait with [`super::wait_group_read`] before reusing `src` and
    /// [`super::wait_group`] before reading the sums. One thread, after
    /// `commit_smem` and a barrier.
    #[inline(always)]
    #[track_caller]
    pub fn reduce_add<const N: usize>(src: Smem<[f32; N]>, dst: Gmem<f32>, at: usize) {
        let bytes = const { copy_bytes::<f32, N>() };
        let p = global_at(dst.as_ptr() as *const f32, dst.len(), at, N);
        // SAFETY: in bounds and aligned (checked), `dst` is writable; the
        // SMEM source contract is the caller's (documented above).
        unsafe { reduce_add_f32_raw(p as *mut f32, src.smem_addr(), bytes) }
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

/// The box of a **gather** tensor map (Blackwell `tile::gather4`; Pallas's
/// `x_ref.at[idxs]` with `Layout.TMA_GATHER_INDICES`): one row of `C`
/// elements of `T`, laid out by `L` as a row of [`Tile<T, R, C, L>`] is.
/// A kernel parameter `Tma<GatherRow<T, C, L>>` is a rank-2 map whose box
/// is `[BLOCK_COLS, 1]` (one column block of one row: the PTX ISA's
/// gather4 maps are 2-D with a box one row high), built on the host like
/// any map (`TensorMap::<GatherRow<..>>::new_2d`,
/// `EmuTensorMap::<GatherRow<..>>::new_2d`); its [`Tma::gather4`] fills 4
/// rows of an SMEM `Tile<T, R, C, L>` with 4 rows of the tensor picked by
/// index. Not an SMEM type itself (it has no 8-row rule: it is a box).
pub struct GatherRow<T, const C: usize, L: Layout> {
    _p: PhantomData<fn() -> (T, L)>,
}

impl<T: Copy, const C: usize, L: Layout> TileLayout for GatherRow<T, C, L> {
    type Elem = T;
    const ROWS: usize = 1;
    const COLS: usize = C;
    const SWIZZLE: Swizzle = L::SWIZZLE;
    const ELEM_BYTES: usize = core::mem::size_of::<T>();
    const BYTES: usize = C * core::mem::size_of::<T>();
    // The row layout of the destination tile (any multiple of 8 rows has
    // the same column blocks).
    const BLOCK_ROW_BYTES: usize = <Tile<T, 8, C, L> as TileLayout>::BLOCK_ROW_BYTES;
    const BLOCK_COLS: usize = <Tile<T, 8, C, L> as TileLayout>::BLOCK_COLS;
    const BLOCKS: usize = <Tile<T, 8, C, L> as TileLayout>::BLOCKS;
    const BLOCK_BYTES: usize = Self::BLOCK_ROW_BYTES;
}

impl<T: Copy, const C: usize, L: Layout> Tma<GatherRow<T, C, L>, 2> {
    /// Bytes one [`Tma::gather4`] delivers (4 rows of `C` elements): what
    /// its barrier must expect.
    pub const GATHER4_BYTES: u32 = (4 * C * core::mem::size_of::<T>()) as u32;

    /// Rows picked by index (Blackwell TMA `tile::gather4`, sm_100a only;
    /// Pallas's `copy_gmem_to_smem(x_ref.at[idxs], ..)`): copies tensor rows
    /// `rows[0..4]`, columns `col..col + C`, into rows `4 * group ..
    /// 4 * group + 4` of `dst` (in that order), completing
    /// [`Tma::GATHER4_BYTES`] on `bar`; one instruction per column block.
    /// A row index at or past the tensor's row count (or a column past its
    /// edge) reads zeros, TMA's out-of-bounds fill: an index of `u32::MAX`
    /// is an always-zero row.
    ///
    /// Issued by one thread of an `arch = sm_100a` kernel (`#[kernel]`
    /// refuses it elsewhere); `bar` must expect the bytes this phase.
    /// Compile-time rules: `dst`'s tile has this map's `T`, `C` and layout
    /// (the types say so) and its column-block rows are multiples of 32
    /// bytes; checked at run time: `group < R / 4`.
    #[inline(always)]
    #[track_caller]
    pub fn gather4<const R: usize>(
        &self,
        dst: Smem<Tile<T, R, C, L>>,
        group: usize,
        col: u32,
        rows: [u32; 4],
        bar: BarrierRef<'_>,
    ) {
        const {
            assert!(
                <GatherRow<T, C, L> as TileLayout>::BLOCK_ROW_BYTES % 32 == 0,
                "Tma::gather4: a row of one column block (C * size_of::<T>() bytes, or the swizzle span) must be a multiple of 32 bytes, so that each group of 4 rows starts 128-byte aligned (cp.async.bulk.tensor's SMEM alignment); widen C (e.g. 8 f32 or 16 f16 columns) or use a swizzle"
            )
        };
        if group >= R / 4 {
            gather4_group_out_of_range(group, R);
        }
        let blk = <Tile<T, R, C, L> as TileLayout>::BLOCK_BYTES;
        let row_bytes = <GatherRow<T, C, L> as TileLayout>::BLOCK_ROW_BYTES;
        let cols = <GatherRow<T, C, L> as TileLayout>::BLOCK_COLS;
        let base = dst.smem_addr() + (4 * group * row_bytes) as u32;
        let r = rows.map(|x| x as i32);
        for j in 0..<GatherRow<T, C, L> as TileLayout>::BLOCKS {
            // SAFETY: the map is rank 2 with a one-row box (its type); the
            // destination is 4 rows of column block `j` of `dst` (in bounds:
            // `group < R / 4`), 128-byte aligned (rule above; tiles are
            // 1024-byte aligned); the barrier contract is the caller's.
            unsafe {
                raw::gather4_2d(
                    base + (j * blk) as u32,
                    self.desc,
                    (col as usize + j * cols) as i32,
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    bar.smem_addr(),
                )
            }
        }
    }
}

#[cold]
#[track_caller]
fn gather4_group_out_of_range(group: usize, rows: usize) -> ! {
    device!("Tma::gather4 group check", {
        let _ = (group, rows);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "Tma::gather4 group out of range",
            format_args!("group {group} of a {rows}-row tile: the 4 rows go to rows 4 * group .. 4 * group + 4, so group must be below {}", rows / 4),
        )
    })
}
