//! The library's kernels keep their pipelines in the language's ring type
//! (`kernel_device::pipeline::Ring`): no hand-written stage arithmetic
//! (`step % STAGES` and its phase) and no hand-driven ring barriers
//! (`consumed.at(s).wait()`) in `kernel-ops/kernels/src`. A new one fails
//! this test, naming the file and the line.
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// What a hand-written ring looks like, on one line of code (comments
/// excluded): a modulo by the stage count (`% STAGES`, `% S`, `% (STAGES
/// + 1)`, `% $stages`), or a barrier of an array driven directly
/// (`.at(s).wait()`, `.at(slot(step - 1)).arrive()`).
fn hand_ring(code: &str) -> Option<&'static str> {
    let modulo_by_stages = code.match_indices('%').any(|(i, _)| {
        let rest = code[i + 1..].trim_start_matches(|c: char| c.is_whitespace() || c == '(' || c == '$');
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        word.to_ascii_uppercase().contains("STAGES") || word == "S"
    });
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if modulo_by_stages {
        return Some("stage arithmetic (a modulo by the stage count)");
    }
    for verb in [".wait()", ".arrive()", ".arrive_expect_tx(", ".arrive_cluster_cta("] {
        if let Some(at) = compact.find(verb) {
            // `<array>.at(<index>)<verb>`: a ring slot's barrier by hand.
            let before = &compact[..at];
            if before.ends_with(')') && before.rfind(".at(").is_some_and(|i| !before[i..].contains(';')) {
                return Some("a ring barrier driven by hand (`.at(slot)` then a barrier verb)");
            }
        }
    }
    None
}

#[test]
fn no_hand_written_ring_in_the_library_kernels() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 5, "found only {} source files under {}", files.len(), root.display());
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            if let Some(what) = hand_ring(code) {
                found.push(format!("{}:{}: {what}: `{}`", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "hand-written rings in the library's kernels; use `kernel_device::pipeline::Ring` (its `Producer`/`Consumer` verbs) instead:\n{}",
        found.join("\n")
    );
}

/// The detector itself: it flags each form the library had before the ring
/// type, and not the ring's verbs.
#[test]
fn the_detector_flags_hand_rings_and_not_the_ring_verbs() {
    for hand in [
        "let slot = |step: u32| (step % STAGES as u32) as usize;",
        "let s = ((step + k) % STAGES as u32) as usize;",
        "let entry = |done: u32| (done % (STAGES as u32 + 1)) as usize;",
        "let s = (step % $stages as u32) as usize;",
        "let i = (t % S as u32) as usize;",
        "consumed.at(s).wait();",
        "consumed.at(slot(step - 1)).arrive();",
        "let bar = loaded.at(s); loaded.at(s).arrive_expect_tx(bytes);",
    ] {
        assert!(hand_ring(hand).is_some(), "not flagged: {hand}");
    }
    for ring in [
        "let slot = consumer.wait();",
        "consumer.release_after_wgmma::<1>();",
        "let slot = producer.acquire_tx(bytes);",
        "a.load(a_bufs.at(slot.index()), row, col, slot.barrier());",
        "let (pm, pn) = (i % m_tiles, i / m_tiles);",
        "q_loaded.arrive_expect_tx(bytes);",
        "kv_loaded.wait();",
    ] {
        assert!(hand_ring(ring).is_none(), "flagged: {ring}");
    }
}
