//! The hardware limits of a launch on the H100/H200 (`sm_90a`) and the B200
//! (`sm_100a`): one definition each, read by the `#[kernel]` macro (compile
//! time), the device API, the host runtime and the emulator. The rules that
//! use them are in [`crate::launch`].

/// Most threads in one CTA (`cudaDevAttrMaxThreadsPerBlock`).
pub const MAX_BLOCK_THREADS: u32 = 1024;

/// Largest `block.z` (`cudaDevAttrMaxBlockDimZ`; x and y may be 1024).
pub const MAX_BLOCK_Z: u32 = 64;

/// Most CTAs in a cluster with a portable launch (up to
/// [`MAX_NON_PORTABLE_CLUSTER_CTAS`] with the non-portable opt-in).
pub const MAX_CLUSTER_CTAS: u32 = 8;

/// Most CTAs in a cluster of a kernel that opts in to non-portable cluster
/// sizes (`#[kernel(.., non_portable_cluster)]`,
/// `KernelSpec::NON_PORTABLE_CLUSTER`): 16 on the H100/H200 and the B200.
/// The host sets `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED` on
/// such kernels when it loads them; whether a given size is schedulable
/// (every CTA of a cluster on one GPC) depends on the GPU and on the CTA's
/// resources, and is asked of the driver at launch.
pub const MAX_NON_PORTABLE_CLUSTER_CTAS: u32 = 16;

/// Shared memory one CTA may use on the H100 and the B200: 227 KiB
/// (`cudaDevAttrMaxSharedMemoryPerBlockOptin` = 232448 bytes).
pub const MAX_SMEM_BYTES: usize = 232_448;

/// Largest `grid.x` (2^31 - 1).
pub const MAX_GRID_X: u32 = i32::MAX as u32;

/// Largest `grid.y` and `grid.z`.
pub const MAX_GRID_YZ: u32 = 65_535;

/// Hardware barriers per CTA (`barrier.sync id`, `id` in 0..16; 0 is
/// `__syncthreads()`).
pub const NUM_NAMED_BARRIERS: u32 = 16;

/// Largest arrival count an mbarrier accepts: 2^20 - 1
/// (`mbarrier.init`'s count, PTX ISA §9.7.13.15).
pub const MAX_MBARRIER_ARRIVALS: u32 = (1 << 20) - 1;

/// Largest magnitude of an mbarrier's pending transaction count: 2^20 - 1
/// (`mbarrier.expect_tx` / `complete_tx`).
pub const MAX_MBARRIER_TX: u32 = (1 << 20) - 1;

/// Tensor memory (Blackwell, sm_100a) lanes per CTA: one per row of a
/// 128-row tcgen05 accumulator (PTX ISA §9.7.16.2, "Tensor Memory").
pub const TMEM_LANES: u32 = 128;

/// Tensor memory columns (32-bit cells per lane) per CTA; `tcgen05.alloc`
/// takes a power of two of at least 32 columns, at most this many in all.
pub const MAX_TMEM_COLS: u32 = 512;

/// Most devices in a peer group: a peer-memory kernel parameter
/// (`kernel_device::peer::PeerGmem`) holds one address per device, and an
/// NVLink host (HGX H100/H200) has 8 GPUs. The emulator runs at most this
/// many emulated devices in one run.
pub const MAX_PEER_DEVICES: usize = 8;

/// 32-bit registers per SM on the H100/H200 and the B200
/// (`cudaDevAttrMaxRegistersPerMultiprocessor`), which is also the most one
/// CTA may use (`cudaDevAttrMaxRegistersPerBlock`). The per-thread count a
/// kernel starts with follows from it: [`crate::registers::entry_registers`].
pub const REGISTER_FILE: u32 = 65_536;

/// Most registers one thread may own: the largest count
/// `setmaxnreg` takes (PTX ISA §9.7.19.6, "setmaxnreg": 24..=256, a
/// multiple of 8), and the cap of a kernel's entry count.
pub const MAX_THREAD_REGISTERS: u32 = 256;

/// Threads per warp (`WARP_SZ`; `kernel_device::index::WARP_SIZE`
/// re-exports it).
pub const WARP_SIZE: u32 = 32;

/// Most threads resident on one SM at once on the H100/H200 and the B200
/// (`cudaDevAttrMaxThreadsPerMultiProcessor`): 64 warps.
pub const MAX_SM_THREADS: u32 = 2048;

/// Most CTAs resident on one SM at once on the H100/H200 and the B200
/// (`cudaDevAttrMaxBlocksPerMultiprocessor`); also the largest
/// `.minnctapersm` ptxas honours (a larger one is ignored with a warning).
pub const MAX_SM_BLOCKS: u32 = 32;

/// Shared memory the SM reserves for the system per resident CTA
/// (`cudaDevAttrReservedSharedMemoryPerBlock`, sm_80 and later): 1 KiB.
pub const SMEM_RESERVED_PER_BLOCK: u32 = 1024;

/// Shared memory of one SM that its resident CTAs share, reserved parts
/// included (`cudaDevAttrMaxSharedMemoryPerMultiprocessor`): 228 KiB, one
/// CTA's most ([`MAX_SMEM_BYTES`]) plus its reservation
/// ([`SMEM_RESERVED_PER_BLOCK`]).
pub const SM_SMEM_BYTES: u32 = MAX_SMEM_BYTES as u32 + SMEM_RESERVED_PER_BLOCK;

/// A CTA's shared memory (its own plus [`SMEM_RESERVED_PER_BLOCK`]) is
/// allocated in units of this many bytes (CUDA's occupancy calculator,
/// `cudaOccSMemAllocationGranularity`, sm_80 and later).
pub const SMEM_ALLOC_GRANULARITY: u32 = 128;

/// Registers are allocated to a warp in units of this many
/// (`cudaOccRegAllocationGranularity`): 8 per thread, so a kernel of 33
/// registers per thread occupies as many as one of 40.
pub const REGISTER_ALLOC_UNIT: u32 = 256;

/// The register file of an SM is split among this many sub-partitions
/// (`cudaOccSubPartitionsPerMultiprocessor`), each of `REGISTER_FILE / 4`
/// registers; a warp's registers are all in one of them.
pub const SM_SUBPARTITIONS: u32 = 4;

/// The smallest per-thread register cap ptxas 13.0 honours: a `.maxnreg`
/// below it is raised to it, with a warning ("adjusting per thread register
/// count of 20 to lower bound of 24").
pub const MIN_MAXNREG: u32 = 24;

/// The largest per-thread register cap ptxas 13.0 honours, the most
/// registers one thread can address: a `.maxnreg` above it is ignored,
/// with a warning ("Too many maxnreg specified").
pub const MAX_MAXNREG: u32 = 255;
