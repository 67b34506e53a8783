#!/usr/bin/env bash
# The test suite: unit tests, trybuild compile-fail cases, PTX/ptxas checks of
# every example kernel for sm_90a and sm_100a. GPU tests are listed as
# ignored here; run them on a GPU machine (README, "Running on a GPU").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/setup.sh"
cd "$root"
# Fail the build, not just a test, if ptxas went missing.
export KERNEL_REQUIRE_PTXAS=1
# Doc examples, and the book's Rust code blocks (docs/src, compiled by the
# kernel-book crate), are compiled as tests (`no_run` where they need a
# GPU): none may be `ignore`d.
if grep -rnE '^\s*//[/!] ```(rust,)?ignore' --include=*.rs kernel-* examples tests tools docs 2>/dev/null \
  || grep -nE '^\s*```(rust,)?ignore' docs/src/*.md; then
  echo "error: the doc examples above are \`ignore\`d; make them compile (\`no_run\` if they need a GPU)" >&2
  exit 1
fi
# The docs build without warnings (broken intra-doc links included).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
# The ptxas report is printed by a documented command.
tools/ptxas-report.sh kernels | grep -c "registers" > /dev/null
cargo test --workspace "$@"
# The Python package (python/): the wheel built and its tests on the
# emulator with NumPy arrays.
tools/python-test.sh
# The template of the book's "Your own kernels crate" chapter, built from
# a copy outside the repository (ptxas required, its report printed), its
# host program and tests run, its Python crate's wheel built and its pytest
# tests run on the emulator. Last: its builds share the target directory,
# and reuse the crates the steps above compiled with the same settings.
tools/template-check.sh
