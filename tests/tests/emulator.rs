//! The CPU emulator: every example that uses only emulated operations runs
//! correctly under several schedules, and each planted bug is caught with
//! the expected message.
use examples::FIRST_EXAMPLES;
use kernel_host::emulate::{EmuError, Emulator};
use kernel_fixtures::planted;
use kernel_host::Device;

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

#[test]
fn first_examples_match_the_cpu_reference_under_4_schedules() {
    for emu in Emulator::schedules(1, 4) {
        let dev = Device::emulator_with(emu.clone());
        for (name, run) in FIRST_EXAMPLES {
            if name == "cluster_allreduce16" {
                continue; // two clusters of 16, in its own test
            }
            if let Err(e) = run(&dev) {
                panic!("seed {}: {name}: {e}", emu.seed());
            }
        }
    }
}

fn expect_err(seed: u64, r: Result<kernel_host::emulate::RunReport, EmuError>) -> EmuError {
    match r {
        Ok(_) => panic!("seed {seed}: the planted bug was not caught"),
        Err(e) => e,
    }
}

#[test]
fn thread_skipping_a_cta_barrier_is_a_deadlock() {
    for seed in SEEDS {
        let mut y = vec![0f32; 64];
        let e = expect_err(
            seed,
            Emulator::new(seed).launch::<planted::skip_barrier, _>(1u32, (&mut y[..],)),
        );
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {seed}: {msg}");
        assert!(
            msg.contains("skip_barrier") && msg.contains("bar"),
            "seed {seed}: {msg}"
        );
    }
}

#[test]
fn missing_arrival_is_a_deadlock_on_the_mbarrier() {
    for seed in SEEDS {
        let mut y = vec![0f32; 128];
        let e = expect_err(
            seed,
            Emulator::new(seed).launch::<planted::missing_arrive, _>(1u32, (&mut y[..],)),
        );
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {seed}: {msg}");
        assert!(msg.contains("mbarrier"), "seed {seed}: {msg}");
    }
}

#[test]
fn extra_arrival_is_a_barrier_misuse() {
    for seed in SEEDS {
        let mut y = vec![0f32; 128];
        let e = expect_err(
            seed,
            Emulator::new(seed).launch::<planted::extra_arrive, _>(1u32, (&mut y[..],)),
        );
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Misuse { .. }), "seed {seed}: {msg}");
        assert!(msg.contains("arrival"), "seed {seed}: {msg}");
    }
}

#[test]
fn announced_bytes_never_delivered_is_a_deadlock_naming_the_transaction_count() {
    for seed in SEEDS {
        let mut y = vec![0f32; 32];
        let e = expect_err(
            seed,
            Emulator::new(seed).launch::<planted::missing_copy, _>(1u32, (&mut y[..],)),
        );
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {seed}: {msg}");
        assert!(msg.contains("tx"), "seed {seed}: {msg}");
    }
}

#[test]
fn same_seed_same_result_and_cluster_grid_checked() {
    // A grid that is not a multiple of the cluster is refused before running.
    let x = vec![0f32; 3 * 128];
    let mut y = vec![0f32; 3 * 128];
    let e = Emulator::new(1)
        .launch::<kernels::first::cluster_exchange, _>(3u32, (&x[..], &mut y[..]))
        .unwrap_err();
    assert!(e.to_string().contains("multiple of the cluster"), "{e}");
}

// ----- Hopper kernels: TMA and wgmma on the emulator ----------------------------

use examples::hopper;

#[test]
fn tma_multicast_and_warp_roles_match_the_cpu_reference() {
    for seed in [1, 2] {
        let dev = Device::emulator_with(Emulator::new(seed));
        hopper::multicast_copy(&dev)
            .unwrap_or_else(|e| panic!("seed {seed}: multicast_copy: {e}"));
        hopper::warp_roles(&dev).unwrap_or_else(|e| panic!("seed {seed}: warp_roles: {e}"));
    }
}

/// A raw-pointer parameter's plain dereferences are invisible to the race
/// detector: a planted write-write race through one runs to the end
/// unreported, and the run's report says which parameter was not
/// race-checked; the same race through `gmem::raw::store` is reported.
#[test]
fn raw_pointer_accesses_are_not_race_checked_and_the_report_says_so() {
    let mut y = vec![0f32; 1];
    let report = Emulator::new(1).launch::<planted::raw_pointer_race_unseen, _>(1u32, (&mut y[..],)).expect("no report: the detector cannot see raw pointers");
    assert!(
        report.warnings.iter().any(|w| w.contains("raw_pointer_race_unseen") && w.contains("raw-pointer parameter(s) `y`") && w.contains("not race-checked") && w.contains("Gmem")),
        "{:?}",
        report.warnings
    );
    // Through `gmem::raw::store` the same race is reported, at the kernel's line.
    let e = Emulator::new(1).launch::<planted::raw_pointer_race_seen, _>(1u32, (&mut y[..],)).expect_err("gmem::raw::store reports its writes");
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Race { .. }) && msg.contains("write-write race on global memory") && msg.contains("planted.rs"), "{msg}");
}

