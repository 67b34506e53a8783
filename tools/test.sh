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
exec cargo test --workspace "$@"
