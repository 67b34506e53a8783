//! Persistent-grid iteration (Pallas's `plgpu.nd_loop` and
//! `plgpu.planar_snake`): a fixed number of programs (CTAs or clusters,
//! usually one per SM) walk a logical iteration space, and a space-filling
//! order over the output tiles keeps concurrently computed tiles sharing
//! operands in L2.
//!
//! ```text
//! nd_loop([m_tiles * n_tiles], Collective::Blocks, |info| {
//!     let (pm, pn) = planar_snake(info.index[0], (m_tiles, n_tiles), 0, grid_tile_width);
//!     // ... one output tile; info.local_index counts this program's tiles
//! });
//! ```
//!
//! Program `p` of `P` visits the linear indices `p, p + P, p + 2P, ..`
//! below the grid's volume, in order (Pallas's static schedule): every
//! index is visited by exactly one program. Both functions are pure
//! arithmetic on `u32`s; only the program's own index and count come from
//! the hardware (`%ctaid`/`%nctaid`, or `%clusterid`/`%nclusterid`), which
//! the CPU emulator provides, so they need no emulator body of their own.
//! Who calls: every thread of a program, with the same arguments (the loop
//! is uniform across the program).

/// The programs a loop's iterations are split over (Pallas's
/// `collective_axes`): every CTA of the (1-D) grid, or every cluster
/// (all CTAs of one cluster get the same iterations, as Pallas's
/// `"cluster_grid"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// Program = the linear CTA index; count = CTAs in the grid.
    Blocks,
    /// Program = the linear cluster index; count = clusters in the grid.
    Clusters,
}

impl Collective {
    /// `(program index, program count)` of the calling thread.
    #[inline(always)]
    pub fn program(self) -> (u32, u32) {
        match self {
            Collective::Blocks => {
                let g = crate::index::grid_dim();
                (crate::index::block_linear(), g.x * g.y * g.z)
            }
            Collective::Clusters => {
                let (c, n) = (crate::index::cluster_idx(), crate::index::cluster_grid_dim());
                (c.x + n.x * (c.y + n.y * c.z), n.x * n.y * n.z)
            }
        }
    }
}

/// What the body of an [`nd_loop`] learns about its iteration (Pallas's
/// `NDLoopInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdLoopInfo<const R: usize> {
    /// The iteration's index in the grid (row-major: the last dimension
    /// changes fastest).
    pub index: [u32; R],
    /// How many iterations this program ran before this one (0 for its
    /// first): e.g. "skip the consumed-barrier waits only when `local_index
    /// == 0`".
    pub local_index: u32,
    /// How many iterations this program runs in total.
    pub num_local_steps: u32,
}

/// The number of iterations program `program` of `programs` runs over
/// `volume` linear indices.
#[inline(always)]
pub const fn local_steps(volume: u32, program: u32, programs: u32) -> u32 {
    if program >= volume {
        0
    } else {
        (volume - program).div_ceil(programs)
    }
}

/// Row-major unravel of `lin` in `grid`.
#[inline(always)]
pub fn unravel<const R: usize>(mut lin: u32, grid: [u32; R]) -> [u32; R] {
    let mut index = [0u32; R];
    let mut d = R;
    while d > 0 {
        d -= 1;
        index[d] = lin % grid[d];
        lin /= grid[d];
    }
    index
}

/// `plgpu.nd_loop(grid, collective_axes=..)`: runs `body` for this
/// program's share of the iterations of `grid` (module docs), in order.
/// Called by every thread of the program.
#[inline(always)]
pub fn nd_loop<const R: usize>(grid: [u32; R], collective: Collective, mut body: impl FnMut(NdLoopInfo<R>)) {
    let (program, programs) = collective.program();
    nd_loop_at(grid, program, programs, |info, ()| body(info), ())
}

/// As [`nd_loop`] with a carry threaded through the iterations (Pallas's
/// `init_carry=`): returns the last iteration's carry (`init` if none ran).
#[inline(always)]
pub fn nd_loop_carry<const R: usize, C>(
    grid: [u32; R],
    collective: Collective,
    init: C,
    body: impl FnMut(NdLoopInfo<R>, C) -> C,
) -> C {
    let (program, programs) = collective.program();
    nd_loop_at(grid, program, programs, body, init)
}

/// The loop of [`nd_loop`] for an explicit `program` of `programs` (host
/// code and tests use it directly).
#[inline(always)]
pub fn nd_loop_at<const R: usize, C>(
    grid: [u32; R],
    program: u32,
    programs: u32,
    mut body: impl FnMut(NdLoopInfo<R>, C) -> C,
    init: C,
) -> C {
    assert!(programs > 0, "nd_loop: the program count must be positive");
    let mut volume = 1u32;
    let mut d = 0;
    while d < R {
        volume *= grid[d];
        d += 1;
    }
    let num_local_steps = local_steps(volume, program, programs);
    let mut carry = init;
    let mut local_index = 0;
    while local_index < num_local_steps {
        let lin = program + local_index * programs;
        carry = body(NdLoopInfo { index: unravel(lin, grid), local_index, num_local_steps }, carry);
        local_index += 1;
    }
    carry
}

