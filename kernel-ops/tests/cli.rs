//! The benchmark binaries' command lines (clap): `--help` exits 0 and
//! prints the usage; an unknown flag, or a malformed value, exits 2 with
//! clap's message and no panic. Only argument parsing runs: no GPU, no
//! kernel (each binary parses its arguments before it opens a device).
use std::process::Command;

/// Each binary, and a command line it must refuse for a malformed or
/// missing value.
const BINS: [(&str, &str, &[&str]); 10] = [
    ("attention_bench", env!("CARGO_BIN_EXE_attention_bench"), &["--only", "4096"]),
    ("decode_bench", env!("CARGO_BIN_EXE_decode_bench"), &["--splits", "0,x"]),
    ("fp8_bench", env!("CARGO_BIN_EXE_fp8_bench"), &["--shape", "4096x4096"]),
    ("grouped_bench", env!("CARGO_BIN_EXE_grouped_bench"), &["--iters", "many"]),
    ("grouped_fp8_bench", env!("CARGO_BIN_EXE_grouped_fp8_bench"), &["--warmup-ms", "long"]),
    ("launch_overhead", env!("CARGO_BIN_EXE_launch_overhead"), &["extra"]),
    ("matmul_table", env!("CARGO_BIN_EXE_matmul_table"), &["--out", "t.tsv", "--m", "64,x"]),
    ("norms_bench", env!("CARGO_BIN_EXE_norms_bench"), &["--csv"]),
    ("swiglu_bench", env!("CARGO_BIN_EXE_swiglu_bench"), &["--shape", "8192x0x4096"]),
    ("soak", env!("CARGO_BIN_EXE_soak"), &["--check-every", "0"]),
];

/// Runs `exe args`, returning (exit code, stdout, stderr).
fn run(exe: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(exe).args(args).env("RUST_BACKTRACE", "1").output().unwrap_or_else(|e| panic!("{exe}: {e}"));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A usage error: exit 2, clap's `error:` line, no panic or backtrace.
fn assert_usage_error(name: &str, args: &[&str], (code, out, err): (Option<i32>, String, String)) {
    assert_eq!(code, Some(2), "{name} {args:?}: exit {code:?}, want 2\nstdout: {out}\nstderr: {err}");
    assert!(err.starts_with("error: "), "{name} {args:?}: stderr should open with clap's `error:`:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{name} {args:?} panicked:\n{err}");
}

#[test]
fn help_exits_zero_and_bad_arguments_exit_two() {
    for (name, exe, bad) in BINS {
        let (code, out, err) = run(exe, &["--help"]);
        assert_eq!(code, Some(0), "{name} --help: exit {code:?}\nstderr: {err}");
        assert!(out.contains(&format!("Usage: {name}")) && out.contains("--help"), "{name} --help printed no usage:\n{out}");
        assert_usage_error(name, &["--no-such-flag"], run(exe, &["--no-such-flag"]));
        assert_usage_error(name, bad, run(exe, bad));
    }
}

/// The soak's mix runs (a few seconds; on the emulator without a GPU),
/// checks every step and ends with its count of failures; an unknown op is
/// a usage error.
#[test]
fn soak_runs_its_mix_and_refuses_unknown_ops() {
    let exe = env!("CARGO_BIN_EXE_soak");
    let (code, out, err) = run(exe, &["--seconds", "4", "--ops", "norm,matmul,add_rms_norm", "--seed", "5"]);
    assert_eq!(code, Some(0), "soak: exit {code:?}\nstdout: {out}\nstderr: {err}");
    assert!(out.contains(", 0 failed") && out.contains("norm "), "soak printed no summary:\n{out}");
    let (code, _, err) = run(exe, &["--ops", "norm,bogus"]);
    assert_eq!(code, Some(2), "soak --ops bogus: exit {code:?}\n{err}");
    assert!(err.starts_with("error: --ops: unknown op `bogus`"), "{err}");
}
