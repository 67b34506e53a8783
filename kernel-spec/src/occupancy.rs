//! How many CTAs of a kernel fit on one SM at once: the rules of CUDA's
//! occupancy calculator (`cuda_occupancy.h`) for the H100/H200 (`sm_90a`)
//! and the B200 (`sm_100a`), which share these limits. One definition,
//! read by `kernel_host` (the emulator's answer to an occupancy query, and
//! the explanation of the driver's on a GPU) and by `#[kernel]`
//! (`min_blocks_per_sm` and `max_registers` checked against each other).
//!
//! A CTA is resident on an SM until it exits; the SM holds as many as each
//! of four resources allows, and the fewest wins:
//!
//! | limit | rule |
//! |---|---|
//! | threads | `MAX_SM_THREADS / (warps per CTA x 32)` (threads counted in whole warps) |
//! | blocks | [`MAX_SM_BLOCKS`] |
//! | registers | a warp gets `registers per thread x 32` rounded up to [`REGISTER_ALLOC_UNIT`], all in one of the [`SM_SUBPARTITIONS`] partitions of `REGISTER_FILE / 4`: `4 x (16384 / per-warp) / warps per CTA` |
//! | shared memory | a CTA gets its static and dynamic SMEM plus [`SMEM_RESERVED_PER_BLOCK`], rounded up to [`SMEM_ALLOC_GRANULARITY`]: `SM_SMEM_BYTES / per-CTA` |
//!
//! The persistent matmul (384 threads at 168 registers, ~200 KB of SMEM)
//! fits 1 CTA per SM (by registers and by shared memory); a 128-thread
//! kernel at 32 registers and no SMEM fits 16 (by threads and by
//! registers).
//!
//! Not modelled: clusters (every CTA of a cluster must fit on one GPC at
//! once: `cuOccupancyMaxActiveClusters` answers that on a GPU) and a
//! shared-memory carveout smaller than the largest (the driver picks the
//! carveout a launch needs).
use crate::limits::{
    MAX_BLOCK_THREADS, MAX_MAXNREG, MAX_SMEM_BYTES, MAX_SM_BLOCKS, MAX_SM_THREADS, REGISTER_ALLOC_UNIT, REGISTER_FILE,
    SMEM_ALLOC_GRANULARITY, SMEM_RESERVED_PER_BLOCK, SM_SMEM_BYTES, SM_SUBPARTITIONS, WARP_SIZE,
};
use core::fmt;

/// What one CTA of a kernel holds while it is resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resources {
    /// Threads per CTA (the kernel's block size).
    pub threads: u32,
    /// Registers per thread (ptxas's "Used N registers").
    pub registers: u32,
    /// Shared memory per CTA in bytes: static (ptxas's "N bytes smem") plus
    /// dynamic (the launch's, `KernelSpec::SMEM_BYTES` for a `#[kernel]`).
    pub smem_bytes: u32,
}

/// The resource that bounds the CTAs per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The register file ([`REGISTER_FILE`] per SM).
    Registers,
    /// Shared memory ([`SM_SMEM_BYTES`] per SM).
    SharedMemory,
    /// Resident threads ([`MAX_SM_THREADS`] per SM).
    Threads,
    /// Resident CTAs ([`MAX_SM_BLOCKS`] per SM).
    Blocks,
}

impl Limit {
    /// The limit in words, e.g. `"registers"`.
    pub const fn name(self) -> &'static str {
        match self {
            Limit::Registers => "registers",
            Limit::SharedMemory => "shared memory",
            Limit::Threads => "threads",
            Limit::Blocks => "blocks",
        }
    }
}

/// How many CTAs of a kernel fit on one SM, by each limit and in all
/// ([`occupancy`]). Its `Display` says the answer, the limiting resource
/// and what would raise it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// What it was computed from.
    pub resources: Resources,
    /// CTAs per SM: the fewest of the four below.
    pub blocks: u32,
    /// CTAs per SM the resident-thread limit allows.
    pub by_threads: u32,
    /// CTAs per SM the resident-CTA limit allows ([`MAX_SM_BLOCKS`]).
    pub by_blocks: u32,
    /// CTAs per SM the register file allows.
    pub by_registers: u32,
    /// CTAs per SM shared memory allows.
    pub by_smem: u32,
    /// The limit that gives [`Occupancy::blocks`] (the first of registers,
    /// shared memory, threads, blocks on a tie).
    pub limit: Limit,
}

impl Occupancy {
    /// Resident warps per SM.
    pub const fn warps(&self) -> u32 {
        self.blocks * warps_per_block(self.resources.threads)
    }
}

const fn round_up(x: u32, to: u32) -> u32 {
    x.div_ceil(to) * to
}

const fn min(a: u32, b: u32) -> u32 {
    if a < b {
        a
    } else {
        b
    }
}

/// Warps per CTA of `threads` threads (at least 1).
pub const fn warps_per_block(threads: u32) -> u32 {
    let w = threads.div_ceil(WARP_SIZE);
    if w == 0 {
        1
    } else {
        w
    }
}

