//! Warp-level tensor-core MMA: `mma.sync.aligned.m16n8k16.row.col` with
//! f16 or bf16 inputs and an f32 accumulator (PTX ISA §9.7.14.5.8, sm_80+;
//! it runs on Hopper's tensor cores beside `wgmma`).
//!
//! One warp multiplies a `16 x 16` A by a `16 x 8` B into a `16 x 8` f32
//! accumulator, every operand in registers (lane `l`, `g = l / 4`, `t = l %
//! 4`; 16-bit pairs with the lower half the lower index):
//!
//! | operand | registers | register `i` of lane `l` holds |
//! |---|---|---|
//! | A (row) | 4 x b32 | row `g + 8 (i % 2)`, columns `2 t + 8 (i / 2)`, `+ 1` |
//! | B (col) | 2 x b32 | rows `2 t + 8 i`, `+ 1` of column `g` |
//! | C, D | 4 x f32 | row `g + 8 (i / 2)`, column `2 t + i % 2` |
//!
//! D's layout is A's for 8 columns: two adjacent n8 accumulators, rounded
//! to 16-bit pairs, are the A fragment of the next MMA over those 16
//! columns (flash attention's P). Use it where wgmma's 64 rows would be
//! mostly padding (decode: a handful of query rows per KV head) or where an
//! operand is built in registers (FP8 dequantized on the fly: wgmma takes
//! B only from shared memory).
//!
//! Both bodies side by side: the PTX, and the emulator's
//! (`kernel_emu::mma`: the lanes exchange their fragments; products exact,
//! summed in f32 in `k` order; the GPU's summation differs in the low bits).
//! Warp-collective: all 32 lanes of the warp execute it, converged.
use half::{bf16, f16};

/// The 16-bit input types of [`mma_m16n8k16`] with an f32 accumulator.
#[diagnostic::on_unimplemented(
    message = "mma.sync m16n8k16 does not take `{Self}` inputs here",
    note = "implemented: f16 and bf16 with an f32 accumulator"
)]
pub trait MmaInput: Copy + 'static {
    /// `d = a · b + c` on the calling lane's fragments (module docs).
    fn mma_m16n8k16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

macro_rules! mma_input {
    ($t:ty, $elem:ident, $op:literal) => {
        impl MmaInput for $t {
            #[inline(always)]
            #[track_caller]
            fn mma_m16n8k16(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
                device!($op, {
                    let mut d = [0f32; 4];
                    // SAFETY: registers only (no memory); every lane of the
                    // warp executes it converged (the documented contract of
                    // a `.sync.aligned` op).
                    unsafe {
                        core::arch::asm!(
                            concat!($op, " {{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{10}, {11}, {12}, {13}}};"),
                            out(reg32) d[0], out(reg32) d[1], out(reg32) d[2], out(reg32) d[3],
                            in(reg32) a[0], in(reg32) a[1], in(reg32) a[2], in(reg32) a[3],
                            in(reg32) b[0], in(reg32) b[1],
                            in(reg32) c[0], in(reg32) c[1], in(reg32) c[2], in(reg32) c[3],
                            options(pure, nomem, nostack, preserves_flags)
                        )
                    };
                    d
                }, host |op| { kernel_emu::mma::mma_m16n8k16(op, kernel_spec::desc_tcgen05::Elem::$elem, a, b, c) })
            }
        }
    };
}
mma_input!(f16, F16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
mma_input!(bf16, Bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");

/// `mma.sync.aligned.m16n8k16.row.col.f32.E.E.f32`: `c + a · b` for one
/// warp, A `16 x 16`, B `16 x 8`, C/D `16 x 8` f32, each lane holding its
/// fragments (module docs). Warp-collective.
#[inline(always)]
#[track_caller]
pub fn mma_m16n8k16<E: MmaInput>(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    E::mma_m16n8k16(a, b, c)
}
