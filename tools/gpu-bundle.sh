#!/usr/bin/env bash
# Builds, here, what a GPU machine without Rust needs into .device/ (ignored
# by git): the release first_kernels binary, the GPU test binary, the sm_90a
# cubin. Then, with the device tool: carry `.device`, run `bash tools/gpu-run.sh`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools/setup.sh
cargo build --release -p examples --bin first_kernels
test_bin=$(cargo test --release -p kernel-tests --test gpu --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu":
        print(m["executable"])')
rm -rf .device && mkdir -p .device
cp target/release/first_kernels .device/
cp "$test_bin" .device/gpu_tests
cp target/release/build/kernels-*/out/kernels_sm_90a.cubin .device/ 2>/dev/null || true
ls -la .device
