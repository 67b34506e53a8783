//! Barrier arrival counts and reports inside library code, on the CPU
//! emulator (issue 15, "the newcomer's path"):
//!
//! * a warp-specialized pipeline whose `consumed` barrier lacks
//!   `arrivals = 256` is reported as an arrival-count error naming the
//!   declared count, the 256 expected arrivals and the arrivals seen, at the
//!   user's call site, inside the pipeline (not as a TMA overwrite);
//! * a count larger than the arriving threads is reported at once;
//! * the correct twin computes the product, and warns only when its run
//!   never reused a pipeline slot;
//! * a report about an operation `emit_pipeline` issues names the user's
//!   `emit_pipeline(..)` line and says it is inside the pipeline.
use kernel_device::f16;
use kernel_host::emulate::{EmuError, EmuTensorMap, Emulator, RunReport};
use kernel_fixtures::planted_arrivals::{self as pa, ArrOut, ArrTile};

const SEEDS: u64 = 4;

/// Small integers, so the f32 sums and the f16 output are exact.
fn operand(len: usize, salt: usize) -> Vec<f16> {
    (0..len).map(|i| f16::from_f32(((i * 7 + salt * 3) % 5) as f32 - 2.0)).collect()
}

/// Runs kernel `$k` (one of the planted_arrivals kernels) on
/// `128 x 128 x 64 k_steps`: `(result, a, b, c)`.
macro_rules! run {
    ($k:ty, $emu:expr, $k_steps:expr) => {{
        let k_steps: usize = $k_steps;
        let k = 64 * k_steps;
        let (a, b) = (operand(128 * k, 1), operand(128 * k, 2));
        let mut c = vec![f16::NAN; 128 * 128];
        let r: Result<RunReport, EmuError> = {
            let am = EmuTensorMap::<ArrTile>::new_2d(&a, 128, k).unwrap();
            let bm = EmuTensorMap::<ArrTile>::new_2d(&b, 128, k).unwrap();
            let cm = EmuTensorMap::<ArrOut>::new_2d_mut(&mut c, 128, 128).unwrap();
            $emu.launch::<$k, _>(1u32, (&am, &bm, &cm, k_steps as u32))
        };
        (r, a, b, c)
    }};
}

#[test]
fn consumed_barrier_without_arrivals_256_names_the_count() {
    for emu in Emulator::schedules(1, SEEDS as usize) {
        let (r, ..) = run!(pa::consumed_count_missing, emu, 4);
        let e = r.expect_err("the missing `arrivals = 256` was not caught");
        let msg = e.to_string();
        if emu.seed() == 1 {
            eprintln!("{msg}");
        }
        let EmuError::Misuse { rule, where_, detail, .. } = &e else {
            panic!("seed {}: not a misuse: {msg}", emu.seed())
        };
        assert_eq!(rule, "mbarrier arrival count smaller than its arriving threads", "seed {}: {msg}", emu.seed());
        // The declared count, the expected arrivals and the arrivals seen.
        assert!(detail.contains("its arrival count is 1 "), "seed {}: {msg}", emu.seed());
        assert!(detail.contains("256 arrivals were expected") && detail.contains("the 256 compute threads"), "seed {}: {msg}", emu.seed());
        assert!(detail.contains("completed after 1 arrival(s)") && detail.contains("255 of those threads had not arrived"), "seed {}: {msg}", emu.seed());
        assert!(detail.contains("`consumed` barrier") && detail.contains("#[scratch(arrivals = 256)]"), "seed {}: {msg}", emu.seed());
        // The user's call sites (the `pipeline.run(..)` arrival, inside the
        // user's `emit_pipeline_warp_specialized(..)`), not pipeline.rs.
        assert!(where_.contains("planted_arrivals.rs:") && !where_.contains("pipeline.rs"), "seed {}: {msg}", emu.seed());
        assert!(where_.contains("inside `emit_pipeline_warp_specialized` called at") && where_.contains("inside `ComputePipeline::run`"), "seed {}: {msg}", emu.seed());
        assert!(!msg.contains("TMA overwrites"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn consumed_barrier_with_too_large_a_count_is_reported_at_once() {
    for emu in Emulator::schedules(11, SEEDS as usize) {
        let (r, ..) = run!(pa::consumed_count_too_large, emu, 4);
        let e = r.expect_err("the count of 384 was not caught");
        let msg = e.to_string();
        let EmuError::Misuse { rule, detail, .. } = &e else {
            panic!("seed {}: not a misuse: {msg}", emu.seed())
        };
        assert_eq!(rule, "mbarrier arrival count larger than its arriving threads", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("arrival count of 384") && detail.contains("256 arrivals"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn consumed_barrier_with_arrivals_256_computes_the_product() {
    for emu in Emulator::schedules(21, SEEDS as usize) {
        let k_steps = 4; // more steps than the 2 stages: slots are reused
        let (r, a, b, c) = run!(pa::consumed_count_256, emu, k_steps);
        let report = r.unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert!(report.warnings.is_empty(), "seed {}: {:?}", emu.seed(), report.warnings);
        let k = 64 * k_steps;
        for i in 0..128 {
            for j in 0..128 {
                let want: f32 = (0..k).map(|p| a[i * k + p].to_f32() * b[j * k + p].to_f32()).sum();
                assert_eq!(c[i * 128 + j].to_f32(), want, "seed {}: C[{i}][{j}]", emu.seed());
            }
        }
    }
}

#[test]
fn a_pipeline_that_never_reuses_a_slot_warns() {
    let (r, ..) = run!(pa::consumed_count_256, Emulator::new(5), 2);
    let report = r.unwrap();
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    let w = &report.warnings[0];
    assert!(w.contains("consumed_count_256") && w.contains("at most 2 step(s) in every CTA with 2 stages") && w.contains("no slot was ever reused"), "{w}");
    assert!(w.contains("planted_arrivals.rs:"), "the warning names the user's call: {w}");
}

/// `planted::release_too_early` refills a slot whose wgmma is in flight:
/// the report names the kernel's `emit_pipeline(..)` line, inside the
/// pipeline, not the library's.
#[test]
fn a_report_inside_emit_pipeline_names_the_users_line() {
    use kernels::hopper::{ATile, BTile, OTile};
    let k = 4 * 64;
    let (a, b) = (operand(128 * k, 3), operand(128 * k, 4));
    let mut c = vec![f16::NAN; 128 * 128];
    for emu in Emulator::schedules(31, SEEDS as usize) {
        let am = EmuTensorMap::<ATile>::new_2d(&a, 128, k).unwrap();
        let bm = EmuTensorMap::<BTile>::new_2d(&b, 128, k).unwrap();
        let cm = EmuTensorMap::<OTile>::new_2d_mut(&mut c, 128, 128).unwrap();
        let e = emu
            .launch::<kernel_fixtures::planted::release_too_early, _>((1u32, 1u32), (&am, &bm, &cm, 4u32))
            .expect_err("release_too_early was not caught");
        let msg = e.to_string();
        let EmuError::Misuse { where_, .. } = &e else {
            panic!("seed {}: not a misuse: {msg}", emu.seed())
        };
        assert!(
            where_.contains("planted.rs:") && where_.contains("inside `emit_pipeline` called at") && !where_.contains("pipeline.rs"),
            "seed {}: {msg}",
            emu.seed()
        );
    }
}
