//! `setmaxnreg` and the CTA's register pool (`engine::regs`): counts over
//! the pool are a deadlock naming the rule (the H100 hang of 240 + 240 + 32
//! at 384 threads), counts that fit run whichever role goes first, and
//! counts that go the wrong way are misuses. Every run goes through `run_t`
//! (a hang fails the test after 30 s instead of hanging it).
use super::*;
use crate::tests::run_t;
use crate::wgmma::{setmaxnreg_dec, setmaxnreg_inc};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];


fn warpgroup() -> u32 {
    thread_idx()[0] / 128
}

/// Which role reaches `setmaxnreg` first.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// As the scheduler picks.
    Any,
    /// The consumers' whole warpgroups are inside `setmaxnreg.inc` (waiting)
    /// before the producer starts its `setmaxnreg.dec`.
    ConsumersFirst,
}

/// A warp-specialized CTA of `counts.len()` warpgroups: the last one (the
/// producer) `setmaxnreg.dec`s to its count, the others `setmaxnreg.inc`
/// to theirs, in `order`. Each thread records its warpgroup's count after
/// its `setmaxnreg` in `seen`.
fn roles(
    kernel: &str,
    counts: &'static [u32],
    order: Order,
    seed: u64,
    seen: Arc<Mutex<Vec<(u32, u32)>>>,
) -> Result<RunReport, EmuError> {
    let wgs = counts.len() as u32;
    let mut c = LaunchConfig::new(kernel, [1, 1, 1], [128 * wgs, 1, 1]);
    c.seed = seed;
    run_t(c, move || {
        let wg = warpgroup();
        let n = counts[wg as usize];
        if wg == wgs - 1 {
            if let Order::ConsumersFirst = order {
                let (e, _) = ctx("test");
                while e.threads_in_setmaxnreg_inc(0) < 128 * (wgs as usize - 1) {
                    yield_point("test: wait until the consumers are inside setmaxnreg.inc");
                }
            }
            setmaxnreg_dec(n);
        } else {
            setmaxnreg_inc(n);
        }
        let (e, _) = ctx("test");
        let now = e.register_counts(0)[wg as usize];
        seen.lock().unwrap().push((wg, now));
    })
}

#[test]
fn counts_over_the_pool_are_a_deadlock_that_names_setmaxnreg_and_the_pool() {
    // 384 threads start with 168 registers each: pool 3 x 168 = 504, and
    // 240 + 240 + 32 = 512 is over it. One consumer gets its 240, the other
    // waits forever (the hang seen on an H100).
    for order in [Order::Any, Order::ConsumersFirst] {
        for seed in SEEDS {
            let start = Instant::now();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let e = roles("over_pool", &[240, 240, 32], order, seed, seen.clone())
                .expect_err("512 > 504 registers must not run");
            let msg = e.to_string();
            assert!(
                matches!(e, EmuError::Deadlock { .. }),
                "{order:?} seed {seed}: {msg}"
            );
            assert!(
                msg.contains("setmaxnreg.inc 240 in warpgroup ")
                    && msg.contains(", for registers: "),
                "{order:?} seed {seed}: {msg}"
            );
            assert!(
                msg.contains("the CTA's pool is 3 x 168 = 504 per thread slot"),
                "{order:?} seed {seed}: {msg}"
            );
            // The producer gave back down to 32, one consumer holds 240, the
            // waiting one still its 168.
            assert!(
                msg.contains("240 + 168 + 32 = 440") || msg.contains("168 + 240 + 32 = 440"),
                "{order:?} seed {seed}: {msg}"
            );
            assert!(
                msg.contains("240 + 240 + 32 = 512 > 504"),
                "{order:?} seed {seed}: {msg}"
            );
            assert!(
                msg.contains("must sum to at most the pool: lower the counts by 8 in all"),
                "{order:?} seed {seed}: {msg}"
            );
            // 128 threads of one consumer are blocked, nobody else.
            assert!(
                msg.contains("128 are blocked"),
                "{order:?} seed {seed}: {msg}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{order:?} seed {seed}: took {:?}",
                start.elapsed()
            );
            let seen = seen.lock().unwrap();
            assert_eq!(
                seen.iter().filter(|&&(wg, n)| wg == 2 && n == 32).count(),
                128,
                "{order:?} seed {seed}: the producer's dec"
            );
            assert_eq!(
                seen.iter().filter(|&&(wg, n)| wg < 2 && n == 240).count(),
                128,
                "{order:?} seed {seed}: one consumer served"
            );
        }
    }
}

