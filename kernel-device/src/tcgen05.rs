//! Blackwell 5th-generation tensor core: `tcgen05.mma`, its descriptors,
//! `tcgen05.commit`, the tcgen05 fences and tensor-core barriers (PTX ISA
//! §9.7.16, sm_100a). Tensor memory itself is in [`crate::tmem`].
//!
//! `tcgen05.mma` computes `D[M x N] (+)= A[M x K] · B[K x N]` on the tensor
//! core with D in tensor memory, A in SMEM (or TMEM) and B in SMEM, and is
//! issued by **one thread**. It completes asynchronously: the only way to
//! observe completion is an mbarrier that `tcgen05.commit` arrives on once
//! every tcgen05 operation *the committing thread* issued before is done.
//!
//! Who issues what (cta_group::1):
//!
//! | op | issued by |
//! |---|---|
//! | [`tcgen05_mma`] / [`tcgen05_mma_kn`] / [`tcgen05_mma_ts`] | one thread (e.g. `elect_one()` in the MMA warp) |
//! | [`tcgen05_commit_arrive`] | the same thread (a commit covers only its own MMAs) |
//! | [`TcBarrier::wait`] | every thread that reads the result |
//! | alloc / relinquish / dealloc ([`raw`]) | one whole warp (`#[kernel]` does it for `Tmem` scratch) |
//!
//! A barrier that tensor-core work arrives on is a [`TcBarrier`] /
//! [`TcBarriers`] (Pallas's `orders_tensor_core=True`): its `wait` is
//! followed by `tcgen05.fence::after_thread_sync` and its `arrive` preceded by
//! `tcgen05.fence::before_thread_sync`, so tensor-core operations are not
//! moved across it. MMA and commit take only these types: passing a plain
//! [`crate::Barrier`] does not compile.
//!
//! Descriptors ([`InstrDescriptor`], [`SmemDescriptor`]) are checked field by
//! field against the PTX ISA tables and an independent encoder in the tests
//! below.
use crate::layout::{Swizzle, TileLayout};
use crate::mbarrier::{Barrier, BarrierRef, Barriers};
use crate::smem::{Scratch, Smem};
use crate::tmem::{Tmem, TmemElem};

/// Bits of data one MMA instruction consumes along K per row: K = 256 / bits
/// (16 for 16-bit inputs, 32 for 8-bit).
pub const K_BITS: usize = 256;

// ----- element types ---------------------------------------------------------

/// FP8 E4M3 (`.e4m3`), raw bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct E4M3(pub u8);
/// FP8 E5M2 (`.e5m2`), raw bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct E5M2(pub u8);

/// `2^e` for a normal-range exponent (no_std: no `powi`).
fn exp2i(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

impl E4M3 {
    /// The value as f32 (bias 7, no infinities, `S.1111.111` is NaN).
    pub fn to_f32(self) -> f32 {
        let (s, e, m) = ((self.0 >> 7) as u32, ((self.0 >> 3) & 0xF) as i32, (self.0 & 7) as f32);
        let mag = if e == 0xF && m == 7.0 {
            f32::NAN
        } else if e == 0 {
            m / 8.0 * exp2i(-6)
        } else {
            (1.0 + m / 8.0) * exp2i(e - 7)
        };
        if s == 1 {
            -mag
        } else {
            mag
        }
    }
}

impl E5M2 {
    /// The value as f32 (the top byte of an f16).
    pub fn to_f32(self) -> f32 {
        half::f16::from_bits(u16::from(self.0) << 8).to_f32()
    }
}

/// The `.kind` of a tcgen05.mma.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `kind::f16`: f16/bf16 inputs.
    F16,
    /// `kind::f8f6f4`: e4m3/e5m2 inputs (f6/f4 not implemented).
    F8F6F4,
    /// `kind::i8`: signed/unsigned 8-bit integer inputs.
    I8,
}

/// An MMA input element type: its kind and instruction-descriptor code.
#[diagnostic::on_unimplemented(
    message = "tcgen05.mma does not take `{Self}` inputs",
    note = "inputs: f16, bf16 (kind::f16), E4M3, E5M2 (kind::f8f6f4), i8, u8 (kind::i8)"
)]
pub trait MmaInput: Copy + 'static {
    const KIND: Kind;
    /// atype/btype code of the instruction descriptor (bits 7-9 / 10-12).
    const CODE: u32;
    const BITS: usize;
    /// K of one instruction: `256 / BITS`.
    const K: usize = K_BITS / Self::BITS;
    /// Decodes raw bits (low `BITS` bits) to f32, for the emulator.
    fn decode(bits: u32) -> f32;
}
impl MmaInput for half::f16 {
    const KIND: Kind = Kind::F16;
    const CODE: u32 = 0;
    const BITS: usize = 16;
    fn decode(bits: u32) -> f32 {
        half::f16::from_bits(bits as u16).to_f32()
    }
}
impl MmaInput for half::bf16 {
    const KIND: Kind = Kind::F16;
    const CODE: u32 = 1;
    const BITS: usize = 16;
    fn decode(bits: u32) -> f32 {
        half::bf16::from_bits(bits as u16).to_f32()
    }
}
impl MmaInput for E4M3 {
    const KIND: Kind = Kind::F8F6F4;
    const CODE: u32 = 0;
    const BITS: usize = 8;
    fn decode(bits: u32) -> f32 {
        E4M3(bits as u8).to_f32()
    }
}
impl MmaInput for E5M2 {
    const KIND: Kind = Kind::F8F6F4;
    const CODE: u32 = 1;
    const BITS: usize = 8;
    fn decode(bits: u32) -> f32 {
        E5M2(bits as u8).to_f32()
    }
}
impl MmaInput for u8 {
    const KIND: Kind = Kind::I8;
    const CODE: u32 = 0;
    const BITS: usize = 8;
    fn decode(bits: u32) -> f32 {
        (bits as u8) as f32
    }
}
impl MmaInput for i8 {
    const KIND: Kind = Kind::I8;
    const CODE: u32 = 1;
    const BITS: usize = 8;
    fn decode(bits: u32) -> f32 {
        (bits as u8 as i8) as f32
    }
}

