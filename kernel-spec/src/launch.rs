//! The launch rules: one check of a launch's shape (grid, block, cluster,
//! dynamic shared memory) against the hardware's limits
//! ([`crate::limits`]), and one [`LaunchProblem`] whose message names the
//! rule, the values and the fix.
//!
//! Used by the `#[kernel]` macro ([`check_block`], [`check_cluster`] on the
//! kernel's options, at compile time), by `kernel_host`'s `check_launch`
//! (before calling CUDA), by `kernel_host::emulate::Emulator::launch` and by
//! `kernel_emu::run` (before emulating). Each maps a [`LaunchProblem`] to its
//! own error type and shows its `Display`.
//!
//! | rule | limit |
//! |---|---|
//! | every grid, block and cluster dimension is at least 1 | |
//! | threads per CTA (`block.x * block.y * block.z`) | [`MAX_BLOCK_THREADS`] |
//! | `block.z` | [`MAX_BLOCK_Z`] |
//! | CTAs per cluster, portable | [`MAX_CLUSTER_CTAS`] |
//! | CTAs per cluster, `non_portable_cluster` | [`MAX_NON_PORTABLE_CLUSTER_CTAS`] |
//! | each grid dimension a multiple of the cluster's | |
//! | `grid.x`; `grid.y`, `grid.z` | [`MAX_GRID_X`]; [`MAX_GRID_YZ`] |
//! | dynamic shared memory per CTA | [`MAX_SMEM_BYTES`] |

use crate::limits::{
    MAX_BLOCK_THREADS, MAX_BLOCK_Z, MAX_CLUSTER_CTAS, MAX_GRID_X, MAX_GRID_YZ,
    MAX_NON_PORTABLE_CLUSTER_CTAS, MAX_SMEM_BYTES,
};
use crate::Dim3;
use core::fmt;

/// A launch's shape: what [`check_launch`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// CTAs in the grid.
    pub grid: Dim3,
    /// Threads per CTA (the kernel's `BLOCK`).
    pub block: Dim3,
    /// CTAs per cluster (the kernel's `CLUSTER`; `(1, 1, 1)`: no cluster).
    pub cluster: Dim3,
    /// Whether the kernel opts in to non-portable cluster sizes
    /// (`#[kernel(.., non_portable_cluster)]`).
    pub non_portable_cluster: bool,
    /// Dynamic shared memory per CTA, in bytes.
    pub smem_bytes: u64,
}

impl LaunchShape {
    /// `grid` CTAs of `block` threads in clusters of `cluster`, portable
    /// cluster sizes, no dynamic shared memory.
    pub const fn new(grid: Dim3, block: Dim3, cluster: Dim3) -> Self {
        LaunchShape {
            grid,
            block,
            cluster,
            non_portable_cluster: false,
            smem_bytes: 0,
        }
    }
}

/// Why a launch shape breaks the hardware's rules. Its `Display` is the
/// message every side shows: the rule, the values and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchProblem {
    /// Some grid dimension is 0.
    ZeroGrid { grid: Dim3 },
    /// Some dimension of the kernel's `BLOCK` is 0.
    ZeroBlock { block: Dim3 },
    /// Some dimension of the kernel's `CLUSTER` is 0.
    ZeroCluster { cluster: Dim3 },
    /// The block has more than [`MAX_BLOCK_THREADS`] threads.
    TooManyThreads { block: Dim3, threads: u64 },
    /// `block.z` is over [`MAX_BLOCK_Z`].
    BlockZTooLarge { block: Dim3 },
    /// The cluster has more than [`MAX_CLUSTER_CTAS`] CTAs (the kernel does
    /// not opt in to non-portable sizes), or more than
    /// [`MAX_NON_PORTABLE_CLUSTER_CTAS`] (it does: `non_portable`).
    TooManyClusterCtas {
        cluster: Dim3,
        ctas: u64,
        non_portable: bool,
    },
    /// `grid.axis` is not a multiple of `cluster.axis`.
    GridNotClusterMultiple {
        axis: char,
        grid: Dim3,
        cluster: Dim3,
    },
    /// `grid.axis` is over the hardware limit `max` ([`MAX_GRID_X`] or
    /// [`MAX_GRID_YZ`]).
    GridTooLarge { axis: char, grid: Dim3, max: u32 },
    /// The dynamic shared memory per CTA is over [`MAX_SMEM_BYTES`].
    TooMuchSmem { bytes: u64 },
}

