//! The grouped rasterization of the warp-specialized matmul visits every
//! output tile exactly once, whatever the group size.
use kernels::hopper::tile_of;

#[test]
fn tile_of_is_a_bijection() {
    for (m_tiles, n_tiles) in [(1, 1), (64, 32), (132, 2), (7, 5), (16, 16)] {
        for group in [0, 1, 3, 8, 16] {
            let mut seen = vec![false; (m_tiles * n_tiles) as usize];
            for pid in 0..m_tiles * n_tiles {
                let (pm, pn) = tile_of(pid, m_tiles, n_tiles, group);
                assert!(pm < m_tiles && pn < n_tiles, "{m_tiles}x{n_tiles} g{group}: pid {pid} -> ({pm}, {pn})");
                let i = (pm * n_tiles + pn) as usize;
                assert!(!seen[i], "{m_tiles}x{n_tiles} g{group}: tile ({pm}, {pn}) twice");
                seen[i] = true;
            }
        }
    }
}

#[test]
fn groups_walk_m_within_a_group_first() {
    // 8 tile rows per group: pids 0..8 are rows 0..8 of column 0, then column 1.
    assert_eq!((0..9).map(|p| tile_of(p, 64, 32, 8)).collect::<Vec<_>>()[7..], [(7, 0), (0, 1)]);
    // group 0: M fastest over all rows.
    assert_eq!(tile_of(64, 64, 32, 0), (0, 1));
}
