//! Hopper warpgroup matrix multiply-accumulate (PTX ISA §9.7.15 `wgmma`,
//! sm_90a).
//!
//! `wgmma.mma_async` is issued by a whole warpgroup (4 consecutive warps
//! starting at a warp index divisible by 4) and computes
//! `D[64 x N] (+)= A[64 x K] · B[N x K]ᵀ` (K = 16 for f16/bf16, 32 for the
//! FP8 types e4m3/e5m2: 32 bytes of each row) asynchronously on the tensor
//! cores, with A and B in shared memory (described by [`SmemDescriptor`]s)
//! and D in registers of the 128 threads (the WGMMA fragment layout, see
//! [`Acc::for_each_pair`]).
//!
//! Protocol (who issues what — every op by all 128 threads of the warpgroup):
//!
//! ```text
//! Acc::mma(..)          wgmma.fence; K/k x wgmma.mma_async    (issue)
//! wgmma_commit_group()  close the group of issued MMAs
//! wgmma_wait::<N>()     wait until <= N groups are pending
//! Acc::store_f16(..)    (after wgmma_wait::<0>) read the accumulators
//! ```
//!
//! The accumulator registers must not be touched between an `mma` and the
//! wait that covers it: ptxas otherwise serializes wgmma ("wgmma.mma_async
//! instructions are serialized", a build error here). [`Acc`] keeps the
//! registers in a fixed-size array only ever indexed by constants.
//!
//! Operands in SMEM are [`crate::Tile`]s with a 32/64/128-byte swizzle, both
//! K-major (`A: M x K`, `B: N x K`, K contiguous), as TMA writes them.
//!
//! On the CPU emulator (host builds) each op's body is one call into
//! `kernel_emu::wgmma`, which owns the semantics: operand gathering through
//! the descriptors, the MMA, the accumulator layout, and `wait_group` as a
//! barrier of the warpgroup (named barrier `15 - warpgroup`: kernels run on
//! the emulator leave named barriers 8..=15 to it).
use crate::layout::{Swizzle, TileLayout};
use crate::smem::Smem;
use crate::array::{Array, Wgmma};

/// `wgmma` is issued by 128 threads (defined in `kernel-spec`).
pub use kernel_spec::desc_wgmma::WARPGROUP_THREADS;
/// M of every wgmma.
pub const WGMMA_M: usize = 64;
/// K of every 16-bit wgmma.
pub const WGMMA_K: usize = 16;
/// K of every FP8 (e4m3, e5m2) wgmma.
pub const WGMMA_K_FP8: usize = 32;
use kernel_spec::desc_tcgen05::Elem;
use kernel_spec::registers::setmaxnreg_count_ok;
/// The CTA's register pool, its entry count and the pool rule (one
/// definition, in `kernel_spec::registers`), for kernels that check their
/// `setmaxnreg` counts at compile time (`counts_fit`).
pub use kernel_spec::registers::{counts_fit, entry_registers, register_pool};

/// The wgmma shared-memory matrix descriptor (PTX ISA §9.7.15.5.1): its
/// encoding, bit layout and decoding `Debug` are defined once in
/// `kernel-spec`, which the emulator decodes with; [`TileDescriptor`] builds
/// it for an operand tile.
pub use kernel_spec::desc_wgmma::SmemDescriptor;