impl LaunchProblem {
    /// The rule broken, in a few words (for error types with a separate
    /// rule field, such as `kernel_emu::EmuError::Misuse`); the `Display`
    /// has the values and the fix.
    pub const fn rule(&self) -> &'static str {
        match self {
            LaunchProblem::ZeroGrid { .. }
            | LaunchProblem::ZeroBlock { .. }
            | LaunchProblem::ZeroCluster { .. } => "launch dimensions are non-zero",
            LaunchProblem::TooManyThreads { .. } => "a CTA has at most MAX_BLOCK_THREADS threads",
            LaunchProblem::BlockZTooLarge { .. } => "block.z is at most MAX_BLOCK_Z",
            LaunchProblem::TooManyClusterCtas { non_portable: false, .. } => {
                "a portable cluster has at most MAX_CLUSTER_CTAS CTAs"
            }
            LaunchProblem::TooManyClusterCtas { non_portable: true, .. } => {
                "a non-portable cluster has at most MAX_NON_PORTABLE_CLUSTER_CTAS CTAs"
            }
            LaunchProblem::GridNotClusterMultiple { .. } => {
                "the grid is a non-zero multiple of the cluster shape in every dimension"
            }
            LaunchProblem::GridTooLarge { .. } => {
                "the grid is within MAX_GRID_X x MAX_GRID_YZ x MAX_GRID_YZ"
            }
            LaunchProblem::TooMuchSmem { .. } => {
                "a CTA has at most MAX_SMEM_BYTES of dynamic shared memory"
            }
        }
    }
}

impl fmt::Display for LaunchProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchProblem::ZeroGrid { grid } => write!(
                f,
                "grid {grid} has a zero dimension: every grid dimension must be at least 1 \
                 (CUDA rejects a launch with no CTAs); skip the launch when there is no work"
            ),
            LaunchProblem::ZeroBlock { block } => write!(
                f,
                "the kernel's BLOCK {block} has a zero dimension: every block dimension must be \
                 at least 1; fix the kernel's block shape"
            ),
            LaunchProblem::ZeroCluster { cluster } => write!(
                f,
                "the kernel's CLUSTER {cluster} has a zero dimension: every cluster dimension \
                 must be at least 1; use (1, 1, 1) for a launch without clusters"
            ),
            LaunchProblem::TooManyThreads { block, threads } => write!(
                f,
                "the kernel's BLOCK {block} has {threads} threads, more than the \
                 {MAX_BLOCK_THREADS} a CTA may have; use a smaller block shape"
            ),
            LaunchProblem::BlockZTooLarge { block } => write!(
                f,
                "the kernel's BLOCK {block} has block.z = {}, more than the {MAX_BLOCK_Z} the \
                 hardware allows; put the threads in x or y instead",
                block.z
            ),
            LaunchProblem::TooManyClusterCtas {
                cluster,
                ctas,
                non_portable: false,
            } => write!(
                f,
                "the kernel's CLUSTER {cluster} has {ctas} CTAs, more than the \
                 {MAX_CLUSTER_CTAS} a portable cluster may have; use a cluster of at most \
                 {MAX_CLUSTER_CTAS} CTAs, or (up to {MAX_NON_PORTABLE_CLUSTER_CTAS}) opt the kernel \
                 in to non-portable cluster sizes with `#[kernel(.., non_portable_cluster)]` (the \
                 host then allows them when it loads the kernel; a GPU that cannot co-schedule \
                 them is a launch error)"
            ),
            LaunchProblem::TooManyClusterCtas {
                cluster,
                ctas,
                non_portable: true,
            } => write!(
                f,
                "the kernel's CLUSTER {cluster} has {ctas} CTAs, more than the \
                 {MAX_NON_PORTABLE_CLUSTER_CTAS} a non-portable cluster may have (the hardware's \
                 largest cluster); use a cluster of at most {MAX_NON_PORTABLE_CLUSTER_CTAS} CTAs"
            ),
            LaunchProblem::GridNotClusterMultiple {
                axis,
                grid,
                cluster,
            } => {
                let g = grid.axis(*axis);
                let c = cluster.axis(*axis).max(1);
                let up = u64::from(g).div_ceil(u64::from(c)) * u64::from(c);
                let down = g / c * c;
                write!(
                    f,
                    "grid.{axis} = {g} is not a multiple of cluster.{axis} = {c} (grid {grid}, \
                     cluster {cluster}): CUDA launches whole clusters only; round grid.{axis} up \
                     to {up} (and have the kernel skip the extra CTAs)"
                )?;
                if down > 0 {
                    write!(f, " or down to {down}")?;
                }
                Ok(())
            }
            LaunchProblem::GridTooLarge { axis, grid, max } => write!(
                f,
                "grid.{axis} = {} (grid {grid}) is over the hardware's limit of {max} for that \
                 dimension; move work to another grid dimension or loop inside the kernel",
                grid.axis(*axis)
            ),
            LaunchProblem::TooMuchSmem { bytes } => write!(
                f,
                "the kernel needs {bytes} bytes of dynamic shared memory per CTA, more than the \
                 {MAX_SMEM_BYTES} bytes (227 KiB) one CTA may use on the H100/H200 and the B200; \
                 use fewer pipeline stages or smaller tiles"
            ),
        }
    }
}