/// The pointer escape hatches check themselves on the emulator (issue 42,
/// item 1): a write-write race through `Gmem::ptr` / `Smem::elem_ptr` is a
/// race report naming the kernel's line, and a read one past a `GmemRef`
/// view or past a scratch array (into the next allocation) is an
/// out-of-bounds report naming the allocation and the line, in both
/// memories, with no call of the kernel's own to the emulator.
#[test]
fn pointer_races_and_out_of_bounds_reads_are_reported_in_both_memories() {
    let run = |which: u32| {
        let mut x = vec![1f32; 32];
        let mut y = vec![0f32; 32];
        Emulator::new(7)
            .launch::<planted::pointer_misuse, _>(1u32, (&mut x[..], &mut y[..], which))
            .expect_err("the pointer's access must be reported")
    };
    for (which, space) in [(planted::PTR_GMEM_RACE, "global memory"), (planted::PTR_SMEM_RACE, "shared memory")] {
        let e = run(which);
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Race { .. }), "{which}: {msg}");
        assert!(msg.contains(&format!("write-write race on {space}")) && msg.contains("planted.rs"), "{which}: {msg}");
    }
    let e = run(planted::PTR_GMEM_OOB_READ);
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Misuse { .. }), "{msg}");
    for want in ["out-of-bounds global-memory access through a pointer", "byte offset 128 of a 128-byte Gmem view", "thread (31,0,0)", "planted.rs"] {
        assert!(msg.contains(want), "the report lacks `{want}`: {msg}");
    }
    let e = run(planted::PTR_SMEM_OOB_READ);
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Misuse { .. }), "{msg}");
    for want in ["out-of-bounds shared-memory access through a pointer", "of a 256-byte shared-memory allocation", "planted.rs"] {
        assert!(msg.contains(want), "the report lacks `{want}`: {msg}");
    }
}

/// The FP8 wgmma forms (`m64n256k32.f32.e4m3.e4m3` and `.e5m2.e5m2`):
/// exact products summed in f32 against the f64 sum, on 4 schedules.
#[test]
fn wgmma_fp8_matches_the_cpu_reference() {
    for seed in 0..4 {
        let errs = hopper::wgmma_fp8(&Device::emulator_with(Emulator::new(seed))).unwrap_or_else(|e| panic!("wgmma_fp8 (seed {seed}): {e}"));
        assert!(errs.iter().all(|&e| e < 1e-6), "seed {seed}: relative Frobenius errors (e4m3, e5m2) {errs:?}");
    }
}

#[test]
fn wgmma_variants_match_the_cpu_reference() {
    let errs = hopper::wgmma_variants(&Device::emulator_with(Emulator::new(3)))
        .unwrap_or_else(|e| panic!("wgmma_variants: {e}"));
    eprintln!("wgmma_variants: relative Frobenius errors {errs:?}");
    for (v, e) in errs.iter().enumerate() {
        assert!(*e < 1e-2, "variant {v}: relative Frobenius error {e}");
    }
}

/// `A · Bᵀ` with transposed SMEM views (MN-major A, B, both) on the
/// emulator, which decodes each operand as its descriptor and transpose
/// immediate say: every variant matches the CPU product (an operand read
/// K-major instead would be the wrong matrix, an error near 1.4).
#[test]
fn wgmma_transposed_views_match_the_cpu_reference() {
    let errs = hopper::wgmma_transposed(&Device::emulator_with(Emulator::new(5)))
        .unwrap_or_else(|e| panic!("wgmma_transposed: {e}"));
    eprintln!("wgmma_transposed: relative Frobenius errors {errs:?}");
    for (v, e) in errs.iter().enumerate() {
        assert!(*e < 1e-5, "variant {v}: relative Frobenius error {e}");
    }
}

/// One emulated matmul at 256 x 256 x 256 (4 K steps: every stage slot is
/// reused) under scheduler seed `seed`.
fn emulated_matmul(name: &str, seed: u64) {
    let (m, n, k) = (256, 256, 256);
    let t = std::time::Instant::now();
    let err = hopper::matmul(&Device::emulator_with(Emulator::new(seed)), name, m, n, k, 40 + seed)
        .unwrap_or_else(|e| panic!("seed {seed}: {name}: {e}"));
    eprintln!(
        "{name} {m}x{n}x{k} seed {seed}: rel err {err:.2e}, {:.2?}",
        t.elapsed()
    );
    assert!(
        err < 1e-2,
        "seed {seed}: {name}: relative Frobenius error {err}"
    );
}

#[test]
fn matmul_pipelined_matches_the_cpu_reference() {
    for seed in [1, 2] {
        emulated_matmul("pipelined<2>", seed);
    }
}

#[test]
fn matmul_pipelined_kn_matches_the_cpu_reference() {
    for seed in [1, 2] {
        emulated_matmul("pipelined_kn<2>", seed);
    }
}

#[test]
fn matmul_warp_specialized_matches_the_cpu_reference() {
    for seed in [1, 2] {
        emulated_matmul("warp_specialized<2,0>", seed);
    }
}

#[test]
fn tma_fills_rows_past_the_tensor_edge_with_zeros() {
    use kernel_host::emulate::EmuTensorMap;
    // warp_roles over 4 tiles of 64 rows, but the map says the tensor has
    // only 246 rows: the last tile's 10 rows past the edge load as zeros.
    let (tiles, rows) = (4usize, 246usize);
    let x: Vec<f32> = examples::inputs(tiles * 64 * 64, 11);
    let mut y = vec![f32::NAN; x.len()];
    let xm = EmuTensorMap::<kernels::hopper::RoleTile>::new_2d(&x, rows, 64).unwrap();
    Emulator::new(5)
        .launch::<kernels::hopper::warp_roles, _>(tiles as u32, (&xm, &mut y[..]))
        .unwrap();
    for (i, (&got, &v)) in y.iter().zip(&x).enumerate() {
        let want = if i / 64 < rows { 2.0 * v } else { 0.0 };
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "element {i} (row {})",
            i / 64
        );
    }
}

