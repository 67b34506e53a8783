#!/usr/bin/env bash
# Builds, here, what a GPU machine without Rust needs into .device/ (ignored
# by git): the release example binaries (first_kernels, hopper, simt, fused, blackwell,
# bench, norms_bench, swiglu_bench, fp8_bench, attention_bench), the Python wheel (.device/wheels), the GPU test binaries and the sm_90a cubins. Then, with
# the device tool: carry `.device`, run `bash tools/gpu-run.sh`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools/setup.sh
bins=(first_kernels hopper simt fused bench blackwell attention_ladder)
cargo build --release -p examples $(printf -- '--bin %s ' "${bins[@]}")
cargo build --release -p kernel-ops --bin norms_bench --bin swiglu_bench --bin fp8_bench --bin attention_bench
# test_exe PACKAGE TARGET-ARGS... : path of the test executable cargo builds
test_exe() {
    cargo test --release "$@" --no-run --message-format=json 2>/dev/null | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' | tail -1
}
gpu_tests=$(test_exe -p kernel-tests --test gpu)
arrays_tests=$(test_exe -p kernel-tests --test arrays)
ops_tests=$(test_exe -p kernel-ops --test gpu)
runtime_tests=$(test_exe -p kernel-host --lib)
one_program_tests=$(test_exe -p kernel-tests --test one_program)
rm -rf .device && mkdir -p .device
for b in "${bins[@]}" norms_bench swiglu_bench fp8_bench attention_bench; do cp "target/release/$b" .device/; done
cp kernel-ops/bench/attention_baselines.py .device/
# The Python wheel (maturin from PyPI, in the venv tools/python-test.sh makes).
venv="$root/target/python-venv"
[ -x "$venv/bin/maturin" ] || { python3 -m venv "$venv"; "$venv/bin/python" -m pip install --quiet "maturin>=1.5,<2"; }
"$venv/bin/maturin" build --quiet --release --manifest-path python/Cargo.toml --out .device/wheels --interpreter "$venv/bin/python"
cp "$gpu_tests" .device/gpu_tests
cp "$arrays_tests" .device/arrays_tests
cp "$ops_tests" .device/ops_tests
cp "$runtime_tests" .device/runtime_tests
cp "$one_program_tests" .device/one_program_tests
cp kernel-ops/bench/norms_torch.py .device/ 2>/dev/null || true
out_dir=$(ls -td target/release/build/kernels-*/out | head -1)
cp "$out_dir"/kernels_sm_90a.cubin "$out_dir"/kernels_sm_90a.ptxas.txt .device/
ops_dir=$(ls -td target/release/build/kernel-ops-kernels-*/out | head -1)
cp "$ops_dir"/kernel_ops_kernels_sm_90a.cubin "$ops_dir"/kernel_ops_kernels_sm_90a.ptxas.txt .device/
ls -la .device
