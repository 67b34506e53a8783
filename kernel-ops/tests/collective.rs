//! `kernel_ops::collective::AllGatherMatmul`: on 2 and 3 emulated devices
//! at a ragged shape against the CPU (the ring schedule's slots, copies and
//! blocks), the persistent and forwarding kernels on 2-4 emulated devices
//! under the race detector, input errors; and, ignored, on 2 GPUs with peer access
//! (and on 3, 4, ... when the machine has them).
use kernel_device::f16;
use kernel_host::emulate::Emulator;
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_host::{randn_f16, reference_gemm_nt};
use kernel_device::bf16;
use kernel_ops::collective::AllGatherMatmul;
use kernel_ops::matmul::{MatmulElem, MatmulError};

fn check(group: &DeviceGroup, (m, n, k): (usize, usize, usize)) {
    let p = group.len();
    let shards: Vec<Vec<f16>> = (0..p).map(|j| randn_f16(m * k, 10 + j as u64)).collect();
    let bs: Vec<Vec<f16>> = (0..p).map(|d| randn_f16(n * k, 20 + d as u64)).collect();
    // Slot j: shard j on device j, NaN elsewhere (a missing copy fails).
    let mut a: Vec<PeerBuffer<f16>> = (0..p)
        .map(|j| group.upload(&(0..p).map(|d| if d == j { shards[j].clone() } else { vec![f16::NAN; m * k] }).collect::<Vec<_>>()).unwrap())
        .collect();
    let b = group.upload(&bs).unwrap();
    let mut c: Vec<PeerBuffer<f16>> = (0..p).map(|_| group.upload(&vec![vec![f16::NAN; m * n]; p]).unwrap()).collect();
    let agm = AllGatherMatmul::new(group).unwrap();
    agm.run(&mut a, &b, &mut c, (m, n, k)).unwrap();
    group.synchronize().unwrap();
    for j in 0..p {
        for (d, got) in group.download(&a[j]).unwrap().iter().enumerate() {
            assert!(got.iter().zip(&shards[j]).all(|(x, y)| x.to_bits() == y.to_bits()), "shard {j} on device {d}");
        }
        for (d, got) in group.download(&c[j]).unwrap().iter().enumerate() {
            let want = reference_gemm_nt(m, n, k, &shards[j], &bs[d]);
            let err = kernel_host::rel_frobenius_error(got, &want);
            assert!(err < 2e-3, "C block {j} on device {d}: relative error {err}");
        }
    }
}

/// `run_persistent` on `group`, twice (the second run's flags take a new
/// epoch): A gathered on every device (NaN where a shard has not arrived),
/// C = the gathered A times each device's B, against the CPU.
fn check_persistent(group: &DeviceGroup, shape: (usize, usize, usize)) {
    check_one_kernel::<f16>(group, &[shape, shape], |agm, a, b, c, s| agm.run_persistent(a, b, c, s))
}

/// [`check_persistent`] for `run_forwarding` (the kernels forward the
/// shards themselves; the second run's counters reach a new target).
fn check_forwarding(group: &DeviceGroup, shape: (usize, usize, usize)) {
    check_one_kernel::<f16>(group, &[shape, shape], |agm, a, b, c, s| agm.run_forwarding(a, b, c, s))
}

/// The relative error a correct result stays under: the output's rounding
/// (bf16 keeps 8 bits, f16 11).
fn tolerance<E: MatmulElem>() -> f64 {
    if E::NAME == "bf16" { 1e-2 } else { 2e-3 }
}