#[test]
fn emulator_tensor_maps_are_checked() {
    use kernel_host::emulate::EmuTensorMap;
    let x = vec![0f32; 64 * 64];
    // The slice is too short for the tensor the map describes.
    let e = EmuTensorMap::<kernels::hopper::RoleTile>::new_2d(&x, 128, 64)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("bytes"), "{e}");
    // A row of 62 f32 (248 bytes) is not a multiple of 16 bytes.
    let e = EmuTensorMap::<kernels::hopper::RoleTile>::new_2d(&x, 64, 62)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("multiple of 16"), "{e}");
}

// ----- async-proxy checks ---------------------------------------------------------

#[test]
fn tma_store_of_smem_without_commit_smem_is_a_misuse() {
    use kernel_host::emulate::EmuTensorMap;
    for seed in SEEDS {
        let mut y = vec![0f32; 64 * 32];
        let ym = EmuTensorMap::<planted::PlantTile>::new_2d_mut(&mut y, 64, 32).unwrap();
        let e = expect_err(
            seed,
            Emulator::new(seed).launch::<planted::store_without_commit, _>(1u32, (&ym,)),
        );
        let msg = e.to_string();
        if seed == 1 {
            eprintln!("{msg}");
        }
        let EmuError::Misuse { rule, where_, .. } = &e else {
            panic!("seed {seed}: not a misuse: {msg}")
        };
        assert!(
            rule.contains("read by the async proxy") && rule.contains("commit_smem"),
            "seed {seed}: {msg}"
        );
        assert!(
            msg.contains("store_without_commit") && msg.contains("smem+0x"),
            "seed {seed}: {msg}"
        );
        assert!(
            where_.contains("thread (0,0,0)") && where_.contains("planted.rs"),
            "seed {seed}: {msg}"
        );
    }
}

#[test]
fn tma_load_over_smem_of_an_in_flight_wgmma_is_a_misuse() {
    use kernel_host::emulate::EmuTensorMap;
    use kernel_host::randn_f16;
    use kernels::hopper::{ATile, BTile, OTile};
    let (m, n, k) = (128, 128, 256);
    let a = randn_f16(m * k, 1);
    let b = randn_f16(n * k, 2);
    for seed in SEEDS {
        let mut c = randn_f16(m * n, 3);
        let am = EmuTensorMap::<ATile>::new_2d(&a, m, k).unwrap();
        let bm = EmuTensorMap::<BTile>::new_2d(&b, n, k).unwrap();
        let cm = EmuTensorMap::<OTile>::new_2d_mut(&mut c, m, n).unwrap();
        let e = expect_err(
            seed,
            Emulator::new(seed).launch::<planted::release_too_early, _>(
                (1u32, 1u32),
                (&am, &bm, &cm, (k / 64) as u32),
            ),
        );
        let msg = e.to_string();
        if seed == 1 {
            eprintln!("{msg}");
        }
        let EmuError::Misuse { rule, .. } = &e else {
            panic!("seed {seed}: not a misuse: {msg}")
        };
        assert!(
            rule.contains("TMA overwrites SMEM still read by an in-flight wgmma")
                && rule.contains("wgmma_wait"),
            "seed {seed}: {msg}"
        );
        assert!(
            msg.contains("release_too_early") && msg.contains("as a wgmma operand"),
            "seed {seed}: {msg}"
        );
    }
}

#[test]
fn deadlock_report_names_the_kernel_source_line() {
    let mut y = vec![0f32; 128];
    let e = Emulator::new(1)
        .launch::<planted::missing_arrive, _>(1u32, (&mut y[..],))
        .unwrap_err();
    let msg = e.to_string();
    eprintln!("{msg}");
    assert!(matches!(e, EmuError::Deadlock { .. }), "{msg}");
    assert!(
        msg.contains("tests/fixtures/src/planted.rs:"),
        "the deadlock report does not name the kernel's line: {msg}"
    );
}