/// An accumulator (D) element type and its dtype code (bits 4-5).
pub trait MmaAccum: TmemElem {
    const DTYPE: u32;
}
impl MmaAccum for f32 {
    const DTYPE: u32 = 1;
}
impl MmaAccum for half::f16 {
    const DTYPE: u32 = 0;
}
impl MmaAccum for i32 {
    const DTYPE: u32 = 2;
}

/// `Self` inputs may accumulate into `D` (PTX ISA §9.7.16.4.2, Table 42;
/// bf16 and fp8 need f32, as in Pallas).
#[diagnostic::on_unimplemented(
    message = "tcgen05.mma: `{Self}` inputs cannot accumulate into a `{D}` accumulator",
    label = "accumulator dtype not allowed for this input dtype",
    note = "allowed: f16 -> f32 or f16; bf16 -> f32; E4M3/E5M2 -> f32; i8/u8 -> i32. Declare the accumulator as `Tmem<f32, M, N>` (or i32 for integers)"
)]
pub trait AccumulatesInto<D: MmaAccum>: MmaInput {}
impl AccumulatesInto<f32> for half::f16 {}
impl AccumulatesInto<half::f16> for half::f16 {}
impl AccumulatesInto<f32> for half::bf16 {}
impl AccumulatesInto<f32> for E4M3 {}
impl AccumulatesInto<f32> for E5M2 {}
impl AccumulatesInto<i32> for i8 {}
impl AccumulatesInto<i32> for u8 {}

// ----- descriptors -------------------------------------------------------------

/// Which dimension of an operand is contiguous in SMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Major {
    /// K contiguous ("no transpose").
    K,
    /// M (for A) or N (for B) contiguous ("transpose").
    MN,
}

/// The tcgen05 instruction descriptor for `.kind::f16/f8f6f4/i8` (PTX ISA
/// §9.7.16.4.2, Table 42), a 32-bit register operand:
///
/// ```text
/// bits  0..2   sparsity selector (0: dense)
/// bit   2      sparsity (0: dense)
/// bit   3      saturate (kind::i8 only; 0)
/// bits  4..6   dtype: F16 = 0, F32 = 1, S32 = 2
/// bit   6      reserved
/// bits  7..10  atype: kind::f16 F16 = 0, BF16 = 1; f8f6f4 E4M3 = 0, E5M2 = 1; i8 U8 = 0, S8 = 1
/// bits 10..13  btype (same codes)
/// bit  13      negate A        bit 14  negate B
/// bit  15      transpose A (1: M-major)   bit 16  transpose B (1: N-major)
/// bits 17..23  N >> 3
/// bit  23      reserved
/// bits 24..29  M >> 4
/// bit  29      reserved
/// bits 30..32  max shift (.ws only; 0)
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct InstrDescriptor(pub u32);

impl InstrDescriptor {
    /// A dense descriptor. `m`, `n` must be legal (checked by the MMA
    /// functions at compile time; here only masked into their fields).
    pub const fn new(dtype: u32, atype: u32, btype: u32, a_major: Major, b_major: Major, m: u32, n: u32) -> Self {
        InstrDescriptor(
            ((dtype & 0x3) << 4)
                | ((atype & 0x7) << 7)
                | ((btype & 0x7) << 10)
                | ((matches!(a_major, Major::MN) as u32) << 15)
                | ((matches!(b_major, Major::MN) as u32) << 16)
                | (((n >> 3) & 0x3F) << 17)
                | (((m >> 4) & 0x1F) << 24),
        )
    }
    /// The descriptor of an `E x E -> D` MMA of shape `m x n`.
    pub const fn of<E: AccumulatesInto<D>, D: MmaAccum>(a_major: Major, b_major: Major, m: u32, n: u32) -> Self {
        Self::new(D::DTYPE, E::CODE, E::CODE, a_major, b_major, m, n)
    }
    /// With A negated (bit 13; not for kind::i8).
    pub const fn negate_a(self) -> Self {
        InstrDescriptor(self.0 | 1 << 13)
    }
    /// With B negated (bit 14; not for kind::i8).
    pub const fn negate_b(self) -> Self {
        InstrDescriptor(self.0 | 1 << 14)
    }
    pub const fn dtype(self) -> u32 {
        (self.0 >> 4) & 0x3
    }
    pub const fn atype(self) -> u32 {
        (self.0 >> 7) & 0x7
    }
    pub const fn btype(self) -> u32 {
        (self.0 >> 10) & 0x7
    }
    pub const fn a_major(self) -> Major {
        if self.0 >> 15 & 1 == 1 {
            Major::MN
        } else {
            Major::K
        }
    }
    pub const fn b_major(self) -> Major {
        if self.0 >> 16 & 1 == 1 {
            Major::MN
        } else {
            Major::K
        }
    }
    pub const fn n(self) -> u32 {
        ((self.0 >> 17) & 0x3F) << 3
    }
    pub const fn m(self) -> u32 {
        ((self.0 >> 24) & 0x1F) << 4
    }
}

impl core::fmt::Debug for InstrDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InstrDescriptor")
            .field("raw", &format_args!("{:#010x}", self.0))
            .field("dtype", &self.dtype())
            .field("atype", &self.atype())
            .field("btype", &self.btype())
            .field("negate_a", &(self.0 >> 13 & 1 == 1))
            .field("negate_b", &(self.0 >> 14 & 1 == 1))
            .field("a_major", &self.a_major())
            .field("b_major", &self.b_major())
            .field("m", &self.m())
            .field("n", &self.n())
            .finish()
    }
}

/// The SM100 shared-memory matrix descriptor of tcgen05 (PTX ISA
/// §9.7.16.4.1), a 64-bit register operand:
///
/// ```text
/// bits  0..14  start address >> 4   (matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4)
/// bits 16..30  leading-dimension byte offset >> 4
/// bits 32..46  stride-dimension byte offset >> 4
/// bits 46..49  fixed 0b001 (the SM100 descriptor version)
/// bits 49..52  base offset (0: operands start on a swizzle-pattern boundary)
/// bit  52      LBO mode (0: relative byte offset)
/// bits 53..61  fixed 0
/// bits 61..64  swizzle: 0 none, 1 128B/32B-atom, 2 128B, 4 64B, 6 32B
/// ```
///
/// It differs from the Hopper wgmma descriptor ([`crate::wgmma::SmemDescriptor`])
/// in the version bits 46-48 and the 3-bit swizzle field at 61-63.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SmemDescriptor(pub u64);

