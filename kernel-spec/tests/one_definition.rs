//! One definition of every limit and rule: greps the workspace's Rust
//! sources (`kernel-*/`, `examples/`, `tests/`; not `kernel-spec` itself)
//! for a second definition of what `kernel_spec` defines, and fails naming
//! the file, the line and where the one definition is.
//!
//! Two kinds of findings:
//!
//! * a definition: `const NAME` / `static NAME` of a limit, `struct Dim3`,
//!   `enum Swizzle`, `enum LaunchProblem`, `fn find_swizzle`, anywhere
//!   (test code included);
//! * a limit's value written out (`232448`, `232_448`, `227 * 1024`) in
//!   code that is not a test: comments and `#[cfg(test)]` modules, test
//!   files (`tests.rs`, `*_tests.rs`) and the `tests/` crates may state the
//!   values they expect.
//!
//! Re-exports (`pub use kernel_spec::limits::MAX_SMEM_BYTES;`) are how other
//! crates offer these names, and are not findings.

use std::path::{Path, PathBuf};

/// Names `kernel_spec` defines as constants, and the module that does.
const LIMITS: &[(&str, &str)] = &[
    ("MAX_BLOCK_THREADS", "kernel_spec::limits"),
    ("MAX_BLOCK_Z", "kernel_spec::limits"),
    ("MAX_CLUSTER_CTAS", "kernel_spec::limits"),
    ("MAX_NON_PORTABLE_CLUSTER_CTAS", "kernel_spec::limits"),
    ("MAX_SMEM_BYTES", "kernel_spec::limits"),
    ("MAX_GRID_X", "kernel_spec::limits"),
    ("MAX_GRID_YZ", "kernel_spec::limits"),
    ("NUM_NAMED_BARRIERS", "kernel_spec::limits"),
    ("MAX_MBARRIER_ARRIVALS", "kernel_spec::limits"),
    ("MAX_MBARRIER_TX", "kernel_spec::limits"),
    ("TMEM_LANES", "kernel_spec::limits"),
    ("MAX_TMEM_COLS", "kernel_spec::limits"),
    ("MAX_PEER_DEVICES", "kernel_spec::limits"),
    ("REGISTER_FILE", "kernel_spec::limits"),
    ("MAX_THREAD_REGISTERS", "kernel_spec::limits"),
    ("MAX_SM_THREADS", "kernel_spec::limits"),
    ("MAX_SM_BLOCKS", "kernel_spec::limits"),
    ("SM_SMEM_BYTES", "kernel_spec::limits"),
    ("SMEM_RESERVED_PER_BLOCK", "kernel_spec::limits"),
    ("SMEM_ALLOC_GRANULARITY", "kernel_spec::limits"),
    ("REGISTER_ALLOC_UNIT", "kernel_spec::limits"),
    ("SM_SUBPARTITIONS", "kernel_spec::limits"),
    ("MIN_MAXNREG", "kernel_spec::limits"),
    ("MAX_MAXNREG", "kernel_spec::limits"),
    // The names other crates re-export them under.
    ("NUM_HW_BARRIERS", "kernel_spec::limits (NUM_NAMED_BARRIERS)"),
    ("MAX_ARRIVALS", "kernel_spec::limits (MAX_MBARRIER_ARRIVALS)"),
    ("MAX_MBAR_COUNT", "kernel_spec::limits (MAX_MBARRIER_ARRIVALS)"),
    ("MAX_TX", "kernel_spec::limits (MAX_MBARRIER_TX)"),
    ("MAX_RANK", "kernel_spec::tensor_map"),
    ("MAX_GLOBAL_DIM", "kernel_spec::tensor_map"),
    ("GLOBAL_STRIDE_LIMIT", "kernel_spec::tensor_map"),
    ("GLOBAL_ALIGN", "kernel_spec::tensor_map"),
    ("MAX_BOX_DIM", "kernel_spec::tensor_map"),
    ("BOX_INNER_ALIGN", "kernel_spec::tensor_map"),
    ("MAX_ELEMENT_STRIDE", "kernel_spec::tensor_map"),
];

