//! A kernels crate that does not compile for nvptx64: the device build's
//! error is rustc's diagnostics plus one line naming the crate and the
//! architecture (no command line, no environment, no panic).
use kernel_host::build::{Arch, BuildError, DeviceBuild};

#[test]
fn a_kernel_that_does_not_compile_reports_rustc_errors_and_one_line() {
    // Under cargo's per-target tmp dir, at a fixed path: the nvptx `core`
    // built for it is reused by later runs (the first one builds it).
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("broken-kernels");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"broken_kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"src/lib.rs\"\n[workspace]\n",
    )
    .unwrap();
    // `exp` is not in `core`: the error a new user hits (E0599).
    std::fs::write(dir.join("src/lib.rs"), "#![no_std]\npub fn f(x: f32) -> f32 { x.exp() }\n").unwrap();
    // An OUT_DIR-like path under this target dir's `debug/build/`, so the
    // device build uses the shared per-architecture target dir
    // (`kernel_host::build::device_target_dir`), where the workspace's own
    // kernels crates already compiled `core` for nvptx64, instead of
    // compiling it again (17 s) in a dir of its own.
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let out = target.join("debug").join("build").join("broken-kernels-device-build-test").join("out");
    let err = DeviceBuild::new(&dir, "broken_kernels", &out).archs(&[Arch::Sm90a]).run().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, BuildError::Compile { .. }), "{msg}");
    assert!(msg.contains("error[E0599]") && msg.contains("exp"), "rustc's error is shown: {msg}");
    let last = msg.lines().last().unwrap();
    assert!(last.starts_with("device build of crate `broken_kernels` for sm_90a (nvptx64-nvidia-cuda) failed"), "{msg}");
    assert!(!msg.contains("CARGO_ENCODED_RUSTFLAGS") && !msg.contains("--manifest-path"), "no command line: {msg}");
    assert!(msg.len() < 2000, "short: {} bytes: {msg}", msg.len());
}
