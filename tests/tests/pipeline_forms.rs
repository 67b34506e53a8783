//! The pipeline forms and index maps on the CPU emulator
//! (`kernel_fixtures::pipeline_forms`):
//!
//! * `emit_pipeline_ping_pong`: compute warpgroups 0 and 1 take alternate
//!   tiles (5 tiles of 3 steps through 2 slots: each slot refilled for the
//!   other warpgroup), every sum right and every tile computed by warpgroup
//!   `t % 2`, on several schedules; with `consumed` declared for 256
//!   arrivals (128 arrive) the emulator reports the count and the rule;
//! * `BlockSpec::at_coords` on a rank-3 map loads the box at each step's
//!   `[col, row, batch]`, rows past a batch's end zero-filled.
use kernel_host::emulate::{EmuError, EmuTensorMap, Emulator, RunReport};
use kernel_fixtures::pipeline_forms::{self as pf, rank3_coords, Block, R3_BATCH, R3_STEPS};

const SEEDS: usize = 4;
const TILES: usize = 5;
const STEPS_PER_TILE: usize = 3;

/// Small integers, so the f32 sums are exact.
fn operand(len: usize, salt: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7 + salt * 3) % 11) as f32 - 5.0).collect()
}

macro_rules! ping_pong {
    ($k:ty, $emu:expr) => {{
        let cols = 32 * STEPS_PER_TILE;
        let x = operand(8 * TILES * cols, 1);
        let (mut out, mut owner) = (vec![f32::NAN; 128 * TILES], vec![u32::MAX; TILES]);
        let r: Result<RunReport, EmuError> = {
            let xm = EmuTensorMap::<Block>::new_2d(&x, 8 * TILES, cols).unwrap();
            $emu.launch::<$k, _>(1u32, (&xm, &mut out[..], &mut owner[..], TILES as u32, STEPS_PER_TILE as u32))
        };
        (r, x, out, owner)
    }};
}

#[test]
fn ping_pong_warpgroups_take_alternate_tiles() {
    let cols = 32 * STEPS_PER_TILE;
    for emu in Emulator::schedules(61, SEEDS) {
        let (r, x, out, owner) = ping_pong!(pf::ping_pong_sums<true>, emu);
        let report = r.unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
        assert!(report.warnings.is_empty(), "seed {}: {:?}", emu.seed(), report.warnings);
        for t in 0..TILES {
            assert_eq!(owner[t], (t % 2) as u32, "seed {}: tile {t} computed by warpgroup {}", emu.seed(), owner[t]);
            for i in 0..128 {
                let (r, c) = (8 * t + 2 * i / 32, 2 * i % 32);
                let want: f32 = (0..STEPS_PER_TILE).map(|k| x[r * cols + 32 * k + c] + x[r * cols + 32 * k + c + 1]).sum();
                assert_eq!(out[128 * t + i], want, "seed {}: tile {t}, thread {i}", emu.seed());
            }
        }
    }
}

/// Without the turn order, warpgroup 1 starts tile 1 (step 3, slot 1, lap
/// 1) while slot 1 may still be in lap 0 (step 1 not landed): on the GPU
/// its parity wait would pass at once and read the slot before the copy.
#[test]
fn ping_pong_mainloops_out_of_order_wait_on_a_phase_ahead() {
    for emu in Emulator::schedules(73, SEEDS) {
        let (r, ..) = ping_pong!(pf::ping_pong_sums<false>, emu);
        let e = r.expect_err("the unordered mainloops were not caught");
        let msg = e.to_string();
        let EmuError::Misuse { rule, where_, .. } = &e else {
            panic!("seed {}: not a misuse: {msg}", emu.seed())
        };
        assert_eq!(rule, "a wait on a phase ahead of the barrier", "seed {}: {msg}", emu.seed());
        assert!(where_.contains("pipeline_forms.rs:") && where_.contains("inside `Consumer::wait`"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn ping_pong_consumed_count_of_256_is_reported() {
    for emu in Emulator::schedules(67, SEEDS) {
        let (r, ..) = ping_pong!(pf::ping_pong_consumed_256, emu);
        let e = r.expect_err("the count of 256 was not caught");
        let msg = e.to_string();
        let EmuError::Misuse { rule, detail, where_, .. } = &e else {
            panic!("seed {}: not a misuse: {msg}", emu.seed())
        };
        if emu.seed() == 67 {
            eprintln!("{msg}");
        }
        assert_eq!(rule, "mbarrier arrival count larger than its arriving threads", "seed {}: {msg}", emu.seed());
        assert!(detail.contains("arrival count of 256") && detail.contains("128 arrivals"), "seed {}: {msg}", emu.seed());
        assert!(where_.contains("pipeline_forms.rs:"), "seed {}: {msg}", emu.seed());
    }
}

#[test]
fn at_coords_on_a_rank3_map_loads_each_steps_box() {
    let (batch, rows, cols) = (R3_BATCH as usize, 20usize, 64usize);
    let x = operand(batch * rows * cols, 2);
    for emu in Emulator::schedules(71, 2) {
        let mut out = vec![f32::NAN; 256 * R3_STEPS as usize];
        {
            let xm = EmuTensorMap::<Block, 3>::new_batched(&x, batch, rows, cols).unwrap();
            let report = emu.launch::<pf::rank3_blocks, _>(1u32, (&xm, &mut out[..])).unwrap_or_else(|e| panic!("seed {}: {e}", emu.seed()));
            assert!(report.warnings.is_empty(), "seed {}: {:?}", emu.seed(), report.warnings);
        }
        let mut zeros = 0;
        for s in 0..R3_STEPS {
            let [c0, r0, b] = rank3_coords(s).map(|v| v as usize);
            for e in 0..256 {
                let (r, c) = (r0 + e / 32, c0 + e % 32);
                let want = if r < rows { x[(b * rows + r) * cols + c] } else { 0.0 };
                zeros += (r >= rows) as usize;
                assert_eq!(out[256 * s as usize + e], want, "seed {}: step {s} [col {c0}, row {r0}, batch {b}], element {e}", emu.seed());
            }
        }
        assert!(zeros > 0, "no box ran past a batch's rows: the zero fill was not exercised");
    }
}
