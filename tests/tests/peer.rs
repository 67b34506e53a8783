//! Several devices (`kernel_host::group`, `kernel_device::peer`): the
//! example kernels on emulated devices under 4 schedules, the cross-device
//! bug twins, the group's input errors; and, ignored, the same host code
//! on 2 GPUs with peer access (and on 3, 4, ... when the machine has them).
use examples::peer as ex;
use kernel_fixtures::peer::{self as f, LEN};
use kernel_host::emulate::Emulator;
use kernel_host::group::DeviceGroup;
use kernel_host::Error;

const SEEDS: [u64; 4] = [1, 2, 3, 0xDEAD_BEEF];

fn groups(n: usize) -> impl Iterator<Item = (u64, DeviceGroup)> {
    SEEDS.into_iter().map(move |s| (s, DeviceGroup::emulator_with(Emulator::new(s), n).expect("an emulated group")))
}

#[test]
fn exchange_shards_on_emulated_devices() {
    for n in [2, 3] {
        for (seed, g) in groups(n) {
            // 3 chunks over 2 CTAs: CTA 0 reuses its first SMEM slot.
            let o = ex::exchange_shards(&g, 3).unwrap_or_else(|e| panic!("{n} devices, seed {seed}: {e}"));
            assert_eq!(o.checked, n * 3 * kernels::peer::CHUNK);
        }
    }
}

#[test]
fn ring_all_gather_on_emulated_devices() {
    for n in [2, 3, 4] {
        for (seed, g) in groups(n) {
            let o = ex::ring_all_gather(&g, 3).unwrap_or_else(|e| panic!("{n} devices, seed {seed}: {e}"));
            assert_eq!(o.checked, n * n * 3 * kernels::peer::CHUNK);
        }
    }
}

#[test]
fn exchange_tiles_through_a_neighbours_tensor_map_on_emulated_devices() {
    for n in [2, 3] {
        for (seed, g) in groups(n) {
            let o = ex::exchange_tiles(&g, 128).unwrap_or_else(|e| panic!("{n} devices, seed {seed}: {e}"));
            assert_eq!(o.checked, n * 128 * 64);
        }
    }
}

/// Runs a fixture (`racy` or its twin) on 2 emulated devices; returns the
/// error text, or checks `z = 2 x_prev` and returns `None`.
fn fixture(seed: u64, racy: bool, gpu_scope_kernel: bool) -> Option<String> {
    let g = DeviceGroup::emulator_with(Emulator::new(seed), 2).unwrap();
    let xs: Vec<Vec<f32>> = (0..2).map(|d| (0..LEN).map(|i| (i + 100 * d) as f32).collect()).collect();
    let x = g.upload(&xs).unwrap();
    let y = g.zeros::<f32>(LEN).unwrap();
    let z = g.zeros::<f32>(LEN).unwrap();
    let sems = g.zeros::<u32>(1).unwrap();
    let run = match (gpu_scope_kernel, racy) {
        (false, true) => g.launch_host::<f::peer_read_before_wait<true>, _>(1u32, |r| (x.on(r), y.on(r), z.on(r), sems.on(r))),
        (false, false) => g.launch_host::<f::peer_read_before_wait<false>, _>(1u32, |r| (x.on(r), y.on(r), z.on(r), sems.on(r))),
        (true, true) => g.launch_host::<f::peer_semaphore_at_gpu_scope<true>, _>(1u32, |r| (x.on(r), y.on(r), z.on(r), sems.on(r))),
        (true, false) => g.launch_host::<f::peer_semaphore_at_gpu_scope<false>, _>(1u32, |r| (x.on(r), y.on(r), z.on(r), sems.on(r))),
    };
    if let Err(e) = run {
        return Some(e.to_string());
    }
    let zs = g.download(&z).unwrap();
    for d in 0..2 {
        let want: Vec<f32> = xs[1 - d].iter().map(|v| 2.0 * v).collect();
        assert_eq!(zs[d], want, "device {d}, seed {seed}");
    }
    None
}

