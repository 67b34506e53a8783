//! `kernel_ops::reduce_scatter::ReduceScatterMatmul`: the reduce-scatter on
//! 2, 3 (f16) and 4 (bf16) emulated devices, the all-reduce on 2 (f16) and
//! 3 (bf16) (one emulator run per call, race detector on) at small
//! shapes against the CPU, each twice in a row (the second call finds the
//! counters the first one left); its input errors; and, ignored, on 2 GPUs
//! with peer access (and on 3, 4, ... when the machine has them).
use kernel_device::{bf16, f16};
use kernel_host::emulate::Emulator;
use kernel_host::group::DeviceGroup;
use kernel_host::reference_gemm_nt;
use kernel_ops::collective::CollectiveElem;
use kernel_ops::reduce_scatter::{ReduceScatterMatmul, INSTANCE_NAMES};

/// The CPU's `C = Σ_d A_d · B_dᵀ` (f32), `m x n`.
fn reference<E: CollectiveElem>(p: usize, (m, n, k): (usize, usize, usize), a: &[Vec<E>], b: &[Vec<E>]) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for d in 0..p {
        for (x, y) in c.iter_mut().zip(reference_gemm_nt(m, n, k, &a[d], &b[d])) {
            *x += y;
        }
    }
    c
}

/// `run` on `group` at `(m, n, k_shard)`, `calls` times in a row on fresh
/// inputs (C starts as NaN: a row block not written fails), each device's
/// row block against the CPU (within the rounding of the partials and the
/// sum: bf16 keeps 8 bits, f16 11).
fn check<E: CollectiveElem>(group: &DeviceGroup, rs: &ReduceScatterMatmul<'_>, shape: (usize, usize, usize), calls: usize, seed: u64) {
    check_sum::<E>(group, rs, shape, calls, seed, false)
}

/// `run_all_reduce` as [`check`] checks `run`: every device's whole `C`
/// against the CPU's sum.
fn check_all_reduce<E: CollectiveElem>(group: &DeviceGroup, rs: &ReduceScatterMatmul<'_>, shape: (usize, usize, usize), calls: usize, seed: u64) {
    check_sum::<E>(group, rs, shape, calls, seed, true)
}

fn check_sum<E: CollectiveElem>(group: &DeviceGroup, rs: &ReduceScatterMatmul<'_>, (m, n, k): (usize, usize, usize), calls: usize, seed: u64, all_reduce: bool) {
    let tolerance = if E::NAME == "bf16" { 1e-2 } else { 2e-3 };
    let p = group.len();
    // Device d's rows of C: its row block, or all of them.
    let rows = if all_reduce { m } else { m / p };
    let first = |d: usize| if all_reduce { 0 } else { d * rows };
    for call in 0..calls {
        let s = seed + 100 * call as u64;
        let a_parts: Vec<Vec<E>> = (0..p).map(|d| E::randn(m * k, s + d as u64)).collect();
        let b_parts: Vec<Vec<E>> = (0..p).map(|d| E::randn(n * k, s + 50 + d as u64)).collect();
        let a = group.upload(&a_parts).unwrap();
        let b = group.upload(&b_parts).unwrap();
        let mut c = group.upload(&vec![vec![E::NAN; rows * n]; p]).unwrap();
        if all_reduce {
            rs.run_all_reduce(&a, &b, &mut c, (m, n, k)).unwrap();
        } else {
            rs.run(&a, &b, &mut c, (m, n, k)).unwrap();
        }
        group.synchronize().unwrap();
        let want = reference(p, (m, n, k), &a_parts, &b_parts);
        let what = if all_reduce { "all-reduce, C" } else { "reduce-scatter, row block" };
        for (d, got) in group.download(&c).unwrap().iter().enumerate() {
            let got: Vec<f32> = got.iter().map(|&x| x.into()).collect();
            let err = kernel_host::rel_frobenius_error_f32(&got, &want[first(d) * n..(first(d) + rows) * n]);
            assert!(err < tolerance, "{} devices, {}, call {call}: {what} of device {d}: relative error {err}", p, E::NAME);
        }
    }
}

