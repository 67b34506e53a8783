//! Unit tests: each runs small grids and can fail (a broken scheduler or
//! barrier gives wrong data, a missing check gives `Ok`). Every run goes
//! through `run_t`, which fails the test instead of hanging it.
use super::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

/// Runs `f` on the emulator in a helper thread; fails if it takes over 30 s.
/// (The other test modules of the crate use it too.)
pub(crate) fn run_t(cfg: LaunchConfig, f: impl Fn() + Send + Sync + 'static) -> Result<RunReport, EmuError> {
    let (tx, rx) = mpsc::channel();
    let name = cfg.kernel.clone();
    std::thread::spawn(move || {
        let _ = tx.send(run(&cfg, &f));
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(r) => r,
        Err(e) => panic!("kernel `{name}`: run() did not return ({e})"),
    }
}

fn cfg(kernel: &str, grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig::new(kernel, [grid, 1, 1], [block, 1, 1])
}

fn smem_u32(i: usize) -> *mut u32 {
    // SAFETY: callers stay inside the launch's smem_bytes.
    unsafe { (smem_base() as *mut u32).add(i) }
}

fn tid_x() -> usize {
    thread_idx()[0] as usize
}

#[test]
fn every_thread_runs_once_with_its_ids() {
    // 2 CTAs (one cluster of 2) x 64 threads laid out 16 x 4.
    let mut c = LaunchConfig::new("ids", [2, 1, 1], [16, 4, 1]);
    c.cluster = [2, 1, 1];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let report = run_t(c, move || {
        let (t, b) = (thread_idx(), block_idx());
        let linear = t[0] + 16 * t[1];
        assert_eq!((lane_id(), warp_id()), (linear % 32, linear / 32));
        assert_eq!(
            (grid_dim(), block_dim(), cluster_dim()),
            ([2, 1, 1], [16, 4, 1], [2, 1, 1])
        );
        assert_eq!((cluster_ctarank(), cluster_idx()), (b[0], [0, 0, 0]));
        assert!(is_emulated_thread());
        s.lock().unwrap().push((b, t));
    })
    .unwrap();
    assert_eq!(report.threads, 128);
    let seen = seen.lock().unwrap();
    let unique: BTreeSet<_> = seen.iter().copied().collect();
    assert_eq!((seen.len(), unique.len()), (128, 128));
    for b in 0..2 {
        for y in 0..4 {
            for x in 0..16 {
                assert!(
                    unique.contains(&([b, 0, 0], [x, y, 0])),
                    "missing cta {b} thread ({x},{y})"
                );
            }
        }
    }
}

/// The order in which threads pass their yield points, for a seed.
fn interleaving(seed: u64) -> Vec<usize> {
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let mut c = cfg("interleaving", 2, 32);
    c.seed = seed;
    run_t(c, move || {
        let id = block_idx()[0] as usize * 32 + tid_x();
        for _ in 0..5 {
            yield_point("step");
            o.lock().unwrap().push(id);
        }
    })
    .unwrap();
    let v = order.lock().unwrap().clone();
    v
}

#[test]
fn same_seed_same_interleaving_other_seed_other_interleaving() {
    let a = interleaving(1);
    assert_eq!(a.len(), 64 * 5);
    assert_eq!(a, interleaving(1), "same seed, different interleaving");
    assert_ne!(
        a,
        interleaving(2),
        "seeds 1 and 2 gave the same interleaving"
    );
    // Not round-robin: the scheduler really interleaves.
    assert_ne!(a, (0..5).flat_map(|_| 0..64).collect::<Vec<_>>());
}

#[test]
fn bar_sync_orders_shared_memory_and_is_reusable() {
    for seed in SEEDS {
        let mut c = cfg("bar_sync", 1, 64);
        c.smem_bytes = 64 * 4;
        c.seed = seed;
        run_t(c, || {
            let t = tid_x();
            if t == 0 {
                for _ in 0..20 {
                    yield_point("let the others reach the barrier");
                }
                for i in 0..64 {
                    // SAFETY: inside the 64 u32 of shared memory.
                    unsafe { *smem_u32(i) = 3 * i as u32 + 1 };
                }
            }
            bar_sync(0, 0);
            // SAFETY: as above.
            assert_eq!(
                unsafe { *smem_u32(t) },
                3 * t as u32 + 1,
                "read before the producer wrote"
            );
            bar_sync(0, 0);
            // SAFETY: as above.
            unsafe { *smem_u32(t) = t as u32 + 100 };
            bar_sync(0, 0);
            // SAFETY: as above.
            assert_eq!(
                unsafe { *smem_u32(63 - t) },
                163 - t as u32,
                "second phase not ordered"
            );
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn named_barrier_arrive_then_sync_hands_data_from_one_warp_to_another() {
    for seed in SEEDS {
        let mut c = cfg("named_barrier", 1, 64);
        c.smem_bytes = 32 * 4;
        c.seed = seed;
        run_t(c, || {
            let t = tid_x();
            if t < 32 {
                yield_point("produce");
                // SAFETY: inside the 32 u32 of shared memory.
                unsafe { *smem_u32(t) = t as u32 * 7 };
                bar_arrive(1, 64);
            } else {
                bar_sync(1, 64);
                // SAFETY: as above.
                assert_eq!(unsafe { *smem_u32(t - 32) }, (t - 32) as u32 * 7);
            }
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn a_thread_skipping_bar_sync_is_a_deadlock_naming_it() {
    for seed in SEEDS {
        let mut c = cfg("skip_barrier", 1, 64);
        c.seed = seed;
        let e = run_t(c, || {
            if tid_x() == 5 {
                return;
            }
            bar_sync(0, 0);
        })
        .unwrap_err();
        let msg = e.to_string();
        let EmuError::Deadlock { kernel, blocked } = &e else {
            panic!("seed {seed}: not a deadlock: {msg}")
        };
        assert_eq!(
            (kernel.as_str(), blocked.len()),
            ("skip_barrier", 63),
            "{msg}"
        );
        assert!(
            msg.contains("bar.sync 0: 63 of 64 threads arrived"),
            "{msg}"
        );
        assert!(msg.contains("thread (5,0,0) [warp 0] (exited)"), "{msg}");
        assert!(blocked[0].starts_with("cta (0,0,0) thread ("), "{msg}");
    }
}

#[test]
fn warp_sync_and_elect_one_pick_lane_0_of_each_warp() {
    let elected = Arc::new(Mutex::new(Vec::new()));
    let el = elected.clone();
    // 80 threads: warps of 32, 32 and 16 lanes.
    run_t(cfg("elect", 1, 80), move || {
        if elect_one() {
            el.lock().unwrap().push(tid_x());
        }
        warp_sync();
    })
    .unwrap();
    let mut v = elected.lock().unwrap().clone();
    v.sort();
    assert_eq!(v, vec![0, 32, 64]);
    // A lane that exits leaves its warp's barrier waiting forever.
    let e = run_t(cfg("warp_exit", 1, 32), || {
        if tid_x() == 3 {
            return;
        }
        warp_sync();
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Deadlock { .. }), "{msg}");
    assert!(
        msg.contains("bar.warp.sync (warp barrier) of warp 0: 31 of 32 lanes arrived"),
        "{msg}"
    );
    assert!(msg.contains("thread (3,0,0) [warp 0] (exited)"), "{msg}");
}

const FULL: u32 = 0;
const EMPTY: u32 = 8;
const DATA: usize = 4; // u32 index of the data slot (byte 16)

/// One producer (thread 0) and 32 consumers (warp 1) pass 8 items through a
/// one-slot queue guarded by a `full` (1 arrival + 128 tx bytes) and an
/// `empty` (32 arrivals) mbarrier.
fn producer_consumer() {
    let t = tid_x();
    if t == 0 {
        mbarrier_init(FULL, 1);
        mbarrier_init(EMPTY, 32);
    }
    bar_sync(0, 0);
    if t == 0 {
        for i in 0..8u32 {
            assert!(mbarrier_try_wait_parity(EMPTY, (i & 1) ^ 1));
            for j in 0..32 {
                // SAFETY: inside the launch's shared memory.
                unsafe { *smem_u32(DATA + j) = i * 100 + j as u32 };
                if j % 8 == 0 {
                    yield_point("write");
                }
            }
            mbarrier_arrive_expect_tx(FULL, 128);
            mbarrier_complete_tx(FULL, 64);
            mbarrier_complete_tx(FULL, 64);
        }
    } else if t >= 32 {
        let j = t - 32;
        for i in 0..8u32 {
            assert!(mbarrier_try_wait_parity(FULL, i & 1));
            // SAFETY: as above.
            let v = unsafe { *smem_u32(DATA + j) };
            assert_eq!(
                v,
                i * 100 + j as u32,
                "consumer {j} read a stale or early item in phase {i}"
            );
            yield_point("consume");
            mbarrier_arrive(EMPTY);
        }
    }
}

#[test]
fn mbarrier_producer_consumer_over_8_phases() {
    for seed in SEEDS {
        let mut c = cfg("mbarrier_queue", 1, 64);
        c.smem_bytes = 16 + 32 * 4;
        c.seed = seed;
        let r = run_t(c, producer_consumer).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(r.steps > 8 * 32 * 2, "seed {seed}: {r:?}");
    }
}

#[test]
fn extra_arrivals_are_misuse() {
    // Every thread of warp 0 arrives twice on a barrier that expects 32.
    for seed in SEEDS {
        let mut c = cfg("extra_arrive", 1, 64);
        c.smem_bytes = 8;
        c.seed = seed;
        let e = run_t(c, || {
            if tid_x() == 0 {
                mbarrier_init(0, 32);
            }
            bar_sync(0, 0);
            if tid_x() < 32 {
                mbarrier_arrive(0);
                mbarrier_arrive(0);
            } else {
                mbarrier_try_wait_parity(0, 0);
            }
        })
        .unwrap_err();
        let msg = e.to_string();
        let EmuError::Misuse { rule, .. } = &e else {
            panic!("seed {seed}: not a misuse: {msg}")
        };
        assert_eq!(
            rule, "more arrivals than the count in one phase",
            "seed {seed}: {msg}"
        );
    }
    // An arrival while the phase has all its arrivals and waits for bytes.
    let mut c = cfg("arrive_past_count", 1, 1);
    c.smem_bytes = 8;
    let e = run_t(c, || {
        mbarrier_init(0, 2);
        mbarrier_expect_tx(0, 16);
        mbarrier_arrive(0);
        mbarrier_arrive(0);
        mbarrier_arrive(0);
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("misuse: more arrivals than the count in one phase"),
        "{msg}"
    );
    assert!(msg.contains("held open by 16 transaction bytes"), "{msg}");
    assert!(
        msg.contains("cta (0,0,0) thread (0,0,0) [warp 0] at kernel-emu/src/tests.rs:"),
        "{msg}"
    );
    // Three arrivals from three threads on a barrier of 2: phase 1 is left
    // with one arrival when the kernel ends.
    let mut c = cfg("odd_arrivals", 1, 3);
    c.smem_bytes = 8;
    let e = run_t(c, || {
        if tid_x() == 0 {
            mbarrier_init(0, 2);
        }
        bar_sync(0, 0);
        mbarrier_arrive(0);
    })
    .unwrap_err();
    let msg = e.to_string();
    let EmuError::Misuse { rule, where_, .. } = &e else {
        panic!("not a misuse: {msg}")
    };
    assert_eq!(
        (rule.as_str(), where_.as_str()),
        ("arrivals pending when the kernel ended", "kernel end")
    );
    assert!(
        msg.contains("phase 1 got 1 of 2 arrivals (1 pending)"),
        "{msg}"
    );
}

#[test]
fn bytes_announced_but_not_completed_deadlock_naming_tx() {
    for seed in SEEDS {
        let mut c = cfg("missing_copy", 1, 32);
        c.smem_bytes = 64;
        c.seed = seed;
        let e = run_t(c, || {
            if tid_x() == 0 {
                mbarrier_init(0x10, 1);
            }
            bar_sync(0, 0);
            if tid_x() == 0 {
                mbarrier_expect_tx(0x10, 64);
                mbarrier_complete_tx(0x10, 32);
                mbarrier_arrive(0x10);
            }
            mbarrier_try_wait_parity(0x10, 0);
        })
        .unwrap_err();
        let msg = e.to_string();
        let EmuError::Deadlock { blocked, .. } = &e else {
            panic!("seed {seed}: not a deadlock: {msg}")
        };
        assert_eq!(blocked.len(), 32, "{msg}");
        assert!(
            msg.contains(
                "mbarrier.try_wait.parity 0 at smem+0x10 (phase 0 incomplete: 0 of 1 arrivals pending, tx 32; arrival count 1, 1 arrival(s) seen)"
            ),
            "{msg}"
        );
        assert!(
            msg.contains("32 transaction bytes announced with expect_tx were never completed"),
            "{msg}"
        );
    }
}

#[test]
fn a_thread_whose_parity_falls_out_of_step_skipped_a_phase() {
    let mut c = cfg("skip_phase", 1, 2);
    c.smem_bytes = 8;
    let e = run_t(c, || {
        let t = tid_x();
        if t == 0 {
            mbarrier_init(0, 1);
        }
        bar_sync(0, 0);
        if t == 0 {
            mbarrier_arrive(0); // completes phase 0
        } else {
            mbarrier_try_wait_parity(0, 0); // sees phase 0
        }
        bar_sync(0, 0);
        if t == 0 {
            mbarrier_arrive(0); // phase 1
            mbarrier_arrive(0); // phase 2
        }
        bar_sync(0, 0);
        if t == 1 {
            mbarrier_try_wait_parity(0, 1); // means phase 1; the barrier is in phase 3
        }
    })
    .unwrap_err();
    let msg = e.to_string();
    let EmuError::Misuse { rule, where_, .. } = &e else {
        panic!("not a misuse: {msg}")
    };
    assert_eq!(rule, "a thread skipped a phase", "{msg}");
    assert!(
        where_.starts_with("cta (0,0,0) thread (1,0,0) [warp 0] at "),
        "{msg}"
    );
    assert!(
        msg.contains("saw phase 0 complete; this one would wait for phase 3"),
        "{msg}"
    );
}

#[test]
fn cluster_of_2_exchanges_through_distributed_shared_memory() {
    for seed in SEEDS {
        let mut c = cfg("cluster_exchange", 2, 32);
        c.cluster = [2, 1, 1];
        c.smem_bytes = 8 + 32 * 4;
        c.seed = seed;
        run_t(c, || {
            let (t, rank) = (tid_x(), cluster_ctarank());
            let peer = 1 - rank;
            if t == 0 {
                mbarrier_init(0, 1);
            }
            cluster_arrive();
            cluster_wait();
            let mine = smem_u32(2 + t) as *mut u8;
            let theirs = map_rank_ptr(mine, peer) as *mut u32;
            assert_eq!(
                theirs as *mut u8,
                smem_ptr(map_rank_addr(smem_addr(mine), peer))
            );
            assert_eq!(map_rank_ptr(theirs as *mut u8, rank), mine);
            // SAFETY: inside the peer's shared memory.
            unsafe { *theirs = rank * 1000 + t as u32 };
            cluster_arrive();
            cluster_wait();
            // SAFETY: inside this CTA's shared memory.
            assert_eq!(unsafe { *(mine as *mut u32) }, peer * 1000 + t as u32);
            // Thread 0 signals the peer's barrier, then waits on its own.
            if t == 0 {
                mbarrier_arrive(map_rank_addr(0, peer));
                assert!(mbarrier_try_wait_parity(0, 0));
            }
            cluster_arrive();
            cluster_wait();
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn a_panic_stops_the_run_and_is_reported() {
    for seed in SEEDS {
        let mut c = cfg("panics", 2, 64);
        c.smem_bytes = 8;
        c.seed = seed;
        let finished = Arc::new(AtomicUsize::new(0));
        let f = finished.clone();
        let e = run_t(c, move || {
            if tid_x() == 0 {
                mbarrier_init(0, 64);
            }
            bar_sync(0, 0);
            if block_idx()[0] == 1 && tid_x() == 7 {
                yield_point("before the panic");
                panic!("boom in thread {}", tid_x());
            }
            mbarrier_try_wait_parity(0, 0);
            f.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap_err();
        let EmuError::Panic {
            kernel,
            cta,
            thread,
            message,
            location,
        } = &e
        else {
            panic!("seed {seed}: {e}")
        };
        assert_eq!(
            (kernel.as_str(), *cta, *thread, message.as_str()),
            ("panics", [1, 0, 0], [7, 0, 0], "boom in thread 7")
        );
        assert!(
            location.as_deref().is_some_and(|l| l.contains("tests.rs")),
            "{e}"
        );
        assert_eq!(
            finished.load(Ordering::Relaxed),
            0,
            "threads went on past a barrier that never completed"
        );
        assert!(
            e.to_string()
                .contains("cta (1,0,0) thread (7,0,0) panicked: boom in thread 7"),
            "{e}"
        );
    }
}

#[test]
fn a_spin_loop_runs_out_of_steps() {
    let mut c = cfg("spin", 1, 4);
    c.max_steps = 500;
    let flag = Arc::new(AtomicUsize::new(0));
    let e = run_t(c, move || {
        if tid_x() == 2 {
            while flag.load(Ordering::Relaxed) == 0 {
                yield_point("spin on flag");
            }
        }
    })
    .unwrap_err();
    let msg = e.to_string();
    let EmuError::NoProgress {
        steps, spinning, ..
    } = &e
    else {
        panic!("not NoProgress: {msg}")
    };
    assert_eq!((*steps, spinning.len()), (501, 1), "{msg}");
    assert!(
        spinning[0]
            .starts_with("cta (0,0,0) thread (2,0,0) [warp 0]: last yielded on spin on flag (at "),
        "{msg}"
    );
}

#[test]
fn address_and_barrier_misuse_is_reported_with_the_rule() {
    fn rule_of(name: &str, threads: u32, f: impl Fn() + Send + Sync + 'static) -> (String, String) {
        let mut c = cfg(name, 1, threads);
        c.smem_bytes = 64;
        match run_t(c, f) {
            Err(EmuError::Misuse {
                rule,
                where_,
                detail,
                ..
            }) => (rule, format!("{where_}: {detail}")),
            other => panic!("{name}: expected a misuse, got {other:?}"),
        }
    }
    type Case = (&'static str, &'static str, u32, Box<dyn Fn() + Send + Sync>);
    let cases: Vec<Case> = vec![
        (
            "uninit",
            "mbarrier used before mbarrier.init",
            1,
            Box::new(|| mbarrier_arrive(8)),
        ),
        (
            "count0",
            "mbarrier.init count out of range",
            1,
            Box::new(|| mbarrier_init(8, 0)),
        ),
        (
            "misaligned",
            "mbarrier address not 8-byte aligned",
            1,
            Box::new(|| mbarrier_init(4, 1)),
        ),
        (
            "outside",
            "mbarrier outside the dynamic shared memory",
            1,
            Box::new(|| mbarrier_init(64, 1)),
        ),
        (
            "reinit",
            "mbarrier.init on a barrier whose phase is in progress",
            1,
            Box::new(|| {
                mbarrier_init(8, 2);
                mbarrier_arrive(8);
                mbarrier_init(8, 2);
            }),
        ),
        (
            "oob",
            "out-of-bounds shared-memory access",
            1,
            Box::new(|| {
                let _ = smem_ptr_range(60, 8);
            }),
        ),
        (
            "not_smem",
            "not a shared-memory address",
            1,
            Box::new(|| {
                let _ = smem_addr(&0u8 as *const u8);
            }),
        ),
        (
            "rank",
            "CTA rank outside the cluster",
            1,
            Box::new(|| {
                let _ = map_rank_addr(0, 1);
            }),
        ),
        (
            "bar_id",
            "named barrier id out of range",
            1,
            Box::new(|| bar_sync(16, 0)),
        ),
        (
            "bar_count",
            "barrier thread count not a multiple of the warp size",
            64,
            Box::new(|| bar_sync(1, 48)),
        ),
        (
            "cluster_wait",
            "barrier.cluster.wait without a preceding arrive",
            1,
            Box::new(cluster_wait),
        ),
        (
            "tx_over",
            "transaction bytes over the expected count",
            1,
            Box::new(|| {
                mbarrier_init(8, 1);
                mbarrier_expect_tx(8, 16);
                mbarrier_arrive(8);
                mbarrier_complete_tx(8, 32);
            }),
        ),
    ];
    for (name, want, threads, f) in cases {
        let (rule, detail) = rule_of(name, threads, f);
        assert_eq!(rule, want, "{name}: {detail}");
        assert!(detail.contains("thread ("), "{name}: {detail}");
    }
}

#[test]
fn launch_shape_is_checked() {
    let e = run(&cfg("big", 65, 1), &|| {}).unwrap_err();
    assert!(
        matches!(e, EmuError::TooLarge { .. }) && e.to_string().contains("at most 64 CTAs"),
        "{e}"
    );
    let e = run(&cfg("big", 5, 1024), &|| {}).unwrap_err();
    assert!(
        matches!(e, EmuError::TooLarge { .. }) && e.to_string().contains("5120 threads"),
        "{e}"
    );
    let mut c = cfg("clusters", 3, 32);
    c.cluster = [2, 1, 1];
    let e = run(&c, &|| {}).unwrap_err();
    assert!(e.to_string().contains("multiple of the cluster"), "{e}");
}

#[test]
fn calls_outside_an_emulated_thread_panic_clearly() {
    let r = std::panic::catch_unwind(thread_idx);
    let msg = panic_message(&*r.unwrap_err());
    assert!(
        msg.contains("`thread_idx` was called outside an emulated GPU thread"),
        "{msg}"
    );
    assert!(!is_emulated_thread());
}

// ----- race detection ---------------------------------------------------------

/// A tracked SMEM write / read of u32 `i` (what `Smem` accessors do).
fn sw(i: usize, v: u32) {
    smem_access(smem_u32(i) as *const u8, 4, true);
    // SAFETY: inside the launch's shared memory.
    unsafe { *smem_u32(i) = v };
}
fn sr(i: usize) -> u32 {
    smem_access(smem_u32(i) as *const u8, 4, false);
    // SAFETY: inside the launch's shared memory.
    unsafe { *smem_u32(i) }
}

fn expect_race(r: Result<RunReport, EmuError>, what: &str) -> EmuError {
    match r {
        Err(e @ EmuError::Race { .. }) => e,
        other => panic!("{what}: expected a race, got {other:?}"),
    }
}

#[test]
fn smem_write_then_read_by_another_thread_races_unless_a_barrier_orders_them() {
    for seed in SEEDS {
        for synced in [false, true] {
            let mut c = cfg("smem_race", 1, 64);
            c.smem_bytes = 64 * 4;
            c.seed = seed;
            let r = run_t(c, move || {
                let t = tid_x();
                sw(t, t as u32);
                if synced {
                    bar_sync(0, 0);
                }
                yield_point("between");
                let _ = sr((t + 1) % 64);
            });
            if synced {
                r.unwrap();
            } else {
                let e = expect_race(r, "no barrier");
                let msg = e.to_string();
                assert!(msg.contains("race on shared memory") && msg.contains("smem+0x"), "{msg}");
                assert!(msg.lines().count() <= 5 && msg.contains("first:") && msg.contains("fix:"), "{msg}");
                assert!(msg.matches("src/tests.rs:").count() >= 2, "both source lines: {msg}");
                assert!(msg.contains("lane "), "{msg}");
            }
        }
    }
}

#[test]
fn mbarrier_hand_over_orders_data_and_a_skipped_wait_races() {
    for seed in SEEDS {
        for wait in [true, false] {
            let mut c = cfg("mbar_hb", 1, 64);
            c.smem_bytes = 16 + 4;
            c.seed = seed;
            let r = run_t(c, move || {
                let t = tid_x();
                if t == 0 {
                    mbarrier_init(0, 1);
                }
                bar_sync(0, 0);
                if t == 0 {
                    sw(4, 7);
                    mbarrier_arrive(0);
                } else if t == 32 {
                    if wait {
                        mbarrier_try_wait_parity(0, 0);
                    }
                    yield_point("reader");
                    let _ = sr(4);
                }
                if t == 32 && !wait {
                    mbarrier_try_wait_parity(0, 0);
                }
            });
            if wait {
                r.unwrap();
            } else {
                // Whether the read comes before or after the write, the two
                // are unordered: reported either way.
                expect_race(r, "read without the wait");
            }
        }
    }
}

/// A host buffer for global memory in these tests.
fn host_buf(n: usize) -> &'static mut [u32] {
    Box::leak(vec![0u32; n].into_boxed_slice())
}

#[test]
fn async_load_lands_by_its_phase_and_a_read_before_the_wait_races() {
    let src = host_buf(16);
    for (i, v) in src.iter_mut().enumerate() {
        *v = 100 + i as u32;
    }
    let src = src.as_ptr() as usize;
    for seed in SEEDS {
        for wait in [true, false] {
            let mut c = cfg("tma_like_load", 1, 32);
            c.smem_bytes = 64 + 8;
            c.seed = seed;
            let got = Arc::new(Mutex::new(Vec::new()));
            let g2 = got.clone();
            let r = run_t(c, move || {
                let t = tid_x();
                if t == 0 {
                    mbarrier_init(64, 1);
                }
                bar_sync(0, 0);
                if t == 0 {
                    mbarrier_arrive_expect_tx(64, 64);
                    let copy = AsyncCopy { dst: smem_u32(0) as *mut u8, src: Some(src as *const u8), len: 64 };
                    async_issue(AsyncOp::copies("test load", vec![copy], Completion::MBarrierTx { bar: 64, bytes: 64 }));
                }
                if wait {
                    mbarrier_try_wait_parity(64, 0);
                }
                let v = sr(t % 16);
                g2.lock().unwrap().push(v);
                if !wait {
                    mbarrier_try_wait_parity(64, 0);
                }
            });
            if wait {
                r.unwrap();
                let got = got.lock().unwrap();
                assert!(got.iter().enumerate().all(|(i, &v)| v == 100 + (i % 16) as u32 || got.len() == 32), "{got:?}");
                let mut sorted = got.clone();
                sorted.sort();
                assert_eq!(sorted.iter().filter(|&&v| v >= 100).count(), 32, "{got:?}");
            } else {
                let e = expect_race(r, "read before the load's wait");
                let msg = e.to_string();
                assert!(msg.contains("`test load`") && msg.contains("mbarrier phase"), "{msg}");
            }
        }
    }
}

/// `ctas` CTAs of 32 threads with 64 bytes of SMEM under schedule `seed`:
/// the launch of the bulk store and reduction tests.
fn bulk_cfg(kernel: &str, ctas: u32, seed: u64) -> LaunchConfig {
    let mut c = cfg(kernel, ctas, 32);
    c.smem_bytes = 64;
    c.seed = seed;
    c
}

/// The bulk operation's SMEM source: words `0..16` set to `word(i)`, then
/// made visible to the async proxy.
fn fill_bulk_source(word: impl Fn(usize) -> u32) {
    for i in 0..16 {
        sw(i, word(i));
    }
    fence_proxy_async();
}

#[test]
fn async_store_source_reuse_needs_wait_group_read_and_exit_needs_a_wait() {
    for seed in SEEDS {
        for mode in 0..3 {
            let dst = host_buf(16).as_mut_ptr() as usize;
            let r = run_t(bulk_cfg("store_like", 1, seed), move || {
                if tid_x() != 0 {
                    return;
                }
                fill_bulk_source(|i| i as u32);
                let copy = AsyncCopy { dst: dst as *mut u8, src: Some(smem_u32(0) as *const u8), len: 64 };
                async_issue(AsyncOp::copies("test store", vec![copy], Completion::BulkGroup));
                bulk_commit_group();
                match mode {
                    0 => {
                        bulk_wait_group(0, true);
                        sw(0, 9);
                        bulk_wait_group(0, false);
                    }
                    1 => sw(0, 9),
                    _ => {}
                }
            });
            match mode {
                0 => {
                    r.unwrap();
                    // SAFETY: the run is over; the buffer is leaked.
                    let out = unsafe { std::slice::from_raw_parts(dst as *const u32, 16) };
                    assert_eq!(out, (0..16).collect::<Vec<u32>>(), "the store ran before wait_group_read returned");
                }
                1 => {
                    let msg = expect_race(r, "source reused").to_string();
                    assert!(msg.contains("wait_group_read"), "{msg}");
                }
                _ => {
                    let msg = format!("{}", r.unwrap_err());
                    assert!(msg.contains("bulk async-groups outstanding"), "{msg}");
                }
            }
        }
    }
}

/// `cp.reduce.async.bulk .add.f32` from two CTAs into the same 16 floats:
/// the sums land by `wait_group`, and a store to the source before
/// `wait_group_read` is a race.
#[test]
fn bulk_reductions_add_from_every_cta_and_their_source_needs_wait_group_read() {
    for seed in SEEDS {
        for reuse_early in [false, true] {
            let dst = host_buf(16);
            dst.iter_mut().for_each(|w| *w = 1f32.to_bits());
            let dst = dst.as_mut_ptr() as usize;
            let r = run_t(bulk_cfg("reduce_like", 2, seed), move || {
                if tid_x() != 0 {
                    return;
                }
                fill_bulk_source(|i| (i as f32).to_bits());
                // SAFETY: `dst` is 16 floats lent to the run.
                unsafe { crate::tma::bulk_reduce_add_f32(dst as *mut f32, smem_addr(smem_u32(0) as *const u8), 64, "test reduce") };
                bulk_commit_group();
                if !reuse_early {
                    bulk_wait_group(0, true);
                }
                sw(0, 7);
                bulk_wait_group(0, false);
            });
            if reuse_early {
                let msg = expect_race(r, "source reused").to_string();
                assert!(msg.contains("test reduce"), "{msg}");
            } else {
                r.unwrap();
                // SAFETY: the run is over; the buffer is leaked.
                let out = unsafe { std::slice::from_raw_parts(dst as *const f32, 16) };
                assert_eq!(out, (0..16).map(|i| 1.0 + 2.0 * i as f32).collect::<Vec<f32>>(), "1 + both CTAs' i");
            }
        }
    }
}

#[test]
fn a_phase_with_tma_bytes_nobody_waits_on_is_reported() {
    let src = host_buf(16).as_ptr() as usize;
    for seed in SEEDS {
        let mut c = cfg("unwaited", 1, 32);
        c.smem_bytes = 72;
        c.seed = seed;
        let r = run_t(c, move || {
            if tid_x() == 0 {
                mbarrier_init(64, 1);
                mbarrier_arrive_expect_tx(64, 64);
                let copy = AsyncCopy { dst: smem_u32(0) as *mut u8, src: Some(src as *const u8), len: 64 };
                async_issue(AsyncOp::copies("test load", vec![copy], Completion::MBarrierTx { bar: 64, bytes: 64 }));
            }
        });
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains("never waited on"), "seed {seed}: {msg}");
    }
}

#[test]
fn async_proxy_needs_a_fence_even_when_the_value_is_unchanged() {
    for seed in SEEDS {
        for fenced in [false, true] {
            let dst = host_buf(16).as_mut_ptr() as usize;
            let mut c = cfg("proxy_hb", 1, 64);
            c.smem_bytes = 64;
            c.seed = seed;
            let r = run_t(c, move || {
                let t = tid_x();
                if t == 40 {
                    sw(3, 0); // the same value as before: only the clocks can tell
                    if fenced {
                        fence_proxy_async();
                    }
                }
                bar_sync(0, 0);
                if t == 0 {
                    let copy = AsyncCopy { dst: dst as *mut u8, src: Some(smem_u32(0) as *const u8), len: 64 };
                    async_issue(AsyncOp::copies("test store", vec![copy], Completion::BulkGroup));
                    bulk_commit_group();
                    bulk_wait_group(0, false);
                }
            });
            if fenced {
                r.unwrap();
            } else {
                let msg = r.unwrap_err().to_string();
                assert!(msg.contains("without commit_smem") && msg.contains("thread (40,0,0)"), "{msg}");
            }
        }
    }
}

#[test]
fn release_acquire_atomics_order_global_memory() {
    for seed in SEEDS {
        for synced in [true, false] {
            let data = host_buf(2).as_mut_ptr() as usize;
            let mut c = cfg("semaphore_hb", 2, 32);
            c.seed = seed;
            let r = run_t(c, move || {
                let (d, flag) = (data as *mut u32, (data + 4) as *mut u32);
                if tid_x() != 0 {
                    return;
                }
                if block_idx()[0] == 0 {
                    gmem_access(d as *const u8, 4, true);
                    // SAFETY: the leaked buffer.
                    unsafe { *d = 5 };
                    yield_point("red.release");
                    if synced {
                        gmem_atomic(flag as *const u8, false, true);
                    }
                    // SAFETY: as above.
                    unsafe { *flag = 1 };
                } else {
                    // SAFETY: as above.
                    while unsafe { std::ptr::read_volatile(flag) } == 0 {
                        yield_point("ld.acquire");
                    }
                    if synced {
                        gmem_atomic(flag as *const u8, true, false);
                    }
                    gmem_access(d as *const u8, 4, false);
                    // SAFETY: as above.
                    assert_eq!(unsafe { *d }, 5);
                }
            });
            if synced {
                r.unwrap();
            } else {
                let msg = expect_race(r, "no release/acquire").to_string();
                assert!(msg.contains("race on global memory"), "{msg}");
            }
        }
    }
}

/// Two emulated devices: device 0 writes a word of global memory and
/// releases a flag, device 1 acquires it and reads the word. Ordered only
/// when both are system scope; a `.gpu`-scope pair (or a mixed one) is a
/// reported race naming both devices.
#[test]
fn devices_synchronize_only_through_system_scope_atomics() {
    use AtomicScope::{Gpu, Sys};
    for seed in SEEDS {
        for (release, acquire) in [(Sys, Sys), (Gpu, Gpu), (Sys, Gpu), (Gpu, Sys)] {
            let data = host_buf(2).as_mut_ptr() as usize;
            let mut c = cfg("peer_flag", 1, 32);
            c.seed = seed;
            c.devices = 2;
            let r = run_t(c, move || {
                let (d, flag) = (data as *mut u32, (data + 4) as *mut u32);
                assert_eq!(device_count(), 2);
                if tid_x() != 0 {
                    return;
                }
                if device_id() == 0 {
                    gmem_access(d as *const u8, 4, true);
                    // SAFETY: the leaked buffer.
                    unsafe { *d = 5 };
                    yield_point("red.release");
                    gmem_atomic_scoped(flag as *const u8, false, true, release);
                    // SAFETY: as above.
                    unsafe { *flag = 1 };
                } else {
                    // SAFETY: as above.
                    while unsafe { std::ptr::read_volatile(flag) } == 0 {
                        yield_point("ld.acquire");
                    }
                    gmem_atomic_scoped(flag as *const u8, true, false, acquire);
                    gmem_access(d as *const u8, 4, false);
                    // SAFETY: as above.
                    assert_eq!(unsafe { *d }, 5);
                }
            });
            if (release, acquire) == (Sys, Sys) {
                r.unwrap_or_else(|e| panic!("seed {seed}: a .sys release/acquire pair orders two devices: {e}"));
            } else {
                let msg = expect_race(r, "a .gpu-scope atomic across devices").to_string();
                assert!(msg.contains("race on global memory") && msg.contains("devices 0 and 1"), "{msg}");
                assert!(msg.contains("device 1 cta (0,0,0) thread (0,0,0)"), "{msg}");
            }
        }
    }
}

#[test]
fn devices_run_the_grid_each_with_their_own_ctas_and_barriers() {
    // 3 devices x 2 CTAs x 32 threads; each CTA counts its threads through a
    // barrier in its own shared memory, then records (device, block).
    let seen = std::sync::Arc::new(Mutex::new(BTreeSet::new()));
    let s2 = seen.clone();
    let mut c = cfg("devices", 2, 32);
    c.devices = 3;
    c.smem_bytes = 4;
    run_t(c, move || {
        // SAFETY: inside the CTA's 4 bytes; one emulated thread runs at a time.
        unsafe { *smem_u32(0) += 1 };
        bar_sync(0, 0);
        if tid_x() == 0 {
            // SAFETY: as above.
            assert_eq!(unsafe { *smem_u32(0) }, 32);
            s2.lock().unwrap().insert((device_id(), block_idx()[0], grid_dim()[0]));
        }
    })
    .unwrap();
    let seen = seen.lock().unwrap();
    let want: BTreeSet<(u32, u32, u32)> = (0..3).flat_map(|d| (0..2).map(move |b| (d, b, 2))).collect();
    assert_eq!(*seen, want);

    // Too many devices, or limited residency with several: refused.
    let mut c = cfg("devices", 1, 32);
    c.devices = kernel_spec::limits::MAX_PEER_DEVICES as u32 + 1;
    let e = run_t(c, || {}).unwrap_err().to_string();
    assert!(e.contains("MAX_PEER_DEVICES"), "{e}");
    let mut c = cfg("devices", 2, 32);
    c.devices = 2;
    c.resident_clusters = 1;
    let e = run_t(c, || {}).unwrap_err().to_string();
    assert!(e.contains("resident_clusters"), "{e}");
}

#[test]
fn tracked_ops_complete_through_commit_arrive_like_tcgen05_commit() {
    // A stand-in for tcgen05.mma into tensor memory + tcgen05.commit: the op
    // writes TMEM when it runs; readers of TMEM must wait on the barrier.
    for seed in SEEDS {
        for wait in [true, false] {
            let mut c = cfg("commit_arrive", 1, 32);
            c.smem_bytes = 8;
            c.seed = seed;
            let r = run_t(c, move || {
                let t = tid_x();
                if t == 0 {
                    mbarrier_init(0, 1);
                }
                bar_sync(0, 0);
                if t == 0 {
                    let mut op = AsyncOp::copies("test mma", Vec::new(), Completion::Tracked);
                    op.writes.push((Space::Tmem { cta: 0 }, 0, 128 * 4));
                    async_issue(op);
                    async_commit_arrive(0, "test commit");
                }
                if wait {
                    mbarrier_try_wait_parity(0, 0);
                }
                tmem_access(t as u64 * 4, t as u64 * 4 + 4, false);
                if !wait {
                    mbarrier_try_wait_parity(0, 0);
                }
            });
            if wait {
                r.unwrap();
            } else {
                let msg = expect_race(r, "TMEM read before the commit's phase").to_string();
                assert!(msg.contains("tensor memory") && msg.contains("test mma"), "{msg}");
            }
        }
    }
}

#[test]
fn a_large_deadlock_prints_bounded_debug_and_display() {
    let c = cfg("big_deadlock", 1, 1024);
    let r = run_t(c, || {
        if tid_x() != 5 {
            bar_sync(0, 0);
        }
    });
    let e = r.unwrap_err();
    let (dbg, disp) = (format!("{e:?}"), e.to_string());
    assert!(dbg.len() < 8 * 1024 && dbg.contains("more lines"), "{} bytes: {dbg}", dbg.len());
    assert!(disp.len() < 8 * 1024, "{} bytes", disp.len());
}

#[test]
fn dsmem_exchange_is_ordered_by_a_releasing_cluster_barrier_only() {
    for seed in SEEDS {
        for release in [true, false] {
            let mut c = cfg("dsmem_hb", 2, 32);
            c.cluster = [2, 1, 1];
            c.smem_bytes = 32 * 4;
            c.seed = seed;
            let r = run_t(c, move || {
                let t = tid_x();
                let peer = cluster_ctarank() ^ 1;
                let remote = map_rank_ptr(smem_u32(t) as *mut u8, peer) as *mut u32;
                smem_access(remote as *const u8, 4, true);
                // SAFETY: inside the peer's shared memory.
                unsafe { *remote = t as u32 };
                if release {
                    cluster_arrive();
                } else {
                    cluster_arrive_relaxed();
                }
                cluster_wait();
                assert_eq!(sr(t), t as u32);
            });
            if release {
                r.unwrap();
            } else {
                expect_race(r, "relaxed cluster arrive");
            }
        }
    }
}

#[test]
fn an_ordinary_store_into_smem_of_an_in_flight_wgmma_is_reported() {
    for seed in SEEDS {
        for waited in [true, false] {
            let mut c = cfg("store_over_wgmma", 1, 64);
            c.smem_bytes = 64;
            c.seed = seed;
            let r = run_t(c, move || {
                let t = tid_x();
                if t == 0 {
                    wgmma_operand_reads(&[(0, 64)], "test wgmma");
                    wgmma_commit_group();
                    if waited {
                        wgmma_wait_group(0);
                    }
                }
                bar_sync(0, 0);
                if t == 40 {
                    sw(2, 1);
                }
                bar_sync(0, 0);
                if t == 0 {
                    wgmma_wait_group(0);
                }
            });
            if waited {
                r.unwrap();
            } else {
                let msg = r.unwrap_err().to_string();
                assert!(msg.contains("in-flight wgmma") && msg.contains("thread (40,0,0)"), "{msg}");
            }
        }
    }
}

#[test]
fn an_empty_bulk_group_left_unwaited_is_not_outstanding() {
    let c = cfg("empty_group", 1, 32);
    run_t(c, || {
        bulk_commit_group();
    })
    .unwrap();
}

/// 64 threads arrive once each on a barrier initialized with `count`,
/// after declaring (as library code does) that all 64 arrive per phase.
fn declared_arrivals(count: u32, seed: u64) -> Result<RunReport, EmuError> {
    let mut c = cfg("declared_arrivals", 1, 64);
    c.smem_bytes = 8;
    c.seed = seed;
    run_t(c, move || {
        if tid_x() == 0 {
            mbarrier_init(0, count);
        }
        bar_sync(0, 0);
        let _scope = scope("the_library_op");
        mbarrier_expect_arrivals(0, 64, "the 64 threads of the test");
        mbarrier_arrive(0);
        mbarrier_try_wait_parity(0, 0);
    })
}

#[test]
fn a_count_smaller_than_the_declared_arrivals_is_reported_when_a_phase_completes() {
    for seed in SEEDS {
        let e = declared_arrivals(16, seed).expect_err("a count of 16 for 64 arrivals was not caught");
        let msg = e.to_string();
        let EmuError::Misuse { rule, where_, detail, .. } = &e else { panic!("seed {seed}: {msg}") };
        assert_eq!(rule, "mbarrier arrival count smaller than its arriving threads", "seed {seed}: {msg}");
        assert!(detail.contains("completed after 16 arrival(s)") && detail.contains("its arrival count is 16 "), "seed {seed}: {msg}");
        assert!(detail.contains("64 arrivals were expected and 48 of those threads had not arrived yet"), "seed {seed}: {msg}");
        assert!(detail.contains("the 64 threads of the test") && detail.contains("`#[scratch(arrivals = 64)]`"), "seed {seed}: {msg}");
        // The report says which library scope the arrival was made in.
        assert!(where_.contains("(inside `the_library_op` called at ") && where_.contains("tests.rs:"), "seed {seed}: {msg}");
    }
    // The right count: no report.
    for seed in SEEDS {
        declared_arrivals(64, seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn a_count_larger_than_the_declared_arrivals_is_reported_at_once() {
    for seed in SEEDS {
        let e = declared_arrivals(65, seed).expect_err("a count of 65 for 64 arrivals was not caught");
        let msg = e.to_string();
        let EmuError::Misuse { rule, detail, .. } = &e else { panic!("seed {seed}: {msg}") };
        assert_eq!(rule, "mbarrier arrival count larger than its arriving threads", "seed {seed}: {msg}");
        assert!(detail.contains("arrival count of 65") && detail.contains("64 arrivals, so no phase ever completes"), "seed {seed}: {msg}");
    }
}

#[test]
fn warnings_are_kept_once_in_the_run_report() {
    let r = run_t(cfg("warns", 1, 64), || {
        warn_once(format!("kernel `{}`: something to know", kernel_name()));
        if tid_x() == 3 {
            warn_once("another".to_string());
        }
    })
    .unwrap();
    assert_eq!(r.warnings, vec!["kernel `warns`: something to know".to_string(), "another".to_string()]);
    let r = run_t(cfg("quiet", 1, 32), || {}).unwrap();
    assert!(r.warnings.is_empty());
}

#[test]
fn a_phase_that_completes_before_its_warps_arrived_is_noted_in_the_report() {
    // 64 threads (2 warps) arrive once each on a barrier counting 48, with
    // no declaration: phase 0 completes after 48 arrivals and the other 16
    // (warp-mates of some of those) land in phase 1, which never completes.
    for seed in SEEDS {
        let mut c = cfg("count_48", 1, 64);
        c.smem_bytes = 8;
        c.seed = seed;
        let e = run_t(c, || {
            if tid_x() == 0 {
                mbarrier_init(0, 48);
            }
            bar_sync(0, 0);
            mbarrier_arrive(0);
            mbarrier_try_wait_parity(0, 1);
        })
        .expect_err("a deadlock");
        let msg = e.to_string();
        let EmuError::Deadlock { blocked, .. } = &e else { panic!("seed {seed}: {msg}") };
        let note = blocked.last().unwrap();
        let threads = blocked.iter().filter(|l| !l.starts_with("note: ")).count();
        assert_eq!(threads, blocked.len() - 1, "seed {seed}: one note: {msg}");
        assert!(msg.contains(&format!("and {threads} are blocked")), "seed {seed}: the note is not counted as a thread: {msg}");
        assert!(
            note.starts_with("note: phase 0 of the mbarrier at smem+0x0") && note.contains("arrival count 48") && note.contains("completed with the arrivals of 48 thread(s)"),
            "seed {seed}: {msg}"
        );
    }
}

// ----- tensor memory: stores in flight; MMAs of two issuing threads ------------

/// Warp 0 allocates 32 TMEM columns (column 0, slot at smem 0); thread 0
/// initializes the mbarriers at smem 8 and 16 (one arrival each).
fn tmem_setup() {
    if warp_id() == 0 {
        tmem::alloc(0, 32);
    }
    if tid_x() == 0 {
        mbarrier_init(8, 1);
        mbarrier_init(16, 1);
    }
    bar_sync(0, 0);
}

/// Every thread's TMEM work done, warp 0 frees the columns.
fn tmem_teardown() {
    bar_sync(0, 0);
    if warp_id() == 0 {
        tmem::dealloc(0, 32);
    }
}

/// The TMEM address of the calling warp's lane quarter, column `col`.
fn quarter(col: u32) -> u32 {
    ((32 * (warp_id() % 4)) << 16) | col
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

/// The TMEM store scenarios (256 threads: warps 0 and 4 share lane quarter
/// 0): each racy (`ok = false`) or its twin (`ok = true`).
#[derive(Clone, Copy, Debug)]
enum StoreCase {
    /// Warp 0 stores, then loads the cells (twin: commit_tmem between).
    SameThreadLoad,
    /// Warp 0 stores, then stores over them (twin: commit_tmem between).
    SameThreadStore,
    /// Warp 4 stores, a CTA barrier, warp 0 loads; warp 4's commit_tmem is
    /// after the barrier (twin: before it).
    OtherThreadLoad,
    /// As `OtherThreadLoad`, warp 0 stores over the cells.
    OtherThreadStore,
    /// Warps 4-7 store the accumulator, a barrier, thread 0 issues an MMA
    /// that accumulates into it (twin: commit_tmem before the barrier).
    OtherThreadMma,
    /// Warp 4 stores and never calls commit_tmem; warp 0 loads after a
    /// barrier (no twin).
    OtherThreadNeverWaits,
}

fn mma_ones(accumulate: bool) {
    // D[128 x 8] (+)= A · Bᵀ with A all ones (K = 16), B row j all j + 1.
    let a = vec![1.0f32; 128 * 16];
    let b: Vec<f32> = (0..8 * 16).map(|i| (i / 16 + 1) as f32).collect();
    tmem::mma(tmem::MmaIssue {
        d: 0,
        a: tmem::AOperand::Smem(a),
        b,
        m: 128,
        n: 8,
        k: 16,
        accumulate,
        dtype: tmem::DType::F32,
        smem_reads: &[],
        op: "tcgen05.mma",
    });
}

fn store_case(case: StoreCase, ok: bool, seed: u64) -> Result<RunReport, EmuError> {
    let mut c = cfg("tmem_store", 1, 256);
    c.smem_bytes = 32;
    c.seed = seed;
    run_t(c, move || {
        let (t, w) = (tid_x(), warp_id());
        tmem_setup();
        let vals = [t as u32; 8];
        let mut out = [0u32; 8];
        match case {
            StoreCase::SameThreadLoad | StoreCase::SameThreadStore => {
                if w == 0 {
                    tmem::st_32x32b(quarter(0), &vals);
                    if ok {
                        tmem::wait_st();
                    }
                    if matches!(case, StoreCase::SameThreadLoad) {
                        tmem::ld_32x32b(quarter(0), &mut out);
                        tmem::wait_ld();
                        assert_eq!(out, vals);
                    } else {
                        tmem::st_32x32b(quarter(0), &[1; 8]);
                    }
                    tmem::wait_st();
                }
            }
            StoreCase::OtherThreadLoad | StoreCase::OtherThreadStore | StoreCase::OtherThreadNeverWaits => {
                let never = matches!(case, StoreCase::OtherThreadNeverWaits);
                if w == 4 {
                    tmem::st_32x32b(quarter(0), &vals);
                    if ok && !never {
                        tmem::wait_st();
                    }
                }
                bar_sync(1, 0);
                if w == 4 && !ok && !never {
                    tmem::wait_st();
                }
                if w == 0 {
                    if matches!(case, StoreCase::OtherThreadStore) {
                        tmem::st_32x32b(quarter(0), &[1; 8]);
                        tmem::wait_st();
                    } else {
                        tmem::ld_32x32b(quarter(0), &mut out);
                        tmem::wait_ld();
                        assert_eq!(out, [t as u32 + 128; 8]);
                    }
                }
            }
            StoreCase::OtherThreadMma => {
                if w >= 4 {
                    tmem::st_32x32b(quarter(0), &[0f32.to_bits(); 8]);
                    if ok {
                        tmem::wait_st();
                    }
                }
                bar_sync(1, 0);
                if w >= 4 && !ok {
                    tmem::wait_st();
                }
                if t == 0 {
                    tmem::fence_after_thread_sync();
                    mma_ones(true);
                    tmem::commit(8);
                }
                mbarrier_try_wait_parity(8, 0);
            }
        }
        tmem_teardown();
    })
}

#[test]
fn a_tmem_store_is_in_flight_until_its_threads_wait_st_and_a_barrier_after_it() {
    use StoreCase::*;
    let rule = "TMEM accessed before the tcgen05.st that writes it completed";
    for seed in SEEDS {
        for case in [SameThreadLoad, SameThreadStore, OtherThreadLoad, OtherThreadStore, OtherThreadMma] {
            store_case(case, true, seed).unwrap_or_else(|e| panic!("seed {seed}: twin {case:?} reported: {e}"));
        }
        let r = |case| store_case(case, false, seed);
        expect_misuse(r(SameThreadLoad), rule, &["tcgen05.ld", "stored at", "this thread has called no tcgen05.wait::st", "commit_tmem()"]);
        expect_misuse(r(SameThreadStore), rule, &["tcgen05.st", "stored at", "this thread has called no tcgen05.wait::st"]);
        for case in [OtherThreadLoad, OtherThreadStore, OtherThreadNeverWaits] {
            expect_misuse(r(case), rule, &["stored at", "warp 4]", "a barrier (sync_threads"]);
        }
        expect_misuse(r(OtherThreadMma), "TMEM store then MMA without commit_tmem", &["accumulator", "stored at", "commit_tmem"]);
    }
}

/// Thread 0 issues an MMA that overwrites the accumulator, thread 32 one
/// that accumulates into it; all 128 threads then read it. `fences`: the
/// tcgen05 fences (before_thread_sync in thread 0 after its MMA,
/// after_thread_sync in thread 32 before its); `barrier`: a CTA barrier
/// between the issues; `both_commit`: thread 0 commits too (to the mbarrier
/// at 8, which every thread waits on besides thread 32's at 16).
fn two_issuers(fence_before: bool, barrier: bool, fence_after: bool, both_commit: bool, seed: u64) -> Result<RunReport, EmuError> {
    let mut c = cfg("tmem_two_issuers", 1, 128);
    c.smem_bytes = 32;
    c.seed = seed;
    run_t(c, move || {
        let t = tid_x();
        tmem_setup();
        if t == 0 {
            mma_ones(false);
            if fence_before {
                tmem::fence_before_thread_sync();
            }
            if both_commit {
                tmem::commit(8);
            }
        }
        if barrier {
            bar_sync(0, 0);
        }
        if t == 32 {
            if fence_after {
                tmem::fence_after_thread_sync();
            }
            mma_ones(true);
            tmem::commit(16);
        }
        if both_commit {
            mbarrier_try_wait_parity(8, 0);
        }
        mbarrier_try_wait_parity(16, 0);
        tmem::fence_after_thread_sync();
        let mut out = [0u32; 8];
        tmem::ld_32x32b(quarter(0), &mut out);
        tmem::wait_ld();
        let want: Vec<f32> = (0..8).map(|j| 32.0 * (j + 1) as f32).collect();
        assert_eq!(out.map(f32::from_bits).to_vec(), want, "thread {t}");
        tmem::fence_before_thread_sync();
        tmem_teardown();
    })
}

#[test]
fn mmas_of_two_threads_on_one_accumulator_pipeline_when_fenced_across_a_barrier() {
    for seed in SEEDS {
        // Only thread 32 commits: its commit's completion implies thread 0's
        // MMA's (the tensor core ran it first).
        for both_commit in [false, true] {
            two_issuers(true, true, true, both_commit, seed).unwrap_or_else(|e| panic!("seed {seed}: fenced, both_commit {both_commit}: {e}"));
        }
        for (fb, bar, fa, what) in [(false, true, true, "no fence::before_thread_sync"), (true, true, false, "no fence::after_thread_sync"), (true, false, true, "no barrier")] {
            let msg = expect_race(two_issuers(fb, bar, fa, true, seed), what).to_string();
            assert!(
                msg.contains("write-write race on tensor memory") && msg.matches("`tcgen05.mma`").count() == 2 && msg.contains("tcgen05.fence::before_thread_sync in the first issuer"),
                "seed {seed}: {what}: {msg}"
            );
        }
    }
}

/// Thread 0 issues an MMA and commits to the mbarrier at 8; every thread
/// waits on it, then (`store`) stores over its accumulator row or loads it.
/// `fence`: `tcgen05.fence::after_thread_sync` after the wait (what
/// `Barrier<TensorCore>::wait` issues); `fence_first`: the fence comes
/// before the wait instead, which orders nothing after the completion.
fn access_after_commit_wait(store: bool, fence: bool, fence_first: bool, seed: u64) -> Result<RunReport, EmuError> {
    let mut c = cfg("tmem_access_after_commit_wait", 1, 128);
    c.smem_bytes = 32;
    c.seed = seed;
    run_t(c, move || {
        tmem_setup();
        if tid_x() == 0 {
            mma_ones(false);
            tmem::commit(8);
        }
        if fence_first {
            tmem::fence_after_thread_sync();
        }
        mbarrier_try_wait_parity(8, 0);
        if fence {
            tmem::fence_after_thread_sync();
        }
        if store {
            tmem::st_32x32b(quarter(0), &[0; 8]);
            tmem::wait_st();
        } else {
            let mut out = [0u32; 8];
            tmem::ld_32x32b(quarter(0), &mut out);
            tmem::wait_ld();
            let want: Vec<f32> = (0..8).map(|j| 16.0 * (j + 1) as f32).collect();
            assert_eq!(out.map(f32::from_bits).to_vec(), want);
        }
        tmem::fence_before_thread_sync();
        tmem_teardown();
    })
}

#[test]
fn tmem_accesses_after_an_mmas_completion_need_the_after_thread_sync_fence() {
    for seed in SEEDS {
        for store in [false, true] {
            access_after_commit_wait(store, true, false, seed).unwrap_or_else(|e| panic!("seed {seed}: fenced twin (store {store}) reported: {e}"));
            let (op, rule) = if store {
                ("tcgen05.st", "TMEM written after an MMA's completion without tcgen05.fence::after_thread_sync")
            } else {
                ("tcgen05.ld", "TMEM read after an MMA's completion without tcgen05.fence::after_thread_sync")
            };
            for fence_first in [false, true] {
                expect_misuse(access_after_commit_wait(store, false, fence_first, seed), rule, &[op, "saw the MMA's commit arrive", "Barrier<TensorCore>::wait"]);
            }
        }
    }
}

/// Every thread loads its accumulator row and waits for the load; then
/// (`before`) `tcgen05.fence::before_thread_sync`, a CTA barrier, thread 0
/// (`after`) `tcgen05.fence::after_thread_sync` and an MMA that overwrites
/// the accumulator, committed and awaited by everyone.
fn mma_after_other_threads_loads(before: bool, after: bool, seed: u64) -> Result<RunReport, EmuError> {
    let mut c = cfg("tmem_mma_after_loads", 1, 128);
    c.smem_bytes = 32;
    c.seed = seed;
    run_t(c, move || {
        tmem_setup();
        let mut out = [0u32; 8];
        tmem::ld_32x32b(quarter(0), &mut out);
        tmem::wait_ld();
        if before {
            tmem::fence_before_thread_sync();
        }
        bar_sync(0, 0);
        if tid_x() == 0 {
            if after {
                tmem::fence_after_thread_sync();
            }
            mma_ones(false);
            tmem::commit(8);
        }
        mbarrier_try_wait_parity(8, 0);
        tmem::fence_after_thread_sync();
        tmem::fence_before_thread_sync();
        tmem_teardown();
    })
}

#[test]
fn an_mma_over_other_threads_finished_loads_needs_both_fences() {
    for seed in SEEDS {
        mma_after_other_threads_loads(true, true, seed).unwrap_or_else(|e| panic!("seed {seed}: fenced twin reported: {e}"));
        expect_misuse(
            mma_after_other_threads_loads(false, true, seed),
            "TMEM written after another thread's tcgen05.ld without tcgen05.fence::before_thread_sync",
            &["tcgen05.mma", "Barrier<TensorCore>::arrive"],
        );
        expect_misuse(
            mma_after_other_threads_loads(true, false, seed),
            "TMEM written after another thread's tcgen05.ld without tcgen05.fence::after_thread_sync",
            &["tcgen05.mma", "Barrier<TensorCore>::wait"],
        );
    }
}

/// Recurses without end: each frame keeps 4 KiB live.
#[inline(never)]
#[allow(unconditional_recursion)]
fn bottomless(n: u64) -> u64 {
    let frame = std::hint::black_box([n; 512]);
    bottomless(std::hint::black_box(n + 1)).wrapping_add(frame[7])
}

/// A kernel that overflows its coroutine's stack stops the process with a
/// line naming `KERNEL_EMU_STACK_KIB` (not a bare segmentation fault). The
/// overflow runs in a child process: this test binary again, running only
/// this test, with `KERNEL_EMU_OVERFLOW_CHILD` set.
#[test]
#[cfg(unix)]
fn stack_overflow_names_the_stack_size() {
    if std::env::var_os("KERNEL_EMU_OVERFLOW_CHILD").is_some() {
        let r = run(&cfg("bottomless", 1, 2), &|| {
            bottomless(0);
        });
        panic!("the run returned instead of overflowing: {r:?}");
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "tests::stack_overflow_names_the_stack_size", "--nocapture", "--test-threads=1"])
        .env("KERNEL_EMU_OVERFLOW_CHILD", "1")
        .env("KERNEL_EMU_STACK_KIB", "64")
        .output()
        .expect("run the test binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child succeeded: {stderr}");
    assert!(
        stderr.contains("an emulated GPU thread overflowed its stack (KERNEL_EMU_STACK_KIB"),
        "stderr of the child: {stderr}"
    );
}