#[test]
fn cross_device_races_are_reported_and_their_twins_run_clean() {
    for seed in SEEDS {
        for gpu_scope in [false, true] {
            let name = if gpu_scope { "peer_semaphore_at_gpu_scope" } else { "peer_read_before_wait" };
            let e = fixture(seed, true, gpu_scope).unwrap_or_else(|| panic!("{name}<true>, seed {seed}: not reported"));
            assert!(e.contains("race on global memory") && e.contains("devices "), "{name}, seed {seed}: {e}");
            assert!(e.contains("system-scope"), "{name}: the fix names the scope: {e}");
            if seed == SEEDS[0] {
                eprintln!("{name}<true>: {e}\n");
            }
            if let Some(e) = fixture(seed, false, gpu_scope) {
                panic!("{name}<false>, seed {seed}: the twin was reported: {e}");
            }
        }
    }
}

/// `peer_counter_epochs` launched `launches` times in a row on 2 emulated
/// devices whose counters start at `start` (the epochs count on from it,
/// wrapping): the first error's text, or `None` with `z = 2 x_prev` checked
/// after every launch.
fn counter_epochs(seed: u64, racy: bool, start: u32, launches: u32) -> Option<String> {
    let g = DeviceGroup::emulator_with(Emulator::new(seed), 2).unwrap();
    let counters = g.upload(&[vec![start], vec![start]]).unwrap();
    let y = g.zeros::<f32>(LEN).unwrap();
    let z = g.zeros::<f32>(LEN).unwrap();
    for l in 1..=launches {
        let xs: Vec<Vec<f32>> = (0..2).map(|d| (0..LEN).map(|i| (i + 100 * d) as f32 + l as f32).collect()).collect();
        let x = g.upload(&xs).unwrap();
        let epoch = start.wrapping_add(l);
        let run = if racy {
            g.launch_host::<f::peer_counter_epochs<true>, _>(1u32, |r| (x.on(r), y.on(r), z.on(r), counters.on(r), epoch))
        } else {
            g.launch_host::<f::peer_counter_epochs<false>, _>(1u32, |r| (x.on(r), y.on(r), z.on(r), counters.on(r), epoch))
        };
        if let Err(e) = run {
            return Some(e.to_string());
        }
        let zs = g.download(&z).unwrap();
        for d in 0..2 {
            let want: Vec<f32> = xs[1 - d].iter().map(|v| 2.0 * v).collect();
            assert_eq!(zs[d], want, "device {d}, seed {seed}, launch {l}");
        }
    }
    assert_eq!(g.download(&counters).unwrap(), vec![vec![start.wrapping_add(launches)]; 2], "each launch adds one per device");
    None
}

#[test]
fn peer_counters_hand_over_across_launches_and_a_stale_target_is_a_race() {
    for seed in SEEDS {
        // Three launches from zero, and three across u32::MAX.
        for start in [0, u32::MAX - 1] {
            if let Some(e) = counter_epochs(seed, false, start, 3) {
                panic!("peer_counter_epochs<false>, seed {seed}, start {start}: reported: {e}");
            }
        }
        let e = counter_epochs(seed, true, 0, 3).unwrap_or_else(|| panic!("peer_counter_epochs<true>, seed {seed}: not reported"));
        assert!(e.contains("race on global memory") && e.contains("devices "), "seed {seed}: {e}");
    }
}

#[test]
fn group_inputs_are_checked_with_the_rule_named() {
    let g = DeviceGroup::emulator(2).unwrap();
    let e = g.upload(&[vec![1.0f32; 4], vec![1.0; 5]]).err().expect("parts of two lengths").to_string();
    assert!(e.contains("lengths [4, 5]") && e.contains("one length on every device"), "{e}");
    let e = g.upload(&[vec![1.0f32; 4]]).err().expect("one part for two devices").to_string();
    assert!(e.contains("1 slices for a group of 2"), "{e}");
    let e = DeviceGroup::emulator(9).err().expect("nine devices").to_string();
    assert!(e.contains("MAX_PEER_DEVICES"), "{e}");
    // A peer buffer of another group's size.
    let g3 = DeviceGroup::emulator(3).unwrap();
    let y3 = g3.zeros::<f32>(LEN).unwrap();
    let (x, z, sems) = (g.zeros::<f32>(LEN).unwrap(), g.zeros::<f32>(LEN).unwrap(), g.zeros::<u32>(1).unwrap());
    let e = g
        .launch_host::<f::peer_read_before_wait<false>, _>(1u32, |r| (x.on(r), y3.on(r), z.on(r), sems.on(r)))
        .err()
        .expect("a 3-device buffer on 2 devices")
        .to_string();
    assert!(e.contains("peer buffer of 3 devices passed to a launch on 2"), "{e}");
}

