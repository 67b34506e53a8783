//! Warp-level matrix loads and stores between shared memory and registers:
//! `ldmatrix` (sm_75) and `stmatrix` (sm_90), one, two or four `8 x 8`
//! matrices of 16-bit elements per instruction, optionally transposed.
//!
//! Matrix `i` of an instruction is one 32-bit register per lane: lane `l`
//! holds row `l / 4`, columns `2 (l % 4)` and `2 (l % 4) + 1` (the lower
//! half is the lower column). That is the layout of an MMA fragment, and of
//! the WGMMA accumulator (`kernel_device::array::layout`): rows `8 j ..`
//! and columns `8 c ..` of a warp's 16 rows are one such matrix after the
//! f32 pairs are packed to f16 or bf16 (`kernel_device::cvt`). Row `r` of
//! matrix `i` is 16 contiguous bytes of shared memory at the address lane
//! `8 i + r` passes (`.x1` reads lanes 0-7's addresses, `.x2` 0-15's, `.x4`
//! all 32): rows may be anywhere, so a 128-byte swizzled tile, whose
//! 16-byte chunks stay whole, takes them as they are. With `.trans`
//! memory row `r` holds column `r` of the fragment.
//!
//! One `stmatrix .x4` stores what 16 lanes x 4 four-byte `st.shared` would
//! (512 bytes). Each op has its PTX body and its emulator body
//! (`kernel_emu::ldst_matrix`) side by side; the emulator checks the
//! convergence of the warp and the alignment of every row address it uses,
//! and each lane's bytes go through the race detector as that lane's
//! shared-memory access.
//!
//! Addresses are 32-bit `.shared::cta` addresses ([`crate::Smem::smem_addr`]
//! plus a byte offset), each a multiple of 16. All 32 lanes of the warp must
//! call the same op (warp-collective, `.sync.aligned`).
/// The matrix counts an instruction takes: 1, 2 or 4 (a compile-time
/// check of every op of this module).
const fn check_count(n: usize) {
    assert!(n == 1 || n == 2 || n == 4, "ldmatrix/stmatrix: N (matrices per instruction) must be 1, 2 or 4 (.x1, .x2, .x4)");
}

/// `regs` padded to 4 (unused registers 0).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn four<const N: usize>(regs: [u32; N]) -> [u32; 4] {
    let mut r = [0u32; 4];
    let mut i = 0;
    while i < N {
        r[i] = regs[i];
        i += 1;
    }
    r
}

/// The first `N` of four registers.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn first<const N: usize>(r: [u32; 4]) -> [u32; N] {
    let mut out = [0u32; N];
    let mut i = 0;
    while i < N {
        out[i] = r[i];
        i += 1;
    }
    out
}