/// Registers one warp is allocated at `registers` per thread.
pub const fn registers_per_warp(registers: u32) -> u32 {
    round_up(registers * WARP_SIZE, REGISTER_ALLOC_UNIT)
}

/// CTAs of `threads` threads at `registers` per thread the register file
/// holds (`cudaOccMaxBlocksPerSMRegsLimit`): 0 if one CTA does not fit.
pub const fn blocks_by_registers(threads: u32, registers: u32) -> u32 {
    let warps = warps_per_block(threads);
    let per_warp = registers_per_warp(registers);
    if per_warp == 0 {
        return MAX_SM_BLOCKS;
    }
    // The hardware's per-CTA check counts warps in whole sets of one per
    // sub-partition.
    if per_warp * round_up(warps, SM_SUBPARTITIONS) > REGISTER_FILE || per_warp * warps > REGISTER_FILE {
        return 0;
    }
    let warps_per_partition = REGISTER_FILE / SM_SUBPARTITIONS / per_warp;
    warps_per_partition * SM_SUBPARTITIONS / warps
}

/// Bytes of shared memory one resident CTA with `smem_bytes` of its own
/// takes from the SM: plus the reservation, rounded up to the granularity.
pub const fn smem_per_block(smem_bytes: u32) -> u32 {
    round_up(smem_bytes + SMEM_RESERVED_PER_BLOCK, SMEM_ALLOC_GRANULARITY)
}

/// CTAs with `smem_bytes` of shared memory each (static + dynamic) the SM's
/// shared memory holds: 0 if over one CTA's most ([`MAX_SMEM_BYTES`]).
pub const fn blocks_by_smem(smem_bytes: u32) -> u32 {
    if smem_bytes as usize > MAX_SMEM_BYTES {
        return 0;
    }
    SM_SMEM_BYTES / smem_per_block(smem_bytes)
}

/// CTAs of `threads` threads the resident-thread limit allows.
pub const fn blocks_by_threads(threads: u32) -> u32 {
    if threads > MAX_BLOCK_THREADS {
        return 0;
    }
    MAX_SM_THREADS / (warps_per_block(threads) * WARP_SIZE)
}

/// How many CTAs with resources `r` fit on one SM, by each limit and in all.
pub const fn occupancy(r: Resources) -> Occupancy {
    let by_threads = blocks_by_threads(r.threads);
    let by_registers = blocks_by_registers(r.threads, r.registers);
    let by_smem = blocks_by_smem(r.smem_bytes);
    let by_blocks = MAX_SM_BLOCKS;
    let blocks = min(min(by_threads, by_blocks), min(by_registers, by_smem));
    let limit = if by_registers == blocks {
        Limit::Registers
    } else if by_smem == blocks {
        Limit::SharedMemory
    } else if by_threads == blocks {
        Limit::Threads
    } else {
        Limit::Blocks
    };
    Occupancy { resources: r, blocks, by_threads, by_blocks, by_registers, by_smem, limit }
}

/// The most registers per thread (a multiple of 8, at most
/// [`MAX_MAXNREG`]) at which `blocks` CTAs of `threads` threads fit the
/// register file; 0 if none does.
pub const fn max_registers_for(threads: u32, blocks: u32) -> u32 {
    let mut r = MAX_MAXNREG / 8 * 8;
    while r > 0 {
        if blocks_by_registers(threads, r) >= blocks {
            return r;
        }
        r -= 8;
    }
    0
}

/// The most shared memory (static + dynamic, bytes) one CTA may use for
/// `blocks` CTAs to fit one SM's (at most [`MAX_SMEM_BYTES`]); 0 if even no
/// shared memory is too much.
pub const fn max_smem_for(blocks: u32) -> u32 {
    if blocks == 0 {
        return MAX_SMEM_BYTES as u32;
    }
    let per_block = SM_SMEM_BYTES / blocks / SMEM_ALLOC_GRANULARITY * SMEM_ALLOC_GRANULARITY;
    if per_block < SMEM_RESERVED_PER_BLOCK {
        return 0;
    }
    min(per_block - SMEM_RESERVED_PER_BLOCK, MAX_SMEM_BYTES as u32)
}