impl SmemDescriptor {
    /// Encodes a descriptor; byte offsets are multiples of 16.
    pub const fn new(start_addr: u32, leading_byte_offset: u32, stride_byte_offset: u32, swizzle: Swizzle) -> Self {
        let mode: u64 = match swizzle {
            Swizzle::None => 0,
            Swizzle::B128 => 2,
            Swizzle::B64 => 4,
            Swizzle::B32 => 6,
        };
        SmemDescriptor(
            ((start_addr as u64 & 0x3_FFFF) >> 4)
                | (((leading_byte_offset as u64 & 0x3_FFFF) >> 4) << 16)
                | (((stride_byte_offset as u64 & 0x3_FFFF) >> 4) << 32)
                | (0b001 << 46)
                | (mode << 61),
        )
    }
    pub const fn start_addr(self) -> u32 {
        ((self.0 & 0x3FFF) << 4) as u32
    }
    pub const fn leading_byte_offset(self) -> u32 {
        (((self.0 >> 16) & 0x3FFF) << 4) as u32
    }
    pub const fn stride_byte_offset(self) -> u32 {
        (((self.0 >> 32) & 0x3FFF) << 4) as u32
    }
    pub const fn version(self) -> u32 {
        ((self.0 >> 46) & 0x7) as u32
    }
    pub const fn base_offset(self) -> u32 {
        ((self.0 >> 49) & 0x7) as u32
    }
    /// The swizzle (`None` also for the invalid codes 3, 5, 7 and for 1,
    /// the 128B/32B-atom mode, which this crate does not produce).
    pub const fn swizzle(self) -> Swizzle {
        match self.0 >> 61 {
            2 => Swizzle::B128,
            4 => Swizzle::B64,
            6 => Swizzle::B32,
            _ => Swizzle::None,
        }
    }

    /// K-major operand (`rows x K`, K contiguous) of tile `Tl` at row `row`
    /// and K element `k`: the start moves inside the swizzle span and jumps
    /// between column blocks; SBO = 8 rows of the span; LBO unused for
    /// swizzled K-major (1 by convention, §9.7.16.4.1).
    pub fn k_major<Tl: TileLayout>(tile_addr: u32, row: usize, k: usize) -> Self {
        let kb = k * Tl::ELEM_BYTES;
        let span = Tl::BLOCK_ROW_BYTES;
        let addr = tile_addr as usize + (kb / span) * Tl::BLOCK_BYTES + row * span + kb % span;
        SmemDescriptor::new(addr as u32, 16, (8 * span) as u32, Tl::SWIZZLE)
    }

    /// MN-major operand stored `K x MN` (MN contiguous) in tile `Tl`, the K
    /// rows from `k_row`, MN columns from `mn_col` (a multiple of the column
    /// block): SBO = 8 K-rows of the span, LBO = one column block (the next
    /// span-wide chunk of MN), §9.7.16.4.1.
    pub fn mn_major<Tl: TileLayout>(tile_addr: u32, k_row: usize, mn_col: usize) -> Self {
        let addr = tile_addr as usize + (mn_col / Tl::BLOCK_COLS) * Tl::BLOCK_BYTES + k_row * Tl::BLOCK_ROW_BYTES;
        SmemDescriptor::new(addr as u32, Tl::BLOCK_BYTES as u32, (8 * Tl::BLOCK_ROW_BYTES) as u32, Tl::SWIZZLE)
    }
}

impl core::fmt::Debug for SmemDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("tcgen05::SmemDescriptor")
            .field("raw", &format_args!("{:#018x}", self.0))
            .field("start_addr", &format_args!("{:#x}", self.start_addr()))
            .field("leading_byte_offset", &self.leading_byte_offset())
            .field("stride_byte_offset", &self.stride_byte_offset())
            .field("version", &self.version())
            .field("base_offset", &self.base_offset())
            .field("swizzle", &self.swizzle())
            .finish()
    }
}

// ----- shape rules -----------------------------------------------------------

/// The cta_group::1 shape rule of `tcgen05.mma` (PTX ISA §9.7.16.10.1):
/// M 64 or 128; N a multiple of 8 in 8..=256 for M = 64, of 16 in 16..=256
/// for M = 128.
pub const fn shape_ok(m: usize, n: usize) -> bool {
    match m {
        64 => n % 8 == 0 && n >= 8 && n <= 256,
        128 => n % 16 == 0 && n >= 16 && n <= 256,
        _ => false,
    }
}

// ----- raw instructions --------------------------------------------------------

pub mod raw {
    //! One `unsafe fn` per tcgen05 PTX form (cta_group::1).
    #[cfg(not(target_arch = "nvptx64"))]
    extern crate std;