/// `plgpu.planar_snake(lin_idx, shape, minor_dim, tile_width)`: the
/// `(i0, i1)` index of `shape` that linear index `lin` maps to, in an order
/// that keeps neighbours close. The minor dimension (`minor_dim`, 0 or 1) is
/// split into tiles of `tile_width`; inside a tile the minor index changes
/// fastest; the major index runs forward in even tiles and backward in odd
/// ones, so consecutive tiles meet at the same end ("snake"). A last, narrower
/// tile takes the remainder. For shape `(8, 8)`, `minor_dim = 0`,
/// `tile_width = 2` the order is (Pallas's docstring):
///
/// ```text
///  0  2  4  6  8 10 12 14
///  1  3  5  7  9 11 13 15
/// 30 28 26 24 22 20 18 16
/// 31 29 27 25 23 21 19 17
/// 32 34 ...
/// ```
///
/// For a matmul's `(m_tiles, n_tiles)` with `minor_dim = 0`, `tile_width`
/// M tiles are visited together down each N column (they share B's tile),
/// and the turn at the end of a band reuses the last N column's B.
#[inline(always)]
pub fn planar_snake(lin: u32, shape: (u32, u32), minor_dim: u32, tile_width: u32) -> (u32, u32) {
    assert!(minor_dim < 2, "planar_snake: minor_dim must be 0 or 1");
    assert!(tile_width > 0, "planar_snake: tile_width must be positive");
    let (minor_size, major_size) = if minor_dim == 0 { (shape.0, shape.1) } else { (shape.1, shape.0) };
    let full_tiles = minor_size / tile_width;
    let full_elems = full_tiles * tile_width * major_size;
    // Inside the full tiles the width is `tile_width`; past them, one last
    // tile holds the remaining `minor_size % tile_width` minor indices.
    let (rel, width, tile) = if lin < full_elems {
        (lin, tile_width, lin / (tile_width * major_size))
    } else {
        (lin - full_elems, minor_size - full_tiles * tile_width, full_tiles)
    };
    let minor = tile * tile_width + rel % width;
    let major_in = (rel / width) % major_size;
    let major = if tile % 2 == 0 { major_in } else { major_size - 1 - major_in };
    if minor_dim == 0 {
        (minor, major)
    } else {
        (major, minor)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn planar_snake_matches_the_pallas_docstring() {
        // Pallas's example: shape (8, 8), minor_dim 0, tile_width 2.
        let want: [[u32; 8]; 4] = [
            [0, 2, 4, 6, 8, 10, 12, 14],
            [1, 3, 5, 7, 9, 11, 13, 15],
            [30, 28, 26, 24, 22, 20, 18, 16],
            [31, 29, 27, 25, 23, 21, 19, 17],
        ];
        let mut order = [[u32::MAX; 8]; 8];
        for lin in 0..64 {
            let (i, j) = planar_snake(lin, (8, 8), 0, 2);
            assert_eq!(order[i as usize][j as usize], u32::MAX, "({i}, {j}) visited twice");
            order[i as usize][j as usize] = lin;
        }
        for (r, row) in want.iter().enumerate() {
            assert_eq!(&order[r], row, "row {r}");
        }
        assert_eq!(order[4][0], 32);
        assert_eq!(order[4][1], 34);
        assert_eq!(order[7][7], 49);
    }

    #[test]
    fn planar_snake_is_a_bijection_with_ragged_tiles_and_both_minor_dims() {
        for &(s0, s1) in &[(7u32, 5u32), (1, 9), (9, 1), (33, 16), (16, 33)] {
            for minor in 0..2 {
                for w in 1..=10 {
                    let mut seen = std::vec![false; (s0 * s1) as usize];
                    for lin in 0..s0 * s1 {
                        let (i, j) = planar_snake(lin, (s0, s1), minor, w);
                        assert!(i < s0 && j < s1, "({s0}, {s1}) minor {minor} w {w}: {lin} -> ({i}, {j})");
                        let k = (i * s1 + j) as usize;
                        assert!(!seen[k], "({s0}, {s1}) minor {minor} w {w}: ({i}, {j}) twice");
                        seen[k] = true;
                    }
                }
            }
        }
        // minor_dim = 1: the transpose of minor_dim = 0 on the transposed shape.
        for lin in 0..35 {
            let (i, j) = planar_snake(lin, (7, 5), 1, 3);
            assert_eq!((j, i), planar_snake(lin, (5, 7), 0, 3));
        }
    }

    #[test]
    fn nd_loop_splits_the_grid_over_programs_in_order() {
        let grid = [3u32, 5];
        let programs = 4;
        let mut all = Vec::new();
        for p in 0..programs {
            let seen = nd_loop_at(
                grid,
                p,
                programs,
                |info, mut seen: Vec<[u32; 2]>| {
                    assert_eq!(info.local_index as usize, seen.len());
                    assert_eq!(info.num_local_steps, local_steps(15, p, programs));
                    seen.push(info.index);
                    seen
                },
                Vec::new(),
            );
            // Program p gets p, p + 4, p + 8, ..
            let want: Vec<[u32; 2]> = (p..15).step_by(programs as usize).map(|l| [l / 5, l % 5]).collect();
            assert_eq!(seen, want, "program {p}");
            all.extend(seen);
        }
        all.sort();
        assert_eq!(all.len(), 15);
        all.dedup();
        assert_eq!(all.len(), 15, "every index exactly once");
        // More programs than iterations: the extra ones run nothing.
        assert_eq!(local_steps(3, 5, 8), 0);
        assert_eq!(nd_loop_at([3u32], 5, 8, |_, n: u32| n + 1, 0), 0);
        assert_eq!(unravel(23, [2u32, 3, 4]), [1, 2, 3]);
    }
}