/// The shared-memory matrix descriptors of operand tiles, for both formats
/// (wgmma's [`SmemDescriptor`] and [`crate::tcgen05::SmemDescriptor`]: the
/// canonical layouts are the same, the bits differ). Bring it into scope to
/// write `SmemDescriptor::k_major::<Tile>(..)`.
pub trait TileDescriptor: Sized {
    /// The descriptor with these fields (byte offsets multiples of 16).
    fn encode(start_addr: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> Self;

    /// This descriptor with its start address `bytes` further (both formats
    /// keep `address >> 4` in bits 0..14: one add, see
    /// `kernel_spec::desc_wgmma::SmemDescriptor::add_start`).
    fn add_start(self, bytes: u32) -> Self;

    /// The descriptor of the 8-row-group-strided, K-major sub-matrix of tile
    /// `Tl` starting at row `row` and K element `k` (any multiple of 16
    /// bytes): the start address moves inside the swizzle span and jumps
    /// between column blocks; the stride between 8-row groups is
    /// `8 * span` bytes; the leading offset is unused for swizzled K-major
    /// layouts (1 by convention, PTX ISA §9.7.15.5.1 and §9.7.16.4.1).
    #[inline(always)]
    fn k_major<Tl: TileLayout>(tile_addr: u32, row: usize, k: usize) -> Self {
        let kb = k * Tl::ELEM_BYTES;
        let span = Tl::BLOCK_ROW_BYTES;
        // The tile's descriptor (the same for every row and K step, so built
        // once per tile in an unrolled K loop), moved to the sub-matrix.
        Self::encode(tile_addr, 16, (8 * span) as u32, Tl::SWIZZLE).add_start(((kb / span) * Tl::BLOCK_BYTES + row * span + kb % span) as u32)
    }

    /// The descriptor of an MN-major operand (`B` stored `K x N`, N
    /// contiguous: Pallas's transposed B) in tile `Tl` (`K` rows, `N`
    /// columns), for the 16 K-rows from `k_row` and the N columns from
    /// `mn_col` (a multiple of the column block). Canonical MN-major layout
    /// `((span/e, m), (8, k)) : ((1, LBO), (span/e, SBO))` (PTX ISA
    /// §9.7.15.5.1; CUTLASS `make_gmma_desc<Major::MN>`): `span/e` N elements
    /// per 128/64/32-byte row, N chunks `LBO` = one column block apart, groups
    /// of 8 K-rows `SBO = 8 * span` apart.
    #[inline(always)]
    fn mn_major<Tl: TileLayout>(tile_addr: u32, k_row: usize, mn_col: usize) -> Self {
        Self::encode(tile_addr, Tl::BLOCK_BYTES as u32, (8 * Tl::BLOCK_ROW_BYTES) as u32, Tl::SWIZZLE)
            .add_start(((mn_col / Tl::BLOCK_COLS) * Tl::BLOCK_BYTES + k_row * Tl::BLOCK_ROW_BYTES) as u32)
    }
}

impl TileDescriptor for SmemDescriptor {
    #[inline(always)]
    fn encode(start_addr: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> Self {
        SmemDescriptor::new(start_addr, leading_byte_offset, stride_byte_offset, swizzle)
    }
    #[inline(always)]
    fn add_start(self, bytes: u32) -> Self {
        SmemDescriptor::add_start(self, bytes)
    }
}

/// A transposed view of an SMEM tile (Pallas's
/// `plgpu.TransposeTransform((1, 0))`): tile `Tl`, stored `R x C` as TMA
/// loaded it (untransposed, swizzled), read as the `C x R` matrix.
///
/// As a wgmma operand ([`Acc::mma_view`]) it is MN-major: the descriptor
/// addresses the stored tile in the canonical MN-major layout
/// ([`TileDescriptor::mn_major`]) and the instruction's transpose
/// immediate (`imm-trans-a` for A, `imm-trans-b` for B) is 1, so the
/// tensor core and TMA agree on one SMEM layout and no data moves. The
/// hardware transposes 16-bit elements only (f16, bf16): an FP8 view is a
/// compile-time error where it is used as an operand.
pub struct Transposed<Tl> {
    tile: Smem<Tl>,
}

impl<Tl> Clone for Transposed<Tl> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Tl> Copy for Transposed<Tl> {}

impl<Tl: TileLayout> Smem<Tl> {
    /// This tile read as its transpose (see [`Transposed`]): `x.transposed()`
    /// of a `K x M` tile is the `M x K` A operand, of a `K x N` tile the
    /// `N x K` B operand.
    #[inline(always)]
    pub fn transposed(self) -> Transposed<Tl> {
        Transposed { tile: self }
    }
}

impl<Tl: TileLayout> Transposed<Tl> {
    /// The stored (untransposed) tile.
    #[inline(always)]
    pub fn stored(self) -> Smem<Tl> {
        self.tile
    }
}

/// An SMEM operand of an MMA given as a view ([`Acc::mma_view`] here,
/// `tcgen05_view::tcgen05_mma_view` on Blackwell), as the MMA sees it: a
/// matrix of `ROWS` (M for A, N for B) x `K`, K-major ([`Smem`] of a tile:
/// rows x K stored) or MN-major ([`Transposed`]: K x rows stored).
pub trait MmaOperand: Copy {
    /// The stored tile.
    type Tile: TileLayout;
    /// Rows of the logical matrix (M or N).
    const ROWS: usize;
    /// K of the logical matrix.
    const K: usize;
    /// Whether the operand is MN-major (wgmma's `imm-trans-a`/`imm-trans-b`,
    /// tcgen05's transpose bits in the instruction descriptor).
    const MN_MAJOR: bool;
    /// The descriptor (of either MMA's format) of the logical rows `row ..`
    /// at K offset `k`.
    fn descriptor<D: TileDescriptor>(&self, row: usize, k: usize) -> D;
}

impl<Tl: TileLayout> MmaOperand for Smem<Tl> {
    type Tile = Tl;
    const ROWS: usize = Tl::ROWS;
    const K: usize = Tl::COLS;
    const MN_MAJOR: bool = false;
    #[inline(always)]
    fn descriptor<D: TileDescriptor>(&self, row: usize, k: usize) -> D {
        D::k_major::<Tl>(self.smem_addr(), row, k)
    }
}

impl<Tl: TileLayout> MmaOperand for Transposed<Tl> {
    type Tile = Tl;
    const ROWS: usize = Tl::COLS;
    const K: usize = Tl::ROWS;
    const MN_MAJOR: bool = true;
    #[inline(always)]
    fn descriptor<D: TileDescriptor>(&self, row: usize, k: usize) -> D {
        // Logical row `row` is stored column `row`; K step `k` is stored row `k`.
        D::mn_major::<Tl>(self.tile.smem_addr(), k, row)
    }
}

/// The row rule of [`Acc::mma_view`]: `rows` logical rows from `row` fit
/// the operand, start at a multiple of 8, and, for a transposed operand
/// (rows are stored columns), at a multiple of the tile's column block.
#[inline(always)]
#[track_caller]
fn check_view_row<O: MmaOperand>(which: &str, row: usize, rows: usize) {
    if row % 8 != 0 || row + rows > O::ROWS || (O::MN_MAJOR && row % O::Tile::BLOCK_COLS != 0) {
        view_row_error(which, row, rows, O::ROWS, O::MN_MAJOR, O::Tile::BLOCK_COLS);
    }
}

#[cold]
#[track_caller]
fn view_row_error(which: &str, row: usize, rows: usize, total: usize, mn_major: bool, block_cols: usize) -> ! {
    device!("wgmma operand row check", {
        let _ = (which, row, rows, total, mn_major, block_cols);
        // SAFETY: aborts the kernel.
        unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
    }, host: {
        kernel_emu::misuse(
            "wgmma operand rows outside the operand, or not aligned",
            format_args!(
                "Acc::mma_view: {which} rows {row}..{} of an operand of {total} rows{}: start at a multiple of {} inside the operand",
                row + rows,
                if mn_major { " (a transposed tile: its rows are stored columns, and an MN-major descriptor starts at a column block)" } else { "" },
                if mn_major { block_cols } else { 8 },
            ),
        )
    })
}

/// Element types wgmma takes from SMEM with an f32 accumulator: 16-bit
/// (`m64nNk16`) and FP8 (`m64nNk32`; both operands K-major, the hardware
/// has no transpose for 8-bit types). A and B have the same type, or are
/// e4m3 and e5m2 mixed ([`WgmmaWith`]).
#[diagnostic::on_unimplemented(
    message = "wgmma does not take `{Self}` operands with an f32 accumulator here",
    note = "implemented: f16 and bf16 (m64nNk16), E4M3 and E5M2 (m64nNk32); the hardware also has tf32 (k8) and s8/u8 (k32), not implemented yet"
)]
pub trait WgmmaInput: Copy + 'static {
    /// The PTX type name (`f16`, `bf16`, `e4m3`, `e5m2`).
    const PTX: &'static str;
    /// The element as the emulator decodes it.
    const ELEM: Elem;
    /// K of one wgmma: 32 bytes of each row, 16 elements of a 16-bit type
    /// ([`WGMMA_K`]) or 32 of an FP8 one ([`WGMMA_K_FP8`]).
    const K: usize;
}
impl WgmmaInput for half::f16 {
    const PTX: &'static str = "f16";
    const ELEM: Elem = Elem::F16;
    const K: usize = WGMMA_K;
}
impl WgmmaInput for half::bf16 {
    const PTX: &'static str = "bf16";
    const ELEM: Elem = Elem::Bf16;
    const K: usize = WGMMA_K;
}
impl WgmmaInput for crate::E4M3 {
    const PTX: &'static str = "e4m3";
    const ELEM: Elem = Elem::E4M3;
    const K: usize = WGMMA_K_FP8;
}
impl WgmmaInput for crate::E5M2 {
    const PTX: &'static str = "e5m2";
    const ELEM: Elem = Elem::E5M2;
    const K: usize = WGMMA_K_FP8;
}

/// The B element types an A of this type multiplies with in one wgmma:
/// the same type, and for FP8 the other FP8 type (`.e4m3.e5m2`,
/// `.e5m2.e4m3`: PTX ISA §9.7.15.5, the FP8 training GEMMs' e5m2
/// gradients times e4m3 weights or activations).
#[diagnostic::on_unimplemented(
    message = "wgmma does not multiply `{Self}` (A) by `{B}` (B)",
    note = "A and B must have the same element type, except e4m3 with e5m2 (either order)"
)]
pub trait WgmmaWith<B: WgmmaInput>: WgmmaInput {}
impl<T: WgmmaInput> WgmmaWith<T> for T {}
impl WgmmaWith<crate::E5M2> for crate::E4M3 {}
impl WgmmaWith<crate::E4M3> for crate::E5M2 {}

/// `N` of `wgmma.m64nNk16` as a type, for [`WgmmaShape`].
pub struct Cols<const N: usize>;

/// The `N`s this crate implements, with their register arrays. The hardware
/// allows N = 8..=256 in steps of 8 for 16-bit inputs; 32, 64, 80, 128 and
/// 256 are implemented.
#[diagnostic::on_unimplemented(
    message = "wgmma with N = {Self} is not implemented",
    note = "the hardware allows N a multiple of 8 from 8 to 256; this crate implements N = 32, 64, 80, 128 and 256 (f32 accumulators)"
)]
pub trait WgmmaShape {
    /// `N / 2` f32 accumulator registers per thread (an array: index it
    /// with constants only, e.g. inside `array::regs::unroll`, so the
    /// registers stay registers).
    type F32Regs: Copy + AsRef<[f32]> + AsMut<[f32]>;
    const N: usize;
    fn zero_f32() -> Self::F32Regs;
    /// Registers with unspecified contents, defined by an empty asm (no
    /// instruction): the first MMA must not accumulate.
    fn undefined_f32() -> Self::F32Regs;
    /// # Safety
    /// See [`Acc::mma`].
    /// `trans_a`: A is MN-major (`imm-trans-a = 1`); `trans_b`: B is
    /// MN-major (`imm-trans-b = 1`). 16-bit inputs only when either is set.
    unsafe fn mma_f32<EA: WgmmaWith<EB>, EB: WgmmaInput>(d: &mut Self::F32Regs, a: SmemDescriptor, b: SmemDescriptor, scale_d: bool, trans_a: bool, trans_b: bool);
    /// # Safety
    /// A from registers (4 x b32 of f16x2 in the WGMMA A-fragment layout).
    /// `trans_b`: B is MN-major (`imm-trans-b = 1`; the RS form has no
    /// `imm-trans-a`).
    unsafe fn mma_f32_rs<E: WgmmaInput>(d: &mut Self::F32Regs, a: [u32; 4], b: SmemDescriptor, scale_d: bool, trans_b: bool);
    /// Empty asm that "uses and redefines" every register: orders plain
    /// register reads after preceding wgmma waits.
    fn fence_operands(d: &mut Self::F32Regs);
    /// `N / 4` f16x2 accumulator registers per thread (f16 accumulation).
    type F16Regs: Copy;
    fn undefined_f16() -> Self::F16Regs;
    /// `wgmma.mma_async...m64nNk16.f16.f16.f16` (f16 inputs, f16 accumulator).
    /// # Safety
    /// See [`Acc::mma`].
    unsafe fn mma_f16(d: &mut Self::F16Regs, a: SmemDescriptor, b: SmemDescriptor, scale_d: bool);
    fn fence_operands_f16(d: &mut Self::F16Regs);
    /// `f(pair, packed f16x2)` for every register, unrolled.
    fn for_each_pair_f16(d: &Self::F16Regs, f: impl FnMut(usize, u32));
    /// `f(pair, d[2 pair], d[2 pair + 1])` for every pair, unrolled.
    fn for_each_pair(d: &Self::F32Regs, f: impl FnMut(usize, f32, f32));
}

