//! The Blackwell kernels (tcgen05 + TMEM) on the CPU emulator: the
//! tutorial's matmul0-2 match the CPU reference under 4 schedules at
//! 512 x 256 x 512, and each planted tensor-memory bug is reported.
use examples::blackwell::{matmul, MATMULS, TOLERANCE};
use kernel_host::emulate::Emulator;
use kernel_host::Device;

/// M x N x K of the emulated runs: 4 x 2 CTAs of 128 x 128 (TN = 128),
/// 8 K steps (every stage slot reused).
const SHAPE: (usize, usize, usize) = (512, 256, 512);

fn check(name: &str, emu: &Emulator) {
    let (m, n, k) = SHAPE;
    let err = matmul(&Device::emulator_with(emu.clone()), name, m, n, k, 70).unwrap_or_else(|e| panic!("seed {}: {name}: {e}", emu.seed()));
    assert!(err < TOLERANCE, "seed {}: {name}: relative Frobenius error {err:e} (tolerance {TOLERANCE:e})", emu.seed());
}

#[test]
fn matmul0_matches_the_cpu_reference_under_4_schedules() {
    for emu in Emulator::schedules(100, 4) {
        check("matmul0<128,4>", &emu);
    }
}

#[test]
fn matmul1_matches_the_cpu_reference_under_4_schedules() {
    for emu in Emulator::schedules(200, 4) {
        check("matmul1<128,4>", &emu);
    }
}

#[test]
fn matmul2_matches_the_cpu_reference_under_4_schedules() {
    for emu in Emulator::schedules(300, 4) {
        check("matmul2<128,4>", &emu);
    }
}

/// The TN = 256 instances, one schedule each, at 256 x 256 x 256.
#[test]
fn tile_n_256_instances_match_the_cpu_reference() {
    for name in MATMULS.iter().filter(|n| n.contains("<256")) {
        let err = matmul(&Device::emulator_with(Emulator::new(7)), name, 256, 256, 256, 71).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(err < TOLERANCE, "{name}: relative Frobenius error {err:e}");
    }
}

/// TMA gather4 (`embedding_gather`): 24 tokens (3 CTAs) of a 40-row
/// table, with repeated ids, ids in both halves of a gather4, and three
/// ids past the table (40, 1000 and `u32::MAX`, which TMA fills with
/// zeros; the output starts as NaN, so a row left unwritten fails),
/// against the CPU gather, bit for bit, under 4 schedules.
#[test]
fn embedding_gather_matches_the_cpu_gather_under_4_schedules() {
    let ids: Vec<u32> = vec![3, 0, 39, 7, 7, 12, 40, 5, 21, 1000, 2, 38, 9, 9, 9, 1, u32::MAX, 17, 30, 4, 11, 25, 6, 33];
    for emu in Emulator::schedules(800, 4) {
        let (got, want) = examples::blackwell::embedding_gather(&Device::emulator_with(emu.clone()), 40, &ids, 80)
            .unwrap_or_else(|e| panic!("seed {}: embedding_gather: {e}", emu.seed()));
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (t, c) = (i / kernels::blackwell::EMBED_DIM, i % kernels::blackwell::EMBED_DIM);
            assert!(g.to_bits() == w.to_bits(), "seed {}: token {t} (id {}), column {c}: got {g}, want {w}", emu.seed(), ids[t]);
        }
    }
}

/// tcgen05 MMAs with transposed SMEM views (`tcgen05_transposed`): B
/// MN-major, A MN-major, both, on the emulator, which decodes each operand
/// by its descriptor and the instruction descriptor's transpose bits:
/// every variant matches the CPU product (an operand read K-major instead
/// would be the wrong matrix, an error near 1.4), under 4 schedules.
#[test]
fn tcgen05_transposed_views_match_the_cpu_reference_under_4_schedules() {
    for emu in Emulator::schedules(900, 4) {
        let errs = examples::blackwell::tcgen05_transposed(&Device::emulator_with(emu.clone()))
            .unwrap_or_else(|e| panic!("seed {}: tcgen05_transposed: {e}", emu.seed()));
        for (v, e) in errs.iter().enumerate() {
            assert!(*e < 1e-5, "seed {}: variant {v}: relative Frobenius error {e}", emu.seed());
        }
    }
}

// ----- planted tensor-memory bugs, each with its race-free twin ---------------

