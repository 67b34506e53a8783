//! The book's chapters (`docs/src/*.md`) as doc comments, so that
//! `cargo test -p kernel-book` (and so `tools/test.sh`, CI's command)
//! compiles every `rust` code block of the book and runs those not
//! marked `no_run`, without installing mdBook. The chapters are included
//! only when rustdoc collects doc tests (`cfg(doctest)`), so
//! `cargo doc` does not render them as this crate's documentation (the book
//! is built by `tools/book.sh`).
//!
//! A chapter added to `docs/src/` must be added to the list below and to
//! `docs/src/SUMMARY.md`; the tests in this file fail otherwise.
//!
//! Code that is compiled elsewhere is shown with mdBook's
//! `{{#include ..}}` in a block marked `rs` (Rust highlighting in the
//! HTML, not a doc test): only the template of `docs/template/`,
//! which `tools/template-check.sh` builds, runs and tests; a test below
//! rejects an `rs` block holding anything else.

/// Every chapter of the book, as `(module name, file name)`: the one list
/// the doc-test modules and the tests below are made from.
macro_rules! chapters {
    ($($module:ident => $file:literal),* $(,)?) => {
        $(
            #[cfg(doctest)]
            #[doc = include_str!(concat!("../../src/", $file))]
            mod $module {}
        )*
        /// The chapter files included above, in `docs/src/`.
        pub const CHAPTERS: &[&str] = &[$($file),*];
    };
}

chapters! {
    introduction => "introduction.md",
    first_kernel => "first-kernel.md",
    hopper => "hopper.md",
    pipelines => "pipelines.md",
    gemm_ladder => "gemm-ladder.md",
    attention => "attention.md",
    simt_and_arrays => "simt-and-arrays.md",
    blackwell => "blackwell.md",
    emulator => "emulator.md",
    performance => "performance.md",
    compile_time_rules => "compile-time-rules.md",
    running_on_a_gpu => "running-on-a-gpu.md",
    own_kernels_crate => "own-kernels-crate.md",
    serving => "serving.md",
    python => "python.md",
    multi_gpu => "multi-gpu.md",
    architecture => "architecture.md",
}

#[cfg(test)]
mod tests {
    use super::CHAPTERS;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../src")
    }

    /// The `.md` files linked from SUMMARY.md (`[title](file.md)`).
    fn summary_links() -> Vec<String> {
        let summary = std::fs::read_to_string(src().join("SUMMARY.md")).expect("docs/src/SUMMARY.md");
        let mut links = Vec::new();
        for line in summary.lines() {
            let mut rest = line;
            while let Some(start) = rest.find("](") {
                let after = &rest[start + 2..];
                let end = after.find(')').unwrap_or_else(|| panic!("SUMMARY.md: unclosed link in `{line}`"));
                links.push(after[..end].to_string());
                rest = &after[end..];
            }
        }
        links
    }

    fn chapter_files() -> BTreeSet<String> {
        std::fs::read_dir(src())
            .expect("docs/src")
            .map(|e| e.expect("docs/src entry").file_name().into_string().expect("UTF-8 file name"))
            .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
            .collect()
    }

    /// The code blocks of a chapter as `(line, info string, body)`.
    fn code_blocks(text: &str) -> Vec<(usize, String, Vec<String>)> {
        let mut blocks = Vec::new();
        let mut open: Option<(usize, String, Vec<String>)> = None;
        for (i, line) in text.lines().enumerate() {
            let fence = line.trim_start().strip_prefix("```");
            match (&mut open, fence) {
                (None, Some(info)) => open = Some((i + 1, info.trim().to_string(), Vec::new())),
                (Some(_), Some("")) => blocks.push(open.take().expect("an open block")),
                (Some((_, _, body)), _) => body.push(line.to_string()),
                (None, None) => {}
            }
        }
        blocks
    }

    #[test]
    fn rs_blocks_only_include_the_template() {
        let mut problems = Vec::new();
        for chapter in CHAPTERS {
            let text = std::fs::read_to_string(src().join(chapter)).expect("chapter");
            for (line, info, body) in code_blocks(&text) {
                let includes: Vec<&String> = body.iter().filter(|l| l.starts_with("{{#include ")).collect();
                if info == "rs" {
                    let ok = body.len() == 1 && includes.len() == 1 && body[0].starts_with("{{#include ../template/");
                    if !ok {
                        problems.push(format!("{chapter}:{line}: an `rs` block must be one `{{{{#include ../template/..}}}}` line (code compiled by tools/template-check.sh); write other Rust as `rust` (compiled here, `no_run` if it needs a GPU)"));
                    }
                }
                for inc in includes {
                    let path = inc.trim_start_matches("{{#include ").trim_end_matches("}}");
                    let path = path.split(':').next().expect("a path");
                    if !src().join(path).is_file() {
                        problems.push(format!("{chapter}:{line}: `{inc}` includes a file that does not exist (relative to docs/src/)"));
                    }
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn every_summary_link_exists() {
        let missing: Vec<String> = summary_links().into_iter().filter(|l| !src().join(l).is_file()).collect();
        assert!(missing.is_empty(), "SUMMARY.md links to chapters that do not exist in docs/src/: {missing:?}");
    }

    #[test]
    fn every_chapter_is_in_the_summary_and_compiled() {
        let linked: BTreeSet<String> = summary_links().into_iter().collect();
        let files = chapter_files();
        let unlisted: Vec<&String> = files.difference(&linked).collect();
        assert!(unlisted.is_empty(), "chapters in docs/src/ missing from SUMMARY.md (mdBook would not build them): {unlisted:?}");
        let compiled: BTreeSet<String> = CHAPTERS.iter().map(|c| c.to_string()).collect();
        let untested: Vec<&String> = files.difference(&compiled).collect();
        assert!(
            untested.is_empty(),
            "chapters in docs/src/ not included in docs/doctest/src/lib.rs's `chapters!` list (their code blocks would not be compiled): {untested:?}"
        );
    }
}
