//! The CPU emulator: every example that uses only emulated operations runs
//! correctly under several schedules, and each planted bug is caught with
//! the expected message.
use examples::emulated::FIRST_EXAMPLES;
use kernel_host::emulate::{EmuError, Emulator};
use kernels::planted;

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

#[test]
fn first_examples_match_the_cpu_reference_under_4_schedules() {
    for seed in SEEDS {
        let emu = Emulator::new(seed);
        for (name, run) in FIRST_EXAMPLES {
            if let Err(e) = run(&emu) {
                panic!("seed {seed}: {name}: {e}");
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
        let e = expect_err(seed, Emulator::new(seed).launch::<planted::skip_barrier, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {seed}: {msg}");
        assert!(msg.contains("skip_barrier") && msg.contains("bar"), "seed {seed}: {msg}");
    }
}

#[test]
fn missing_arrival_is_a_deadlock_on_the_mbarrier() {
    for seed in SEEDS {
        let mut y = vec![0f32; 128];
        let e = expect_err(seed, Emulator::new(seed).launch::<planted::missing_arrive, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Deadlock { .. }), "seed {seed}: {msg}");
        assert!(msg.contains("mbarrier"), "seed {seed}: {msg}");
    }
}

#[test]
fn extra_arrival_is_a_barrier_misuse() {
    for seed in SEEDS {
        let mut y = vec![0f32; 128];
        let e = expect_err(seed, Emulator::new(seed).launch::<planted::extra_arrive, _>(1u32, (&mut y[..],)));
        let msg = e.to_string();
        assert!(matches!(e, EmuError::Misuse { .. }), "seed {seed}: {msg}");
        assert!(msg.contains("arrival"), "seed {seed}: {msg}");
    }
}

#[test]
fn announced_bytes_never_delivered_is_a_deadlock_naming_the_transaction_count() {
    for seed in SEEDS {
        let mut y = vec![0f32; 32];
        let e = expect_err(seed, Emulator::new(seed).launch::<planted::missing_copy, _>(1u32, (&mut y[..],)));
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
    let e = Emulator::new(1).launch::<kernels::first::cluster_exchange, _>(3u32, (&x[..], &mut y[..])).unwrap_err();
    assert!(e.to_string().contains("multiple of the cluster"), "{e}");
}