#[test]
fn waiting_after_several_completed_phases_is_a_skipped_phase() {
    for emu in Emulator::schedules(11, 4) {
        let mut y = vec![0f32; 64];
        let e = expect_err(emu.seed(), emu.launch::<planted::skip_phase, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Misuse { .. }) && msg.contains("skipped a phase"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn arrivals_pending_at_kernel_end_are_reported() {
    for emu in Emulator::schedules(21, 4) {
        let mut y = vec![0f32; 32];
        let e = expect_err(emu.seed(), emu.launch::<planted::pending_at_exit, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Misuse { .. }) && msg.contains("arrivals pending when the kernel ended"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn tma_load_past_the_end_of_shared_memory_is_out_of_bounds() {
    use kernel_host::emulate::EmuTensorMap;
    for emu in Emulator::schedules(31, 4) {
        let x = vec![1f32; 8 * 32];
        let map = EmuTensorMap::<planted::SmallTile>::new_2d(&x, 8, 32).expect("map");
        let e = expect_err(emu.seed(), emu.launch::<planted::smem_out_of_bounds, _>(1u32, (&map,)));
        let msg = e.to_string();
        // Caught where the destination address is formed from the pointer.
        assert!(
            matches!(e, EmuError::Misuse { .. }) && msg.contains("not in this CTA's dynamic shared memory"),
            "seed {}: {msg}",
            emu.seed()
        );
    }
}

#[test]
fn collective_copy_not_issued_by_every_cta_is_reported() {
    use kernel_host::emulate::EmuTensorMap;
    use kernels::hopper::{McHalf, MC_COLS, MC_ROWS};
    for emu in Emulator::schedules(41, 4) {
        let x = vec![1f32; MC_ROWS * MC_COLS];
        let map = EmuTensorMap::<McHalf>::new_2d(&x, MC_ROWS, MC_COLS).expect("map");
        let e = expect_err(emu.seed(), emu.launch::<planted::multicast_one_sided, _>(2u32, (&map,)));
        let msg = e.to_string();
        assert!(
            matches!(e, EmuError::Deadlock { .. }) && msg.contains("collective copy not issued by every CTA of the cluster") && msg.contains("rank(s) [1] did not"),
            "seed {}: {msg}",
            emu.seed()
        );
    }
}

/// The report of an out-of-bounds global-memory access at index 32 of 32
/// elements: a misuse naming the index and the kernel's line.
fn assert_gmem_index_32_out_of_bounds(seed: u64, e: EmuError) {
    let msg = e.to_string();
    assert!(
        matches!(e, EmuError::Misuse { .. }) && msg.contains("out-of-bounds global-memory access") && msg.contains("index 32 of a Gmem of 32"),
        "seed {seed}: {msg}"
    );
    assert!(msg.contains("planted.rs"), "the report names the kernel's line: {msg}");
}

#[test]
fn gmem_index_past_the_end_is_out_of_bounds() {
    for emu in Emulator::schedules(51, 4) {
        let mut y = vec![0f32; 32];
        assert_gmem_index_32_out_of_bounds(emu.seed(), expect_err(emu.seed(), emu.launch::<planted::gmem_out_of_bounds, _>(1u32, (&mut y[..],))));
    }
}

/// `GmemRef::read_nc_unchecked` skips its bounds check on the GPU only: on
/// the emulator a read past the end is still reported, naming the kernel's
/// line.
#[test]
fn gmem_unchecked_read_past_the_end_is_out_of_bounds_on_the_emulator() {
    for emu in Emulator::schedules(52, 2) {
        let x = vec![1f32; 32];
        let mut y = vec![0f32; 32];
        assert_gmem_index_32_out_of_bounds(emu.seed(), expect_err(emu.seed(), emu.launch::<planted::gmem_unchecked_read_out_of_bounds, _>(1u32, (&x[..], &mut y[..]))));
    }
}

/// Every other instance of the Hopper matmuls (more slots, grouped
/// rasterization) once, so every example kernel in the repository runs on
/// the emulator.
#[test]
fn every_other_matmul_instance_matches_the_cpu_reference() {
    for name in hopper::MATMULS {
        if ["pipelined<2>", "pipelined_kn<2>", "warp_specialized<2,0>"].contains(&name) {
            continue; // run under 2 seeds above
        }
        emulated_matmul(name, 3);
    }
}

/// `cluster::cluster_allreduce` (a 2 x 2 cluster, `ClusterBarrier<X>`,
/// `<Y>` and `<WholeCluster>`, 2 steps) under 4 seeds: every CTA gets the
/// cluster's sum.
#[test]
fn cluster_barrier_allreduce_matches_the_cpu_reference() {
    use kernels::cluster::{cluster_allreduce, ALLREDUCE_LEN as L};
    let steps = 2usize;
    let mut x: Vec<f32> = (0..4 * steps * L).map(|i| (i % 29) as f32 - 7.0).collect();
    let want = examples::allreduce2x2_reference(&x, steps);
    for emu in Emulator::schedules(61, 4) {
        let mut y = vec![f32::NAN; x.len()];
        emu.launch::<cluster_allreduce, _>((2u32, 2u32), (&mut x[..], &mut y[..], steps as u32))
            .unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert_eq!(y, want, "seed {}", emu.seed());
    }
}

// ----- races (happens-before) -----------------------------------------------------

fn expect_race(seed: u64, r: Result<kernel_host::emulate::RunReport, EmuError>, space: &str) -> String {
    let e = expect_err(seed, r);
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Race { .. }), "seed {seed}: not a race: {msg}");
    assert!(msg.contains(&format!("race on {space}")), "seed {seed}: {msg}");
    assert!(msg.contains("first:") && msg.contains("second:") && msg.contains("fix:"), "seed {seed}: {msg}");
    assert!(msg.lines().count() <= 5, "seed {seed}: a few lines: {msg}");
    msg
}

#[test]
fn tma_load_read_by_threads_that_did_not_wait_is_a_race() {
    use kernel_host::emulate::EmuTensorMap;
    let x: Vec<f32> = (0..64 * 32).map(|i| i as f32).collect();
    let xm = EmuTensorMap::<planted::PlantTile>::new_2d(&x, 64, 32).unwrap();
    for emu in Emulator::schedules(61, 4) {
        let mut y = vec![0f32; 128];
        let r = emu.launch::<planted::tma_read_without_wait, _>(1u32, (&xm, &mut y[..]));
        let msg = expect_race(emu.seed(), r, "shared memory");
        assert!(msg.contains("cp.async.bulk.tensor") && msg.contains("planted.rs"), "{msg}");
    }
}

#[test]
fn tma_store_source_rewritten_before_wait_group_read_is_a_race() {
    use kernel_host::emulate::EmuTensorMap;
    for emu in Emulator::schedules(71, 4) {
        let mut y = vec![0f32; 64 * 32];
        let ym = EmuTensorMap::<planted::PlantTile>::new_2d_mut(&mut y, 64, 32).unwrap();
        let r = emu.launch::<planted::tma_store_source_reused, _>(1u32, (&ym,));
        let msg = expect_race(emu.seed(), r, "shared memory");
        assert!(msg.contains("wait_group_read") && msg.contains("(store)"), "{msg}");
    }
}

#[test]
fn smem_reduction_missing_its_last_barrier_is_a_race() {
    for emu in Emulator::schedules(81, 4) {
        let mut x: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let mut y = vec![0f32; 1];
        let r = emu.launch::<planted::reduction_missing_sync, _>(1u32, (&mut x[..], &mut y[..]));
        let msg = expect_race(emu.seed(), r, "shared memory");
        assert!(msg.matches("planted.rs:").count() >= 2, "both lines named: {msg}");
        if emu.seed() == 81 {
            eprintln!("{msg}");
        }
    }
}

#[test]
fn two_ctas_writing_one_gmem_element_is_a_race() {
    for emu in Emulator::schedules(91, 4) {
        let mut y = vec![0f32; 1];
        let r = emu.launch::<planted::gmem_two_ctas_write_one_element, _>(2u32, (&mut y[..],));
        let msg = expect_race(emu.seed(), r, "global memory");
        assert!(msg.contains("write-write"), "{msg}");
    }
}

/// `cluster::cluster_axis_sums` (a 2 x 2 x 2 cluster, `ClusterBarrier<YZ>`
/// and `<X>`) under 4 seeds: each CTA sums what the CTAs of its y-z plane
/// and of its x row sent it.
#[test]
fn cluster_barrier_peers_along_yz_and_x() {
    use kernels::cluster::cluster_axis_sums;
    let want = examples::axis_sums_reference();
    for emu in Emulator::schedules(71, 4) {
        let mut y = vec![0u32; 16];
        emu.launch::<cluster_axis_sums, _>((2u32, 2u32, 2u32), (&mut y[..],))
            .unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert_eq!(y, want, "seed {}", emu.seed());
    }
}

#[test]
fn simt_examples_match_the_cpu_reference_on_the_emulator() {
    use examples::simt::SIMT_EXAMPLES;
    for emu in Emulator::schedules(1, 2) {
        let dev = Device::emulator_with(emu.clone());
        for (name, run) in SIMT_EXAMPLES {
            if let Err(e) = run(&dev) {
                panic!("seed {}: {name}: {e}", emu.seed());
            }
        }
    }
}

#[test]
fn misaligned_and_out_of_bounds_vector_accesses_are_reported() {
    use kernels::simt;
    let threads = 2 * simt::GMEM_BLOCK as usize;
    let x = vec![1f32; 4 * threads + 4];
    let run = |x: &[f32]| {
        let mut y = vec![0f32; 4 * threads];
        let (mut c, mut fs, mut w) = (vec![0u32; 3], vec![0f32; 1], vec![0u64; 1]);
        let (mut fe, mut ie) = (vec![0f32; 2], vec![0i32; 2]);
        Emulator::new(3)
            .launch::<simt::gmem_ops, _>(2u32, (x, &mut y[..], &mut c[..], &mut fs[..], &mut w[..], &mut fe[..], &mut ie[..]))
            .unwrap_err()
            .to_string()
    };
    // One element in: every v4 load is 4 bytes off its 16-byte alignment.
    let msg = run(&x[1..]);
    assert!(msg.contains("misaligned vector global-memory access") && msg.contains("simt.rs"), "{msg}");
    // Too short: the last thread's v4 load runs past the end.
    let msg = run(&x[..4 * threads - 4]);
    assert!(msg.contains("out-of-bounds global-memory access"), "{msg}");
}

/// One Hopper ladder instance (steps 2 to 5) on the emulator against the
/// CPU reference: `m x n x k` with `sms` emulated SMs (persistent grids run
/// several tiles per CTA).
fn emulated_ladder(name: &str, (m, n, k): (usize, usize, usize), sms: u32, seed: u64) {
    let t = std::time::Instant::now();
    let dev = Device::emulator_with(Emulator::new(seed).sms(sms));
    // A (seed 50 + seed) and B (51 + seed), every row of C checked.
    let mut p = examples::hopper::Problem::new(&dev, m, n, k, usize::MAX, 50 + seed).unwrap_or_else(|e| panic!("{e}"));
    let err = examples::ladder::run(&dev, name, &mut p).unwrap_or_else(|e| panic!("seed {seed}: {name}: {e}"));
    eprintln!("{name} {m}x{n}x{k} on {sms} SMs, seed {seed}: rel err {err:.2e}, {:.2?}", t.elapsed());
    assert!(err < 1e-2, "seed {seed}: {name} at {m}x{n}x{k}: relative Frobenius error {err}");
}

/// One instance of each ladder step and tile shape at 256 x 512 x 192 (3 K
/// steps; 4 output tiles on 2 CTAs, so the persistent kernels run 2 tiles
/// each and reuse every stage slot across tiles). The other instances
/// differ only in stage count or grid tile width.
#[test]
fn hopper_ladder_matches_the_cpu_reference() {
    for name in [
        "step2 128x256 s4 w8",
        "step2 256x128 s4 w8",
        "step3 128x256 s3 w8",
        "step4 128x256 s4 w8",
        "step5 128x256 s4 w8",
        "step6 128x256 s4 w8",
    ] {
        emulated_ladder(name, (256, 512, 192), 2, 1);
    }
}

/// Ragged shapes (TMA zero-fills the loads past the edges and clips the
/// stores): the last tiles and the last K step are partial.
#[test]
fn hopper_ladder_handles_ragged_shapes() {
    for name in ["step4 128x256 s4 w8", "step6 128x256 s4 w8"] {
        emulated_ladder(name, (200, 328, 136), 2, 2);
    }
}

// ----- Blackwell II: collective MMA, persistent and dynamically scheduled ladders -----

/// Blackwell ladder instances (steps 3 to 6) on the emulator under the
/// schedules `seeds`, each against the CPU reference, with the race and
/// tensor-memory checks on.
fn emulated_blackwell(names: &[&str], (m, n, k): (usize, usize, usize), sms: u32, seeds: std::ops::Range<u64>) {
    // One input and one reference for every kernel and schedule (the seed
    // picks the schedule; the reference GEMM is most of a debug build's time).
    let a = kernel_host::randn_f16(m * k, 70 + seeds.start);
    let b = kernel_host::randn_f16(k * n, 71 + seeds.start);
    let want = kernel_host::reference_gemm_nn(m, n, k, &a, &b);
    for name in names {
        for seed in seeds.clone() {
            let t = std::time::Instant::now();
            let dev = Device::emulator_with(Emulator::new(seed).sms(sms));
            let c = examples::blackwell_ladder::run(&dev, name, &a, &b, m, n, k).unwrap_or_else(|e| panic!("seed {seed}: {name}: {e}"));
            let err = kernel_host::rel_frobenius_error(&c, &want);
            eprintln!("{name} {m}x{n}x{k} on {sms} SMs, seed {seed}: rel err {err:.2e}, {:.2?}", t.elapsed());
            assert!(err < 1e-2, "seed {seed}: {name} at {m}x{n}x{k}: relative Frobenius error {err}");
        }
    }
}

/// matmul3 (one cluster per 256 x 256 tile): 512 x 512 x 256 (4 clusters,
/// 4 K steps) under 4 schedules.
#[test]
fn blackwell_matmul3_collective_mma_matches_the_cpu_reference() {
    emulated_blackwell(&["matmul3 256x256 s4"], (512, 512, 256), 4, 300..304);
}

// The persistent steps at 1024 x 512 x 256 on a 4-SM emulated device: 8
// pair tiles on 2 clusters, so each cluster runs 4 tiles (the slots and
// the accumulator halves wrap), under 4 schedules each (one test per step:
// they run in parallel).

#[test]
fn blackwell_persistent_matmul4_matches_the_cpu_reference() {
    emulated_blackwell(&["matmul4 256x256 s4"], (1024, 512, 256), 4, 400..404);
}

#[test]
fn blackwell_persistent_matmul5_matches_the_cpu_reference() {
    emulated_blackwell(&["matmul5 256x256 s4"], (1024, 512, 256), 4, 400..404);
}

#[test]
fn blackwell_persistent_matmul6_matches_the_cpu_reference() {
    emulated_blackwell(&["matmul6 256x256 s4"], (1024, 512, 256), 4, 400..404);
}

/// matmul_dynamic at 1024 x 512 x 256 (8 clusters) on a 4-SM emulated
/// device (2 resident clusters): the clusters that start late are canceled
/// by cluster launch control (their tiles computed by running clusters) or
/// start when a cluster finished after a failed cancel; under 4 schedules
/// both paths run, and the result is right either way.
#[test]
fn blackwell_matmul_dynamic_steals_tiles_with_cluster_launch_control() {
    let (m, n, k) = (1024, 512, 256);
    let a = kernel_host::randn_f16(m * k, 90);
    let b = kernel_host::randn_f16(k * n, 91);
    let want = kernel_host::reference_gemm_nn(m, n, k, &a, &b);
    let mut canceled = Vec::new();
    for emu in Emulator::schedules(500, 4) {
        let dev = Device::emulator_with(emu.clone().sms(4));
        let (c, launched) = examples::blackwell_ladder::run_report(&dev, "matmul_dynamic 256x256 s4", &a, &b, m, n, k)
            .unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        let cancels = launched.emulator.expect("an emulator run reports").canceled_clusters;
        let err = kernel_host::rel_frobenius_error(&c, &want);
        assert!(err < 1e-2, "seed {}: relative Frobenius error {err}", emu.seed());
        canceled.push(cancels);
    }
    eprintln!("clusters canceled per schedule (of 6 that start late): {canceled:?}");
    assert!(canceled.iter().any(|&c| c > 0), "no cancel succeeded in 4 schedules: {canceled:?}");
    assert!(canceled.iter().any(|&c| c < 6), "every late cluster was canceled in every schedule (the failure path never ran): {canceled:?}");
}

/// Runs a planted collective kernel (`256 x 128` pair tiles, B halves of
/// 64 columns) on the emulator at `m x n x k` with `grid` CTAs and the
/// extra arguments `$extra`: `Ok(relative error)` or the emulator's error.
macro_rules! run_collective_planted {
    ($k:ty, $emu:expr, $grid:expr, ($m:expr, $n:expr, $kk:expr) $(, $extra:expr)*) => {{
        use kernel_host::emulate::EmuTensorMap;
        let (m, n, k): (usize, usize, usize) = ($m, $n, $kk);
        let a = kernel_host::randn_f16(m * k, 7);
        let b = kernel_host::randn_f16(k * n, 8);
        let mut c = vec![kernel_device::f16::NAN; m * n];
        let r = {
            let am = EmuTensorMap::<kernels::blackwell::ATile>::new_2d(&a, m, k).unwrap();
            let bm = EmuTensorMap::<kernels::blackwell::BTile<64>>::new_2d(&b, k, n).unwrap();
            let cm = EmuTensorMap::<kernels::blackwell::ETile>::new_2d_mut(&mut c, m, n).unwrap();
            $emu.launch::<$k, _>($grid, (&am, &bm, &cm, $($extra,)* (k / 64) as u32))
        };
        r.map(|_| kernel_host::rel_frobenius_error(&c, &kernel_host::reference_gemm_nn(m, n, k, &a, &b)))
    }};
}

/// The four planted collective bugs of issue 9, each reported under 4
/// schedules, and their race-free twins (same kernel, `MODE 0` / `BUG =
/// false`) clean and correct under the same schedules.
#[test]
fn blackwell_planted_collective_bugs_are_reported_and_twins_are_clean() {
    use kernel_fixtures::blackwell::planted_collective::{collective_copy, store_done_skipped};
    for emu in Emulator::schedules(600, 4) {
        let s = emu.seed();
        let ok = run_collective_planted!(collective_copy<0>, emu, (2u32, 1u32), (256, 128, 256)).unwrap_or_else(|e| panic!("seed {s}: twin: {e}"));
        assert!(ok < 1e-2, "seed {s}: twin wrong: {ok}");
        // 1. A collective copy the peer does not issue: the leader's barrier
        // never completes.
        let e = run_collective_planted!(collective_copy<1>, emu, (2u32, 1u32), (256, 128, 256)).expect_err("missing peer copy not reported");
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {s}: {e}");
        // 2. SMEM reused before the MMA reading the peer's half finished.
        let e = run_collective_planted!(collective_copy<2>, emu, (2u32, 1u32), (256, 128, 256)).expect_err("SMEM reuse not reported");
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Race { .. } | EmuError::Misuse { .. }), "seed {s}: {msg}");
        assert!(msg.contains("shared memory") || msg.contains("tcgen05.mma") || msg.contains("mbarrier"), "seed {s}: {msg}");
        // 3. A commit not multicast to the peer: the peer waits forever.
        let e = run_collective_planted!(collective_copy<3>, emu, (2u32, 1u32), (256, 128, 256)).expect_err("missing multicast not reported");
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {s}: {e}");
        // 4. TMEM reused by the MMA before the epilogue's store_done.
        let ok = run_collective_planted!(store_done_skipped<false>, emu, (2u32, 1u32), (512, 256, 256), 2u32, 2u32).unwrap_or_else(|e| panic!("seed {s}: twin: {e}"));
        assert!(ok < 1e-2, "seed {s}: twin wrong: {ok}");
        let e = run_collective_planted!(store_done_skipped<true>, emu, (2u32, 1u32), (512, 256, 256), 2u32, 2u32).expect_err("TMEM reuse not reported");
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Race { .. } | EmuError::Misuse { .. }), "seed {s}: {msg}");
        assert!(msg.contains("tensor memory") || msg.contains("TMEM"), "seed {s}: {msg}");
        if s == 600 {
            eprintln!("{msg}");
        }
    }
}