use kernel_device::f16;
use kernel_host::emulate::{EmuError, EmuTensorMap};
use kernel_host::{randn_f16, reference_gemm_nt, rel_frobenius_error};
use kernel_fixtures::blackwell::planted::{self, PA, PB};

/// Runs `tmem_protocol` with `variant` under `emu`; the output on success.
fn protocol(emu: &Emulator, variant: u32) -> Result<Vec<f32>, EmuError> {
    let a = randn_f16(128 * 64, 90);
    let b = randn_f16(128 * 64, 91);
    let mut out = vec![f32::NAN; 128 * 128];
    let am = EmuTensorMap::<PA>::new_2d(&a, 128, 64).expect("map");
    let bm = EmuTensorMap::<PB>::new_2d(&b, 128, 64).expect("map");
    emu.launch::<planted::tmem_protocol, _>(1u32, (&am, &bm, &mut out[..], variant))?;
    Ok(out)
}

/// The twin runs clean and matches `A · Bᵀ`.
fn twin_ok(variant: u32) {
    let a = randn_f16(128 * 64, 90);
    let b = randn_f16(128 * 64, 91);
    let want = reference_gemm_nt(128, 128, 64, &a, &b);
    for emu in Emulator::schedules(500 + variant as u64, 4) {
        let out = protocol(&emu, variant).unwrap_or_else(|e| panic!("seed {}: twin variant {variant} reported: {e}", emu.seed()));
        let out16: Vec<f16> = out.iter().map(|&v| f16::from_f32(v)).collect();
        let err = rel_frobenius_error(&out16, &want);
        assert!(err < TOLERANCE, "seed {}: variant {variant}: error {err:e}", emu.seed());
    }
}

/// The bug is reported under 4 schedules with `rule` (and `detail_has` in the message).
fn caught(variant: u32, rule: &str, detail_has: &str) {
    for emu in Emulator::schedules(600 + variant as u64, 4) {
        match protocol(&emu, variant) {
            Ok(_) => panic!("seed {}: planted variant {variant} ({rule}) was not caught", emu.seed()),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(rule) && msg.contains(detail_has), "seed {}: variant {variant}: expected `{rule}` / `{detail_has}`, got: {msg}", emu.seed());
            }
        }
    }
}

#[test]
fn twins_run_clean_and_match_the_reference() {
    for v in [planted::OK_SS, planted::STORE_AFTER_WAIT_LOAD, planted::MMA_AFTER_COMMIT_TMEM, planted::SMEM_RELOAD_AFTER_COMMIT, planted::TMEM_STORE_AFTER_COMMIT, planted::LOAD_OWN_STORE_AFTER_COMMIT] {
        twin_ok(v);
    }
}

#[test]
fn tmem_load_of_this_threads_store_without_commit_tmem() {
    caught(planted::LOAD_OWN_STORE_WITHOUT_COMMIT, "TMEM accessed before the tcgen05.st that writes it completed", "this thread has called no tcgen05.wait::st (commit_tmem) since");
}

#[test]
fn tmem_store_then_barrier_then_commit_tmem_then_mma() {
    // The barrier orders the other threads' stores' issue, not their
    // completion (their commit_tmem comes after it).
    caught(planted::MMA_AFTER_STORE_COMMIT_AFTER_SYNC, "TMEM store then MMA without commit_tmem", "A operand");
}

#[test]
fn mmas_of_two_threads_fenced_across_a_barrier_are_pipelined_not_a_race() {
    twin_ok(planted::TWO_ISSUERS_FENCED);
    twin_ok(planted::TWO_ISSUERS_FENCED_ONE_COMMIT);
}

#[test]
fn mmas_of_two_threads_without_the_fences_or_the_barrier_race() {
    for v in [planted::TWO_ISSUERS_NO_FENCE_BEFORE, planted::TWO_ISSUERS_NO_FENCE_AFTER, planted::TWO_ISSUERS_NO_SYNC] {
        caught(v, "write-write race on tensor memory", "tcgen05.fence::before_thread_sync in the first issuer");
    }
}

#[test]
fn accumulator_read_after_a_wait_without_the_after_thread_sync_fence() {
    // The twin is OK_SS: `Barrier<TensorCore>::wait` issues the fence.
    caught(planted::LOAD_AFTER_PLAIN_WAIT, "TMEM read after an MMA's completion without tcgen05.fence::after_thread_sync", "Barrier<TensorCore>::wait");
}