fn emulated(p: usize, seed: u64) -> DeviceGroup {
    DeviceGroup::emulator_with(Emulator::new(seed).max_steps(0), p).unwrap()
}

#[test]
fn reduce_scatter_matmul_matches_the_cpu_on_two_emulated_devices() {
    // Three SMs per device: two CTAs of two tiles each.
    let g = DeviceGroup::emulator_with(Emulator::new(3).max_steps(0).sms(3), 2).unwrap();
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    // 128 x 256 tiles, a ragged N (the last tile's columns clipped) and a
    // ragged K shard (zero-filled).
    check::<f16>(&g, &rs, (256, 264, 72), 2, 10);
}

#[test]
fn reduce_scatter_matmul_matches_the_cpu_on_three_emulated_devices() {
    let g = emulated(3, 5);
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    // 128 x 128 tiles (N <= 128); two K steps.
    check::<f16>(&g, &rs, (384, 120, 128), 2, 20);
}

#[test]
fn reduce_scatter_matmul_in_bf16_matches_the_cpu_on_four_emulated_devices() {
    let g = emulated(4, 7);
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    check::<bf16>(&g, &rs, (512, 128, 64), 2, 30);
}

#[test]
fn reduce_scatter_matmul_runs_several_ctas_and_tiles_per_device() {
    // Two SMs per emulated device: two CTAs per device, each with tiles of
    // every row block (two row-block tiles per device, two column tiles).
    let g = DeviceGroup::emulator_with(Emulator::new(9).max_steps(0).sms(2), 2).unwrap();
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    rs.force_instance(Some(INSTANCE_NAMES[1])).unwrap();
    check::<f16>(&g, &rs, (512, 256, 64), 2, 40);
}

/// The all-reduce matmul: every device's `C` whole, f16 on 2 devices of 2
/// SMs (a ragged N: the last tile's columns past N are neither stored by
/// TMA nor sent) and bf16 on 3, each twice in a row.
#[test]
fn all_reduce_matmul_matches_the_cpu_on_emulated_devices() {
    let g = DeviceGroup::emulator_with(Emulator::new(13).max_steps(0).sms(2), 2).unwrap();
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    check_all_reduce::<f16>(&g, &rs, (256, 264, 72), 2, 60);
    let g = emulated(3, 17);
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    check_all_reduce::<bf16>(&g, &rs, (384, 120, 64), 2, 70);
    let e = rs.run_all_reduce(&g.zeros::<f16>(384 * 64).unwrap(), &g.zeros::<f16>(120 * 64).unwrap(), &mut g.zeros::<f16>(128 * 120).unwrap(), (384, 120, 64));
    let e = e.unwrap_err().to_string();
    assert!(e.contains("M x N = 384 x 120"), "{e}");
}

#[test]
fn reduce_scatter_matmul_refuses_bad_shapes() {
    let g = DeviceGroup::emulator(2).unwrap();
    let rs = ReduceScatterMatmul::new(&g).unwrap();
    let err = |m: usize, n: usize, k: usize, c_len: usize| {
        let a = g.zeros::<f16>(m * k).unwrap();
        let b = g.zeros::<f16>(n * k).unwrap();
        let mut c = g.zeros::<f16>(c_len).unwrap();
        rs.run(&a, &b, &mut c, (m, n, k)).unwrap_err().to_string()
    };
    let e = err(257, 64, 64, 128 * 64);
    assert!(e.contains("m = 257") && e.contains("over 2 devices") && e.contains("multiple of 2"), "{e}");
    let e = err(192, 64, 64, 96 * 64);
    assert!(e.contains("m / p = 192 / 2 = 96") && e.contains("multiple of the kernel's 128 tile rows") && e.contains("multiple of 256"), "{e}");
    let e = err(256, 64, 64, 256 * 64);
    assert!(e.contains("M/p x N = 128 x 64"), "{e}");
    let e = err(256, 64, 60, 128 * 64);
    assert!(e.contains("K") && e.contains("60"), "{e}");
    let three = DeviceGroup::emulator(3).unwrap();
    let a3 = three.zeros::<f16>(256 * 64).unwrap();
    let b = g.zeros::<f16>(64 * 64).unwrap();
    let mut c = g.zeros::<f16>(128 * 64).unwrap();
    let e = rs.run(&a3, &b, &mut c, (256, 64, 64)).unwrap_err().to_string();
    assert!(e.contains("a has parts on 3 devices; the group has 2"), "{e}");
    assert!(rs.force_instance(Some("no such")).is_err());
}