    /// `tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [dst], ncols;`
    ///
    /// # Safety
    /// All 32 lanes of one warp, converged; `ncols` a power of two in
    /// 32..=512; `dst` a 4-byte `.shared::cta` slot that receives the TMEM
    /// address. Blocks while the columns are not free.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn alloc(dst: u32, ncols: u32) {
        device!("tcgen05.alloc", {
            // SAFETY: caller contract; writes SMEM (memory clobber).
            unsafe {
                core::arch::asm!("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [{0}], {1};", in(reg32) dst, in(reg32) ncols,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::alloc(dst, ncols) })
    }

    /// `tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;`
    ///
    /// # Safety
    /// One warp, converged; no `alloc` by this CTA afterwards.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn relinquish_alloc_permit() {
        device!("tcgen05.relinquish_alloc_permit", {
            // SAFETY: caller contract.
            unsafe { core::arch::asm!("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::tmem::relinquish_alloc_permit() })
    }

    /// `tcgen05.dealloc.cta_group::1.sync.aligned.b32 taddr, ncols;`
    ///
    /// # Safety
    /// One warp, converged; `taddr`/`ncols` an allocation of this CTA that no
    /// tcgen05 operation uses any more.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn dealloc(taddr: u32, ncols: u32) {
        device!("tcgen05.dealloc", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.dealloc.cta_group::1.sync.aligned.b32 {0}, {1};", in(reg32) taddr, in(reg32) ncols,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::dealloc(taddr, ncols) })
    }

    /// `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];`
    /// (a `.shared::cta` address is a valid `.shared::cluster` address of
    /// the own CTA).
    ///
    /// # Safety
    /// `bar` an initialized mbarrier expecting this arrival. One thread.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn commit(bar: u32) {
        device!("tcgen05.commit", {
            // SAFETY: caller contract.
            unsafe {
                core::arch::asm!("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{0}];", in(reg32) bar,
                    options(nostack, preserves_flags))
            }
        }, host: { kernel_emu::tmem::commit(bar) })
    }

    /// `tcgen05.fence::before_thread_sync;`: orders this thread's prior
    /// tcgen05 operations before a following thread sync (barrier arrive,
    /// `bar.sync`).
    #[inline(always)]
    #[track_caller]
    pub fn fence_before_thread_sync() {
        device!("tcgen05.fence::before_thread_sync", {
            // SAFETY: a fence; memory clobber.
            unsafe { core::arch::asm!("tcgen05.fence::before_thread_sync;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::yield_point("tcgen05.fence::before_thread_sync") })
    }

    /// `tcgen05.fence::after_thread_sync;`: orders this thread's following
    /// tcgen05 operations after a preceding thread sync (barrier wait).
    #[inline(always)]
    #[track_caller]
    pub fn fence_after_thread_sync() {
        device!("tcgen05.fence::after_thread_sync", {
            // SAFETY: a fence; memory clobber.
            unsafe { core::arch::asm!("tcgen05.fence::after_thread_sync;", options(nostack, preserves_flags)) }
        }, host: { kernel_emu::yield_point("tcgen05.fence::after_thread_sync") })
    }

    /// `tcgen05.mma.cta_group::1.kind::{f16,f8f6f4,i8} [d], a_desc, b_desc, idesc, p;`
    /// with A and B in SMEM; `p = accumulate` (enable-input-d).
    ///
    /// # Safety
    /// One thread; `d` inside this CTA's TMEM allocation; descriptors
    /// describe SMEM operands that stay untouched until the MMA's commit is
    /// observed; `idesc` matches them.
    #[inline(always)]
    pub unsafe fn mma_ss(kind: super::Kind, d: u32, a: u64, b: u64, idesc: u32, accumulate: bool) {
        #[cfg(target_arch = "nvptx64")]
        {
            let p = accumulate as u32;
            macro_rules! issue {
                ($k:literal) => {
                    // SAFETY: caller contract; reads SMEM, writes TMEM (memory clobber).
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; setp.ne.b32 p, {p}, 0; tcgen05.mma.cta_group::1.kind::", $k, " [{d}], {a}, {b}, {i}, p; }}"),
                            d = in(reg32) d, a = in(reg64) a, b = in(reg64) b, i = in(reg32) idesc, p = in(reg32) p,
                            options(nostack)
                        )
                    }
                };
            }
            match kind {
                super::Kind::F16 => issue!("f16"),
                super::Kind::F8F6F4 => issue!("f8f6f4"),
                super::Kind::I8 => issue!("i8"),
            }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let _ = (kind, d, a, b, idesc, accumulate);
            crate::host::no_emulator("tcgen05.mma (raw: use tcgen05_mma, whose emulator body decodes the operands)")
        }
    }

    /// `tcgen05.mma.cta_group::1.kind::{f16,f8f6f4,i8} [d], [a_tmem], b_desc, idesc, p;`
    /// with A in TMEM (packed).
    ///
    /// # Safety
    /// As [`mma_ss`]; `a_tmem` a packed A operand in this CTA's TMEM.
    #[inline(always)]
    pub unsafe fn mma_ts(kind: super::Kind, d: u32, a_tmem: u32, b: u64, idesc: u32, accumulate: bool) {
        #[cfg(target_arch = "nvptx64")]
        {
            let p = accumulate as u32;
            macro_rules! issue {
                ($k:literal) => {
                    // SAFETY: caller contract.
                    unsafe {
                        core::arch::asm!(
                            concat!("{{ .reg .pred p; setp.ne.b32 p, {p}, 0; tcgen05.mma.cta_group::1.kind::", $k, " [{d}], [{a}], {b}, {i}, p; }}"),
                            d = in(reg32) d, a = in(reg32) a_tmem, b = in(reg64) b, i = in(reg32) idesc, p = in(reg32) p,
                            options(nostack)
                        )
                    }
                };
            }
            match kind {
                super::Kind::F16 => issue!("f16"),
                super::Kind::F8F6F4 => issue!("f8f6f4"),
                super::Kind::I8 => issue!("i8"),
            }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let _ = (kind, d, a_tmem, b, idesc, accumulate);
            crate::host::no_emulator("tcgen05.mma (raw: use tcgen05_mma_ts)")
        }
    }
}

// ----- tensor-core barriers ----------------------------------------------------

/// A view of one tensor-core mbarrier ([`TcBarrier`] / [`TcBarriers::at`]).
#[derive(Clone, Copy, Debug)]
pub struct TcBarrierRef<'a>(BarrierRef<'a>);

impl<'a> TcBarrierRef<'a> {
    /// The mbarrier's `.shared::cta` address.
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.0.smem_addr()
    }
    /// The plain barrier view (for a TMA copy that completes on it too).
    #[inline(always)]
    pub fn plain(&self) -> BarrierRef<'a> {
        self.0
    }
    /// Waits for this thread's next phase, then
    /// `tcgen05.fence::after_thread_sync` (tensor-core work that follows is
    /// not moved before the wait).
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.0.wait();
        raw::fence_after_thread_sync();
    }
    /// `tcgen05.fence::before_thread_sync`, then one arrival.
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        raw::fence_before_thread_sync();
        self.0.arrive();
    }
}

/// One mbarrier that tensor-core work arrives on (Pallas's
/// `Barrier(orders_tensor_core=True)`). Kernel scratch:
/// `#[scratch] mma_done: TcBarrier` (1 arrival by default: one commit).
pub struct TcBarrier(Barrier);

