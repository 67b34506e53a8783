//! Launch-configuration rules checked on the host before calling CUDA, as a
//! pure function of the shapes, so that a bad launch is reported with the
//! rule and the fix instead of a bare `CUDA_ERROR_INVALID_VALUE`.

use super::error::LaunchProblem;
use kernel_device::{Dim3, KernelSpec};
use kernel_spec::launch::LaunchShape;
#[cfg(doc)]
use kernel_spec::limits::{MAX_BLOCK_THREADS, MAX_CLUSTER_CTAS, MAX_NON_PORTABLE_CLUSTER_CTAS};

/// The grid and block limits, defined in [`kernel_spec::limits`].
pub use kernel_spec::limits::{MAX_BLOCK_Z, MAX_GRID_X, MAX_GRID_YZ};

/// Checks a launch of `grid` CTAs of `block` threads in clusters of `cluster`
/// CTAs (`(1, 1, 1)`: no cluster) against CUDA's rules
/// ([`kernel_spec::launch::check_launch`], the check the emulator and
/// `#[kernel]` run too):
///
/// * no dimension of grid, block or cluster is 0;
/// * the block has at most [`MAX_BLOCK_THREADS`] threads and `block.z <= 64`;
/// * the cluster has at most [`MAX_CLUSTER_CTAS`] CTAs (portable size);
/// * every grid dimension is a multiple of the cluster's;
/// * `grid.x < 2^31`, `grid.y, grid.z <= 65535`.
///
/// The first rule broken is returned. For a kernel that opts in to
/// non-portable cluster sizes use [`check_launch_with`]; to check a kernel's
/// dynamic shared memory too, [`check_kernel_launch`].
pub fn check_launch(grid: Dim3, block: Dim3, cluster: Dim3) -> Result<(), LaunchProblem> {
    check_launch_with(grid, block, cluster, false)
}

/// [`check_launch`] for a kernel whose
/// [`KernelSpec::NON_PORTABLE_CLUSTER`](kernel_device::KernelSpec::NON_PORTABLE_CLUSTER)
/// is `non_portable_cluster`: with it, the cluster may have up to
/// [`MAX_NON_PORTABLE_CLUSTER_CTAS`] CTAs (whether the GPU can co-schedule
/// them is asked of the driver at launch, not here).
pub fn check_launch_with(
    grid: Dim3,
    block: Dim3,
    cluster: Dim3,
    non_portable_cluster: bool,
) -> Result<(), LaunchProblem> {
    kernel_spec::launch::check_launch(&LaunchShape {
        non_portable_cluster,
        ..LaunchShape::new(grid, block, cluster)
    })
}