#[test]
fn divergent_and_exited_lanes_at_a_warp_collective_are_misuses() {
    for emu in Emulator::schedules(61, 4) {
        let mut y = vec![0f32; 32];
        let e = expect_err(emu.seed(), emu.launch::<planted::divergent_shuffle, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Misuse { .. }) && msg.contains("warp collective not converged"), "seed {}: {msg}", emu.seed());
        assert!(msg.contains("lanes 0-15 at shfl.sync.bfly.b32 (at tests/fixtures/src/planted.rs"), "seed {}: {msg}", emu.seed());
        assert!(msg.contains("lanes 16-31 at shfl.sync.bfly.b32 (at tests/fixtures/src/planted.rs"), "seed {}: {msg}", emu.seed());
        let e = expect_err(emu.seed(), emu.launch::<planted::reduce_after_exit, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(
            matches!(e, EmuError::Misuse { .. }) && msg.contains("warp collective with an exited lane") && msg.contains("lane 5"),
            "seed {}: {msg}",
            emu.seed()
        );
        assert!(msg.contains("planted.rs"), "the report names the kernel's line: {msg}");
    }
}

/// `stmatrix` with a row address off the 16-byte alignment: the emulator
/// names the rule, the lane and the kernel's line.
#[test]
fn a_misaligned_stmatrix_row_is_a_misuse() {
    let e = expect_err(1, Emulator::new(1).launch::<planted::stmatrix_misaligned, _>(1u32, ()));
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Misuse { .. }) && msg.contains("ldmatrix/stmatrix row address not 16-byte aligned"), "{msg}");
    assert!(msg.contains("lane 0 supplies shared address 0x8 for row 0 of matrix 0") && msg.contains("planted.rs"), "{msg}");
}