impl TcBarrier {
    #[inline(always)]
    pub fn as_ref(&self) -> TcBarrierRef<'_> {
        TcBarrierRef(self.0.as_ref())
    }
    #[inline(always)]
    pub fn smem_addr(&self) -> u32 {
        self.0.smem_addr()
    }
    /// See [`TcBarrierRef::wait`].
    #[inline(always)]
    #[track_caller]
    pub fn wait(&self) {
        self.as_ref().wait()
    }
    /// See [`TcBarrierRef::arrive`].
    #[inline(always)]
    #[track_caller]
    pub fn arrive(&self) {
        self.as_ref().arrive()
    }
}

/// `N` tensor-core mbarriers (one per pipeline slot).
pub struct TcBarriers<const N: usize>(Barriers<N>);

impl<const N: usize> TcBarriers<N> {
    /// Barrier `i` (traps if `i >= N`).
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, i: usize) -> TcBarrierRef<'_> {
        TcBarrierRef(self.0.at(i))
    }
}

// SAFETY: one 8-byte mbarrier, as `Barrier`.
unsafe impl Scratch for TcBarrier {
    const BYTES: usize = crate::mbarrier::MBARRIER_BYTES;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: forwarded contract.
        TcBarrier(unsafe { <Barrier as Scratch>::from_smem(ptr) })
    }
    unsafe fn init(&self, arrivals: u32) {
        // SAFETY: forwarded contract.
        unsafe { <Barrier as Scratch>::init(&self.0, arrivals) }
    }
}

// SAFETY: N consecutive mbarriers, as `Barriers<N>`.
unsafe impl<const N: usize> Scratch for TcBarriers<N> {
    const BYTES: usize = crate::mbarrier::MBARRIER_BYTES * N;
    const ALIGN: usize = 8;
    const TAKES_ARRIVALS: bool = true;
    unsafe fn from_smem(ptr: *mut u8) -> Self {
        // SAFETY: forwarded contract.
        TcBarriers(unsafe { <Barriers<N> as Scratch>::from_smem(ptr) })
    }
    unsafe fn init(&self, arrivals: u32) {
        // SAFETY: forwarded contract.
        unsafe { <Barriers<N> as Scratch>::init(&self.0, arrivals) }
    }
}

// ----- Pallas-level operations -------------------------------------------------

/// `tcgen05_commit_arrive(bar)`: one arrival on `bar` once every tcgen05
/// operation this thread issued has completed. Issued by the thread that
/// issued the MMAs (one thread).
#[inline(always)]
#[track_caller]
pub fn tcgen05_commit_arrive(bar: TcBarrierRef<'_>) {
    // SAFETY: `bar` is an initialized scratch tensor-core barrier.
    unsafe { raw::commit(bar.smem_addr()) }
}

/// The compile-time rules every MMA form checks.
const fn check_mma<E: MmaInput>(m: usize, n: usize, k: usize, a_swz: Swizzle, b_swz: Swizzle) {
    assert!(shape_ok(m, n), "tcgen05.mma (cta_group::1): M must be 64 or 128, N a multiple of 8 in 8..=256 for M = 64 and a multiple of 16 in 16..=256 for M = 128 (the accumulator Tmem<D, M, N>)");
    assert!(k % E::K == 0, "tcgen05.mma: the tiles' K must be a multiple of the instruction's K (16 for kind::f16, 32 for kind::f8f6f4 and kind::i8)");
    assert!(!matches!(a_swz, Swizzle::None) && !matches!(b_swz, Swizzle::None), "tcgen05.mma: SMEM operand tiles must be swizzled (Swizzled<32/64/128>)");
}

/// `acc (+)= A · Bᵀ` over the whole K of the tiles: `A` is `M x K`
/// K-major, `B` is `N x K` K-major (`D = A · Bᵀ`), one `tcgen05.mma` per
/// instruction K (16 for 16-bit inputs); `accumulate = false` overwrites the
/// accumulator with the first one. Issued by **one thread**; completion is
/// observed through [`tcgen05_commit_arrive`].
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma<E, D, A, B, const M: usize, const N: usize>(acc: &Tmem<D, M, N>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<E>(M, N, A::COLS, A::SWIZZLE, B::SWIZZLE);
        assert!(A::ROWS == M, "tcgen05.mma: the A tile must have M rows (the accumulator's rows)");
        assert!(B::ROWS == N, "tcgen05.mma: the B tile (N x K, K-major) must have N rows (the accumulator's columns)");
        assert!(A::COLS == B::COLS, "tcgen05.mma: A and B tiles must have the same K (columns)");
    };
    let idesc = const { InstrDescriptor::of::<E, D>(Major::K, Major::K, M as u32, N as u32) };
    let (aa, ba) = (a.smem_addr(), b.smem_addr());
    let mut k = 0;
    while k < A::COLS {
        let da = SmemDescriptor::k_major::<A>(aa, 0, k);
        let db = SmemDescriptor::k_major::<B>(ba, 0, k);
        issue_ss::<E, D>(acc.addr(), da, db, idesc, accumulate || k > 0, M, N);
        k += E::K;
    }
}

/// As [`tcgen05_mma`] with B stored `K x N` (N contiguous, MN-major: a
/// row-major `K x N` matrix, the tutorial's B): `acc (+)= A · B`.
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_kn<E, D, A, B, const M: usize, const N: usize>(acc: &Tmem<D, M, N>, a: Smem<A>, b: Smem<B>, accumulate: bool)
where
    E: AccumulatesInto<D>,
    D: MmaAccum,
    A: TileLayout<Elem = E>,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<E>(M, N, A::COLS, A::SWIZZLE, B::SWIZZLE);
        assert!(A::ROWS == M, "tcgen05.mma: the A tile must have M rows (the accumulator's rows)");
        assert!(B::COLS == N, "tcgen05.mma (B K x N): the B tile must have N columns (the accumulator's columns)");
        assert!(A::COLS == B::ROWS, "tcgen05.mma (B K x N): A's columns and B's rows must both be K");
    };
    let idesc = const { InstrDescriptor::of::<E, D>(Major::K, Major::MN, M as u32, N as u32) };
    let (aa, ba) = (a.smem_addr(), b.smem_addr());
    let mut k = 0;
    while k < A::COLS {
        let da = SmemDescriptor::k_major::<A>(aa, 0, k);
        let db = SmemDescriptor::mn_major::<B>(ba, k, 0);
        issue_ss::<E, D>(acc.addr(), da, db, idesc, accumulate || k > 0, M, N);
        k += E::K;
    }
}

