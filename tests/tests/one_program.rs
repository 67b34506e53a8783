//! One host program, two targets: the same function runs the first
//! examples and a Hopper ladder step against their CPU references through
//! `kernel_host::Device`, once on the CPU emulator (in CI) and once on a GPU
//! (`#[ignore]`d: run with `--ignored` on a GPU machine). Nothing in
//! [`one_program`] knows which backend it runs on.
use examples::hopper::Problem;
use examples::{ladder, FIRST_EXAMPLES};
use kernel_host::emulate::Emulator;
use kernel_host::Device;

/// The Hopper ladder step run here (persistent: `min(SMs, tiles)` CTAs).
const LADDER_STEP: &str = "step3 128x256 s3 w8";
/// 256 x 512 x 192: 4 output tiles of 128 x 256 and 3 K steps, so on 2
/// emulated SMs each persistent CTA runs 2 tiles and reuses every slot.
const LADDER_SHAPE: (usize, usize, usize) = (256, 512, 192);

/// The program: every first example, then one ladder step checked on
/// every row of C. Panics naming the example and the device on a failure.
fn one_program(dev: &Device) {
    let on = dev.describe();
    for (name, run) in FIRST_EXAMPLES {
        match run(dev) {
            Ok(o) => eprintln!("ok {name}: {} elements equal the CPU reference on {on}", o.checked),
            Err(e) => panic!("{name} on {on}: {e}"),
        }
    }
    let (m, n, k) = LADDER_SHAPE;
    let mut p = Problem::new(dev, m, n, k, usize::MAX, 60).unwrap_or_else(|e| panic!("{LADDER_STEP}: inputs on {on}: {e}"));
    let err = ladder::run(dev, LADDER_STEP, &mut p).unwrap_or_else(|e| panic!("{LADDER_STEP} on {on}: {e}"));
    eprintln!("ok {LADDER_STEP} {m}x{n}x{k}: relative Frobenius error {err:.2e} on {on}");
    assert!(err < 1e-2, "{LADDER_STEP} on {on}: relative Frobenius error {err}");
}

#[test]
fn one_program_on_the_emulator() {
    one_program(&Device::emulator_with(Emulator::new(11).sms(2)));
}

#[test]
#[ignore = "needs a CUDA GPU (sm_90): run with --ignored on a GPU machine"]
fn one_program_on_the_gpu() {
    let dev = Device::gpu_or_emulator().expect("the device opens");
    if !dev.is_gpu() {
        eprintln!("SKIPPED: this test needs a CUDA GPU; the device is {}", dev.describe());
        return;
    }
    one_program(&dev);
}