#[test]
fn accumulator_read_before_the_commit_arrive_was_awaited() {
    caught(planted::READ_BEFORE_COMMIT_WAIT, "TMEM read before the MMA that writes it completed", "tcgen05.ld");
}

#[test]
fn tma_arrival_mistaken_for_mma_completion() {
    caught(planted::TMA_BARRIER_AS_MMA_DONE, "TMEM read before the MMA that writes it completed", "not complete for this thread");
}

#[test]
fn commit_covers_only_the_issuing_threads_mmas() {
    caught(planted::COMMIT_BY_OTHER_THREAD, "TMEM read before the MMA that writes it completed", "a commit covers only the MMAs and copies of the thread that issues it");
}

#[test]
fn tmem_store_then_mma_without_commit_tmem() {
    caught(planted::MMA_AFTER_STORE_WITHOUT_COMMIT, "TMEM store then MMA without commit_tmem", "A operand");
}

#[test]
fn store_over_an_in_flight_tmem_load() {
    caught(planted::STORE_OVER_INFLIGHT_LOAD, "TMEM overwritten while an in-flight tcgen05.ld reads it", "wait_load_tmem");
}

#[test]
fn smem_operand_overwritten_while_the_mma_is_in_flight() {
    // Reported by the race detector (happens-before): the MMA's operand read
    // and the TMA load's write, in whichever order they ran.
    caught(planted::SMEM_OPERAND_OVERWRITTEN, "race on shared memory", "asynchronous `tcgen05.mma`");
    caught(planted::SMEM_OPERAND_OVERWRITTEN, "data race", "cp.async.bulk.tensor");
}

#[test]
fn tmem_operand_overwritten_while_the_mma_is_in_flight() {
    caught(planted::TMEM_OPERAND_OVERWRITTEN, "TMEM operand of an in-flight MMA overwritten", "tcgen05.st");
}

#[test]
fn tmem_outside_the_allocation_and_wrong_lane_quarter() {
    caught(planted::OUTSIDE_ALLOCATION, "TMEM accessed outside the allocation", "columns 0..256");
    caught(planted::WRONG_LANE_QUARTER, "TMEM lane quarter of another warp", "may access only lanes");
}

fn alloc_run(emu: &Emulator, variant: u32) -> Result<(), EmuError> {
    emu.launch::<planted::tmem_alloc_misuse, _>(1u32, (variant,)).map(|_| ())
}

#[test]
fn tmem_allocation_not_freed_or_over_512_columns() {
    for emu in Emulator::schedules(700, 4) {
        for v in [planted::ALLOC_FREED, planted::ALLOC_TWO_HALVES] {
            alloc_run(&emu, v).unwrap_or_else(|e| panic!("seed {}: twin {v}: {e}", emu.seed()));
        }
        let e = alloc_run(&emu, planted::ALLOC_NOT_FREED).expect_err("not freed: not caught").to_string();
        assert!(e.contains("TMEM allocation not freed when the kernel ended") && e.contains("columns 0..64"), "{e}");
        let e = alloc_run(&emu, planted::ALLOC_OVER_512).expect_err("over 512: not caught").to_string();
        assert!(e.contains("TMEM allocation over 512 columns") && e.contains("512 of 512 already allocated"), "{e}");
    }
}

// ----- tcgen05.cp and scoped TMEM (planted_copy), each bug beside its twin ----

use kernel_fixtures::blackwell::planted_copy as cp;

/// A's rows packed as `tcgen05.cp` moves them: word `j` of row `r` holds
/// elements `2j` (low half) and `2j + 1` (high half).
fn packed_row(a: &[f16], r: usize) -> Vec<u32> {
    (0..32).map(|j| u32::from(a[r * 64 + 2 * j].to_bits()) | (u32::from(a[r * 64 + 2 * j + 1].to_bits()) << 16)).collect()
}

/// Runs `tmem_copy` with `variant`; its `128 x 128` output words on success.
fn copy_run(emu: &Emulator, variant: u32) -> Result<Vec<f32>, EmuError> {
    let a = randn_f16(128 * 64, 90);
    let b = randn_f16(128 * 64, 91);
    let mut out = vec![f32::NAN; 128 * 128];
    let am = EmuTensorMap::<PA>::new_2d(&a, 128, 64).expect("map");
    let bm = EmuTensorMap::<PB>::new_2d(&b, 128, 64).expect("map");
    emu.launch::<cp::tmem_copy, _>(1u32, (&am, &bm, &mut out[..], variant))?;
    Ok(out)
}