/// `", {}, {}"`: the template of one more register pair.
#[allow(unused_macros)] // used only in the nvptx64 bodies
macro_rules! pair_tpl {
    ($p:literal) => {
        ", {}, {}"
    };
}

/// `", {}"`: the template of one more register.
#[allow(unused_macros)] // used only in the nvptx64 bodies
macro_rules! one_tpl {
    ($p:literal) => {
        ", {}"
    };
}

/// Emits the `WgmmaShape` impl for one N from its list of register pairs.
macro_rules! wgmma_shape {
    ($n:literal, $regs:literal, [$p0:literal $(, $p:literal)*]) => {
        impl WgmmaShape for Cols<$n> {
            type F32Regs = [f32; $regs];
            const N: usize = $n;
            #[inline(always)]
            fn zero_f32() -> [f32; $regs] {
                [0.0; $regs]
            }
            #[inline(always)]
            fn undefined_f32() -> [f32; $regs] {
                #[cfg(not(target_arch = "nvptx64"))]
                return [0.0; $regs];
                // No zero-initialized array first: at N = 256 (512 bytes) LLVM
                // lowers its memset to a loop over a local-memory array.
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: a comment template; only defines the registers. Every
                // element is an `out` operand, so the array is initialized after it.
                unsafe {
                    let mut d = core::mem::MaybeUninit::<[f32; $regs]>::uninit();
                    let p = d.as_mut_ptr() as *mut f32;
                    core::arch::asm!(
                        concat!("// wgmma accumulator, undefined until the first mma: {}, {}" $(, pair_tpl!($p))*),
                        out(reg32) *p.add(2 * $p0), out(reg32) *p.add(2 * $p0 + 1),
                        $(out(reg32) *p.add(2 * $p), out(reg32) *p.add(2 * $p + 1),)*
                        // Not `pure`: two accumulators must not be merged into one.
                        options(nomem, nostack, preserves_flags)
                    );
                    d.assume_init()
                }
            }
            #[inline(always)]
            #[track_caller]
            unsafe fn mma_f32<EA: WgmmaWith<EB>, EB: WgmmaInput>(d: &mut [f32; $regs], a: SmemDescriptor, b: SmemDescriptor, scale_d: bool, trans_a: bool, trans_b: bool) {
                device!("wgmma.mma_async (SS, f32 accumulator)", {
                    let sd = scale_d as u32;
                    macro_rules! issue {
                        ($ty:literal, $ta:literal, $tb:literal) => {
                            // SAFETY: the caller's contract (warpgroup-wide, after wgmma.fence).
                            unsafe {
                                core::arch::asm!(
                                    concat!(
                                        "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty,
                                        " {{{}, {}" $(, pair_tpl!($p))* , "}}, {da}, {db}, p, 1, 1, ", $ta, ", ", $tb, "; }}"
                                    ),
                                    inout(reg32) d[2 * $p0], inout(reg32) d[2 * $p0 + 1],
                                    $(inout(reg32) d[2 * $p], inout(reg32) d[2 * $p + 1],)*
                                    da = in(reg64) a.0, db = in(reg64) b.0, sd = in(reg32) sd,
                                    options(nostack)
                                )
                            }
                        };
                    }
                    // FP8: k32, and no transpose immediates (both operands
                    // K-major; `Acc::mma_kn` refuses FP8 at compile time).
                    macro_rules! issue_fp8 {
                        ($ta:literal, $tb:literal) => {
                            // SAFETY: as `issue!`.
                            unsafe {
                                core::arch::asm!(
                                    concat!(
                                        "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k32.f32.", $ta, ".", $tb,
                                        " {{{}, {}" $(, pair_tpl!($p))* , "}}, {da}, {db}, p, 1, 1; }}"
                                    ),
                                    inout(reg32) d[2 * $p0], inout(reg32) d[2 * $p0 + 1],
                                    $(inout(reg32) d[2 * $p], inout(reg32) d[2 * $p + 1],)*
                                    da = in(reg64) a.0, db = in(reg64) b.0, sd = in(reg32) sd,
                                    options(nostack)
                                )
                            }
                        };
                    }
                    // imm-trans-a, imm-trans-b: 1 for an MN-major operand.
                    match (EA::ELEM, trans_a, trans_b) {
                        (Elem::F16, false, false) => issue!("f16", "0", "0"),
                        (Elem::F16, false, true) => issue!("f16", "0", "1"),
                        (Elem::F16, true, false) => issue!("f16", "1", "0"),
                        (Elem::F16, true, true) => issue!("f16", "1", "1"),
                        (Elem::Bf16, false, false) => issue!("bf16", "0", "0"),
                        (Elem::Bf16, false, true) => issue!("bf16", "0", "1"),
                        (Elem::Bf16, true, false) => issue!("bf16", "1", "0"),
                        (Elem::Bf16, true, true) => issue!("bf16", "1", "1"),
                        (Elem::E4M3, _, _) => match EB::ELEM {
                            Elem::E5M2 => issue_fp8!("e4m3", "e5m2"),
                            _ => issue_fp8!("e4m3", "e4m3"),
                        },
                        (Elem::E5M2, _, _) => match EB::ELEM {
                            Elem::E4M3 => issue_fp8!("e5m2", "e4m3"),
                            _ => issue_fp8!("e5m2", "e5m2"),
                        },
                        // No `WgmmaInput` has another element.
                        _ => {}
                    }
                }, host |op| {
                    let a = if trans_a { kernel_emu::wgmma::A::SmemMnMajor(a) } else { kernel_emu::wgmma::A::Smem(a) };
                    kernel_emu::wgmma::mma_f32_mixed(d, a, b, scale_d, trans_b, (EA::ELEM, EB::ELEM), op)
                })
            }
            #[inline(always)]
            #[track_caller]
            unsafe fn mma_f32_rs<E: WgmmaInput>(d: &mut [f32; $regs], a: [u32; 4], b: SmemDescriptor, scale_d: bool, trans_b: bool) {
                device!("wgmma.mma_async (RS, f32 accumulator)", {
                    let sd = scale_d as u32;
                    macro_rules! issue {
                        ($ty:literal, $tb:literal) => {
                            // SAFETY: the caller's contract.
                            unsafe {
                                core::arch::asm!(
                                    concat!(
                                        "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty,
                                        " {{{}, {}" $(, pair_tpl!($p))* , "}}, {{{a0}, {a1}, {a2}, {a3}}}, {db}, p, 1, 1, ", $tb, "; }}"
                                    ),
                                    inout(reg32) d[2 * $p0], inout(reg32) d[2 * $p0 + 1],
                                    $(inout(reg32) d[2 * $p], inout(reg32) d[2 * $p + 1],)*
                                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                                    db = in(reg64) b.0, sd = in(reg32) sd,
                                    options(nostack)
                                )
                            }
                        };
                    }
                    // 16-bit only (`Acc::mma_rs` refuses FP8 at compile time).
                    match (matches!(E::ELEM, Elem::Bf16), trans_b) {
                        (false, false) => issue!("f16", "0"),
                        (false, true) => issue!("f16", "1"),
                        (true, false) => issue!("bf16", "0"),
                        (true, true) => issue!("bf16", "1"),
                    }
                }, host |op| {
                    kernel_emu::wgmma::mma_f32(d, kernel_emu::wgmma::A::Regs(a), b, scale_d, trans_b, E::ELEM, op)
                })
            }
            #[inline(always)]
            fn fence_operands(d: &mut [f32; $regs]) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: an empty template; only constrains the compiler.
                unsafe {
                    core::arch::asm!(
                        concat!("// wgmma operand fence: {}, {}" $(, pair_tpl!($p))*),
                        inout(reg32) d[2 * $p0], inout(reg32) d[2 * $p0 + 1],
                        $(inout(reg32) d[2 * $p], inout(reg32) d[2 * $p + 1],)*
                        options(nostack, preserves_flags)
                    )
                }
                #[cfg(not(target_arch = "nvptx64"))]
                let _ = d;
            }
            type F16Regs = [u32; $regs / 2];
            #[inline(always)]
            fn undefined_f16() -> [u32; $regs / 2] {
                #[allow(unused_mut)]
                let mut d = [0u32; $regs / 2];
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: a comment template; only defines the registers.
                unsafe {
                    core::arch::asm!(
                        concat!("// wgmma f16 accumulator, undefined until the first mma: {}" $(, one_tpl!($p))*),
                        out(reg32) d[$p0], $(out(reg32) d[$p],)*
                        options(nomem, nostack, preserves_flags)
                    )
                }
                d
            }
            #[inline(always)]
            #[track_caller]
            unsafe fn mma_f16(d: &mut [u32; $regs / 2], a: SmemDescriptor, b: SmemDescriptor, scale_d: bool) {
                device!("wgmma.mma_async (SS, f16 accumulator)", {
                    let sd = scale_d as u32;
                    // SAFETY: the caller's contract.
                    unsafe {
                        core::arch::asm!(
                            concat!(
                                "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k16.f16.f16.f16",
                                " {{{}" $(, one_tpl!($p))* , "}}, {da}, {db}, p, 1, 1, 0, 0; }}"
                            ),
                            inout(reg32) d[$p0], $(inout(reg32) d[$p],)*
                            da = in(reg64) a.0, db = in(reg64) b.0, sd = in(reg32) sd,
                            options(nostack)
                        )
                    }
                }, host |op| { kernel_emu::wgmma::mma_f16(d, a, b, scale_d, op) })
            }
            #[inline(always)]
            fn fence_operands_f16(d: &mut [u32; $regs / 2]) {
                #[cfg(target_arch = "nvptx64")]
                // SAFETY: a comment template; only constrains the compiler.
                unsafe {
                    core::arch::asm!(
                        concat!("// wgmma operand fence: {}" $(, one_tpl!($p))*),
                        inout(reg32) d[$p0], $(inout(reg32) d[$p],)*
                        options(nostack, preserves_flags)
                    )
                }
                #[cfg(not(target_arch = "nvptx64"))]
                let _ = d;
            }
            #[inline(always)]
            fn for_each_pair_f16(d: &[u32; $regs / 2], mut f: impl FnMut(usize, u32)) {
                f($p0, d[$p0]);
                $( f($p, d[$p]); )*
            }
            #[inline(always)]
            fn for_each_pair(d: &[f32; $regs], mut f: impl FnMut(usize, f32, f32)) {
                f($p0, d[2 * $p0], d[2 * $p0 + 1]);
                $( f($p, d[2 * $p], d[2 * $p + 1]); )*
            }
        }

        impl Acc<$n> {
            /// The accumulator as a register array in the WGMMA layout:
            /// the same registers, no instruction (after an operand fence,
            /// so call it after `wgmma_wait::<0>()`).
            #[inline(always)]
            pub fn into_array(mut self) -> Array<f32, Wgmma<$n>> {
                self.fence_operands();
                Array::from_regs(self.regs)
            }
            /// The accumulator viewed in place as a register array in the
            /// WGMMA layout (after an operand fence: call it after
            /// `wgmma_wait::<0>()`).
            #[inline(always)]
            pub fn array(&mut self) -> &mut Array<f32, Wgmma<$n>> {
                self.fence_operands();
                // SAFETY: `Array<f32, Wgmma<N>>` is `repr(transparent)` over
                // its registers, `[f32; N / 2]`, the type of `self.regs`.
                unsafe { &mut *(&mut self.regs as *mut [f32; $regs] as *mut Array<f32, Wgmma<$n>>) }
            }
            /// An accumulator holding `a` (e.g. to accumulate onto it).
            #[inline(always)]
            pub fn from_array(a: Array<f32, Wgmma<$n>>) -> Self {
                Acc { regs: a.regs }
            }
        }
    };
}

