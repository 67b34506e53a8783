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
# 1. Build every test, example and benchmark binary: the kernels crates'
#    device builds (PTX for sm_90a and sm_100a, ptxas) run here, beside the
#    host crates that do not wait for them.
cargo test --workspace --no-run "$@"
# The ptxas report is printed by a documented command.
tools/ptxas-report.sh kernels | grep -c "registers" > /dev/null
# 2. Run the tests. Cargo holds the build directory's lock only while it
#    builds, not while the tests run, so the steps below build and run
#    beside them, on the cores the emulator tests leave idle (on the 2-core
#    CI machine the tests keep about 1.7 busy); their output is printed
#    after the tests'. In order:
#    - the docs build without warnings (broken intra-doc links included);
#    - the Python package (python/): the wheel built and its tests run on
#      the emulator with NumPy arrays;
#    - the template of the book's "Your own kernels crate" chapter, built
#      from a copy outside the repository (ptxas required, its report
#      printed), its host program and tests run, its Python crate's wheel
#      built and its pytest tests run on the emulator. Its builds share
#      the target directory and reuse the registry crates compiled above.
beside="$(mktemp "${TMPDIR:-/tmp}/kernel-test-beside.XXXXXX")"
tests="$(mktemp "${TMPDIR:-/tmp}/kernel-test-tests.XXXXXX")"
trap 'rm -f "$beside" "$tests"' EXIT
( set -o pipefail; cargo test --workspace "$@" 2>&1 | tee "$tests" ) &
tests_pid=$!
# Start once the tests run (cargo has released the lock): their first
# "Running" line, or cargo's exit.
while kill -0 "$tests_pid" 2> /dev/null && ! grep -qE '^ +(Running|Doc-tests) ' "$tests"; do
  sleep 1
done
beside_rc=0
# (Chained with `&&`: `set -e` does not apply on the left of `||`.)
{
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace \
    && tools/python-test.sh \
    && tools/template-check.sh
} > "$beside" 2>&1 || beside_rc=$?
tests_rc=0
wait "$tests_pid" || tests_rc=$?
echo "== beside the tests: cargo doc, tools/python-test.sh, tools/template-check.sh"
cat "$beside"
if [ "$tests_rc" != 0 ] || [ "$beside_rc" != 0 ]; then
  echo "error: cargo test exited with $tests_rc; the docs, Python and template steps with $beside_rc (their output is above)" >&2
  exit 1
fi