/// As [`tcgen05_mma`] with A from tensor memory: `a` is a **packed**
/// `M x K` TMEM operand (two 16-bit elements per 32-bit column), `B` an
/// `N x K` K-major SMEM tile.
#[inline(always)]
#[track_caller]
pub fn tcgen05_mma_ts<E, D, B, const M: usize, const N: usize, const K: usize>(
    acc: &Tmem<D, M, N>,
    a: &Tmem<E, M, K, true>,
    b: Smem<B>,
    accumulate: bool,
) where
    E: AccumulatesInto<D> + TmemElem,
    D: MmaAccum,
    B: TileLayout<Elem = E>,
{
    const {
        check_mma::<E>(M, N, K, Swizzle::B128, B::SWIZZLE);
        assert!(<E as MmaInput>::BITS == 16, "tcgen05.mma with A in TMEM: implemented for 16-bit inputs (kind::f16)");
        assert!(B::ROWS == N && B::COLS == K, "tcgen05.mma (A in TMEM): the B tile must be N x K (K-major)");
    };
    let idesc = const { InstrDescriptor::of::<E, D>(Major::K, Major::K, M as u32, N as u32) };
    let ba = b.smem_addr();
    let mut k = 0;
    while k < K {
        let db = SmemDescriptor::k_major::<B>(ba, 0, k);
        // Packed: K elements in K / 2 columns.
        let a_addr = a.addr() + (k / 2) as u32;
        device!("tcgen05.mma (A in TMEM)", {
            // SAFETY: one thread (documented); operands from typed handles.
            unsafe { raw::mma_ts(E::KIND, acc.addr(), a_addr, db.0, idesc.0, accumulate || k > 0) }
        }, host: {
            emu::mma::<E, D>(acc.addr(), emu::A::Tmem(a_addr), (db, Major::K), M, N, "tcgen05.mma (A in TMEM)", accumulate || k > 0)
        });
        k += E::K;
    }
}

#[inline(always)]
#[track_caller]
fn issue_ss<E: AccumulatesInto<D>, D: MmaAccum>(d: u32, da: SmemDescriptor, db: SmemDescriptor, idesc: InstrDescriptor, accumulate: bool, m: usize, n: usize) {
    device!("tcgen05.mma", {
        let _ = (m, n);
        // SAFETY: one thread (documented); descriptors from typed tiles.
        unsafe { raw::mma_ss(E::KIND, d, da.0, db.0, idesc.0, accumulate) }
    }, host: {
        emu::mma::<E, D>(d, emu::A::Smem(da, idesc.a_major()), db_with_major(db, idesc), m, n, "tcgen05.mma", accumulate)
    })
}

#[cfg(not(target_arch = "nvptx64"))]
fn db_with_major(db: SmemDescriptor, idesc: InstrDescriptor) -> (SmemDescriptor, Major) {
    (db, idesc.b_major())
}

/// The CPU emulator's tcgen05.mma (host builds only): decodes the SMEM
/// operands through the descriptors (the canonical swizzled layouts, as the
/// wgmma emulation: K-major element `(r, k)` at
/// `start + (r / 8) SBO + (r % 8) span + k e`; MN-major element `(k, n)` at
/// `start + (n / (span / e)) LBO + (k / 8) SBO + (k % 8) span + (n % (span / e)) e`,
/// then the swizzle), checks them against the async proxy's view, and hands
/// the values to `kernel_emu::tmem::mma`, which runs the MMA asynchronously.
#[cfg(not(target_arch = "nvptx64"))]
mod emu {
    extern crate std;
    use super::{AccumulatesInto, Major, MmaAccum, MmaInput, SmemDescriptor};
    use kernel_emu::tmem::{AOperand, DType, MmaIssue};
    use std::vec::Vec;

    pub(super) enum A {
        Smem(SmemDescriptor, Major),
        Tmem(u32),
    }

    fn elem<E: MmaInput>(smem: *const u8, size: usize, off: usize, seen: &mut Vec<u32>) -> f32 {
        let bytes = E::BITS / 8;
        if off + bytes > size {
            kernel_emu::smem_ptr_range(off as u32, bytes);
        }
        seen.push(off as u32 & !15);
        // SAFETY: `off + bytes <= size`: inside this CTA's SMEM buffer.
        let bits = unsafe {
            if bytes == 2 {
                u32::from((smem.add(off) as *const u16).read_unaligned())
            } else {
                u32::from(smem.add(off).read())
            }
        };
        E::decode(bits)
    }

    /// Element (mn, k) of an operand with `mn` rows/columns along M or N.
    pub(super) fn at<E: MmaInput>(smem: *const u8, size: usize, d: SmemDescriptor, major: Major, mn: usize, k: usize, seen: &mut Vec<u32>) -> f32 {
        let e = E::BITS / 8;
        let span = d.swizzle().bytes();
        assert!(span != 0, "tcgen05.mma: unswizzled operands are not emulated (the crate only makes swizzled ones)");
        let off = match major {
            Major::K => d.start_addr() as usize + (mn / 8) * d.stride_byte_offset() as usize + (mn % 8) * span + k * e,
            Major::MN => {
                let per = span / e;
                d.start_addr() as usize
                    + (mn / per) * d.leading_byte_offset() as usize
                    + (k / 8) * d.stride_byte_offset() as usize
                    + (k % 8) * span
                    + (mn % per) * e
            }
        };
        elem::<E>(smem, size, d.swizzle().apply(off), seen)
    }

    pub(super) fn ranges(mut seen: Vec<u32>) -> Vec<kernel_emu::Range> {
        seen.sort_unstable();
        seen.dedup();
        let mut out: Vec<kernel_emu::Range> = Vec::new();
        for c in seen {
            match out.last_mut() {
                Some(last) if last.1 == c => last.1 = c + 16,
                _ => out.push((c, c + 16)),
            }
        }
        out
    }

