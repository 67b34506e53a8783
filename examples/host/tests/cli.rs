//! The example binaries' command lines (clap): `--help` exits 0 and prints
//! the usage; an unknown flag, or a malformed value, exits 2 with clap's
//! message and no panic. Only argument parsing runs: no GPU, no kernel
//! (each binary parses its arguments before it opens a device).
use std::process::Command;

/// Each binary, and a command line it must refuse for a malformed or
/// missing value (or an argument it takes none of).
const BINS: [(&str, &str, &[&str]); 9] = [
    ("attention_ladder", env!("CARGO_BIN_EXE_attention_ladder"), &["--iters", "x"]),
    ("bench", env!("CARGO_BIN_EXE_bench"), &["--dtype", "f32"]),
    ("blackwell", env!("CARGO_BIN_EXE_blackwell"), &["extra"]),
    ("first_kernels", env!("CARGO_BIN_EXE_first_kernels"), &["no_such_example"]),
    ("fused", env!("CARGO_BIN_EXE_fused"), &["--quick=yes"]),
    ("hopper", env!("CARGO_BIN_EXE_hopper"), &["extra"]),
    ("multi_gpu", env!("CARGO_BIN_EXE_multi_gpu"), &["--devices", "0"]),
    ("reduce_scatter_bench", env!("CARGO_BIN_EXE_reduce_scatter_bench"), &["--devices", "0"]),
    ("simt", env!("CARGO_BIN_EXE_simt"), &["extra"]),
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