/// Ladder step 7 (ping-pong compute warpgroups): 8 tiles of 128 x 128 on 2
/// CTAs, so each compute warpgroup runs 2 tiles and the order barriers
/// alternate 4 mainloops per CTA (12 steps through the 6-stage ring); a
/// ragged shape; and the 64 x 256 tile on a ragged shape (3 x 3 tiles).
#[test]
fn hopper_ladder_pingpong_matches_the_cpu_reference() {
    emulated_ladder("step7 pingpong 128x128 s6 w8", (256, 512, 192), 2, 3);
    emulated_ladder("step7 pingpong 128x128 s6 w8", (200, 328, 136), 2, 4);
    emulated_ladder("step7 pingpong 64x256 s5 w8", (136, 520, 200), 2, 5);
}

/// The Blackwell ladder's host side refuses a shape its `256 x 256 x 64`
/// pair tile does not divide, naming the rule, before launching anything.
#[test]
fn blackwell_ladder_refuses_ragged_shapes() {
    let (m, n, k) = (768, 256, 96);
    let a = kernel_host::randn_f16(m * k, 1);
    let b = kernel_host::randn_f16(k * n, 2);
    let dev = Device::emulator_with(Emulator::new(0).sms(4));
    let e = examples::blackwell_ladder::run(&dev, "matmul4 256x256 s4", &a, &b, m, n, k).expect_err("K = 96 is not a multiple of 64");
    let msg = e.to_string();
    assert!(msg.contains("K % 64 == 0") && msg.contains("768 x 256 x 96"), "{msg}");
}

