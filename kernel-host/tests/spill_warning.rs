//! The device build's local-memory warning and the occupancy options,
//! through ptxas, on a small kernels crate built here (sm_90a only):
//!
//! * a planted kernel whose per-thread array is indexed by a run-time value
//!   gets a stack frame, and the build warns naming it, the bytes and the
//!   fix; its twin with `allow_spills = ".."` does not warn;
//! * `max_registers = 32` and `min_blocks_per_sm = 2` (1024 threads) reach
//!   the PTX as `.maxnreg 32` and `.minnctapersm 2`, and ptxas keeps the
//!   kernel at 32 registers or fewer, where the same body without them
//!   uses more.
//!
//! The library's kernels do not warn: `kernel-ops/tests/ptx.rs`
//! (`the_known_spills_opt_out_of_the_build_warning_and_nothing_warns`) and
//! `tests/tests/ptx.rs` (no entry of the examples or the fixtures has a
//! stack frame).
use kernel_host::build::{Arch, DeviceBuild};
use std::path::Path;

const LIB_RS: &str = r#"#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
use kernel_device::array::regs::unroll;
use kernel_device::prelude::*;

/// A newcomer's loop over a per-thread array: the index is a run-time
/// value, so the array lives in local memory (a stack frame).
#[inline(always)]
fn local_array(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    let t = thread_idx().x;
    let mut acc = [0.0f32; 32];
    let mut i = 0;
    while i < n {
        acc[(i % 32) as usize] += x.read(i as usize);
        i += 1;
    }
    y.write(t as usize, acc[(t % 32) as usize]);
}

#[kernel(block = threads(128))]
pub fn planted_local_array(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    local_array(x, y, n);
}

#[kernel(block = threads(128), allow_spills = "planted: the twin of planted_local_array that opts out")]
pub fn planted_allowed(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    local_array(x, y, n);
}

/// 48 accumulators live across a loop, indexed by constants (registers).
#[inline(always)]
fn pressure(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    let mut acc = [0.0f32; 48];
    let mut i = 0usize;
    while i < n as usize {
        unroll(48, |j| acc[j] = acc[j] * x.read(i + j) + 1.0);
        i += 48;
    }
    let mut s = 0.0f32;
    unroll(48, |j| s += acc[j] * j as f32);
    y.write(thread_idx().x as usize, s);
}

#[kernel(block = threads(256))]
pub fn uncapped(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    pressure(x, y, n);
}

#[kernel(block = threads(256), max_registers = 32, allow_spills = "planted: spills under a 32-register cap")]
pub fn capped(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    pressure(x, y, n);
}

#[kernel(block = threads(1024), min_blocks_per_sm = 2, allow_spills = "planted: spills at 2 blocks of 1024 threads per SM")]
pub fn two_per_sm(x: GmemRef<f32>, y: Gmem<f32>, n: u32) {
    pressure(x, y, n);
}
"#;

#[test]
fn a_planted_local_array_warns_and_the_occupancy_options_reach_ptxas() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // Under cargo's per-target tmp dir, at a fixed path (as
    // device_build_error.rs): later runs reuse what the first compiled.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("planted-spills");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = \"planted_spills\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"src/lib.rs\"\n\
         [dependencies]\nkernel-device = {{ path = {:?} }}\n[workspace]\n",
        repo.join("kernel-device").display().to_string()
    );
    let write_if_changed = |path: &Path, text: &str| {
        if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
            std::fs::write(path, text).unwrap();
        }
    };
    write_if_changed(&dir.join("Cargo.toml"), &manifest);
    write_if_changed(&dir.join("src/lib.rs"), LIB_RS);
    // The repository's versions of the registry crates: nothing to
    // download, and the nvptx builds of kernel-device and the proc macros
    // in the shared target dir are reused.
    write_if_changed(&dir.join("Cargo.lock"), &std::fs::read_to_string(repo.join("Cargo.lock")).unwrap());
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let out_dir = target.join("debug").join("build").join("planted-spills-device-build-test").join("out");
    let build = DeviceBuild::new(&dir, "planted_spills", &out_dir).archs(&[Arch::Sm90a]);
    let Some(_) = kernel_host::build::find_ptxas(&dir) else {
        assert!(std::env::var_os("KERNEL_REQUIRE_PTXAS").is_none(), "ptxas is required (KERNEL_REQUIRE_PTXAS) and was not found");
        eprintln!("skipped: no ptxas (tools/install-ptxas.sh)");
        return;
    };
    let out = build.run().unwrap_or_else(|e| panic!("{e}"));
    let report = out.archs[0].ptxas_report.as_deref().expect("a ptxas report");
    let entry = |name: &str| kernel_host::ptxas::entry(report, name).unwrap_or_else(|| panic!("{name} not in the report:\n{report}"));

    // The warning: the planted kernel only, with its bytes and the fix.
    assert_eq!(out.warnings.len(), 1, "{:#?}\n{report}", out.warnings);
    let w = &out.warnings[0];
    eprintln!("the warning: {w}");
    let frame = entry("planted_local_array").stack_frame;
    assert!(frame >= 128, "the 32-float array in local memory: {frame}-byte stack frame\n{report}");
    assert!(w.starts_with(&format!("kernel `planted_local_array` uses local memory (sm_90a: {frame}-byte stack frame")), "{w}");
    assert!(w.contains("kernel_device::array::regs::unroll") && w.contains("allow_spills = \"reason\""), "{w}");
    let allowed: Vec<&str> = out.local_memory.iter().filter(|u| u.allowed).map(|u| u.kernel.as_str()).collect();
    assert!(allowed.contains(&"planted_allowed"), "{allowed:?}");

    // The directives, and ptxas honouring them.
    let ptx = std::fs::read_to_string(&out.archs[0].ptx).unwrap();
    let head = |name: &str| {
        let start = ptx.find(&format!(".entry {name}(")).unwrap();
        ptx[start..start + ptx[start..].find('{').unwrap()].to_string()
    };
    assert!(head("capped").contains(".maxntid 256, 1, 1\n.maxnreg 32\n"), "{}", head("capped"));
    assert!(head("two_per_sm").contains(".maxntid 1024, 1, 1\n.minnctapersm 2\n"), "{}", head("two_per_sm"));
    assert!(!head("uncapped").contains(".maxnreg") && !head("uncapped").contains(".minnctapersm"));
    let (free, capped, two) = (entry("uncapped").registers, entry("capped").registers, entry("two_per_sm").registers);
    assert!(free > 40, "the body needs more than 40 registers uncapped: {free}\n{report}");
    assert!(capped <= 32, "max_registers = 32: {capped} registers\n{report}");
    assert!(two <= 32, "min_blocks_per_sm = 2 at 1024 threads leaves 32 registers per thread: {two}\n{report}");
    assert!(!report.contains("ignored"), "ptxas ignored a directive:\n{report}");
}
