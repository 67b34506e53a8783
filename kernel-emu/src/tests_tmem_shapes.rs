//! Unit tests of the TMEM data-movement shapes (`tcgen05.ld`/`st`
//! `.16x64b`, `.16x128b`, `.16x256b`, `.16x32bx2`) and the M = 64 MMA data
//! path: the fragment maps against CUTLASS's copy traits, the data each
//! shape moves against `.32x32b` accesses of the same cells, and the checks
//! (lane quarter, in-flight accesses, MMA completion) on the new regions.
#![allow(clippy::result_large_err)] // `EmuError` as the emulator returns it
use super::tmem::{self, Shape};
use super::*;
use crate::tests::run_t;

const SEEDS: [u64; 2] = [11, 0xC0FFEE];


fn tid_x() -> u32 {
    thread_idx()[0]
}

/// A CuTe layout mode list, `(shape, stride)` per mode, evaluated
/// colexicographically (the first mode fastest), as CuTe does.
fn cute(modes: &[(u32, u32)], mut i: u32) -> u32 {
    let mut off = 0;
    for &(n, s) in modes {
        off += (i % n) * s;
        i /= n;
    }
    off
}

/// CUTLASS's `Copy_Traits<SM100_TMEM_LOAD_16dp*>` (`cute/atom/copy_traits_sm100.hpp`),
/// pasted: the shape with its repetition count `.xN`, the bits per TMEM
/// lane of the atom (`ValID`'s first mode; lanes are the second), and
/// `DstLayout`'s thread modes and value modes (a value is one bit of the
/// thread's registers, 32 per register). The 16dp32b traits (`.16x32bx2`)
/// use `immHalfSplitoff = N` (`copy_sm100.hpp`).
#[allow(clippy::type_complexity)]
const CUTLASS: &[(Shape, u32, u32, &[(u32, u32)], &[(u32, u32)])] = &[
    (Shape::S16x64b, 1, 64, &[(2, 512), (2, 32), (8, 64)], &[(32, 1)]),
    (Shape::S16x64b, 2, 128, &[(2, 1024), (2, 32), (8, 128)], &[(32, 1), (2, 64)]),
    (Shape::S16x128b, 1, 128, &[(4, 32), (8, 128)], &[(32, 1), (2, 1024)]),
    (Shape::S16x128b, 2, 256, &[(4, 32), (8, 256)], &[(32, 1), (2, 2048), (2, 128)]),
    (Shape::S16x256b, 1, 256, &[(4, 64), (8, 256)], &[(64, 1), (2, 2048)]),
    (Shape::S16x256b, 2, 512, &[(4, 64), (8, 512)], &[(64, 1), (2, 4096), (2, 256)]),
    (Shape::S16x32bx2 { split: 1 }, 1, 64, &[(16, 64), (2, 32)], &[(32, 1)]),
    (Shape::S16x32bx2 { split: 2 }, 2, 128, &[(16, 128), (2, 64)], &[(64, 1)]),
];

#[test]
fn fragment_maps_are_cutlass_copy_traits() {
    for &(shape, reps, width, thr, val) in CUTLASS {
        let nregs = reps * shape.regs_per_rep();
        let mut seen = std::collections::BTreeSet::new();
        for l in 0..32 {
            for r in 0..nregs {
                let bit = cute(thr, l) + cute(val, 32 * r);
                let want = (bit / width, bit % width / 32);
                assert_eq!(shape.cell(l, r), want, "{shape:?}.x{reps}: lane {l} register {r}");
                seen.insert(want);
            }
        }
        // One warp covers the 16 x (width / 32) atom, each cell once.
        assert_eq!(seen.len() as u32, 32 * nregs, "{shape:?}.x{reps}");
        assert_eq!(seen.len() as u32, 16 * width / 32, "{shape:?}.x{reps}");
    }
}

/// The ISA's `.16x256b` fragment written out as a table (rows of the
/// 16 x 8 atom, the warp lane and register each cell goes to): the
/// `mma.m16n8` accumulator pattern, two columns per thread of a quad.
#[test]
fn the_16x256b_fragment_is_the_m16n8_accumulator_pattern() {
    for row in 0..16u32 {
        for col in 0..8u32 {
            let lane = 4 * (row % 8) + col / 2;
            let reg = col % 2 + 2 * (row / 8);
            assert_eq!(Shape::S16x256b.cell(lane, reg), (row, col));
        }
    }
    // .x2: the second repetition (registers 4..8) is the atom 8 columns
    // to the right.
    assert_eq!(Shape::S16x256b.cell(5, 4), (1, 8 + 2));
    assert_eq!(Shape::S16x256b.cell(5, 7), (9, 8 + 3));
}