// 32: narrow column blocks (a 64 x 32 output tile per warpgroup: the
// decode GEMM's shape, where cuBLAS runs 64 x 32 tiles).
wgmma_shape!(32, 16, [0, 1, 2, 3, 4, 5, 6, 7]);
wgmma_shape!(64, 32, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
// 80: attention's key blocks at head dim 256 (FlashAttention-3's choice).
wgmma_shape!(80, 40, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
wgmma_shape!(128, 64, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
wgmma_shape!(
    256,
    128,
    [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36,
        37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63
    ]
);

/// `wgmma.fence.sync.aligned;`: orders prior register/SMEM accesses of the
/// accumulators and operands before the following `wgmma.mma_async`.
/// Warpgroup-collective. [`Acc::mma`] issues it.
#[inline(always)]
#[track_caller]
pub fn wgmma_fence() {
    device!("wgmma.fence", {
        // SAFETY: a fence; memory clobber.
        unsafe { core::arch::asm!("wgmma.fence.sync.aligned;", options(nostack, preserves_flags)) }
    }, host |op| { kernel_emu::yield_point(op) })
}

/// `wgmma.commit_group.sync.aligned;`: closes the group of MMAs issued
/// since the last commit. Warpgroup-collective.
#[inline(always)]
#[track_caller]
pub fn wgmma_commit_group() {
    device!("wgmma.commit_group", {
        // SAFETY: no operands.
        unsafe { core::arch::asm!("wgmma.commit_group.sync.aligned;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::wgmma::commit_group() })
}

/// `wgmma.wait_group.sync.aligned N;`: waits until at most `N` groups are
/// pending; SMEM operands of completed groups may be overwritten, and their
/// accumulators read (after [`Acc`]'s operand fence). Warpgroup-collective.
#[inline(always)]
#[track_caller]
pub fn wgmma_wait<const N: u32>() {
    device!("wgmma.wait_group", {
        // SAFETY: waits only; memory clobber orders later SMEM reuse.
        unsafe { core::arch::asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack, preserves_flags)) }
    }, host: {
        // Emulated MMAs complete at issue; the wait retires the groups and
        // is a barrier of the warpgroup (see `kernel_emu::wgmma`).
        kernel_emu::wgmma::wait_group(N)
    })
}

/// `setmaxnreg.inc.sync.aligned.u32 N;` (sm_90a; PTX ISA §9.7.19.6): this
/// warpgroup asks for `N` registers per thread (a consumer role). `N` in
/// 24..=256, a multiple of 8; checked at compile time. Warpgroup-collective
/// (all 4 warps execute the same one); takes effect only when the kernel
/// has a register cap (`.maxntid`, which `#[kernel]` emits).
///
/// The registers come from the CTA's pool, never from outside the CTA:
/// every warpgroup starts with the kernel's entry count
/// (`kernel_spec::registers::entry_registers`: 168 per thread at 384
/// threads, 128 at 512), [`setmaxnreg_dec`] returns registers to the pool,
/// and this instruction **blocks until the pool has them**. So the counts
/// of all roles must sum to at most `warpgroups x entry count` (504 at 384
/// threads: 240 + 240 + 24 fits, 240 + 240 + 32 hangs). `N` must not be
/// below the warpgroup's current count.
///
/// On the emulator (`kernel_emu::wgmma::setmaxnreg_inc`) the warpgroup
/// waits for the registers as the GPU does: counts over the pool end in a
/// deadlock report that gives the pool, each warpgroup's count and the
/// rule, and an `N` below the current count is a misuse.
/// `#[warp_specialize(warpgroups, registers = [..])]` checks the sum at
/// compile time.
#[inline(always)]
#[track_caller]
pub fn setmaxnreg_inc<const N: u32>() {
    const { assert!(setmaxnreg_count_ok(N), "setmaxnreg: the register count must be a multiple of 8 in 24..=256") };
    device!("setmaxnreg.inc", {
        // SAFETY: warpgroup-collective register reallocation.
        unsafe { core::arch::asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack, preserves_flags)) }
    }, host: {
        // The CTA's register pool: waits until it has N per thread for
        // this warpgroup.
        kernel_emu::wgmma::setmaxnreg_inc(N)
    })
}

/// `setmaxnreg.dec.sync.aligned.u32 N;` (sm_90a; PTX ISA §9.7.19.6): this
/// warpgroup gives registers back to the CTA's pool, down to `N` per thread
/// (a producer role), where a waiting [`setmaxnreg_inc`] of another
/// warpgroup can take them. `N` must not be above the warpgroup's current
/// count; otherwise as [`setmaxnreg_inc`], whose pool rule this serves. On
/// the emulator (`kernel_emu::wgmma::setmaxnreg_dec`) the warpgroup's count
/// drops to `N`, and an `N` above it is a misuse.
#[inline(always)]
#[track_caller]
pub fn setmaxnreg_dec<const N: u32>() {
    const { assert!(setmaxnreg_count_ok(N), "setmaxnreg: the register count must be a multiple of 8 in 24..=256") };
    device!("setmaxnreg.dec", {
        // SAFETY: warpgroup-collective register reallocation.
        unsafe { core::arch::asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack, preserves_flags)) }
    }, host: {
        // Returns registers to the CTA's pool.
        kernel_emu::wgmma::setmaxnreg_dec(N)
    })
}

/// The marker of [`pin_entry_registers`] in the PTX, which the build's
/// `kernel_host::build::apply_kernel_meta` turns into `.minnctapersm 1`.
pub use kernel_spec::PIN_ENTRY_REGISTERS_MARKER;

/// Asks the build to give this kernel `.minnctapersm 1` (one CTA per SM),
/// which pins the register count at the kernel's entry. ptxas honours
/// [`setmaxnreg_inc`]/[`setmaxnreg_dec`] only where it can determine that
/// count; where `.maxntid` alone does not let it, it drops every
/// `setmaxnreg` of the kernel with the note C7508 ("unable to determine
/// register count at entry") and allocates the launch's flat count, which
/// spills or serializes the wgmmas of a role that needs more
/// (NVIDIA/cutlass#3406). Call it anywhere in such a kernel; it emits
/// only a PTX comment (the emulator ignores it). A kernel that calls it
/// runs one CTA per SM, as a warp-specialized kernel with per-role
/// register counts does anyway.
#[inline(always)]
pub fn pin_entry_registers() {
    device!("pin_entry_registers", {
        // SAFETY: a comment; no instruction.
        unsafe { core::arch::asm!("// kernel-meta: minnctapersm 1", options(nostack, preserves_flags, nomem)) }
    }, host: {})
}

/// `cvt.rn.f16x2.f32 d, hi, lo;` (moved to [`crate::cvt`]; re-exported here for
/// its users).
pub use crate::cvt::pack_f16x2;

/// A `64 x N` f32 accumulator in registers, in the WGMMA fragment layout:
/// thread `t` of the warpgroup (warp `w = t / 32`, lane `l = t % 32`) holds,
/// for register pair `p` (quad `q = p / 2`, half `h = p % 2`), the elements
/// `(row, col) = (16 w + l / 4 + 8 h, 8 q + 2 (l % 4) + {0, 1})`
/// (PTX ISA §9.7.15.5.1, "Matrix fragments for wgmma .m64nNk16", D).
pub struct Acc<const N: usize>
where
    Cols<N>: WgmmaShape,
{
    pub regs: <Cols<N> as WgmmaShape>::F32Regs,
}

impl<const N: usize> Acc<N>
where
    Cols<N>: WgmmaShape,
{
    /// All zeros (costs `N / 2` register moves, which ptxas counts as
    /// touching the accumulators: prefer [`Acc::undefined`] in MMA loops).
    #[inline(always)]
    pub fn zeros() -> Self {
        Acc { regs: <Cols<N>>::zero_f32() }
    }

    /// An accumulator whose contents are unspecified (no instruction is
    /// emitted): the first [`Acc::mma`] into it must pass
    /// `accumulate = false`, which makes the MMA overwrite it.
    #[inline(always)]
    pub fn undefined() -> Self {
        Acc { regs: <Cols<N>>::undefined_f32() }
    }

    /// Issues `acc (+)= A[a_row .. a_row + 64, 0 .. K] · B[b_row .. b_row + N, 0 .. K]ᵀ`
    /// as `K / 16` wgmmas after a `wgmma.fence` (no commit: call
    /// [`wgmma_commit_group`] once the step's MMAs are issued). With
    /// `accumulate = false` the first MMA overwrites the accumulator.
    ///
    /// `A` and `B` are swizzled K-major tiles of the same element type
    /// ([`WgmmaInput`]: f16, bf16, or FP8 with `k32` MMAs), or of e4m3
    /// and e5m2 mixed ([`WgmmaWith`]), and the same K. Warpgroup-collective: all 128 threads of a warpgroup
    /// call it with the same arguments. `a_row`, `b_row` are multiples of 8.
    #[inline(always)]
    #[track_caller]
    pub fn mma<EA, EB, A, B>(&mut self, a: Smem<A>, a_row: usize, b: Smem<B>, b_row: usize, accumulate: bool)
    where
        EA: WgmmaWith<EB>,
        EB: WgmmaInput,
        A: TileLayout<Elem = EA>,
        B: TileLayout<Elem = EB>,
    {
        const {
            assert!(A::COLS == B::COLS, "wgmma: A and B tiles must have the same K (columns)");
            assert!(A::COLS % EA::K == 0, "wgmma: K must be a multiple of one MMA's K (16 for 16-bit inputs, 32 for FP8)");
            assert!(A::ROWS >= WGMMA_M, "wgmma: the A tile needs at least 64 rows (M = 64)");
            assert!(B::ROWS >= N, "wgmma: the B tile needs at least N rows");
            assert!(
                !matches!(A::SWIZZLE, Swizzle::None) && !matches!(B::SWIZZLE, Swizzle::None),
                "wgmma: operand tiles must be swizzled (Swizzled<32/64/128>): the canonical unswizzled layout is not implemented"
            );
        };
        let b_addr = b.smem_addr();
        self.issue_k_steps::<EA, EB, A>(a, a_row, |k| SmemDescriptor::k_major::<B>(b_addr, b_row, k), false, accumulate);
    }

    /// `wgmma.fence`, then one MMA per `E::K` columns of A's K, with A's K-major
    /// descriptor at row `a_row` and B's descriptor for each `k` from `b_desc`
    /// (`trans_b`: B is MN-major). The shared loop of [`Acc::mma`] and
    /// [`Acc::mma_kn`], whose callers checked the shapes.
    #[inline(always)]
    #[track_caller]
    fn issue_k_steps<EA: WgmmaWith<EB>, EB: WgmmaInput, A: TileLayout<Elem = EA>>(
        &mut self,
        a: Smem<A>,
        a_row: usize,
        b_desc: impl Fn(usize) -> SmemDescriptor,
        trans_b: bool,
        accumulate: bool,
    ) {
        let a_addr = a.smem_addr();
        wgmma_fence();
        let mut k = 0;
        while k < A::COLS {
            let da = SmemDescriptor::k_major::<A>(a_addr, a_row, k);
            // SAFETY: all threads of the warpgroup issue the same MMA after the
            // fence; descriptors address the given tiles.
            unsafe { <Cols<N>>::mma_f32::<EA, EB>(&mut self.regs, da, b_desc(k), accumulate || k > 0, false, trans_b) };
            k += EA::K;
        }
    }

    /// As [`Acc::mma`] with B stored `K x N` (N contiguous, MN-major: the
    /// layout of a row-major `K x N` matrix, Pallas's transposed B):
    /// `acc (+)= A[a_row .. a_row + 64, 0 .. K] · B[0 .. K, b_col .. b_col + N]`.
    /// `b_col` is a multiple of B's column block (64 f16 for 128B swizzle).
    #[inline(always)]
    #[track_caller]
    pub fn mma_kn<E, A, B>(&mut self, a: Smem<A>, a_row: usize, b: Smem<B>, b_col: usize, accumulate: bool)
    where
        E: WgmmaInput,
        A: TileLayout<Elem = E>,
        B: TileLayout<Elem = E>,
    {
        const {
            assert!(E::K == WGMMA_K, "wgmma (B K x N): an MN-major (transposed) B needs 16-bit inputs; FP8 operands must both be K-major (the hardware's transpose immediates are for .f16/.bf16 only)");
            assert!(A::COLS == B::ROWS, "wgmma (B K x N): A's columns and B's rows must both be K");
            assert!(A::COLS % WGMMA_K == 0, "wgmma: K must be a multiple of 16 for 16-bit inputs");
            assert!(A::ROWS >= WGMMA_M, "wgmma: the A tile needs at least 64 rows (M = 64)");
            assert!(B::COLS >= N, "wgmma (B K x N): the B tile needs at least N columns");
            assert!(
                !matches!(A::SWIZZLE, Swizzle::None) && !matches!(B::SWIZZLE, Swizzle::None),
                "wgmma: operand tiles must be swizzled (Swizzled<32/64/128>)"
            );
        };
        let b_addr = b.smem_addr();
        // B MN-major: imm-trans-b = 1.
        self.issue_k_steps::<E, E, A>(a, a_row, |k| SmemDescriptor::mn_major::<B>(b_addr, k, b_col), true, accumulate);
    }

    /// `acc (+)= A[a_row .. a_row + 64, 0 .. K] · B[b_row .. b_row + N, 0 .. K]ᵀ`
    /// for operands given as views ([`MmaOperand`]): a tile (`Smem<Tl>`,
    /// K-major, as [`Acc::mma`]) or a transposed tile (`x.transposed()`,
    /// MN-major: the `imm-trans-a`/`imm-trans-b` immediates are set). So
    /// `acc.mma_view(a, 0, b_kn.transposed(), 0, false)` is [`Acc::mma_kn`],
    /// and `acc.mma_view(a_km.transposed(), 0, b, 0, false)` takes A stored
    /// `K x M` (Pallas: `plgpu.TransposeTransform` on the A operand).
    ///
    /// Rules (compile errors): the same element type on both sides; the
    /// same K, a multiple of 16; a transposed operand needs 16-bit inputs
    /// (the hardware has no transpose for FP8); swizzled tiles; at least 64
    /// rows of A and N of B. Rows of a transposed operand are stored
    /// columns: `a_row`/`b_row` must then be a multiple of the tile's
    /// column block (`Tl::BLOCK_COLS`, 64 f16 for 128-byte swizzle),
    /// checked when called. Warpgroup-collective; after a `wgmma.fence`
    /// (issued here), no commit.
    #[inline(always)]
    #[track_caller]
    pub fn mma_view<E, OA, OB>(&mut self, a: OA, a_row: usize, b: OB, b_row: usize, accumulate: bool)
    where
        E: WgmmaInput,
        OA: MmaOperand,
        OB: MmaOperand,
        OA::Tile: TileLayout<Elem = E>,
        OB::Tile: TileLayout<Elem = E>,
    {
        const {
            assert!(
                E::K == WGMMA_K || !(OA::MN_MAJOR || OB::MN_MAJOR),
                "wgmma (transposed operand): an MN-major (transposed) operand needs 16-bit inputs (f16, bf16): the hardware's imm-trans-a/imm-trans-b are for .f16/.bf16 only; keep FP8 operands K-major (untransposed)"
            );
            assert!(OA::K == OB::K, "wgmma: A's K (columns, or rows of a transposed A) and B's K must be equal");
            assert!(OA::K % E::K == 0, "wgmma: K must be a multiple of the MMA's K (16 for 16-bit inputs, 32 for FP8)");
            assert!(OA::ROWS >= WGMMA_M, "wgmma: the A operand needs at least 64 rows (M = 64; a transposed A: 64 stored columns)");
            assert!(OB::ROWS >= N, "wgmma: the B operand needs at least N rows (a transposed B: N stored columns)");
            assert!(
                !matches!(<OA::Tile as TileLayout>::SWIZZLE, Swizzle::None) && !matches!(<OB::Tile as TileLayout>::SWIZZLE, Swizzle::None),
                "wgmma: operand tiles must be swizzled (Swizzled<32/64/128>): the canonical unswizzled layout is not implemented"
            );
        };
        check_view_row::<OA>("A", a_row, WGMMA_M);
        check_view_row::<OB>("B", b_row, N);
        wgmma_fence();
        let mut k = 0;
        while k < OA::K {
            // SAFETY: all threads of the warpgroup issue the same MMA after the
            // fence; the descriptors address the given tiles, in bounds.
            unsafe {
                <Cols<N>>::mma_f32::<E, E>(&mut self.regs, a.descriptor::<SmemDescriptor>(a_row, k), b.descriptor::<SmemDescriptor>(b_row, k), accumulate || k > 0, OA::MN_MAJOR, OB::MN_MAJOR)
            };
            k += E::K;
        }
    }

    /// Issues one `wgmma` with A from registers:
    /// `acc (+)= A_frag[64 x 16] · B[b_row .. b_row + N, k .. k + 16]ᵀ`,
    /// where `a` is this thread's A fragment ([`load_a_fragment`]). After a
    /// `wgmma.fence`; no commit. Warpgroup-collective.
    #[inline(always)]
    #[track_caller]
    pub fn mma_rs<E, B>(&mut self, a: [u32; 4], b: Smem<B>, b_row: usize, k: usize, accumulate: bool)
    where
        E: WgmmaInput,
        B: TileLayout<Elem = E>,
    {
        const {
            assert!(E::K == WGMMA_K, "wgmma (A from registers): implemented for 16-bit inputs only (the FP8 A fragment is not)");
            assert!(B::ROWS >= N, "wgmma: the B tile needs at least N rows");
            assert!(!matches!(B::SWIZZLE, Swizzle::None), "wgmma: the B tile must be swizzled (Swizzled<32/64/128>)");
        };
        wgmma_fence();
        let db = SmemDescriptor::k_major::<B>(b.smem_addr(), b_row, k);
        // SAFETY: warpgroup-wide, after the fence; `a` is this thread's fragment.
        unsafe { <Cols<N>>::mma_f32_rs::<E>(&mut self.regs, a, db, accumulate, false) };
    }

    /// `acc (+)= A[64 x 16 KC] · B[0 .. 16 KC, b_col .. b_col + N]` with A
    /// from registers (`a[c]`: this thread's fragment of A's columns `16 c
    /// .. 16 c + 16`, `c < KC`) and B stored `K x N` (N contiguous,
    /// MN-major, as [`Acc::mma_kn`]): ONE `wgmma.fence`, then `KC` chained wgmmas
    /// (a fence between MMAs of one accumulator chain makes each wait for
    /// the one before). With `accumulate = false` the first overwrites the
    /// accumulator. Attention's `O += P V` is this. Warpgroup-collective.
    #[inline(always)]
    #[track_caller]
    pub fn mma_rs_kn_chain<E, B, const KC: usize>(&mut self, a: &[[u32; 4]; KC], b: Smem<B>, b_col: usize, accumulate: bool)
    where
        E: WgmmaInput,
        B: TileLayout<Elem = E>,
    {
        const {
            assert!(E::K == WGMMA_K, "wgmma (A from registers, B K x N): implemented for 16-bit inputs only (FP8 has neither the A fragment here nor a transposed B)");
            assert!(B::COLS >= N, "wgmma (B K x N): the B tile needs at least N columns");
            assert!(B::ROWS >= WGMMA_K * KC, "wgmma (B K x N): B needs 16 rows (K) per A fragment");
            assert!(!matches!(B::SWIZZLE, Swizzle::None), "wgmma: the B tile must be swizzled (Swizzled<32/64/128>)");
        };
        assert!(b_col + N <= B::COLS, "Acc::mma_rs_kn_chain: block outside the B tile");
        let b_addr = b.smem_addr();
        wgmma_fence();
        crate::array::regs::unroll(KC, |c| {
            let db = SmemDescriptor::mn_major::<B>(b_addr, WGMMA_K * c, b_col);
            // SAFETY: warpgroup-wide, after the fence; `a[c]` is this
            // thread's fragment; B MN-major (imm-trans-b = 1).
            unsafe { <Cols<N>>::mma_f32_rs::<E>(&mut self.regs, a[c], db, accumulate || c > 0, true) };
        });
    }

    /// Orders plain reads of the registers after a preceding [`wgmma_wait`].
    #[inline(always)]
    pub fn fence_operands(&mut self) {
        <Cols<N>>::fence_operands(&mut self.regs)
    }

    /// `f(row, col, v0, v1)` for each pair of adjacent elements this thread
    /// holds (`(row, col)` and `(row, col + 1)`), rows relative to the
    /// 64-row block, unrolled. Call after `wgmma_wait::<0>()`.
    #[inline(always)]
    pub fn for_each_pair(&mut self, mut f: impl FnMut(usize, usize, f32, f32)) {
        self.fence_operands();
        let t = crate::index::thread_in_warpgroup() as usize;
        let (w, l) = (t / 32, t % 32);
        let row = 16 * w + l / 4;
        let col = 2 * (l % 4);
        <Cols<N>>::for_each_pair(&self.regs, |p, v0, v1| f(row + 8 * (p % 2), col + 8 * (p / 2), v0, v1));
    }

    /// Converts to f16 and writes the `64 x N` block to `dst` at
    /// `(row0, col0)` (swizzle applied). Call after `wgmma_wait::<0>()`;
    /// then [`crate::commit_smem`] and a barrier before a TMA store reads
    /// `dst`.
    #[inline(always)]
    pub fn store_f16<const R: usize, const C: usize, L: crate::layout::Layout>(
        &mut self,
        dst: Smem<crate::layout::Tile<half::f16, R, C, L>>,
        row0: usize,
        col0: usize,
    ) {
        assert!(row0 + WGMMA_M <= R && col0 + N <= C && col0 % 8 == 0, "Acc::store_f16: block outside the tile");
        let base = dst.as_ptr() as *mut u8;
        self.for_each_pair(|r, c, v0, v1| {
            let off = crate::layout::Tile::<half::f16, R, C, L>::offset_of(row0 + r, col0 + c);
            // SAFETY: inside the tile (asserted above); 4-byte aligned (even column).
            unsafe { (base.add(off) as *mut u32).write(pack_f16x2(v0, v1)) };
        });
    }
}

/// This thread's A fragment for `wgmma ... A-from-registers` (m64k16, 16-bit
/// elements): rows `row0 + 16 w + l / 4 (+ 8)`, columns `k + 2 (l % 4) (+ 8)`
/// of `tile`, as four f16x2 words in the order `(r, c), (r + 8, c),
/// (r, c + 8), (r + 8, c + 8)` (PTX ISA §9.7.15.5.1, "Matrix fragments for
/// wgmma .m64nNk16", A). Warpgroup threads call it; reads SMEM with ordinary
/// loads (the TMA that filled `tile` must have completed).
#[inline(always)]
pub fn load_a_fragment<E: WgmmaInput, const R: usize, const C: usize, L: crate::layout::Layout>(
    tile: Smem<crate::layout::Tile<E, R, C, L>>,
    row0: usize,
    k: usize,
) -> [u32; 4] {
    assert!(row0 + WGMMA_M <= R && k + WGMMA_K <= C, "load_a_fragment: block outside the tile");
    let t = crate::index::thread_in_warpgroup() as usize;
    let (w, l) = (t / 32, t % 32);
    let (r, c) = (row0 + 16 * w + l / 4, k + 2 * (l % 4));
    let base = tile.as_ptr() as *const u8;
    let word = |row: usize, col: usize| {
        let off = crate::layout::Tile::<E, R, C, L>::offset_of(row, col);
        // SAFETY: inside the tile (asserted); 4-byte aligned (even column).
        unsafe { (base.add(off) as *const u32).read() }
    };
    [word(r, c), word(r + 8, c), word(r, c + 8), word(r + 8, c + 8)]
}

/// A `64 x N` f16 accumulator (f16 inputs, f16 accumulation): `N / 4`
/// registers of packed f16x2, the same fragment positions as [`Acc`]'s
/// pairs. Half the registers of an f32 accumulator, at f16 precision.
pub struct AccF16<const N: usize>
where
    Cols<N>: WgmmaShape,
{
    pub regs: <Cols<N> as WgmmaShape>::F16Regs,
}

impl<const N: usize> AccF16<N>
where
    Cols<N>: WgmmaShape,
{
    /// Unspecified contents (no instruction); the first `mma` must not accumulate.
    #[inline(always)]
    pub fn undefined() -> Self {
        AccF16 { regs: <Cols<N>>::undefined_f16() }
    }

    /// As [`Acc::mma`], accumulating in f16 (`.f16.f16.f16`).
    #[inline(always)]
    #[track_caller]
    pub fn mma<A, B>(&mut self, a: Smem<A>, a_row: usize, b: Smem<B>, b_row: usize, accumulate: bool)
    where
        A: TileLayout<Elem = half::f16>,
        B: TileLayout<Elem = half::f16>,
    {
        const {
            assert!(A::COLS == B::COLS, "wgmma: A and B tiles must have the same K (columns)");
            assert!(A::COLS % WGMMA_K == 0, "wgmma: K must be a multiple of 16 for 16-bit inputs");
            assert!(A::ROWS >= WGMMA_M, "wgmma: the A tile needs at least 64 rows (M = 64)");
            assert!(B::ROWS >= N, "wgmma: the B tile needs at least N rows");
            assert!(
                !matches!(A::SWIZZLE, Swizzle::None) && !matches!(B::SWIZZLE, Swizzle::None),
                "wgmma: operand tiles must be swizzled (Swizzled<32/64/128>)"
            );
        };
        let (a_addr, b_addr) = (a.smem_addr(), b.smem_addr());
        wgmma_fence();
        let mut k = 0;
        while k < A::COLS {
            let da = SmemDescriptor::k_major::<A>(a_addr, a_row, k);
            let db = SmemDescriptor::k_major::<B>(b_addr, b_row, k);
            // SAFETY: as `Acc::mma`.
            unsafe { <Cols<N>>::mma_f16(&mut self.regs, da, db, accumulate || k > 0) };
            k += WGMMA_K;
        }
    }

    /// `f(row, col, packed)` for each f16x2 this thread holds (elements
    /// `(row, col)` and `(row, col + 1)`). Call after `wgmma_wait::<0>()`.
    #[inline(always)]
    pub fn for_each_pair(&mut self, mut f: impl FnMut(usize, usize, u32)) {
        <Cols<N>>::fence_operands_f16(&mut self.regs);
        let t = crate::index::thread_in_warpgroup() as usize;
        let (w, l) = (t / 32, t % 32);
        let (row, col) = (16 * w + l / 4, 2 * (l % 4));
        <Cols<N>>::for_each_pair_f16(&self.regs, |p, v| f(row + 8 * (p % 2), col + 8 * (p / 2), v));
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layout::{Swizzled, Tile};
    use half::f16;
    use std::string::ToString;
    use std::vec::Vec;

    // The encoding itself is tested in `kernel_spec::desc_wgmma`.

    #[test]
    fn k_major_descriptor_walks_k_inside_and_across_column_blocks() {
        type A = Tile<f16, 128, 128, Swizzled<128>>; // two column blocks of 128 rows x 128 B
        let base = 0x400;
        // k = 16 (32 bytes) stays in block 0.
        let d = SmemDescriptor::k_major::<A>(base, 0, 16);
        assert_eq!(d.start_addr(), base + 32);
        assert_eq!(d.stride_byte_offset(), 1024);
        // row 64: + 64 rows x 128 B.
        assert_eq!(SmemDescriptor::k_major::<A>(base, 64, 0).start_addr(), base + 8192);
        // k = 80 (160 bytes): block 1 (+16384), 32 bytes in.
        assert_eq!(SmemDescriptor::k_major::<A>(base, 0, 80).start_addr(), base + 16384 + 32);
        type B = Tile<f16, 64, 32, Swizzled<64>>;
        let d = SmemDescriptor::k_major::<B>(0, 8, 16);
        assert_eq!((d.start_addr(), d.stride_byte_offset(), d.swizzle()), (8 * 64 + 32, 512, Swizzle::B64));
    }

    #[test]
    fn mn_major_descriptor_strides() {
        // B as K x N = 64 x 128 f16, 128B swizzle: two column blocks of 64 rows x 128 B.
        type B = Tile<f16, 64, 128, Swizzled<128>>;
        let d = SmemDescriptor::mn_major::<B>(0x800, 16, 0);
        assert_eq!(d.start_addr(), 0x800 + 16 * 128);
        assert_eq!(d.leading_byte_offset(), 8192, "N chunks one column block apart");
        assert_eq!(d.stride_byte_offset(), 1024, "8-row K groups");
        assert_eq!(SmemDescriptor::mn_major::<B>(0, 0, 64).start_addr(), 8192);
    }

    /// Runs `f` in every thread of one CTA of `threads` threads on the
    /// emulator (schedule `seed`); a run that does not return in 30 s fails
    /// the test instead of hanging it.
    fn emulate(kernel: &str, threads: u32, seed: u64, f: impl Fn() + Send + Sync + 'static) -> Result<kernel_emu::RunReport, kernel_emu::EmuError> {
        let mut cfg = kernel_emu::LaunchConfig::new(kernel, [1, 1, 1], [threads, 1, 1]);
        cfg.smem_bytes = 64;
        cfg.seed = seed;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(kernel_emu::run(&cfg, &f));
        });
        rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the emulated run did not return in 30 s")
    }

    const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

    /// The warp-specialized kernel that hung on an H100: 384 threads (168
    /// registers each at entry, a pool of 3 x 168 = 504), the producer
    /// `setmaxnreg.dec 32`, two consumers `setmaxnreg.inc 240`: 512 > 504.
    /// On the emulator: a deadlock report naming setmaxnreg, the pool and
    /// the rule, in well under a second.
    #[test]
    fn setmaxnreg_over_the_pool_is_a_deadlock_report_not_a_hang() {
        for seed in SEEDS {
            let start = std::time::Instant::now();
            let e = emulate("ws_240_240_32", 384, seed, || match crate::index::warpgroup_idx() {
                2 => setmaxnreg_dec::<32>(),
                _ => setmaxnreg_inc::<240>(),
            })
            .expect_err("240 + 240 + 32 = 512 registers per thread slot must not fit a pool of 504");
            let msg = e.to_string();
            if seed == SEEDS[0] {
                std::eprintln!("{msg}");
            }
            assert!(matches!(e, kernel_emu::EmuError::Deadlock { .. }), "seed {seed}: {msg}");
            assert!(msg.contains("setmaxnreg.inc 240 in warpgroup") && msg.contains(", for registers: "), "seed {seed}: {msg}");
            assert!(msg.contains("the CTA's pool is 3 x 168 = 504 per thread slot"), "seed {seed}: {msg}");
            assert!(msg.contains("240 + 240 + 32 = 512 > 504"), "seed {seed}: {msg}");
            assert!(msg.contains("the register counts of all warpgroups must sum to at most the pool"), "seed {seed}: {msg}");
            // The report names the kernel's line (this file), not the emulator's.
            assert!(msg.contains("kernel-device/src/wgmma.rs"), "seed {seed}: {msg}");
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "seed {seed}: {:?}", start.elapsed());
        }
    }

    /// Counts that fit the pool run, including when both consumers are
    /// inside `setmaxnreg.inc` before the producer's `setmaxnreg.dec`: the
    /// consumers arrive on an mbarrier and then ask for registers; the
    /// producer waits for the barrier's phase and yields 200 times before
    /// its dec, so the consumers' incs must wait for it. `log` checks that
    /// order did happen (the schedules are seeded: the same each run).
    fn roles_fit<const PRODUCER: u32, const CONSUMER: u32>() {
        use std::sync::{Arc, Mutex};
        for seed in SEEDS {
            let log = Arc::new(Mutex::new(Vec::new()));
            let l = log.clone();
            emulate("ws_fits", 384, seed, move || {
                let tid = crate::index::thread_idx().x;
                if tid == 0 {
                    kernel_emu::mbarrier_init(0, 256);
                }
                kernel_emu::bar_sync(0, 0);
                if crate::index::warpgroup_idx() == 2 {
                    while !kernel_emu::mbarrier_try_wait_parity(0, 0) {}
                    for _ in 0..200 {
                        kernel_emu::yield_point("test: let the consumers reach setmaxnreg.inc");
                    }
                    l.lock().unwrap().push("dec");
                    setmaxnreg_dec::<PRODUCER>();
                } else {
                    kernel_emu::mbarrier_arrive(0);
                    l.lock().unwrap().push("inc");
                    setmaxnreg_inc::<CONSUMER>();
                    l.lock().unwrap().push("served");
                }
            })
            .unwrap_or_else(|e| panic!("{PRODUCER}/{CONSUMER}/{CONSUMER}, seed {seed}: {e}"));
            let log = log.lock().unwrap();
            let first_dec = log.iter().position(|&e| e == "dec").expect("the producer decs");
            let incs_before = log[..first_dec].iter().filter(|&&e| e == "inc").count();
            assert_eq!(incs_before, 256, "{PRODUCER}/{CONSUMER}/{CONSUMER}, seed {seed}: every consumer thread reached setmaxnreg.inc before the dec");
            assert_eq!(log.iter().filter(|&&e| e == "served").count(), 256, "seed {seed}");
        }
    }

    #[test]
    fn setmaxnreg_40_232_232_runs_when_the_consumers_ask_first() {
        roles_fit::<40, 232>();
    }

    #[test]
    fn setmaxnreg_24_240_240_runs_when_the_consumers_ask_first() {
        roles_fit::<24, 240>();
    }

    #[test]
    fn setmaxnreg_inc_that_lowers_and_dec_that_raises_are_reported() {
        let rule = |r: Result<kernel_emu::RunReport, kernel_emu::EmuError>| match r {
            Err(kernel_emu::EmuError::Misuse { rule, detail, .. }) => (rule, detail),
            other => panic!("expected a misuse, got {other:?}"),
        };
        // 384 threads start with 168 per thread.
        let (r, d) = rule(emulate("inc_lowers", 384, 1, || {
            if crate::index::warpgroup_idx() == 0 {
                setmaxnreg_inc::<160>();
            }
        }));
        assert_eq!(r, "setmaxnreg.inc below the warpgroup's register count", "{d}");
        assert!(d.contains("setmaxnreg.inc 160 in warpgroup 0, which has 168 registers per thread"), "{d}");
        let (r, d) = rule(emulate("dec_raises", 384, 1, || {
            if crate::index::warpgroup_idx() == 2 {
                setmaxnreg_dec::<176>();
            }
        }));
        assert_eq!(r, "setmaxnreg.dec above the warpgroup's register count", "{d}");
        assert!(d.contains("setmaxnreg.dec 176 in warpgroup 2, which has 168 registers per thread"), "{d}");
    }

    #[test]
    fn accumulator_fragment_covers_the_block_once() {
        // Simulate the 128 threads' (row, col) pairs for N = 64 with the
        // fragment formula and check every element of 64 x 64 is covered once.
        let mut seen = [[0u8; 64]; 64];
        for t in 0..128usize {
            let (w, l) = (t / 32, t % 32);
            for p in 0..16usize {
                let (r, c) = (16 * w + l / 4 + 8 * (p % 2), 8 * (p / 2) + 2 * (l % 4));
                seen[r][c] += 1;
                seen[r][c + 1] += 1;
            }
        }
        assert!(seen.iter().all(|row| row.iter().all(|&x| x == 1)));
    }
}