/// The copy twins run clean under 4 schedules and give what they should:
/// `A · Bᵀ` after a copy feeds an MMA (one thread, or two with the
/// fences), A's packed words bit for bit after a copy is read back (negated
/// when the source was rewritten), both beside each other when the copy
/// lands in a finished accumulator.
#[test]
fn tcgen05_cp_twins_run_clean_and_copy_the_tile() {
    let a = randn_f16(128 * 64, 90);
    let b = randn_f16(128 * 64, 91);
    let want = reference_gemm_nt(128, 128, 64, &a, &b);
    let neg: Vec<f16> = a.iter().map(|&x| -x).collect();
    for v in [cp::COPY_THEN_MMA, cp::COPY_READ_BACK, cp::SOURCE_RELOAD_AFTER_COMMIT, cp::COPY_INTO_ACCUMULATOR_AFTER_COMMIT, cp::COPY_AFTER_PROXY_FENCE, cp::CROSS_THREAD_FENCED] {
        for emu in Emulator::schedules(800 + v as u64, 4) {
            let out = copy_run(&emu, v).unwrap_or_else(|e| panic!("seed {}: twin {v} reported: {e}", emu.seed()));
            let bits = |r: usize, j: usize| out[r * 128 + j].to_bits();
            match v {
                cp::COPY_THEN_MMA | cp::CROSS_THREAD_FENCED => {
                    let out16: Vec<f16> = out.iter().map(|&x| f16::from_f32(x)).collect();
                    let err = rel_frobenius_error(&out16, &want);
                    assert!(err < TOLERANCE, "seed {}: twin {v}: error {err:e}", emu.seed());
                }
                cp::COPY_INTO_ACCUMULATOR_AFTER_COMMIT => {
                    for r in 0..128 {
                        assert_eq!((0..32).map(|j| bits(r, j)).collect::<Vec<_>>(), packed_row(&a, r), "seed {}: row {r}: the copy", emu.seed());
                        for j in 32..128 {
                            let w = want[r * 128 + j];
                            assert!((out[r * 128 + j] - w).abs() <= 2e-2 * (1.0 + w.abs()), "seed {}: ({r}, {j}): {} vs {w}", emu.seed(), out[r * 128 + j]);
                        }
                    }
                }
                _ => {
                    let src = if v == cp::COPY_AFTER_PROXY_FENCE { &neg } else { &a };
                    for r in 0..128 {
                        assert_eq!((0..32).map(|j| bits(r, j)).collect::<Vec<_>>(), packed_row(src, r), "seed {}: twin {v}: row {r}", emu.seed());
                    }
                }
            }
        }
    }
}

/// `tmem_copy`'s bug `variant` is reported under 4 schedules with `rule`
/// (and `detail_has` in the message).
fn copy_caught(variant: u32, rule: &str, detail_has: &str) {
    for emu in Emulator::schedules(900 + variant as u64, 4) {
        match copy_run(&emu, variant) {
            Ok(_) => panic!("seed {}: copy bug {variant} ({rule}) was not caught", emu.seed()),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(rule) && msg.contains(detail_has), "seed {}: copy bug {variant}: expected `{rule}` / `{detail_has}`, got: {msg}", emu.seed());
            }
        }
    }
}

#[test]
fn copied_tmem_read_before_the_copy_completed() {
    copy_caught(cp::READ_BEFORE_COPY_DONE, "TMEM read before the tcgen05.cp that writes it completed", "reads the destination of tcgen05.cp issued at");
}

#[test]
fn copy_source_overwritten_while_the_copy_is_in_flight() {
    copy_caught(cp::SOURCE_OVERWRITTEN, "race on shared memory", "tcgen05.cp");
}

#[test]
fn copied_tmem_overwritten_before_the_copy_completed() {
    copy_caught(cp::STORE_OVER_COPY, "TMEM destination of an in-flight tcgen05.cp overwritten", "tcgen05.st");
}

#[test]
fn copy_into_the_accumulator_of_an_in_flight_mma() {
    copy_caught(cp::COPY_INTO_BUSY_ACCUMULATOR, "TMEM operand of an in-flight MMA overwritten", "tcgen05.cp of lanes 0..128");
}

#[test]
fn copy_of_smem_written_without_commit_smem() {
    copy_caught(cp::COPY_WITHOUT_PROXY_FENCE, "commit_smem", "tcgen05.cp");
}