/// `cluster::cluster_allreduce16`: two clusters of 16 CTAs (a non-portable
/// size, `non_portable_cluster`), 2 steps, under 4 seeds: every CTA gets its
/// cluster's sum, with the race detector on (the reuse of `parts` and `sums`
/// across steps is ordered by the two cluster barriers only).
#[test]
fn cluster_of_16_allreduce_matches_the_cpu_reference() {
    use kernels::cluster::{cluster_allreduce16, ALLREDUCE16_CTAS as C, ALLREDUCE16_LEN as L};
    use kernel_device::KernelSpec;
    assert_eq!(<cluster_allreduce16 as KernelSpec>::CLUSTER.volume(), 16);
    assert!(<cluster_allreduce16 as KernelSpec>::NON_PORTABLE_CLUSTER);
    let (ctas, steps) = (2 * C, 2usize);
    let x = examples::inputs(ctas * steps * L, 16);
    let want = examples::allreduce16_reference(&x, ctas, steps);
    for emu in Emulator::schedules(16, 4) {
        let mut y = vec![f32::NAN; x.len()];
        emu.launch::<cluster_allreduce16, _>(ctas as u32, (&x[..], &mut y[..], steps as u32))
            .unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        let wrong = (0..y.len()).filter(|&i| y[i].to_bits() != want[i].to_bits()).count();
        assert_eq!(wrong, 0, "seed {}: {wrong} elements differ from the CPU reference", emu.seed());
    }
}