    #[track_caller]
    pub(super) fn mma<E: AccumulatesInto<D>, D: MmaAccum>(d: u32, a: A, b: (SmemDescriptor, Major), m: usize, n: usize, op: &'static str, accumulate: bool) {
        let k = E::K;
        let smem = kernel_emu::smem_base() as *const u8;
        let size = kernel_emu::smem_size();
        let mut seen = Vec::new();
        let a = match a {
            A::Smem(da, major) => {
                let mut v = Vec::with_capacity(m * k);
                for r in 0..m {
                    for kk in 0..k {
                        v.push(at::<E>(smem, size, da, major, r, kk, &mut seen));
                    }
                }
                AOperand::Smem(v)
            }
            A::Tmem(taddr) => AOperand::Tmem { taddr, bf16: E::CODE == 1 && E::BITS == 16 },
        };
        let mut bv = Vec::with_capacity(n * k);
        for j in 0..n {
            for kk in 0..k {
                bv.push(at::<E>(smem, size, b.0, b.1, j, kk, &mut seen));
            }
        }
        let reads = ranges(seen);
        for &(lo, hi) in &reads {
            kernel_emu::async_proxy_read(lo, (hi - lo) as usize, op);
        }
        let dtype = match D::DTYPE {
            0 => DType::F16,
            2 => DType::S32,
            _ => DType::F32,
        };
        kernel_emu::tmem::mma(MmaIssue { d, a, b: bv, m: m as u32, n: n as u32, k: k as u32, accumulate, dtype, smem_reads: &reads, op });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Swizzled, Tile};
    use half::{bf16, f16};

    /// Values worked out by hand from PTX ISA §9.7.16.4.2, Table 42.
    #[test]
    fn instr_descriptor_fields_from_the_isa_table() {
        // kind::f16, f16 x f16 -> f32, both K-major, M = 128, N = 256:
        // dtype F32 = 1 << 4 = 0x10; atype = btype = 0; N >> 3 = 32 -> 32 << 17 = 0x40_0000;
        // M >> 4 = 8 -> 8 << 24 = 0x800_0000.
        let d = InstrDescriptor::of::<f16, f32>(Major::K, Major::K, 128, 256);
        assert_eq!(d.0, 0x10 | 0x40_0000 | 0x800_0000);
        assert_eq!((d.m(), d.n(), d.dtype(), d.atype(), d.btype()), (128, 256, 1, 0, 0));
        // bf16 -> f32, B N-major (transpose B, bit 16), M = 64, N = 8:
        // 0x10 | 1 << 7 | 1 << 10 | 1 << 16 | 1 << 17 | 4 << 24.
        let d = InstrDescriptor::of::<bf16, f32>(Major::K, Major::MN, 64, 8);
        assert_eq!(d.0, 0x10 | 0x80 | 0x400 | 0x1_0000 | 0x2_0000 | 0x400_0000);
        assert_eq!(d.b_major(), Major::MN);
        assert_eq!(d.a_major(), Major::K);
        // f16 -> f16 accumulator: dtype 0.
        assert_eq!(InstrDescriptor::of::<f16, f16>(Major::K, Major::K, 128, 128).dtype(), 0);
        // kind::f8f6f4 e5m2 -> f32: atype = btype = 1; kind::i8 s8 -> s32: dtype 2, types 1.
        let d = InstrDescriptor::of::<E5M2, f32>(Major::K, Major::K, 128, 128);
        assert_eq!((d.atype(), d.btype(), d.dtype()), (1, 1, 1));
        let d = InstrDescriptor::of::<i8, i32>(Major::K, Major::K, 128, 16);
        assert_eq!((d.atype(), d.btype(), d.dtype(), d.n()), (1, 1, 2, 16));
        assert_eq!(InstrDescriptor::of::<u8, i32>(Major::K, Major::K, 128, 16).atype(), 0);
        // Negation bits 13 and 14.
        assert_eq!(InstrDescriptor::new(1, 0, 0, Major::K, Major::K, 0, 0).negate_a().negate_b().0, 0x10 | 0x2000 | 0x4000);
        // Transpose A: bit 15.
        assert_eq!(InstrDescriptor::new(0, 0, 0, Major::MN, Major::K, 0, 0).0, 0x8000);
    }

    /// Outputs of an independent encoder: `tests/encodings/tcgen05_desc.py`,
    /// a transcription of the ISA tables (Table 42 and §9.7.16.4.1) written
    /// separately from this module, run with python3 3.11 on 2026-11-22;
    /// its printed lines are pasted here unchanged.
    #[test]
    fn descriptors_match_the_independent_python_encoder() {
        let idesc: [(InstrDescriptor, u32); 6] = [
            (InstrDescriptor::of::<f16, f32>(Major::K, Major::K, 128, 128), 0x08200010),
            (InstrDescriptor::of::<f16, f32>(Major::K, Major::MN, 128, 256), 0x08410010),
            (InstrDescriptor::of::<bf16, f32>(Major::K, Major::K, 64, 64), 0x04100490),
            (InstrDescriptor::of::<f16, f16>(Major::K, Major::K, 128, 16), 0x08040000),
            (InstrDescriptor::of::<E4M3, f32>(Major::K, Major::K, 128, 256), 0x08400010),
            (InstrDescriptor::of::<i8, i32>(Major::K, Major::K, 128, 128), 0x082004a0),
        ];
        for (d, want) in idesc {
            assert_eq!(d.0, want, "{d:?}");
        }
        let sdesc: [(SmemDescriptor, u64); 4] = [
            (SmemDescriptor::new(0x400, 16, 1024, Swizzle::B128), 0x4000404000010040),
            (SmemDescriptor::new(0x1_2340, 8192, 1024, Swizzle::B128), 0x4000404002001234),
            (SmemDescriptor::new(0x800, 16, 512, Swizzle::B64), 0x8000402000010080),
            (SmemDescriptor::new(0x100, 16, 256, Swizzle::B32), 0xc000401000010010),
        ];
        for (d, want) in sdesc {
            assert_eq!(d.0, want, "{d:?}");
        }
    }

