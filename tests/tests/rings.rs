//! Misuses of the pipeline ring type (`kernel_device::pipeline::Ring`) on
//! the CPU emulator: each planted one (`kernel_fixtures::planted_ring`) is
//! reported with its rule and the kernel's line, on every schedule tried,
//! and the correct twin computes the product with no report.
use kernel_device::f16;
use kernel_host::emulate::{EmuError, EmuTensorMap, Emulator, RunReport};
use kernel_fixtures::planted_ring::{self as pr, RingOut, RingTile};

const SEEDS: usize = 4;
/// More steps than stages (2), so slots are refilled.
const K_STEPS: usize = 3;

/// Small integers, so the f32 sums and the f16 output are exact.
fn operand(len: usize, salt: usize) -> Vec<f16> {
    (0..len).map(|i| f16::from_f32(((i * 7 + salt * 3) % 5) as f32 - 2.0)).collect()
}


macro_rules! run {
    ($k:ty, $emu:expr) => {{
        let k = 64 * K_STEPS;
        let (a, b) = (operand(128 * k, 1), operand(128 * k, 2));
        let mut c = vec![f16::NAN; 128 * 128];
        let r: Result<RunReport, EmuError> = {
            let am = EmuTensorMap::<RingTile>::new_2d(&a, 128, k).unwrap();
            let bm = EmuTensorMap::<RingTile>::new_2d(&b, 128, k).unwrap();
            let cm = EmuTensorMap::<RingOut>::new_2d_mut(&mut c, 128, 128).unwrap();
            $emu.launch::<$k, _>(1u32, (&am, &bm, &cm, K_STEPS as u32))
        };
        (r, a, b, c)
    }};
}

/// The misuse report of `e`: `(rule, where, detail, whole message)`.
fn misuse(e: &EmuError) -> (&str, &str, &str, String) {
    match e {
        EmuError::Misuse { rule, where_, detail, .. } => (rule, where_, detail, e.to_string()),
        other => panic!("not a misuse: {other}"),
    }
}

#[test]
fn the_correct_ring_computes_the_product() {
    for emu in Emulator::schedules(41, SEEDS) {
        let (r, a, b, c) = run!(pr::ring_gemm<0>, emu);
        let report = r.unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert!(report.warnings.is_empty(), "seed {}: {:?}", emu.seed(), report.warnings);
        let k = 64 * K_STEPS;
        for i in 0..128 {
            for j in 0..128 {
                let want: f32 = (0..k).map(|p| a[i * k + p].to_f32() * b[j * k + p].to_f32()).sum();
                assert_eq!(c[i * 128 + j].to_f32(), want, "seed {}: C[{i}][{j}]", emu.seed());
            }
        }
    }
}