/// The attention ladder (`kernels::attention_ladder`, steps 0-2; step 3 is
/// the library kernel, `kernel-ops/tests/attention.rs`) on the emulator
/// against the f64 reference, every row checked: a ragged causal GQA
/// problem at D 64 (4 K/V blocks: the 3-slot ring wraps) and a ragged one
/// at D 128 (3 blocks through 2 slots), each step under its own schedule
/// (seeds differ by step and shape).
#[test]
fn attention_ladder_matches_the_cpu_reference() {
    use examples::attention_ladder::{run, Problem, STEPS};
    use kernel_ops::attention::Shape;
    let problems = [
        (Shape { batch: 1, seq: 420, heads: 2, kv_heads: 1, head_dim: 64 }, true),
        (Shape { batch: 1, seq: 300, heads: 1, kv_heads: 1, head_dim: 128 }, false),
    ];
    for (i, (shape, causal)) in problems.into_iter().enumerate() {
        for (step, name) in STEPS.iter().enumerate().take(3) {
            let seed = (4 * i + step) as u64;
            let dev = Device::emulator_with(Emulator::new(seed));
            let prog = dev.load(&kernels::DEVICE_CODE).unwrap();
            let ops = dev.load(&kernel_ops_kernels::DEVICE_CODE).unwrap();
            let mut p = Problem::new(&dev, shape, causal, 30).unwrap();
            run(&dev, &prog, &ops, step, &mut p).unwrap_or_else(|e| panic!("{name}, {shape:?}, seed {seed}: {e}"));
            let err = p.error(&dev, usize::MAX).unwrap();
            assert!(err < 5e-3, "{name}, {shape:?}: relative error {err:.2e}");
        }
    }
}
