#!/usr/bin/env bash
# The main job: build the example kernels for sm_90a/sm_100a and run them on
# the GPU, each checked against a CPU reference. Without a GPU it says so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/setup.sh"
cd "$root"
exec cargo run --release -p examples --bin first_kernels -- "$@"