/// The block rules: no zero dimension, at most [`MAX_BLOCK_THREADS`]
/// threads, `block.z` at most [`MAX_BLOCK_Z`].
pub const fn check_block(block: Dim3) -> Result<(), LaunchProblem> {
    if block.has_zero() {
        return Err(LaunchProblem::ZeroBlock { block });
    }
    let threads = block.volume_u64();
    if threads > MAX_BLOCK_THREADS as u64 {
        return Err(LaunchProblem::TooManyThreads { block, threads });
    }
    if block.z > MAX_BLOCK_Z {
        return Err(LaunchProblem::BlockZTooLarge { block });
    }
    Ok(())
}

/// The cluster rules: no zero dimension, at most [`MAX_CLUSTER_CTAS`] CTAs,
/// or [`MAX_NON_PORTABLE_CLUSTER_CTAS`] with `non_portable`.
pub const fn check_cluster(cluster: Dim3, non_portable: bool) -> Result<(), LaunchProblem> {
    if cluster.has_zero() {
        return Err(LaunchProblem::ZeroCluster { cluster });
    }
    let ctas = cluster.volume_u64();
    let max = if non_portable {
        MAX_NON_PORTABLE_CLUSTER_CTAS
    } else {
        MAX_CLUSTER_CTAS
    };
    if ctas > max as u64 {
        return Err(LaunchProblem::TooManyClusterCtas {
            cluster,
            ctas,
            non_portable,
        });
    }
    Ok(())
}

/// The grid rules for clusters of `cluster` (already checked non-zero): no
/// zero dimension, each a multiple of the cluster's, within
/// [`MAX_GRID_X`] / [`MAX_GRID_YZ`].
pub const fn check_grid(grid: Dim3, cluster: Dim3) -> Result<(), LaunchProblem> {
    if grid.has_zero() {
        return Err(LaunchProblem::ZeroGrid { grid });
    }
    let axes = ['x', 'y', 'z'];
    let mut i = 0;
    while i < 3 {
        let axis = axes[i];
        let c = cluster.axis(axis);
        if c != 0 && grid.axis(axis) % c != 0 {
            return Err(LaunchProblem::GridNotClusterMultiple { axis, grid, cluster });
        }
        i += 1;
    }
    let mut i = 0;
    while i < 3 {
        let axis = axes[i];
        let max = if i == 0 { MAX_GRID_X } else { MAX_GRID_YZ };
        if grid.axis(axis) > max {
            return Err(LaunchProblem::GridTooLarge { axis, grid, max });
        }
        i += 1;
    }
    Ok(())
}

/// The shared memory rule: at most [`MAX_SMEM_BYTES`] of dynamic shared
/// memory per CTA.
pub const fn check_smem(bytes: u64) -> Result<(), LaunchProblem> {
    if bytes > MAX_SMEM_BYTES as u64 {
        return Err(LaunchProblem::TooMuchSmem { bytes });
    }
    Ok(())
}