/// `run_persistent` or `run_forwarding` on an `AllGatherMatmul`.
type Call<E> = fn(&AllGatherMatmul<'_>, &mut PeerBuffer<E>, &PeerBuffer<E>, &mut PeerBuffer<E>, (usize, usize, usize)) -> Result<(), MatmulError>;

/// `call` once per shape of `shapes` on one `AllGatherMatmul`, in order.
fn check_one_kernel<E: MatmulElem>(group: &DeviceGroup, shapes: &[(usize, usize, usize)], call: Call<E>) {
    let p = group.len();
    let agm = AllGatherMatmul::new(group).unwrap();
    for (run, &(m, n, k)) in shapes.iter().enumerate() {
        let seed = 30 + 10 * run as u64;
        let shards: Vec<Vec<E>> = (0..p).map(|j| E::randn(m * k, seed + j as u64)).collect();
        let bs: Vec<Vec<E>> = (0..p).map(|d| E::randn(n * k, seed + 5 + d as u64)).collect();
        let full: Vec<E> = shards.concat();
        let parts: Vec<Vec<E>> = (0..p)
            .map(|d| (0..p).flat_map(|j| if j == d { shards[j].clone() } else { vec![E::NAN; m * k] }).collect())
            .collect();
        let mut a = group.upload(&parts).unwrap();
        let b = group.upload(&bs).unwrap();
        let mut c = group.upload(&vec![vec![E::NAN; p * m * n]; p]).unwrap();
        call(&agm, &mut a, &b, &mut c, (m, n, k)).unwrap();
        group.synchronize().unwrap();
        let bits = |x: &E| Into::<f32>::into(*x).to_bits();
        for (d, got) in group.download(&a).unwrap().iter().enumerate() {
            assert!(got.iter().zip(&full).all(|(x, y)| bits(x) == bits(y)), "run {run} ({m} x {n} x {k}): gathered A on device {d}");
        }
        for (d, got) in group.download(&c).unwrap().iter().enumerate() {
            let want = reference_gemm_nt(p * m, n, k, &full, &bs[d]);
            let got: Vec<f32> = got.iter().map(|&x| x.into()).collect();
            let err = kernel_host::rel_frobenius_error_f32(&got, &want);
            assert!(err < tolerance::<E>(), "run {run} ({m} x {n} x {k}): C on device {d}: relative error {err}");
        }
    }
}

#[test]
fn all_gather_matmul_matches_the_cpu_on_emulated_devices() {
    for p in [2, 3] {
        check(&DeviceGroup::emulator_with(Emulator::new(3).max_steps(0), p).unwrap(), (72, 136, 64));
    }
}

#[test]
fn persistent_all_gather_matmul_matches_the_cpu_on_emulated_devices() {
    for p in [2, 3] {
        check_persistent(&DeviceGroup::emulator_with(Emulator::new(5).max_steps(0), p).unwrap(), (128, 136, 96));
    }
}

/// The kernels forward the shards by TMA and signal each row on the next
/// device, under the race detector, on 2, 3 and 4 devices: one column of
/// tiles (one sender per row) with 5, 1 and 3 K steps (the forwarding lags
/// its loads by 2 steps: slots are refilled while stores from them may
/// still read them, and a row may be shorter than the lag and the signal's
/// delay).
#[test]
fn forwarding_all_gather_matmul_matches_the_cpu_on_emulated_devices() {
    for (p, k) in [(2, 320), (3, 64), (4, 192)] {
        check_forwarding(&DeviceGroup::emulator_with(Emulator::new(7).max_steps(0), p).unwrap(), (128, 72, k));
    }
}

/// Three columns of tiles on 2 devices of 2 SMs each: three senders per
/// row, each sending every third of the row's 14 K steps (its producer
/// waits for some slots' phases only).
#[test]
fn forwarding_all_gather_matmul_splits_rows_among_senders_on_emulated_devices() {
    check_forwarding(&DeviceGroup::emulator_with(Emulator::new(8).sms(2).max_steps(0), 2).unwrap(), (128, 520, 896));
}

/// bf16, and calls whose shapes change the senders per row (`min(n_tiles,
/// k_steps)`: 2, then 1, then 2 again) and the tile rows (4, then 2, then 4
/// again) on one `AllGatherMatmul`: each call's counters start where the
/// kernels expect them (a stale count would let a wait pass before its row
/// arrived, a race, or hold it forever).
#[test]
fn forwarding_all_gather_matmul_in_bf16_across_changing_shapes_on_emulated_devices() {
    let g = DeviceGroup::emulator_with(Emulator::new(11).sms(2), 2).unwrap();
    check_one_kernel::<bf16>(&g, &[(256, 264, 128), (256, 264, 64), (128, 264, 128), (256, 264, 128)], |agm, a, b, c, s| agm.run_forwarding(a, b, c, s));
}

#[test]
fn forwarding_all_gather_matmul_refuses_unaligned_shards() {
    let g = DeviceGroup::emulator(2).unwrap();
    let agm = AllGatherMatmul::new(&g).unwrap();
    let (m, n, k) = (96, 64, 64);
    let mut a = g.zeros::<f16>(2 * m * k).unwrap();
    let b = g.zeros::<f16>(n * k).unwrap();
    let mut c = g.zeros::<f16>(2 * m * n).unwrap();
    let e = agm.run_forwarding(&mut a, &b, &mut c, (m, n, k)).unwrap_err().to_string();
    assert!(e.contains("m = 96") && e.contains("multiple of the kernel's 128 tile rows"), "{e}");
}

#[test]
fn persistent_all_gather_matmul_refuses_unaligned_shards_and_foreign_buffers() {
    let g = DeviceGroup::emulator(2).unwrap();
    let agm = AllGatherMatmul::new(&g).unwrap();
    let (m, n, k) = (96, 64, 64);
    let mut a = g.zeros::<f16>(2 * m * k).unwrap();
    let b = g.zeros::<f16>(n * k).unwrap();
    let mut c = g.zeros::<f16>(2 * m * n).unwrap();
    let e = agm.run_persistent(&mut a, &b, &mut c, (m, n, k)).unwrap_err().to_string();
    assert!(e.contains("m = 96") && e.contains("multiple of the kernel's 128 tile rows"), "{e}");
    let mut short = g.zeros::<f16>(2 * 128 * n - 8).unwrap();
    let mut a = g.zeros::<f16>(2 * 128 * k).unwrap();
    let e = agm.run_persistent(&mut a, &b, &mut short, (128, n, k)).unwrap_err().to_string();
    assert!(e.contains("M x N = 256 x 64"), "{e}");
    let three = DeviceGroup::emulator(3).unwrap();
    let mut a3 = three.zeros::<f16>(2 * 128 * k).unwrap();
    let e = agm.run_persistent(&mut a3, &b, &mut c, (128, n, k)).unwrap_err().to_string();
    assert!(e.contains("a has parts on 3 devices; the group has 2"), "{e}");
}

#[test]
fn all_gather_matmul_refuses_mismatched_inputs() {
    let g = DeviceGroup::emulator(2).unwrap();
    let agm = AllGatherMatmul::new(&g).unwrap();
    let mut a = vec![g.zeros::<f16>(64 * 64).unwrap()];
    let b = g.zeros::<f16>(64 * 64).unwrap();
    let mut c = vec![g.zeros::<f16>(64 * 64).unwrap(), g.zeros::<f16>(64 * 64).unwrap()];
    let e = agm.run(&mut a, &b, &mut c, (64, 64, 64)).unwrap_err().to_string();
    assert!(e.contains("1 A slots and 2 C blocks for 2 devices"), "{e}");
    let mut a = vec![g.zeros::<f16>(64 * 64).unwrap(), g.zeros::<f16>(64 * 64).unwrap()];
    let e = agm.run(&mut a, &b, &mut c, (64, 64, 32)).unwrap_err().to_string();
    assert!(e.contains("a") && e.contains("64 x 32"), "{e}");
}

#[test]
#[ignore = "needs 2 GPUs with peer access"]
fn all_gather_matmul_matches_the_cpu_on_two_gpus() {
    // 2 GPUs, then 3, 4, ... as many as the machine has.
    for n in 2..=8 {
        match DeviceGroup::gpus(n) {
            Ok(g) => {
                check(&g, (256, 384, 192));
                check_persistent(&g, (256, 384, 192));
                // Enough tiles to occupy every SM but the one left free.
                check_persistent(&g, (512, 4096, 64));
                // The kernels forward the shards: a launch on one GPU takes
                // the next GPU's `A` (a store map), whose use it must not
                // record as an event of its own stream.
                check_forwarding(&g, (256, 384, 192));
                check_forwarding(&g, (512, 4096, 320));
                // bf16, and shapes that change the senders per row.
                check_one_kernel::<bf16>(&g, &[(512, 4096, 320), (512, 4096, 64), (256, 4096, 320), (512, 4096, 320)], |agm, a, b, c, s| agm.run_forwarding(a, b, c, s));
            }
            Err(kernel_host::Error::NoSuchDevice { .. }) if n > 2 => break,
            Err(e) => panic!("{e}"),
        }
    }
}
