//! Warp-level operations (PTX ISA §9.7.13 "Parallel Synchronization and
//! Communication Instructions").
pub use crate::index::lane_id;

/// `elect.sync _|p, 0xffffffff;` (PTX ISA §9.7.13.8, sm_90): true in exactly
/// one lane of the warp, the same lane every time for the same mask.
///
/// Use it to let one lane issue an operation that the hardware wants from a
/// single thread (a TMA copy, an `mbarrier.arrive.expect_tx`, a tcgen05 MMA).
///
/// Collective: all 32 lanes of the warp must call it together (converged);
/// calling it from a diverged warp is undefined behaviour in PTX.
#[inline(always)]
pub fn elect_one() -> bool {
    device!("elect.sync", {
        let r: u32;
        // SAFETY: reads no memory; convergence is the documented contract.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; elect.sync _|p, 0xffffffff; selp.u32 {0}, 1, 0, p; }}",
                out(reg32) r,
                options(nomem, nostack, preserves_flags)
            )
        };
        r != 0
    }, host: { kernel_emu::elect_one() })
}

/// `bar.warp.sync 0xffffffff;` (PTX ISA §9.7.13.3): reconverges the warp and
/// orders memory among its lanes.
///
/// Collective: all 32 lanes of the warp must call it.
#[inline(always)]
pub fn sync_warp() {
    device!("bar.warp.sync", {
        // SAFETY: a warp barrier; the memory clobber orders surrounding accesses.
        unsafe { core::arch::asm!("bar.warp.sync 0xffffffff;", options(nostack, preserves_flags)) }
    }, host: { kernel_emu::warp_sync() })
}
