//! `kernel_ops::collective::AllGatherMatmul`: on 2 and 3 emulated devices
//! at a ragged shape against the CPU (the ring schedule's slots, copies and
//! blocks), its input errors; and, ignored, on 2 GPUs with peer access
//! (and on 3, 4, ... when the machine has them).
use kernel_device::f16;
use kernel_host::emulate::Emulator;
use kernel_host::group::{DeviceGroup, PeerBuffer};
use kernel_host::{randn_f16, reference_gemm_nt};
use kernel_ops::collective::AllGatherMatmul;

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

#[test]
fn all_gather_matmul_matches_the_cpu_on_emulated_devices() {
    for p in [2, 3] {
        check(&DeviceGroup::emulator_with(Emulator::new(3).max_steps(0), p).unwrap(), (72, 136, 64));
    }
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
            Ok(g) => check(&g, (256, 384, 192)),
            Err(kernel_host::Error::NoSuchDevice { .. }) if n > 2 => break,
            Err(e) => panic!("{e}"),
        }
    }
}