/// 4 warps (one warpgroup), 32 TMEM columns at column 0 (slot at smem 0).
fn setup() {
    if warp_id() == 0 {
        tmem::alloc(0, 32);
    }
    if tid_x() == 0 {
        mbarrier_init(8, 1);
    }
    bar_sync(0, 0);
}

fn teardown() {
    bar_sync(0, 0);
    if warp_id() == 0 {
        tmem::dealloc(0, 32);
    }
}

/// The value the pattern puts in cell (lane, col).
fn tag(lane: u32, col: u32) -> u32 {
    lane << 16 | col
}

fn launch(name: &str, seed: u64, f: impl Fn() + Send + Sync + 'static) -> Result<RunReport, EmuError> {
    let mut c = LaunchConfig::new(name, [1, 1, 1], [128, 1, 1]);
    c.smem_bytes = 32;
    c.seed = seed;
    run_t(c, f)
}

/// Every shape at both 16-lane halves of each warp's quarter, `.x1` and
/// `.x2` (and `.16x32bx2` with split offsets 2 and 8): loads read what
/// `.32x32b` stores put in the cells `Shape::cell` names, and stores put
/// their registers where `.32x32b` loads find them.
#[test]
fn every_shape_moves_the_cells_of_its_fragment_map() {
    let shapes = [Shape::S16x64b, Shape::S16x128b, Shape::S16x256b, Shape::S16x32bx2 { split: 2 }, Shape::S16x32bx2 { split: 8 }];
    for seed in SEEDS {
        launch("tmem_shapes", seed, move || {
            setup();
            let (w, l) = (warp_id() % 4, tid_x() % 32);
            let base = 32 * w;
            // Fill this warp's quarter, columns 0..16, with the tags.
            let row: Vec<u32> = (0..16).map(|c| tag(base + l, c)).collect();
            tmem::st_32x32b(base << 16, &row);
            tmem::wait_st();
            for shape in shapes {
                for half in [0, 16] {
                    for reps in [1, 2] {
                        let n = (reps * shape.regs_per_rep()) as usize;
                        let taddr = (base + half) << 16;
                        let mut out = vec![0u32; n];
                        tmem::ld(shape, taddr, &mut out);
                        tmem::wait_ld();
                        for (r, &v) in out.iter().enumerate() {
                            let (dl, dc) = shape.cell(l, r as u32);
                            assert_eq!(v, tag(base + half + dl, dc), "{shape:?} x{reps} half {half}: lane {l} register {r}");
                        }
                        // Store the registers + 1 back with the same
                        // shape; each lane's row as a .32x32b load sees them.
                        let inc: Vec<u32> = out.iter().map(|v| v + 1).collect();
                        tmem::st(shape, taddr, &inc);
                        tmem::wait_st();
                        // Other threads' cells of this lane: a warp barrier
                        // after their wait::st orders them before the load.
                        warp_sync();
                        let mut back = [0u32; 16];
                        tmem::ld_32x32b(base << 16, &mut back);
                        tmem::wait_ld();
                        let lane = base + l;
                        let mut touched = [false; 16];
                        for lane_src in 0..32 {
                            for r in 0..n as u32 {
                                let (dl, dc) = shape.cell(lane_src, r);
                                if base + half + dl == lane {
                                    touched[dc as usize] = true;
                                }
                            }
                        }
                        for c in 0..16 {
                            let want = tag(lane, c as u32) + u32::from(touched[c]);
                            assert_eq!(back[c], want, "{shape:?} x{reps} half {half}: store, lane {lane} column {c}");
                        }
                        // Restore the pattern for the next shape.
                        tmem::st_32x32b(base << 16, &row);
                        tmem::wait_st();
                        warp_sync();
                    }
                }
            }
            teardown();
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

fn expect_misuse(r: Result<RunReport, EmuError>, rule: &str, has: &[&str]) {
    match r {
        Err(EmuError::Misuse { rule: got, detail, where_, .. }) => {
            assert!(got.contains(rule), "expected `{rule}`, got `{got}`: {detail}");
            for h in has {
                assert!(detail.contains(h) || where_.contains(h), "`{h}` missing from `{got}` at {where_}: {detail}");
            }
        }
        other => panic!("expected `{rule}`, got {other:?}"),
    }
}

#[test]
fn a_16_lane_access_must_start_at_a_half_of_the_warps_quarter() {
    for (off, ok) in [(0, true), (16, true), (8, false), (32, false)] {
        let r = launch("tmem_16_lane_offset", 3, move || {
            setup();
            let mut out = [0u32; 4];
            tmem::ld(Shape::S16x256b, (32 * (warp_id() % 4) + off) << 16, &mut out);
            tmem::wait_ld();
            teardown();
        });
        if ok {
            r.unwrap_or_else(|e| panic!("offset {off}: {e}"));
        } else {
            expect_misuse(r, "TMEM lane quarter of another warp", &["tcgen05.ld.16x256b", "a 16-lane .16x256b access starts at lane"]);
        }
    }
}

/// Warp 0 stores with `.16x64b` (lanes 0..16, columns 0..2) and loads the
/// same cells with `.16x256b` before (`wait`: after) its `tcgen05.wait::st`;
/// and stores over its own in-flight `.16x128b` load (`wait`: after its
/// `tcgen05.wait::ld`).
#[test]
fn in_flight_16_lane_stores_and_loads_are_reported() {
    for wait in [true, false] {
        let r = launch("tmem_16x_in_flight_store", 5, move || {
            setup();
            if warp_id() == 0 {
                tmem::st(Shape::S16x64b, 0, &[7]);
                if wait {
                    tmem::wait_st();
                }
                // Every lane's store issued before any load (as the
                // warp-collective instructions are on the GPU).
                warp_sync();
                let mut out = [0u32; 4];
                tmem::ld(Shape::S16x256b, 0, &mut out);
                tmem::wait_ld();
                tmem::wait_st();
            }
            teardown();
        });
        if wait {
            r.unwrap_or_else(|e| panic!("twin: {e}"));
        } else {
            expect_misuse(r, "TMEM accessed before the tcgen05.st that writes it completed", &["tcgen05.ld.16x256b", "called no tcgen05.wait::st (commit_tmem) since"]);
        }
        let r = launch("tmem_16x_store_over_load", 5, move || {
            setup();
            if warp_id() == 0 {
                let mut out = [0u32; 2];
                tmem::ld(Shape::S16x128b, 0, &mut out);
                if wait {
                    tmem::wait_ld();
                }
                warp_sync();
                tmem::st(Shape::S16x32bx2 { split: 1 }, 0, &[1]);
                tmem::wait_st();
                tmem::wait_ld();
            }
            teardown();
        });
        if wait {
            r.unwrap_or_else(|e| panic!("twin: {e}"));
        } else {
            expect_misuse(r, "TMEM overwritten while an in-flight tcgen05.ld reads it", &["tcgen05.st.16x32bx2", "tcgen05.wait::ld"]);
        }
    }
}

/// Thread 0 issues `D[64 x 8] = A · Bᵀ` (A row i all i + 1, K = 16; B row
/// j all j + 1, so D[i][j] = 16 (i + 1) (j + 1)) at TMEM lane `lane`,
/// commits to the mbarrier at 8; every warp reads its 16 rows with
/// `.16x256b` (or, `early`, before the wait: reported).
fn m64(lane: u32, early: bool, seed: u64) -> Result<RunReport, EmuError> {
    launch("tmem_m64", seed, move || {
        setup();
        if tid_x() == 0 {
            let a: Vec<f32> = (0..64 * 16).map(|i| (i / 16 + 1) as f32).collect();
            let b: Vec<f32> = (0..8 * 16).map(|i| (i / 16 + 1) as f32).collect();
            tmem::mma(tmem::MmaIssue {
                d: lane << 16,
                a: tmem::AOperand::Smem(a),
                b,
                m: 64,
                n: 8,
                k: 16,
                accumulate: false,
                dtype: tmem::DType::F32,
                smem_reads: &[],
                op: "tcgen05.mma",
            });
            tmem::commit(8);
        }
        let (w, l) = (warp_id() % 4, tid_x() % 32);
        let taddr = (32 * w + lane) << 16;
        // The other half of the quarter is not the MMA's: reading it early
        // is no misuse (it holds zeros).
        let mut other = [1u32; 4];
        tmem::ld(Shape::S16x256b, (32 * w + (16 - lane)) << 16, &mut other);
        tmem::wait_ld();
        assert_eq!(other, [0; 4]);
        if !early {
            mbarrier_try_wait_parity(8, 0);
            tmem::fence_after_thread_sync();
        }
        let mut out = [0u32; 4];
        tmem::ld(Shape::S16x256b, taddr, &mut out);
        tmem::wait_ld();
        for (r, v) in out.iter().enumerate() {
            // Row 16 w + (lane offset in the half) of D.
            let (dl, dc) = Shape::S16x256b.cell(l, r as u32);
            let i = 16 * w + dl;
            assert_eq!(f32::from_bits(*v), (16 * (i + 1) * (dc + 1)) as f32, "row {i} column {dc}");
        }
        if early {
            mbarrier_try_wait_parity(8, 0);
        }
        tmem::fence_before_thread_sync();
        teardown();
    })
}

#[test]
fn an_m64_accumulator_takes_half_of_each_lane_quarter() {
    for seed in SEEDS {
        for lane in [0, 16] {
            m64(lane, false, seed).unwrap_or_else(|e| panic!("seed {seed}, lane {lane}: {e}"));
            let d = format!("lanes {}..{}, {}..{}, {}..{}, {}..{}, columns 0..8", lane, lane + 16, lane + 32, lane + 48, lane + 64, lane + 80, lane + 96, lane + 112);
            expect_misuse(m64(lane, true, seed), "TMEM read before the MMA that writes it completed", &["tcgen05.ld.16x256b", &d]);
        }
    }
}

/// A cluster of 2 CTAs: the leader's thread 0 issues a cta_group::2 MMA
/// of M = 128 (64 rows per CTA), N = 16, K = 16, A row `i` all
/// `i + 1` in the leader and `100 + i` in the peer, B row `j` all `j + 1`,
/// and multicasts its commit to the mbarrier at 8 of both CTAs; every
/// thread of both waits on it and reads its lane with `.32x32b`: lanes
/// 0..64 hold the CTA's rows for columns 0..8, lanes 64..128 for columns
/// 8..16 (the ISA's layout B). `early`: the peer's warps 2-3 read before
/// the wait (reported: the folded half is the MMA's too).
fn pair_m128(early: bool, seed: u64) -> Result<RunReport, EmuError> {
    let mut c = LaunchConfig::new("tmem_pair_m128", [2, 1, 1], [128, 1, 1]);
    c.cluster = [2, 1, 1];
    c.smem_bytes = 32;
    c.seed = seed;
    run_t(c, move || {
        setup();
        cluster_arrive();
        cluster_wait();
        let rank = cluster_ctarank();
        if rank == 0 && tid_x() == 0 {
            let a: Vec<f32> = (0..64 * 16).map(|i| (i / 16 + 1) as f32).collect();
            let peer_a: Vec<f32> = (0..64 * 16).map(|i| (100 + i / 16) as f32).collect();
            let b: Vec<f32> = (0..16 * 16).map(|i| (i / 16 + 1) as f32).collect();
            tmem::mma_pair(
                tmem::MmaIssue { d: 0, a: tmem::AOperand::Smem(a), b, m: 64, n: 16, k: 16, accumulate: false, dtype: tmem::DType::F32, smem_reads: &[], op: "tcgen05.mma.cta_group::2" },
                1,
                peer_a,
                &[],
            );
            tmem::commit_multicast(8, 0b11);
        }
        // Orders the issue (not the MMA's completion) before the reads.
        cluster_arrive();
        cluster_wait();
        let w = warp_id() % 4;
        let lane = 32 * w + tid_x() % 32;
        if !(early && rank == 1 && w >= 2) {
            mbarrier_try_wait_parity(8, 0);
            tmem::fence_after_thread_sync();
        }
        let mut out = [0u32; 8];
        tmem::ld_32x32b((32 * w) << 16, &mut out);
        tmem::wait_ld();
        let (row, col0) = (lane % 64, 8 * (lane / 64));
        let a_row = if rank == 0 { row + 1 } else { 100 + row };
        for (c, v) in out.iter().enumerate() {
            let j = col0 + c as u32;
            assert_eq!(f32::from_bits(*v), (16 * a_row * (j + 1)) as f32, "cta {rank}: row {row} column {j}");
        }
        if early && rank == 1 && w >= 2 {
            mbarrier_try_wait_parity(8, 0);
        }
        tmem::fence_before_thread_sync();
        cluster_arrive();
        cluster_wait();
        teardown();
    })
}

#[test]
fn a_pair_mma_of_m128_folds_each_ctas_columns_into_the_upper_lanes() {
    for seed in SEEDS {
        pair_m128(false, seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        expect_misuse(pair_m128(true, seed), "TMEM read before the MMA that writes it completed", &["lanes 0..64, 64..128, columns 0..8"]);
    }
}