macro_rules! st_op {
    ($(#[$doc:meta])* $name:ident, $op:literal, $trans:literal, $x1:literal, $x2:literal, $x4:literal) => {
        $(#[$doc])*
        #[inline(always)]
        #[track_caller]
        pub fn $name<const N: usize>(addr: u32, regs: [u32; N]) {
            const { check_count(N) };
            device!($op, {
                let r = four(regs);
                // SAFETY: a warp-collective store of `N` 8 x 8 b16 matrices to
                // the shared-memory rows the lanes name; every lane of the warp
                // issues it (the caller's contract, as for any `.sync.aligned`
                // op), with 16-byte aligned row addresses in this CTA's shared
                // memory.
                unsafe {
                    match N {
                        1 => core::arch::asm!($x1, in(reg32) addr, in(reg32) r[0], options(nostack, preserves_flags)),
                        2 => core::arch::asm!($x2, in(reg32) addr, in(reg32) r[0], in(reg32) r[1], options(nostack, preserves_flags)),
                        _ => core::arch::asm!($x4, in(reg32) addr, in(reg32) r[0], in(reg32) r[1], in(reg32) r[2], in(reg32) r[3],
                            options(nostack, preserves_flags)),
                    }
                }
            }, host |op| { kernel_emu::ldst_matrix::stmatrix(op, addr, &regs, $trans) })
        }
    };
}

macro_rules! ld_op {
    ($(#[$doc:meta])* $name:ident, $op:literal, $trans:literal, $x1:literal, $x2:literal, $x4:literal) => {
        $(#[$doc])*
        #[inline(always)]
        #[track_caller]
        pub fn $name<const N: usize>(addr: u32) -> [u32; N] {
            const { check_count(N) };
            device!($op, {
                let mut r = [0u32; 4];
                // SAFETY: a warp-collective load of `N` 8 x 8 b16 matrices from
                // the shared-memory rows the lanes name; every lane issues it,
                // with 16-byte aligned row addresses in this CTA's shared
                // memory (the caller's contract).
                unsafe {
                    match N {
                        1 => core::arch::asm!($x1, out(reg32) r[0], in(reg32) addr, options(nostack, preserves_flags)),
                        2 => core::arch::asm!($x2, out(reg32) r[0], out(reg32) r[1], in(reg32) addr, options(nostack, preserves_flags)),
                        _ => core::arch::asm!($x4, out(reg32) r[0], out(reg32) r[1], out(reg32) r[2], out(reg32) r[3], in(reg32) addr,
                            options(nostack, preserves_flags)),
                    }
                }
                first(r)
            }, host |op| { kernel_emu::ldst_matrix::ldmatrix::<N>(op, addr, $trans) })
        }
    };
}

st_op!(
    /// `stmatrix.sync.aligned.m8n8.xN.shared.b16`: this lane's registers of
    /// `N` (1, 2, 4) 8 x 8 b16 matrices to shared memory, row `r` of matrix
    /// `i` at the address lane `8 i + r` passes (module docs). sm_90.
    /// Warp-collective.
    stmatrix, "stmatrix.sync.aligned.m8n8.shared.b16", false,
    "stmatrix.sync.aligned.m8n8.x1.shared.b16 [{0}], {{{1}}};",
    "stmatrix.sync.aligned.m8n8.x2.shared.b16 [{0}], {{{1}, {2}}};",
    "stmatrix.sync.aligned.m8n8.x4.shared.b16 [{0}], {{{1}, {2}, {3}, {4}}};"
);
st_op!(
    /// [`stmatrix`] transposed (`.trans`): memory row `r` of matrix `i`
    /// (at lane `8 i + r`'s address) receives column `r` of the fragment.
    /// sm_90. Warp-collective.
    stmatrix_trans, "stmatrix.sync.aligned.m8n8.trans.shared.b16", true,
    "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [{0}], {{{1}}};",
    "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [{0}], {{{1}, {2}}};",
    "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [{0}], {{{1}, {2}, {3}, {4}}};"
);
ld_op!(
    /// `ldmatrix.sync.aligned.m8n8.xN.shared.b16`: `N` (1, 2, 4) 8 x 8 b16
    /// matrices from shared memory into this lane's registers, row `r` of
    /// matrix `i` from the address lane `8 i + r` passes (module docs).
    /// sm_75. Warp-collective.
    ldmatrix, "ldmatrix.sync.aligned.m8n8.shared.b16", false,
    "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {{{0}}}, [{1}];",
    "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{0}, {1}}}, [{2}];",
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];"
);
ld_op!(
    /// [`ldmatrix`] transposed (`.trans`): column `r` of the fragment comes
    /// from memory row `r` (lane `8 i + r`'s address). sm_75.
    /// Warp-collective.
    ldmatrix_trans, "ldmatrix.sync.aligned.m8n8.trans.shared.b16", true,
    "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {{{0}}}, [{1}];",
    "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{0}, {1}}}, [{2}];",
    "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{0}, {1}, {2}, {3}}}, [{4}];"
);