/// Every launch rule, in this order: a non-zero grid, the block
/// ([`check_block`]), the cluster ([`check_cluster`]), the grid against the
/// cluster and the grid limits ([`check_grid`]), the shared memory
/// ([`check_smem`]). The first rule broken is returned.
pub const fn check_launch(shape: &LaunchShape) -> Result<(), LaunchProblem> {
    if shape.grid.has_zero() {
        return Err(LaunchProblem::ZeroGrid { grid: shape.grid });
    }
    if let Err(p) = check_block(shape.block) {
        return Err(p);
    }
    if let Err(p) = check_cluster(shape.cluster, shape.non_portable_cluster) {
        return Err(p);
    }
    if let Err(p) = check_grid(shape.grid, shape.cluster) {
        return Err(p);
    }
    check_smem(shape.smem_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    const ONE: Dim3 = Dim3::ONE;

    fn shape(grid: Dim3, block: Dim3, cluster: Dim3) -> LaunchShape {
        LaunchShape::new(grid, block, cluster)
    }

    #[test]
    fn accepts_valid_launches() {
        assert_eq!(check_launch(&shape(Dim3::new(132, 1, 1), Dim3::new(128, 1, 1), ONE)), Ok(()));
        assert_eq!(check_launch(&shape(Dim3::new(8, 6, 2), Dim3::new(32, 4, 8), Dim3::new(2, 2, 1))), Ok(()));
        assert_eq!(check_launch(&shape(Dim3::new(16, 1, 1), Dim3::new(1024, 1, 1), Dim3::new(8, 1, 1))), Ok(()));
        assert_eq!(check_launch(&shape(Dim3::new(MAX_GRID_X, MAX_GRID_YZ, MAX_GRID_YZ), ONE, ONE)), Ok(()));
        let full = LaunchShape {
            non_portable_cluster: true,
            smem_bytes: MAX_SMEM_BYTES as u64,
            ..shape(Dim3::new(32, 1, 1), Dim3::new(128, 1, 1), Dim3::new(16, 1, 1))
        };
        assert_eq!(check_launch(&full), Ok(()));
    }

    #[test]
    fn rejects_each_rule_with_its_values_and_fix() {
        let p = check_launch(&shape(Dim3::new(10, 1, 1), Dim3::new(128, 1, 1), Dim3::new(4, 1, 1))).unwrap_err();
        assert_eq!(
            p,
            LaunchProblem::GridNotClusterMultiple { axis: 'x', grid: Dim3::new(10, 1, 1), cluster: Dim3::new(4, 1, 1) }
        );
        let msg = p.to_string();
        assert!(msg.contains("grid.x = 10 is not a multiple of cluster.x = 4"), "{msg}");
        assert!(msg.contains("round grid.x up to 12") && msg.contains("or down to 8"), "{msg}");
        assert!(p.rule().contains("multiple of the cluster"));

        let p = check_launch(&shape(ONE, Dim3::new(32, 33, 1), ONE)).unwrap_err();
        assert_eq!(p, LaunchProblem::TooManyThreads { block: Dim3::new(32, 33, 1), threads: 1056 });
        assert!(p.to_string().contains("(32, 33, 1) has 1056 threads, more than the 1024"), "{p}");

        // No u32 overflow: 2^16 * 2^16 threads is reported, not wrapped to 0.
        let big = Dim3::new(65_536, 65_536, 1);
        assert_eq!(check_block(big), Err(LaunchProblem::TooManyThreads { block: big, threads: 1 << 32 }));

        assert!(matches!(check_block(Dim3::new(1, 1, 128)), Err(LaunchProblem::BlockZTooLarge { .. })));
        assert!(matches!(check_launch(&shape(Dim3::new(1, 0, 1), ONE, ONE)), Err(LaunchProblem::ZeroGrid { .. })));
        assert!(matches!(check_block(Dim3::new(0, 1, 1)), Err(LaunchProblem::ZeroBlock { .. })));
        let p = check_cluster(Dim3::new(1, 0, 1), false).unwrap_err();
        assert!(p.to_string().contains("use (1, 1, 1)"), "{p}");

        let p = check_launch(&shape(Dim3::new(1, MAX_GRID_YZ + 1, 1), ONE, ONE)).unwrap_err();
        assert!(matches!(p, LaunchProblem::GridTooLarge { axis: 'y', max: MAX_GRID_YZ, .. }));
        assert!(p.to_string().contains("grid.y = 65536"), "{p}");

        let p = check_smem(MAX_SMEM_BYTES as u64 + 1).unwrap_err();
        assert_eq!(p, LaunchProblem::TooMuchSmem { bytes: 232_449 });
        assert!(p.to_string().contains("232449 bytes") && p.to_string().contains("232448 bytes"), "{p}");
    }

    #[test]
    fn cluster_sizes_portable_and_not() {
        let c16 = Dim3::new(4, 4, 1);
        let p = check_cluster(c16, false).unwrap_err();
        assert_eq!(p, LaunchProblem::TooManyClusterCtas { cluster: c16, ctas: 16, non_portable: false });
        let msg = p.to_string();
        assert!(msg.contains("(4, 4, 1) has 16 CTAs") && msg.contains("at most 8 CTAs"), "{msg}");
        assert!(msg.contains("non_portable_cluster"), "the fix names the opt-in: {msg}");
        assert_eq!(check_cluster(c16, true), Ok(()));
        let c32 = Dim3::new(4, 4, 2);
        let msg = check_cluster(c32, true).unwrap_err().to_string();
        assert!(msg.contains("more than the 16 a non-portable cluster may have"), "{msg}");
        // The grid must still be a multiple of a large cluster.
        assert!(matches!(
            check_grid(Dim3::new(24, 1, 1), Dim3::new(16, 1, 1)),
            Err(LaunchProblem::GridNotClusterMultiple { axis: 'x', .. })
        ));
        // No "down to 0" when the grid is smaller than the cluster.
        let msg = check_grid(Dim3::new(4, 1, 1), Dim3::new(2, 2, 1)).unwrap_err().to_string();
        assert!(msg.contains("grid.y = 1 is not a multiple of cluster.y = 2") && !msg.contains("down to"), "{msg}");
    }
}
