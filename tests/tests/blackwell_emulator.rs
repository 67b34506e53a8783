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
    caught(planted::COMMIT_BY_OTHER_THREAD, "TMEM read before the MMA that writes it completed", "a commit covers only the MMAs of the thread that issues it");
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
