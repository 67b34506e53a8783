//! The register pool of a CTA and `setmaxnreg` (PTX ISA §9.7.19.6,
//! "setmaxnreg"): one definition of the entry count and of the rule, read
//! by `#[warp_specialize(warpgroups, registers = [..])]` (compile time) and
//! by the emulator's `setmaxnreg` (run time).
//!
//! A kernel starts with the same per-thread register count in every warp,
//! its *entry count*. `setmaxnreg.dec N` gives a warpgroup's registers
//! above `N` back to a pool kept per CTA; `setmaxnreg.inc N` takes them
//! from that pool and **blocks until the pool has enough**. Registers never
//! come from outside the CTA: the pool holds what the CTA was launched with,
//! [`entry_registers`] per thread of every warpgroup. So the counts of all
//! warpgroups (per thread) must sum to at most
//! `warpgroups x entry_registers(threads)`; with more, some
//! `setmaxnreg.inc` waits forever (on an H100, a 384-thread kernel with
//! 240 + 240 + 32 = 512 > 3 x 168 = 504 hung).
use crate::desc_wgmma::WARPGROUP_THREADS;
use crate::limits::{MAX_THREAD_REGISTERS, REGISTER_FILE};

/// The per-thread register count a kernel of `threads` threads per CTA
/// starts with when ptxas knows it from `.maxntid` (which `#[kernel]`
/// emits; `.minnctapersm 1`, from `kernel_device::wgmma::pin_entry_registers`,
/// makes ptxas keep it): the CTA's share of the register file,
/// `REGISTER_FILE / threads`, capped at [`MAX_THREAD_REGISTERS`] and rounded
/// down to a multiple of 8 (the allocation granularity, and what
/// `setmaxnreg` counts in). 168 for 384 threads, 128 for 512, 256 for 256
/// or fewer. `threads = 0` is treated as 1.
pub const fn entry_registers(threads: u32) -> u32 {
    let threads = if threads == 0 { 1 } else { threads };
    let share = REGISTER_FILE / threads;
    let capped = if share < MAX_THREAD_REGISTERS {
        share
    } else {
        MAX_THREAD_REGISTERS
    };
    capped / 8 * 8
}

/// The CTA's register pool in registers per thread slot of a warpgroup:
/// `warpgroups x entry_registers(threads)` for a CTA of `threads` threads
/// (whole warpgroups of `WARPGROUP_THREADS`). The per-thread counts of all warpgroups must sum to
/// at most this (504 for 384 threads).
pub const fn register_pool(threads: u32) -> u32 {
    threads / WARPGROUP_THREADS * entry_registers(threads)
}

/// The pool rule: whether per-thread register counts, one per warpgroup of
/// a CTA of whole warpgroups (`counts.len() x WARPGROUP_THREADS` threads),
/// sum to at most the CTA's [`register_pool`]. `[240, 240, 24]` fits,
/// `[240, 240, 32]` does not (it hung an H100).
pub const fn counts_fit(counts: &[u32]) -> bool {
    let mut sum = 0u32;
    let mut i = 0;
    while i < counts.len() {
        sum += counts[i];
        i += 1;
    }
    sum <= register_pool(counts.len() as u32 * WARPGROUP_THREADS)
}

/// Why a kernel of `self.0` threads per CTA starts with its
/// [`entry_registers`], in words, for the messages that enforce the pool
/// rule: "A 384-thread kernel starts with 168 registers per thread (65536
/// / 384, at most 256, rounded down to a multiple of 8)".
#[derive(Clone, Copy, Debug)]
pub struct EntryCountReason(pub u32);

impl core::fmt::Display for EntryCountReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let t = self.0;
        write!(
            f,
            "A {t}-thread kernel starts with {} registers per thread ({REGISTER_FILE} / {t}, at most {MAX_THREAD_REGISTERS}, rounded down to a multiple of 8)",
            entry_registers(t)
        )
    }
}

/// Whether `setmaxnreg` takes `n`: a multiple of 8 in 24..=256.
pub const fn setmaxnreg_count_ok(n: u32) -> bool {
    n >= 24 && n <= MAX_THREAD_REGISTERS && n.is_multiple_of(8)
}

/// The pool rule in words, for the messages that enforce it (the
/// `#[warp_specialize]` compile error, the emulator's deadlock report).
pub const REGISTER_POOL_RULE: &str = "setmaxnreg only moves registers within the pool the CTA was launched with \
     (each warpgroup's entry count), and setmaxnreg.inc waits until the pool has the registers it asks for: \
     the register counts of all warpgroups must sum to at most the pool";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_counts_of_the_usual_blocks() {
        // 65536 / 384 = 170.67 -> 170 -> 168; 65536 / 512 = 128.
        assert_eq!(entry_registers(384), 168);
        assert_eq!(entry_registers(512), 128);
        assert_eq!(entry_registers(256), 256);
        assert_eq!(entry_registers(128), 256);
        assert_eq!(entry_registers(640), 96); // 102.4 -> 96
        assert_eq!(entry_registers(1024), 64);
        assert_eq!(entry_registers(0), 256);
        assert_eq!(register_pool(384), 504);
        assert_eq!(register_pool(512), 512);
    }

    #[test]
    fn the_hang_on_the_h100_is_over_the_pool_and_the_library_counts_fit() {
        let fits = counts_fit;
        assert!(
            !fits(&[240, 240, 32]),
            "the 128 x 256 block-scaled experiment that hung"
        );
        assert!(fits(&[240, 240, 24]), "attention, 2 consumers");
        assert!(fits(&[232, 232, 40]), "the GEMMs");
        assert!(fits(&[160, 160, 160, 32]), "attention, 3 consumers");
    }

    #[test]
    fn setmaxnreg_counts() {
        assert!(setmaxnreg_count_ok(24) && setmaxnreg_count_ok(256) && setmaxnreg_count_ok(168));
        assert!(!setmaxnreg_count_ok(16) && !setmaxnreg_count_ok(264) && !setmaxnreg_count_ok(42));
    }
}
