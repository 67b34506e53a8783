//! The `tcgen05.ld` / `tcgen05.st` data-movement shapes and their fragment
//! layouts (PTX ISA, tcgen05 chapter: "Data movement shape" and its
//! "Matrix fragments for shape .." sections): which TMEM cell each register
//! of each thread of the warp moves. The emulator moves data by it
//! (`kernel_emu::tmem::ld`/`st`), the device API documents and offers it
//! (`kernel_device::tmem`), and the emulator's tests check it against
//! CUTLASS's copy traits.

/// A data-movement shape of `tcgen05.ld` / `tcgen05.st`. A warp moves
/// [`lanes`](Shape::lanes) consecutive TMEM lanes from the lane of its
/// address; [`cell`](Shape::cell) is the fragment layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `.32x32b`: 32 lanes x 32 bits per repetition.
    S32x32b,
    /// `.16x64b`: 16 lanes x 64 bits (2 columns) per repetition.
    S16x64b,
    /// `.16x128b`: 16 lanes x 128 bits (4 columns) per repetition.
    S16x128b,
    /// `.16x256b`: 16 lanes x 256 bits (8 columns) per repetition.
    S16x256b,
    /// `.16x32bx2`: two halves of 16 lanes x 32 bits per repetition, the
    /// second `split` columns (the instruction's `immHalfSplitoff`) right
    /// of the first.
    S16x32bx2 { split: u32 },
}

impl Shape {
    /// The shape as PTX spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Shape::S32x32b => "32x32b",
            Shape::S16x64b => "16x64b",
            Shape::S16x128b => "16x128b",
            Shape::S16x256b => "16x256b",
            Shape::S16x32bx2 { .. } => "16x32bx2",
        }
    }

    /// TMEM lanes one warp's access spans: 32 (its whole lane quarter) or
    /// 16 (half of it).
    pub const fn lanes(self) -> u32 {
        match self {
            Shape::S32x32b => 32,
            _ => 16,
        }
    }

    /// Registers per thread of one repetition (`.x1`).
    pub const fn regs_per_rep(self) -> u32 {
        match self {
            Shape::S16x128b => 2,
            Shape::S16x256b => 4,
            _ => 1,
        }
    }

    /// The largest repetition count `.xN` (128 registers per thread).
    pub const fn max_reps(self) -> u32 {
        128 / self.regs_per_rep()
    }

    /// The cell (lane, column) relative to the access's address that
    /// register `r` of warp lane `l` holds: the ISA's matrix fragment
    /// figures, the same maps as CUTLASS's `Copy_Traits` of
    /// `SM100_TMEM_LOAD_{32dp32b,16dp64b,16dp128b,16dp256b,16dp32b}Nx`
    /// (`cute/atom/copy_traits_sm100.hpp`). Repetition `k` is the `.x1`
    /// pattern `k` times its width further right.
    ///
    /// | shape | lane | column |
    /// |---|---|---|
    /// | 32x32b | `l` | `r` |
    /// | 16x64b | `l/4 + 8 (l%2)` | `(l/2)%2 + 2r` |
    /// | 16x128b | `l/4 + 8 (r%2)` | `l%4 + 4 (r/2)` |
    /// | 16x256b | `l/4 + 8 ((r/2)%2)` | `2 (l%4) + r%2 + 8 (r/4)` |
    /// | 16x32bx2 | `l%16` | `split (l/16) + r` |
    ///
    /// (`.16x256b` is the `mma.m16n8` accumulator pattern: lane `l` holds
    /// two adjacent columns of rows `l/4` and `l/4 + 8`.)
    pub const fn cell(self, l: u32, r: u32) -> (u32, u32) {
        match self {
            Shape::S32x32b => (l, r),
            Shape::S16x64b => (l / 4 + 8 * (l % 2), (l / 2) % 2 + 2 * r),
            Shape::S16x128b => (l / 4 + 8 * (r % 2), l % 4 + 4 * (r / 2)),
            Shape::S16x256b => (l / 4 + 8 * ((r / 2) % 2), 2 * (l % 4) + r % 2 + 8 * (r / 4)),
            Shape::S16x32bx2 { split } => (l % 16, split * (l / 16) + r),
        }
    }
}