#[test]
fn copy_then_mma_of_another_thread_without_the_fences() {
    copy_caught(cp::CROSS_THREAD_NO_FENCES, "race on tensor memory", "tcgen05.cp");
}

/// Every copy shape lands each source row in the lanes the PTX ISA's shape
/// table gives (written out here independently of `kernel_spec`'s
/// `CpShape::lanes`), 8 or 4 words from the destination column.
#[test]
fn every_copy_shape_lands_rows_in_the_isa_lanes() {
    let a = randn_f16(128 * 64, 92);
    let am = EmuTensorMap::<PA>::new_2d(&a, 128, 64).expect("map");
    // (shape index, words per row, source row of each lane or None).
    let table: [(u32, usize, fn(usize) -> Option<usize>); 6] = [
        (0, 8, |l| Some(l)),                                          // 128x256b
        (1, 4, |l| Some(l)),                                          // 128x128b
        (2, 8, |l| (l % 32 == 0).then_some(l / 32)),                  // 4x256b: lanes 0, 32, 64, 96
        (3, 4, |l| Some(l % 64)),                                     // 64x128b.warpx2::02_13: warps 0,2 rows 0..32; 1,3 rows 32..64
        (4, 4, |l| Some(32 * (l / 64) + l % 32)),                     // 64x128b.warpx2::01_23: warps 0,1 rows 0..32; 2,3 rows 32..64
        (5, 4, |l| Some(l % 32)),                                     // 32x128b.warpx4
    ];
    for (shape, words, row_of) in table {
        let emu = Emulator::new(950 + shape as u64);
        let mut out = vec![u32::MAX; 128 * 8];
        emu.launch::<cp::tmem_copy_shapes, _>(1u32, (&am, &mut out[..], shape)).unwrap_or_else(|e| panic!("shape {shape}: {e}"));
        for lane in 0..128 {
            let got = &out[lane * 8..lane * 8 + 8];
            let want: Vec<u32> = match row_of(lane) {
                Some(r) => (0..8).map(|w| if w < words { packed_row(&a, r)[w] } else { 0 }).collect(),
                None => vec![0; 8],
            };
            assert_eq!(got, &want[..], "shape {shape}, lane {lane}");
        }
    }
}

/// Runs `tmem_scoped` with `variant`; its two `128 x 128` blocks on success.
fn scoped_run(emu: &Emulator, variant: u32) -> Result<Vec<f32>, EmuError> {
    let a = randn_f16(128 * 64, 90);
    let b = randn_f16(128 * 64, 91);
    let mut out = vec![f32::NAN; 2 * 128 * 128];
    let am = EmuTensorMap::<PA>::new_2d(&a, 128, 64).expect("map");
    let bm = EmuTensorMap::<PB>::new_2d(&b, 128, 64).expect("map");
    emu.launch::<cp::tmem_scoped, _>(1u32, (&am, &bm, &mut out[..], variant))?;
    Ok(out)
}

/// Two scopes in a row (the second reusing the first's columns), and a
/// scope freed while an MMA runs on the kernel-wide accumulator: clean,
/// and both blocks hold `A · Bᵀ`.
#[test]
fn scoped_tmem_twins_run_clean_and_compute() {
    let a = randn_f16(128 * 64, 90);
    let b = randn_f16(128 * 64, 91);
    let want = reference_gemm_nt(128, 128, 64, &a, &b);
    for v in [cp::TWO_SCOPES, cp::FREE_OTHER_COLUMNS_WHILE_MMA_RUNS] {
        for emu in Emulator::schedules(1000 + v as u64, 4) {
            let out = scoped_run(&emu, v).unwrap_or_else(|e| panic!("seed {}: scoped twin {v} reported: {e}", emu.seed()));
            for half in out.chunks(128 * 128) {
                let h16: Vec<f16> = half.iter().map(|&x| f16::from_f32(x)).collect();
                let err = rel_frobenius_error(&h16, &want);
                assert!(err < TOLERANCE, "seed {}: scoped twin {v}: error {err:e}", emu.seed());
            }
        }
    }
}