/// Items `kernel_spec` defines: the keyword and name, and the module.
const ITEMS: &[(&str, &str)] = &[
    ("struct Dim3", "kernel_spec::dim3"),
    ("enum Swizzle", "kernel_spec::swizzle"),
    ("fn find_swizzle", "kernel_spec::swizzle"),
    ("enum LaunchProblem", "kernel_spec::launch"),
    ("struct LaunchShape", "kernel_spec::launch"),
    ("enum MapProblem", "kernel_spec::tensor_map"),
    ("fn entry_registers", "kernel_spec::registers"),
    ("fn register_pool", "kernel_spec::registers"),
    ("fn blocks_by_registers", "kernel_spec::occupancy"),
    ("fn blocks_by_smem", "kernel_spec::occupancy"),
    ("fn max_registers_for", "kernel_spec::occupancy"),
];

/// Limit values that must be written only in `kernel_spec`, and the
/// constant to use instead.
const VALUES: &[(&str, &str)] = &[
    ("232448", "MAX_SMEM_BYTES"),
    ("232_448", "MAX_SMEM_BYTES"),
    ("227 * 1024", "MAX_SMEM_BYTES"),
    ("227*1024", "MAX_SMEM_BYTES"),
    ("(1 << 20) - 1", "MAX_MBARRIER_ARRIVALS or MAX_MBARRIER_TX"),
    ("233472", "SM_SMEM_BYTES"),
    ("233_472", "SM_SMEM_BYTES"),
];

/// Whether `line` has `word` not preceded or followed by an identifier
/// character.
fn has_word(line: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    line.match_indices(word).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// `line` without its `//` comment (a `//` inside a string literal is kept).
fn code_part(line: &str) -> &str {
    let mut in_str = false;
    let mut prev = '\0';
    for (i, c) in line.char_indices() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '/' if !in_str && prev == '/' => return &line[..i - 1],
            _ => {}
        }
        prev = if prev == '\\' && c == '\\' { '\0' } else { c };
    }
    line
}

/// The findings in one file's text, as `path:line: ...` messages. `test_file`:
/// the whole file is test code.
fn findings(path: &str, text: &str, test_file: bool) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    // Brace depth at which the current `#[cfg(test)]` module closes.
    let mut depth: i64 = 0;
    let mut test_until: Option<i64> = None;
    let mut cfg_test_pending = false;
    for (n, raw) in lines.iter().enumerate() {
        let code = code_part(raw);
        let trimmed = code.trim();
        if trimmed == "#[cfg(test)]" {
            cfg_test_pending = true;
        } else if cfg_test_pending && !trimmed.is_empty() {
            if test_until.is_none()
                && (trimmed.starts_with("mod ") || trimmed.starts_with("pub mod "))
                && trimmed.ends_with('{')
            {
                test_until = Some(depth);
            }
            cfg_test_pending = false;
        }
        let in_test = test_file || test_until.is_some();
        let at = format!("{path}:{}", n + 1);

        // A constant whose value is the spec's (`const MAX_TX: i64 =
        // kernel_spec::limits::MAX_MBARRIER_TX as i64;`) is a conversion, not
        // a second definition.
        let from_spec = code.contains("kernel_spec::");
        for (name, home) in LIMITS {
            for kw in ["const ", "static "] {
                if let Some(i) = code.find(&format!("{kw}{name}")) {
                    if has_word(&code[i + kw.len()..], name) && !from_spec {
                        out.push(format!(
                            "{at}: `{}` defines {name} again; it is defined once, in {home}: \
                             use it from there (or a `pub use` of it)",
                            trimmed
                        ));
                    }
                }
            }
        }
        for (item, home) in ITEMS {
            if has_word(code, item) {
                out.push(format!(
                    "{at}: `{trimmed}` defines `{item}` again; it is defined once, in {home}: \
                     use it from there (or a `pub use` of it)"
                ));
            }
        }
        if !in_test {
            for (v, name) in VALUES {
                if code.contains(v) {
                    out.push(format!(
                        "{at}: `{trimmed}` writes the limit {v} out; use kernel_spec::limits::{name} \
                         (or a `pub use` of it)"
                    ));
                }
            }
        }

        for c in code.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
        }
        // The module's closing brace brings the depth back.
        if test_until.is_some_and(|d| depth <= d) {
            test_until = None;
        }
    }
    out
}