#[test]
fn a_release_without_an_acquire_names_the_users_line() {
    for emu in Emulator::schedules(43, SEEDS) {
        let (r, ..) = run!(pr::ring_gemm<1>, emu);
        let e = r.expect_err("the second release was not caught");
        let (rule, where_, detail, msg) = misuse(&e);
        assert_eq!(rule, "a release without an acquire", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("has not waited for") && detail.contains("planted_ring.rs:"), "seed {}: {msg}", emu.seed());
        assert!(where_.contains("planted_ring.rs:") && where_.contains("inside `Consumer::release`"), "seed {}: {msg}", emu.seed());
        assert!(!where_.contains("ring.rs:") || where_.contains("planted_ring.rs:"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn the_mma_steps_loop_computes_the_product() {
    for emu in Emulator::schedules(61, SEEDS) {
        let (r, a, b, c) = run!(pr::ring_gemm<4>, emu);
        let report = r.unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert!(report.warnings.is_empty(), "seed {}: {:?}", emu.seed(), report.warnings);
        let k = 64 * K_STEPS;
        for i in (0..128).step_by(7) {
            for j in 0..128 {
                let want: f32 = (0..k).map(|p| a[i * k + p].to_f32() * b[j * k + p].to_f32()).sum();
                assert_eq!(c[i * 128 + j].to_f32(), want, "seed {}: C[{i}][{j}]", emu.seed());
            }
        }
    }
}

#[test]
fn an_mma_steps_loop_over_an_unreleased_step_names_the_users_line() {
    for emu in Emulator::schedules(67, SEEDS) {
        let (r, ..) = run!(pr::ring_gemm<5>, emu);
        let e = r.expect_err("the unreleased step was not caught");
        let (rule, where_, detail, msg) = misuse(&e);
        assert_eq!(rule, "a K loop over unreleased steps", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("1 earlier step(s)") && detail.contains("planted_ring.rs:"), "seed {}: {msg}", emu.seed());
        assert!(where_.contains("planted_ring.rs:") && where_.contains("inside `Consumer::mma_steps`"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn a_peeked_first_slot_is_handed_out_by_the_next_wait() {
    for emu in Emulator::schedules(71, SEEDS) {
        let (r, a, b, c) = run!(pr::ring_gemm<6>, emu);
        let report = r.unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert!(report.warnings.is_empty(), "seed {}: {:?}", emu.seed(), report.warnings);
        let k = 64 * K_STEPS;
        for i in (0..128).step_by(5) {
            for j in 0..128 {
                let want: f32 = (0..k).map(|p| a[i * k + p].to_f32() * b[j * k + p].to_f32()).sum();
                assert_eq!(c[i * 128 + j].to_f32(), want, "seed {}: C[{i}][{j}]", emu.seed());
            }
        }
    }
}

#[test]
fn a_peek_of_a_consumer_made_anew_waits_on_a_stale_phase() {
    for emu in Emulator::schedules(73, SEEDS) {
        let (r, ..) = run!(pr::ring_gemm<7>, emu);
        let e = r.expect_err("the stale phase was not caught");
        let (rule, where_, detail, msg) = misuse(&e);
        assert_eq!(rule, "a wait on a stale phase", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("waits for phase 0") && detail.contains("at step 0 (slot 0)"), "seed {}: {msg}", emu.seed());
        assert!(where_.contains("planted_ring.rs:") && where_.contains("inside `Consumer::peek`"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn a_consumer_made_anew_waits_on_a_stale_phase() {
    for emu in Emulator::schedules(47, SEEDS) {
        let (r, ..) = run!(pr::ring_gemm<2>, emu);
        let e = r.expect_err("the stale phase was not caught");
        let (rule, where_, detail, msg) = misuse(&e);
        assert_eq!(rule, "a wait on a stale phase", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("waits for phase 0") && detail.contains("at step 0 (slot 0)"), "seed {}: {msg}", emu.seed());
        assert!(where_.contains("planted_ring.rs:") && where_.contains("inside `Consumer::wait`"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn a_slot_released_before_its_mmas_is_refilled_under_them() {
    for emu in Emulator::schedules(53, SEEDS) {
        let (r, ..) = run!(pr::ring_gemm<3>, emu);
        let e = r.expect_err("the early release was not caught");
        let (rule, where_, detail, msg) = misuse(&e);
        assert!(rule.starts_with("TMA overwrites SMEM still read by an in-flight wgmma"), "seed {}: {msg}", emu.seed());
        // The producer's refill, at the kernel's load line; the consumer's
        // wgmma whose group is still pending.
        assert!(where_.contains("planted_ring.rs:"), "seed {}: {msg}", emu.seed());
        assert!(detail.contains("as a wgmma operand") && detail.contains("no wgmma_wait has retired it"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn a_consumed_count_below_the_consumers_is_reported() {
    for emu in Emulator::schedules(59, SEEDS) {
        let (r, ..) = run!(pr::ring_consumed_count_128, emu);
        let e = r.expect_err("the count of 128 was not caught");
        let (rule, _, detail, msg) = misuse(&e);
        assert_eq!(rule, "mbarrier arrival count smaller than its arriving threads", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("256 consumer releases") && detail.contains("`empty` barrier") && detail.contains("planted_ring.rs:"), "seed {}: {msg}", emu.seed());
    }
}