#[test]
#[ignore = "needs 2 GPUs with peer access"]
fn reduce_scatter_matmul_matches_the_cpu_on_two_gpus() {
    // 2 GPUs, then 3, 4, ... as many as the machine has.
    for p in 2..=8 {
        match DeviceGroup::gpus(p) {
            Ok(g) => {
                let rs = ReduceScatterMatmul::new(&g).unwrap();
                for name in INSTANCE_NAMES {
                    rs.force_instance(Some(name)).unwrap();
                    check::<f16>(&g, &rs, (128 * p, 384, 192), 3, 1);
                    // More tiles than SMs: several waves, every CTA resident.
                    check::<f16>(&g, &rs, (1024 * p, 4096, 512), 2, 2);
                    check::<bf16>(&g, &rs, (1024 * p, 4096, 512), 2, 4);
                }
                rs.force_instance(None).unwrap();
                check::<f16>(&g, &rs, (1024 * p, 2048, 1024), 2, 3);
                check::<bf16>(&g, &rs, (1024 * p, 2048, 1024), 2, 5);
                check_all_reduce::<f16>(&g, &rs, (128 * p, 4104, 512), 2, 6);
                check_all_reduce::<bf16>(&g, &rs, (256 * p, 8192, 1024), 2, 7);
            }
            Err(kernel_host::Error::NoSuchDevice { .. }) if p > 2 => break,
            Err(e @ (kernel_host::Error::NoSuchDevice { .. } | kernel_host::Error::NoGpu { .. })) => {
                eprintln!("SKIPPED: no group of 2 GPUs here ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn each_device_visits_every_tile_once_other_blocks_first() {
    use kernel_ops_kernels::reduce_scatter::{recv_slot, rs_tile};
    for p in 1..=4u32 {
        for (block_tiles, n_tiles, grid_w) in [(1, 1, 8), (3, 5, 2), (16, 32, 8), (5, 3, 16)] {
            let tiles = p * block_tiles * n_tiles;
            let foreign = (p - 1) * block_tiles * n_tiles;
            // index[rank][tile]: where device `rank` visits the tile.
            let mut index = vec![vec![u32::MAX; tiles as usize]; p as usize];
            for rank in 0..p {
                for i in 0..tiles {
                    let (pm, pn) = rs_tile(i, rank, p, block_tiles, n_tiles, grid_w);
                    assert!(pm < p * block_tiles && pn < n_tiles, "tile {i} of rank {rank}: ({pm}, {pn}) out of range");
                    let seen = std::mem::replace(&mut index[rank as usize][(pm * n_tiles + pn) as usize], i);
                    assert_eq!(seen, u32::MAX, "rank {rank}: tile ({pm}, {pn}) visited twice");
                    assert_eq!(pm / block_tiles == rank, i >= foreign, "rank {rank}, index {i}: its own block comes last");
                }
            }
            // The kernel's deadlock freedom: an owner's wait for a tile
            // needs only lower indices on the senders (module docs).
            for owner in 0..p {
                for t in 0..tiles {
                    if t / n_tiles / block_tiles != owner {
                        continue;
                    }
                    let mine = index[owner as usize][t as usize];
                    for sender in (0..p).filter(|&s| s != owner) {
                        let theirs = index[sender as usize][t as usize];
                        assert!(theirs < mine, "p {p}: owner {owner} visits its tile {t} at {mine}, sender {sender} at {theirs}");
                    }
                }
            }
            // Each owner's p - 1 senders take distinct slots.
            for owner in 0..p {
                let mut slots: Vec<u32> = (0..p).filter(|&s| s != owner).map(|s| recv_slot(s, owner, p)).collect();
                slots.sort();
                assert_eq!(slots, (0..p - 1).collect::<Vec<_>>());
            }
        }
    }
}