#[test]
fn scoped_tmem_used_after_its_scope_or_freed_under_an_mma() {
    for emu in Emulator::schedules(1100, 4) {
        // The stale read after the scope, or (when a thread reads before
        // warp 0 has freed) the free under that read: both the bug.
        let e = scoped_run(&emu, cp::USE_AFTER_FREE).expect_err("use after free: not caught").to_string();
        assert!(
            (e.contains("TMEM used after tcgen05.dealloc") && e.contains("freed at")) || e.contains("TMEM freed while a tcgen05.ld of it is in flight"),
            "seed {}: {e}",
            emu.seed()
        );
        let e = scoped_run(&emu, cp::FREE_WHILE_MMA_IN_FLIGHT).expect_err("free under an MMA: not caught").to_string();
        assert!(
            e.contains("TMEM freed while an MMA on it is pending") || (e.contains("race on tensor memory") && e.contains("tcgen05.mma")),
            "seed {}: {e}",
            emu.seed()
        );
    }
}

// ----- the M = 64 data path and the 16-lane TMEM shapes -----------------------

use kernel_fixtures::blackwell::shapes::{self, A64, B64};

/// Runs `m64_readback` with `variant` under `emu`; the four read-backs on success.
fn m64(emu: &Emulator, variant: u32) -> Result<Vec<f32>, EmuError> {
    let a = randn_f16(64 * 64, 92);
    let b = randn_f16(64 * 64, 93);
    let mut out = vec![f32::NAN; 4 * 64 * 64];
    let am = EmuTensorMap::<A64>::new_2d(&a, 64, 64).expect("map");
    let bm = EmuTensorMap::<B64>::new_2d(&b, 64, 64).expect("map");
    emu.launch::<shapes::m64_readback, _>(1u32, (&am, &bm, &mut out[..], variant))?;
    Ok(out)
}

/// The M = 64 MMA read back with `.16x64b`, `.16x128b`, `.16x256b` and
/// `.16x32bx2` (each register put where the ISA's fragment map says)
/// matches `A · Bᵀ` in every cell, under 4 schedules; so does the twin with
/// a `.16x256b` store, `commit_tmem` and load after it.
#[test]
fn m64_mma_read_back_with_every_16_lane_shape_matches_the_reference() {
    let a = randn_f16(64 * 64, 92);
    let b = randn_f16(64 * 64, 93);
    let want = reference_gemm_nt(64, 64, 64, &a, &b);
    for (i, emu) in Emulator::schedules(800, 4).into_iter().enumerate() {
        // Schedules 0 and 2 run the plain twin, 1 and 3 the store twin.
        let variant = if i % 2 == 0 { shapes::OK } else { shapes::LOAD_OVER_STORE_AFTER_COMMIT };
        let out = m64(&emu, variant).unwrap_or_else(|e| panic!("seed {}: variant {variant}: {e}", emu.seed()));
        for (s, got) in ["16x64b", "16x128b", "16x256b", "16x32bx2"].iter().zip(out.chunks(64 * 64)) {
            assert!(got.iter().all(|v| v.is_finite()), "seed {}: {s}: cells not written (NaN)", emu.seed());
            let got16: Vec<f16> = got.iter().map(|&v| f16::from_f32(v)).collect();
            let err = rel_frobenius_error(&got16, &want);
            assert!(err < TOLERANCE, "seed {}: {s}: error {err:e}", emu.seed());
        }
    }
}

/// The bug is reported under 4 schedules with `rule` (and `detail_has`).
fn m64_caught(variant: u32, rule: &str, detail_has: &str) {
    for emu in Emulator::schedules(900 + variant as u64, 4) {
        match m64(&emu, variant) {
            Ok(_) => panic!("seed {}: planted variant {variant} ({rule}) was not caught", emu.seed()),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(rule) && msg.contains(detail_has), "seed {}: variant {variant}: expected `{rule}` / `{detail_has}`, got: {msg}", emu.seed());
            }
        }
    }
}

#[test]
fn a_16x256b_load_over_the_warps_store_without_commit_tmem() {
    // The twin is LOAD_OVER_STORE_AFTER_COMMIT (above).
    m64_caught(shapes::LOAD_OVER_STORE_WITHOUT_COMMIT, "TMEM accessed before the tcgen05.st that writes it completed", "tcgen05.ld.16x256b");
}

#[test]
fn an_m64_accumulator_read_with_16x128b_before_the_commit_wait() {
    // The accumulator's lanes in the report: 16 per lane quarter.
    m64_caught(shapes::READ_BEFORE_COMMIT_WAIT, "TMEM read before the MMA that writes it completed", "lanes 0..16, 32..48, 64..80, 96..112");
}