/// Every launch rule for kernel `K` over `grid` CTAs: [`check_launch_with`]
/// with `K`'s block, cluster and non-portable opt-in, and `K::SMEM_BYTES`
/// against the hardware's per-CTA maximum
/// ([`kernel_spec::limits::MAX_SMEM_BYTES`]; loading the kernel checks it,
/// with the static shared memory, against the device's own maximum).
pub fn check_kernel_launch<K: KernelSpec>(grid: Dim3) -> Result<(), LaunchProblem> {
    kernel_spec::launch::check_launch(&LaunchShape {
        grid,
        block: K::BLOCK,
        cluster: K::CLUSTER,
        non_portable_cluster: K::NON_PORTABLE_CLUSTER,
        smem_bytes: u64::from(K::SMEM_BYTES),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: Dim3 = Dim3::new(1, 1, 1);

    fn problem(grid: Dim3, block: Dim3, cluster: Dim3) -> (LaunchProblem, String) {
        match check_launch(grid, block, cluster) {
            Err(p) => {
                let msg = p.to_string();
                (p, msg)
            }
            Ok(()) => panic!("{grid} x {block} in clusters of {cluster} was accepted"),
        }
    }

    #[test]
    fn accepts_valid_launches() {
        assert_eq!(
            check_launch(Dim3::new(132, 1, 1), Dim3::new(128, 1, 1), ONE),
            Ok(())
        );
        assert_eq!(
            check_launch(Dim3::new(8, 6, 2), Dim3::new(32, 4, 8), Dim3::new(2, 2, 1)),
            Ok(())
        );
        assert_eq!(
            check_launch(
                Dim3::new(16, 1, 1),
                Dim3::new(1024, 1, 1),
                Dim3::new(8, 1, 1)
            ),
            Ok(())
        );
        assert_eq!(
            check_launch(Dim3::new(MAX_GRID_X, MAX_GRID_YZ, 1), ONE, ONE),
            Ok(())
        );
    }

    #[test]
    fn rejects_grid_not_multiple_of_cluster() {
        let (p, msg) = problem(
            Dim3::new(10, 1, 1),
            Dim3::new(128, 1, 1),
            Dim3::new(4, 1, 1),
        );
        assert_eq!(
            p,
            LaunchProblem::GridNotClusterMultiple {
                axis: 'x',
                grid: Dim3::new(10, 1, 1),
                cluster: Dim3::new(4, 1, 1)
            }
        );
        assert!(
            msg.contains("grid.x = 10 is not a multiple of cluster.x = 4"),
            "{msg}"
        );
        assert!(msg.contains("round grid.x up to 12"), "{msg}");
        assert!(msg.contains("or down to 8"), "{msg}");

        // The y dimension is named when x is fine; no "down to 0".
        let (p, msg) = problem(Dim3::new(4, 1, 1), ONE, Dim3::new(2, 2, 1));
        assert!(matches!(
            p,
            LaunchProblem::GridNotClusterMultiple { axis: 'y', .. }
        ));
        assert!(
            msg.contains("grid.y = 1 is not a multiple of cluster.y = 2"),
            "{msg}"
        );
        assert!(msg.contains("up to 2"), "{msg}");
        assert!(!msg.contains("down to"), "{msg}");

        let (p, _) = problem(Dim3::new(2, 2, 3), ONE, Dim3::new(1, 1, 2));
        assert!(matches!(
            p,
            LaunchProblem::GridNotClusterMultiple { axis: 'z', .. }
        ));
    }

    #[test]
    fn rejects_zero_grid() {
        for grid in [Dim3::new(0, 1, 1), Dim3::new(1, 0, 1), Dim3::new(1, 1, 0)] {
            let (p, msg) = problem(grid, Dim3::new(128, 1, 1), ONE);
            assert_eq!(p, LaunchProblem::ZeroGrid { grid });
            assert!(
                msg.contains(&format!("grid {grid} has a zero dimension")),
                "{msg}"
            );
            assert!(msg.contains("skip the launch"), "{msg}");
        }
    }

    #[test]
    fn rejects_zero_block_and_cluster() {
        let (p, _) = problem(ONE, Dim3::new(0, 1, 1), ONE);
        assert!(matches!(p, LaunchProblem::ZeroBlock { .. }));
        let (p, msg) = problem(ONE, ONE, Dim3::new(1, 0, 1));
        assert!(matches!(p, LaunchProblem::ZeroCluster { .. }));
        assert!(msg.contains("use (1, 1, 1)"), "{msg}");
    }

    #[test]
    fn rejects_too_many_threads() {
        let block = Dim3::new(32, 33, 1);
        let (p, msg) = problem(Dim3::new(4, 1, 1), block, ONE);
        assert_eq!(
            p,
            LaunchProblem::TooManyThreads {
                block,
                threads: 1056
            }
        );
        assert!(msg.contains("(32, 33, 1) has 1056 threads"), "{msg}");
        assert!(msg.contains("1024"), "{msg}");

        // No u32 overflow: 2^16 * 2^16 * 1 threads is reported, not wrapped to 0.
        let block = Dim3::new(65_536, 65_536, 1);
        let (p, _) = problem(ONE, block, ONE);
        assert_eq!(
            p,
            LaunchProblem::TooManyThreads {
                block,
                threads: 1 << 32
            }
        );

        let (p, msg) = problem(ONE, Dim3::new(1, 1, 128), ONE);
        assert!(matches!(p, LaunchProblem::BlockZTooLarge { .. }));
        assert!(msg.contains("block.z = 128"), "{msg}");
    }

    #[test]
    fn rejects_too_many_cluster_ctas() {
        let cluster = Dim3::new(4, 4, 1);
        let (p, msg) = problem(Dim3::new(16, 16, 1), Dim3::new(128, 1, 1), cluster);
        assert_eq!(
            p,
            LaunchProblem::TooManyClusterCtas {
                cluster,
                ctas: 16,
                non_portable: false
            }
        );
        assert!(msg.contains("(4, 4, 1) has 16 CTAs"), "{msg}");
        assert!(msg.contains("at most 8 CTAs"), "{msg}");
        assert!(msg.contains("non_portable_cluster"), "the fix names the opt-in: {msg}");
    }

    #[test]
    fn non_portable_clusters_allow_up_to_16_ctas() {
        let block = Dim3::new(64, 1, 1);
        for cluster in [Dim3::new(16, 1, 1), Dim3::new(4, 4, 1), Dim3::new(2, 2, 4), Dim3::new(9, 1, 1)] {
            let grid = Dim3::new(cluster.x * 2, cluster.y, cluster.z);
            assert_eq!(check_launch_with(grid, block, cluster, true), Ok(()), "{cluster}");
            // The same launch without the opt-in is the portable rule's.
            assert!(matches!(
                check_launch(grid, block, cluster),
                Err(LaunchProblem::TooManyClusterCtas { non_portable: false, .. })
            ));
        }
        // Portable sizes are fine either way.
        let c8 = Dim3::new(8, 1, 1);
        assert_eq!(check_launch_with(c8, block, c8, true), Ok(()));
        // Over 16 is refused even with the opt-in, naming the hardware limit.
        let cluster = Dim3::new(4, 4, 2);
        let p = check_launch_with(Dim3::new(4, 4, 2), block, cluster, true).unwrap_err();
        assert_eq!(
            p,
            LaunchProblem::TooManyClusterCtas {
                cluster,
                ctas: 32,
                non_portable: true
            }
        );
        let msg = p.to_string();
        assert!(msg.contains("(4, 4, 2) has 32 CTAs"), "{msg}");
        assert!(msg.contains("more than the 16 a non-portable cluster may have"), "{msg}");
        assert!(msg.contains("use a cluster of at most 16 CTAs"), "{msg}");
        // The grid must still be a multiple of the (large) cluster.
        assert!(matches!(
            check_launch_with(Dim3::new(24, 1, 1), block, Dim3::new(16, 1, 1), true),
            Err(LaunchProblem::GridNotClusterMultiple { axis: 'x', .. })
        ));
    }

    #[test]
    fn rejects_grid_over_hardware_limits() {
        let grid = Dim3::new(1, MAX_GRID_YZ + 1, 1);
        let (p, msg) = problem(grid, ONE, ONE);
        assert_eq!(
            p,
            LaunchProblem::GridTooLarge {
                axis: 'y',
                grid,
                max: MAX_GRID_YZ
            }
        );
        assert!(msg.contains("grid.y = 65536"), "{msg}");
        let (p, _) = problem(Dim3::new(MAX_GRID_X + 1, 1, 1), ONE, ONE);
        assert!(matches!(p, LaunchProblem::GridTooLarge { axis: 'x', .. }));
    }
}