    /// Values worked out by hand from §9.7.16.4.1.
    #[test]
    fn smem_descriptor_fields_from_the_isa_table() {
        let d = SmemDescriptor::new(0x1_2340, 16, 1024, Swizzle::B128);
        // start 0x12340 >> 4 = 0x1234; LBO 16 >> 4 = 1 at bit 16; SBO 1024 >> 4 = 64 at bit 32;
        // version 0b001 at bit 46; swizzle 128B = 2 at bit 61.
        assert_eq!(d.0, 0x1234 | 1 << 16 | 64 << 32 | 1 << 46 | 2 << 61);
        assert_eq!((d.start_addr(), d.leading_byte_offset(), d.stride_byte_offset()), (0x1_2340, 16, 1024));
        assert_eq!((d.version(), d.base_offset(), d.swizzle()), (1, 0, Swizzle::B128));
        assert_eq!(SmemDescriptor::new(0, 16, 512, Swizzle::B64).0 >> 61, 4);
        assert_eq!(SmemDescriptor::new(0, 16, 256, Swizzle::B32).0 >> 61, 6);
        assert_eq!(SmemDescriptor::new(0, 16, 128, Swizzle::None).0 >> 61, 0);
        // The 18-bit address window: bits above 0x3FFFF are dropped.
        assert_eq!(SmemDescriptor::new(0x4_0010, 0, 0, Swizzle::None).start_addr(), 0x10);
    }

    #[test]
    fn operand_descriptors_walk_the_tiles() {
        type A = Tile<f16, 128, 64, Swizzled<128>>;
        let d = SmemDescriptor::k_major::<A>(0x400, 0, 16);
        assert_eq!((d.start_addr(), d.stride_byte_offset(), d.swizzle()), (0x400 + 32, 1024, Swizzle::B128));
        // B K x N = 64 x 128 f16: two column blocks of 64 rows x 128 B.
        type B = Tile<f16, 64, 128, Swizzled<128>>;
        let d = SmemDescriptor::mn_major::<B>(0x800, 16, 0);
        assert_eq!((d.start_addr(), d.leading_byte_offset(), d.stride_byte_offset()), (0x800 + 16 * 128, 8192, 1024));
    }

    #[test]
    fn shape_rule() {
        assert!(shape_ok(128, 16) && shape_ok(128, 256) && shape_ok(64, 8) && shape_ok(64, 248));
        assert!(!shape_ok(128, 8) && !shape_ok(128, 272) && !shape_ok(64, 12) && !shape_ok(256, 128) && !shape_ok(32, 32));
    }

    #[test]
    fn fp8_decoding() {
        assert_eq!(E4M3(0x38).to_f32(), 1.0); // exponent 7 = bias
        assert_eq!(E4M3(0xC0).to_f32(), -2.0);
        assert_eq!(E4M3(0x7E).to_f32(), 448.0); // largest finite
        assert!(E4M3(0x7F).to_f32().is_nan());
        assert_eq!(E4M3(0x01).to_f32(), 2f32.powi(-9)); // smallest subnormal
        assert_eq!(E5M2(0x3C).to_f32(), 1.0);
        assert_eq!(E5M2(0xC0).to_f32(), -2.0);
    }
}

// ----- collective (cta_group::2) MMA on the emulator ---------------------------

/// The emulator's `tcgen05.mma.cta_group::2` (M = 256, B MN-major, f16
/// inputs): A's rows 0..128 and B's columns 0..N/2 from the leader's (the
/// caller's) SMEM, A's rows 128..256 and B's columns N/2..N from the peer's
/// at the same offsets; the accumulator's rows 0..128 go to the leader's
/// TMEM and 128..256 to the peer's (see `kernel_emu::tmem::mma_pair`).
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
pub(crate) fn emu_mma_pair<E: AccumulatesInto<D>, D: MmaAccum>(d: u32, da: SmemDescriptor, db: SmemDescriptor, n: usize, accumulate: bool) {
    extern crate std;
    use std::vec::Vec;
    let k = E::K;
    let rank = kernel_emu::cluster_ctarank();
    let peer = rank ^ 1;
    let own = kernel_emu::smem_base() as *const u8;
    let other = kernel_emu::map_rank_ptr(kernel_emu::smem_base(), peer) as *const u8;
    let size = kernel_emu::smem_size();
    let (mut seen_own, mut seen_peer) = (Vec::new(), Vec::new());
    let mut a_own = Vec::with_capacity(128 * k);
    let mut a_peer = Vec::with_capacity(128 * k);
    for r in 0..128 {
        for kk in 0..k {
            a_own.push(emu::at::<E>(own, size, da, Major::K, r, kk, &mut seen_own));
            a_peer.push(emu::at::<E>(other, size, da, Major::K, r, kk, &mut seen_peer));
        }
    }
    let mut bv = Vec::with_capacity(n * k);
    for j in 0..n {
        for kk in 0..k {
            let (base, seen) = if j < n / 2 { (own, &mut seen_own) } else { (other, &mut seen_peer) };
            bv.push(emu::at::<E>(base, size, db, Major::MN, j % (n / 2), kk, seen));
        }
    }
    let op = "tcgen05.mma.cta_group::2";
    let (r_own, r_peer) = (emu::ranges(seen_own), emu::ranges(seen_peer));
    // Ordinary stores into either half need a proxy fence before the MMA;
    // the race detector sees the reads when each half executes (a TMA load
    // that refills a slot must be ordered after it, in the peer CTA too).
    for &(lo, hi) in &r_own {
        kernel_emu::async_proxy_read(lo, (hi - lo) as usize, op);
    }
    for &(lo, hi) in &r_peer {
        kernel_emu::async_proxy_read(kernel_emu::map_rank_addr(lo, peer), (hi - lo) as usize, op);
    }
    let dtype = match D::DTYPE {
        0 => kernel_emu::tmem::DType::F16,
        2 => kernel_emu::tmem::DType::S32,
        _ => kernel_emu::tmem::DType::F32,
    };
    kernel_emu::tmem::mma_pair(
        kernel_emu::tmem::MmaIssue { d, a: kernel_emu::tmem::AOperand::Smem(a_own), b: bv, m: 128, n: n as u32, k: k as u32, accumulate, dtype, smem_reads: &r_own, op },
        peer,
        a_peer,
        &r_peer,
    );
}