/// Every `.rs` file under `dir`, skipping build outputs and hidden folders.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name == "target" || name.starts_with('.') {
                continue;
            }
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_limit_and_rule_is_defined_once_in_kernel_spec() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut files = Vec::new();
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let scanned = (name.starts_with("kernel-") && name != "kernel-spec")
            || name == "examples"
            || name == "tests";
        if scanned && e.path().is_dir() {
            rust_files(&e.path(), &mut files);
        }
    }
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("kernel-device/src/launch.rs")),
        "the scan found no kernel-device sources under {}: the walk is broken",
        root.display()
    );
    let mut all = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        let file_name = f.file_name().unwrap().to_string_lossy();
        let test_file = rel.starts_with("tests/")
            || file_name == "tests.rs"
            || file_name.ends_with("_tests.rs");
        let text = std::fs::read_to_string(f).unwrap();
        all.extend(findings(&rel, &text, test_file));
    }
    assert!(
        all.is_empty(),
        "{} second definition(s) of what kernel-spec defines:\n{}",
        all.len(),
        all.join("\n")
    );
}

/// The scanner finds what it looks for, and not in comments, re-exports or
/// test modules (the workspace test above passes only if this one holds).
#[test]
fn the_scanner_finds_planted_definitions() {
    let planted = "\
pub const MAX_CLUSTER_CTAS: u32 = 16;
const MAX_SMEM_BYTES: usize = 227 * 1024;
pub struct Dim3 { x: u32 }
pub(crate) enum Swizzle { None }
const MAX_MBAR_COUNT: u32 = (1 << 20) - 1;
fn f() { assert!(n <= 232448, \"at most 232448 bytes\"); }
";
    let f = findings("k/src/lib.rs", planted, false);
    assert_eq!(f.len(), 8, "{f:#?}");
    assert!(f[0].starts_with("k/src/lib.rs:1: ") && f[0].contains("MAX_CLUSTER_CTAS"), "{f:#?}");
    assert!(f[0].contains("kernel_spec::limits"), "{f:#?}");
    assert!(f[1].starts_with("k/src/lib.rs:2: ") && f[1].contains("defines MAX_SMEM_BYTES"), "{f:#?}");
    assert!(f[2].starts_with("k/src/lib.rs:2: ") && f[2].contains("227 * 1024"), "{f:#?}");
    assert!(f[3].contains(":3: ") && f[3].contains("struct Dim3"), "{f:#?}");
    assert!(f[4].contains(":4: ") && f[4].contains("enum Swizzle"), "{f:#?}");
    assert!(f[5].contains(":5: ") && f[5].contains("defines MAX_MBAR_COUNT"), "{f:#?}");
    assert!(f[6].contains(":5: ") && f[6].contains("MAX_MBARRIER_ARRIVALS or MAX_MBARRIER_TX"), "{f:#?}");
    assert!(f[7].contains(":6: ") && f[7].contains("232448"), "{f:#?}");

    let fine = "\
// MAX_SMEM_BYTES is 232448 bytes (a comment)
/// const MAX_RANK: usize = 5; in a doc comment
pub use kernel_spec::limits::{MAX_CLUSTER_CTAS, MAX_SMEM_BYTES};
pub use kernel_spec::Dim3;
const MAX_RANKS: usize = 5;
const MAX_TX: i64 = kernel_spec::limits::MAX_MBARRIER_TX as i64;
enum SwizzleMode { A }
let x = MAX_SMEM_BYTES; // 232448
#[cfg(test)]
mod tests {
    fn t() {
        assert!(msg.contains(\"232448 bytes\"), \"{msg}\");
    }
}
fn after() {}
";
    assert_eq!(findings("k/src/lib.rs", fine, false), Vec::<String>::new());
    // After the test module, code is scanned again.
    let after = format!("{fine}fn g() {{ let m = 227 * 1024; }}\n");
    let f = findings("k/src/lib.rs", &after, false);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].starts_with("k/src/lib.rs:16: "), "{f:#?}");
    // In a test file values may be written out; definitions may not.
    let f = findings("tests/t.rs", "assert_eq!(x, 232448);\nconst MAX_BOX_DIM: u32 = 256;\n", true);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].contains("tests/t.rs:2: ") && f[0].contains("kernel_spec::tensor_map"), "{f:#?}");
}