/// GPU groups of 2, 3, ... up to 8 devices, as many as the machine has
/// (at least 2, or the test fails).
fn gpu_groups() -> Vec<DeviceGroup> {
    let mut v = Vec::new();
    for n in 2..=8 {
        match DeviceGroup::gpus(n) {
            Ok(g) => v.push(g),
            Err(Error::NoSuchDevice { .. }) if n > 2 => break,
            Err(Error::NoGpu { reason }) => panic!("no GPU: {reason}"),
            Err(e) => panic!("{e}"),
        }
    }
    v
}

#[test]
#[ignore = "needs 2 GPUs with peer access"]
fn peer_examples_on_two_gpus() {
    for g in gpu_groups() {
        eprintln!("{}", g.describe());
        // 256 chunks of 16 KiB per device (4 MiB), then a ragged CTA count.
        for chunks in [256, 37] {
            ex::exchange_shards(&g, chunks).unwrap();
            ex::ring_all_gather(&g, chunks).unwrap();
        }
        // TMA stores through a tensor map over the neighbour's memory.
        ex::exchange_tiles(&g, 64 * 132).unwrap();
    }
}

/// NCCL beside our kernels on the same streams: `all_gather` and
/// `all_reduce_sum` on every group size the machine has, against values
/// computed here (small integers in f32, so the sums are exact), the
/// all-gather's input written by our `exchange_shards` kernel just before
/// (stream order, no host sync between); and the size rules.
#[test]
#[ignore = "needs 2 GPUs with peer access and libnccl"]
fn nccl_collectives_on_gpus() {
    use kernel_host::nccl::Nccl;
    for g in gpu_groups() {
        let p = g.len();
        let nccl = Nccl::new(&g).unwrap();
        let chunks = 64;
        let len = kernels::peer::CHUNK * chunks;
        let xs: Vec<Vec<f32>> = (0..p).map(|d| (0..len).map(|i| ((i * 7 + d * 13) % 101) as f32).collect()).collect();
        let x = g.upload(&xs).unwrap();
        let y = g.zeros::<f32>(len).unwrap();
        // Our kernel: y on device d = x of device d - 1.
        let sems = g.zeros::<u32>(chunks).unwrap();
        let exchange = g.load(&kernels::DEVICE_CODE).unwrap().kernel::<kernels::peer::exchange_shards>().unwrap();
        exchange.launch(chunks as u32, |r| (x.on(r), y.on(r), sems.on(r))).unwrap();
        let mut gathered = g.zeros::<f32>(p * len).unwrap();
        nccl.all_gather(&y, &mut gathered).unwrap();
        let mut summed = g.zeros::<f32>(len).unwrap();
        nccl.all_reduce_sum(&x, &mut summed).unwrap();
        g.synchronize().unwrap();
        let want_gather: Vec<f32> = (0..p).flat_map(|d| xs[(d + p - 1) % p].clone()).collect();
        for (d, got) in g.download(&gathered).unwrap().iter().enumerate() {
            assert!(*got == want_gather, "{p} GPUs: all-gather of the exchanged shards on device {d}");
        }
        let want_sum: Vec<f32> = (0..len).map(|i| (0..p).map(|d| xs[d][i]).sum()).collect();
        for (d, got) in g.download(&summed).unwrap().iter().enumerate() {
            assert!(*got == want_sum, "{p} GPUs: all-reduce on device {d}");
        }
        let e = nccl.all_gather(&x, &mut summed).unwrap_err().to_string();
        assert!(e.contains("needs"), "{e}");
        let mut short = g.zeros::<f32>(len - 1).unwrap();
        let e = nccl.all_reduce_sum(&x, &mut short).unwrap_err().to_string();
        assert!(e.contains("must be equal"), "{e}");
        eprintln!("{p} GPUs: NCCL all-gather and all-reduce of {len} f32 per device: exact");
    }
}