#[test]
fn counts_within_the_pool_run_whichever_role_goes_first() {
    // 40 + 232 + 232 and 24 + 240 + 240 (= 504), and 4 warpgroups at 512
    // threads (entry 128): 32 + 3 x 160 = 512.
    let cases: [&'static [u32]; 3] = [&[232, 232, 40], &[240, 240, 24], &[160, 160, 160, 32]];
    for counts in cases {
        for order in [Order::Any, Order::ConsumersFirst] {
            for seed in SEEDS {
                let seen = Arc::new(Mutex::new(Vec::new()));
                roles("within_pool", counts, order, seed, seen.clone())
                    .unwrap_or_else(|e| panic!("{counts:?} {order:?} seed {seed}: {e}"));
                let seen = seen.lock().unwrap();
                assert_eq!(
                    seen.len(),
                    128 * counts.len(),
                    "{counts:?} {order:?} seed {seed}"
                );
                for &(wg, n) in seen.iter() {
                    assert_eq!(
                        n, counts[wg as usize],
                        "{counts:?} {order:?} seed {seed}: warpgroup {wg}"
                    );
                }
            }
        }
    }
}

#[test]
fn counts_just_over_the_pool_deadlock_with_4_warpgroups_too() {
    // 512 threads start with 128: pool 512; 32 + 3 x 168 = 536.
    for seed in SEEDS {
        let e = roles(
            "over_pool_4",
            &[168, 168, 168, 32],
            Order::Any,
            seed,
            Arc::default(),
        )
        .expect_err("536 > 512");
        let msg = e.to_string();
        assert!(
            msg.contains("the CTA's pool is 4 x 128 = 512 per thread slot")
                && msg.contains("= 536 > 512"),
            "seed {seed}: {msg}"
        );
        assert!(
            msg.contains("lower the counts by 24 in all"),
            "seed {seed}: {msg}"
        );
    }
}

fn misuse_of(kernel: &str, block: u32, f: impl Fn() + Send + Sync + 'static) -> (String, String) {
    match run_t(LaunchConfig::new(kernel, [1, 1, 1], [block, 1, 1]), f) {
        Err(e @ EmuError::Misuse { .. }) => {
            let EmuError::Misuse { rule, .. } = &e else {
                unreachable!()
            };
            (rule.clone(), e.to_string())
        }
        other => panic!("{kernel}: expected a misuse, got {other:?}"),
    }
}

#[test]
fn an_inc_that_lowers_and_a_dec_that_raises_are_misuses() {
    // 384 threads start with 168.
    let (rule, msg) = misuse_of("inc_lowers", 384, || {
        if warpgroup() == 0 {
            setmaxnreg_inc(160);
        }
    });
    assert_eq!(
        rule, "setmaxnreg.inc below the warpgroup's register count",
        "{msg}"
    );
    assert!(
        msg.contains("setmaxnreg.inc 160 in warpgroup 0, which has 168 registers per thread"),
        "{msg}"
    );
    let (rule, msg) = misuse_of("dec_raises", 384, || {
        if warpgroup() == 2 {
            setmaxnreg_dec(176);
        }
    });
    assert_eq!(
        rule, "setmaxnreg.dec above the warpgroup's register count",
        "{msg}"
    );
    assert!(
        msg.contains("setmaxnreg.dec 176 in warpgroup 2, which has 168 registers per thread"),
        "{msg}"
    );
    // 256 threads start with the most a thread may have (256): a consumer's
    // `setmaxnreg.inc 240` would lower it.
    let (rule, msg) = misuse_of("inc_at_256", 256, || {
        if warpgroup() == 0 {
            setmaxnreg_inc(240);
        } else {
            setmaxnreg_dec(24);
        }
    });
    assert_eq!(
        rule, "setmaxnreg.inc below the warpgroup's register count",
        "{msg}"
    );
    assert!(
        msg.contains("a 256-thread kernel starts with 256 per thread"),
        "{msg}"
    );
    // After a dec, the count to compare with is the new one.
    let (rule, _) = misuse_of("dec_then_dec_up", 384, || {
        if warpgroup() == 2 {
            setmaxnreg_dec(40);
            setmaxnreg_dec(48);
        }
    });
    assert_eq!(rule, "setmaxnreg.dec above the warpgroup's register count");
}

#[test]
fn one_warpgroup_at_two_setmaxnregs_and_bad_counts_are_misuses() {
    let (rule, msg) = misuse_of("split_warpgroup", 384, || {
        if warpgroup() == 0 {
            if thread_idx()[0] < 64 {
                setmaxnreg_inc(240);
            } else {
                setmaxnreg_inc(232);
            }
        }
    });
    assert_eq!(rule, "different setmaxnreg in one warpgroup", "{msg}");
    let (rule, _) = misuse_of("count_42", 384, || setmaxnreg_dec(42));
    assert_eq!(rule, "setmaxnreg count not allowed");
    let (rule, _) = misuse_of("partial_warpgroup", 192, || setmaxnreg_dec(40));
    assert_eq!(rule, "setmaxnreg in a CTA that is not whole warpgroups");
}

#[test]
fn a_warp_that_skips_setmaxnreg_leaves_its_warpgroup_waiting() {
    let e = run_t(
        LaunchConfig::new("skipping_warp", [1, 1, 1], [384, 1, 1]),
        || {
            if warpgroup() == 2 && warp_id() != 9 {
                setmaxnreg_dec(40);
            }
        },
    )
    .expect_err("warp 9 never reaches the dec");
    let msg = e.to_string();
    assert!(matches!(e, EmuError::Deadlock { .. }), "{msg}");
    assert!(msg.contains("setmaxnreg.dec 40 of warpgroup 2 (executed by all 128 threads of the warpgroup together): 96 of 128 threads arrived"), "{msg}");
    assert!(msg.contains("[warp 9] (exited)"), "{msg}");
}

#[test]
fn registers_of_exited_warps_are_not_returned_to_the_pool() {
    // The producer exits without `setmaxnreg.dec`: its 168 stay counted
    // (the conservative model), so 168 + 240 + 240 = 648 > 504.
    let e = run_t(
        LaunchConfig::new("producer_exits", [1, 1, 1], [384, 1, 1]),
        || {
            if warpgroup() < 2 {
                setmaxnreg_inc(240);
            }
        },
    )
    .expect_err("no dec, no registers");
    let msg = e.to_string();
    assert!(
        msg.contains("warpgroups 0..3 hold 168 + 168 + 168 = 504"),
        "{msg}"
    );
}

#[test]
fn each_cta_has_its_own_pool() {
    // Two CTAs: each producer's dec serves only its own consumers.
    let mut c = LaunchConfig::new("two_ctas", [2, 1, 1], [384, 1, 1]);
    for seed in SEEDS {
        c.seed = seed;
        run_t(c.clone(), || {
            if block_idx()[0] == 1 && warpgroup() == 2 {
                // CTA 1's producer gives back only after CTA 0's consumers
                // are served: their registers must come from CTA 0's pool.
                let (e, _) = ctx("test");
                while e.register_counts(0)[..2] != [240, 240] {
                    yield_point("test: wait for CTA 0");
                }
            }
            if warpgroup() == 2 {
                setmaxnreg_dec(24);
            } else {
                setmaxnreg_inc(240);
            }
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