impl fmt::Display for Occupancy {
    /// "1 block of 384 threads per SM (12 of 64 warps), limited by
    /// registers: ... (shared memory allows 1, threads 5, blocks 32)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.resources;
        let s = if self.blocks == 1 { "" } else { "s" };
        write!(
            f,
            "{} block{s} of {} threads per SM ({} of {} warps), limited by {}: ",
            self.blocks,
            r.threads,
            self.warps(),
            MAX_SM_THREADS / WARP_SIZE,
            self.limit.name()
        )?;
        let per_warp = registers_per_warp(r.registers);
        match self.limit {
            Limit::Registers => write!(
                f,
                "{} registers per thread take {per_warp} per warp (allocated in units of {REGISTER_ALLOC_UNIT}); each of the \
                 {SM_SUBPARTITIONS} register-file partitions of {} holds {} such warps, and a block has {}; \
                 fewer registers (`#[kernel(max_registers = R)]` or `min_blocks_per_sm = N`) fit more",
                r.registers,
                REGISTER_FILE / SM_SUBPARTITIONS,
                (REGISTER_FILE / SM_SUBPARTITIONS).checked_div(per_warp).unwrap_or(0),
                warps_per_block(r.threads)
            )?,
            Limit::SharedMemory => write!(
                f,
                "{} bytes of shared memory per block take {} (with the {SMEM_RESERVED_PER_BLOCK} bytes reserved per block, \
                 in units of {SMEM_ALLOC_GRANULARITY}) of the SM's {SM_SMEM_BYTES}; less shared memory (fewer stages, smaller tiles) fits more",
                r.smem_bytes,
                smem_per_block(r.smem_bytes)
            )?,
            Limit::Threads => write!(f, "an SM holds {MAX_SM_THREADS} threads")?,
            Limit::Blocks => write!(f, "an SM holds {MAX_SM_BLOCKS} blocks; bigger blocks would use it better")?,
        }
        write!(
            f,
            " (by each limit: registers {}, shared memory {}, threads {}, blocks {})",
            self.by_registers, self.by_smem, self.by_threads, self.by_blocks
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn occ(threads: u32, registers: u32, smem_bytes: u32) -> Occupancy {
        occupancy(Resources { threads, registers, smem_bytes })
    }

    #[test]
    fn the_persistent_matmul_fits_one_block() {
        // 384 threads at 168 registers (5376 per warp: 3 warps per
        // partition, 12 per SM), ~200 KB of SMEM.
        let o = occ(384, 168, 200 * 1024);
        assert_eq!((o.blocks, o.by_registers, o.by_smem, o.by_threads), (1, 1, 1, 5));
        assert_eq!(o.limit, Limit::Registers);
        assert_eq!(o.warps(), 12);
        let text = o.to_string();
        assert!(text.starts_with("1 block of 384 threads per SM (12 of 64 warps), limited by registers: 168 registers"), "{text}");
    }

    #[test]
    fn small_blocks_are_limited_by_threads_and_registers() {
        // 128 threads at 32 registers: 1024 per warp, 16 per partition, 64
        // per SM = 16 blocks; 2048 threads = 16 blocks.
        let o = occ(128, 32, 0);
        assert_eq!((o.blocks, o.by_registers, o.by_threads, o.by_smem), (16, 16, 16, 228));
        // 64 threads at 16 registers: 32 blocks by threads, 32 by the block limit.
        let o = occ(64, 16, 0);
        assert_eq!((o.blocks, o.by_threads, o.by_blocks), (32, 32, 32));
        // 32 threads: 64 by threads, 32 by the block limit.
        let o = occ(32, 16, 0);
        assert_eq!((o.blocks, o.limit), (32, Limit::Blocks));
    }

    #[test]
    fn registers_are_allocated_8_per_thread_and_per_partition() {
        // 33 registers cost as much as 40: 1280 per warp, 12 warps per partition.
        assert_eq!(registers_per_warp(33), registers_per_warp(40));
        assert_eq!(blocks_by_registers(128, 40), 12);
        // 255 registers: 8192 per warp, 2 warps per partition, 8 per SM.
        assert_eq!(blocks_by_registers(256, 255), 1);
        assert_eq!(blocks_by_registers(288, 255), 0);
        // 1024 threads at 64 registers fill the file exactly.
        assert_eq!(blocks_by_registers(1024, 64), 1);
        assert_eq!(blocks_by_registers(1024, 72), 0);
        // 384 threads at 80 registers: 2560 per warp, 6 per partition, 24 per SM: 2 blocks.
        assert_eq!(blocks_by_registers(384, 80), 2);
        assert_eq!(max_registers_for(384, 2), 80);
        assert_eq!(max_registers_for(128, 16), 32);
        assert_eq!(max_registers_for(128, 1), 248);
        assert_eq!(max_registers_for(1024, 2), 32);
    }

    #[test]
    fn shared_memory_counts_the_reservation() {
        // The most one block may use fills the SM with its reservation.
        assert_eq!(blocks_by_smem(MAX_SMEM_BYTES as u32), 1);
        assert_eq!(blocks_by_smem(MAX_SMEM_BYTES as u32 + 1), 0);
        // Two blocks: 233472 / 2 = 116736, less 1 KiB each.
        assert_eq!(max_smem_for(2), 115_712);
        assert_eq!(blocks_by_smem(115_712), 2);
        assert_eq!(blocks_by_smem(115_713), 1);
        assert_eq!(max_smem_for(1), MAX_SMEM_BYTES as u32);
        let o = occ(128, 32, 100 * 1024);
        assert_eq!((o.blocks, o.limit), (2, Limit::SharedMemory));
        assert!(o.to_string().contains("limited by shared memory: 102400 bytes"), "{o}");
    }
}
