#!/usr/bin/env bash
# The main job: build the example kernels for sm_90a/sm_100a and run them:
# the first examples, the SIMT examples, the register-array examples and the
# bias+ReLU matmul, the norm kernels of kernel-ops, the Blackwell matmuls, and
# the attention ladder, the Hopper matmuls, each checked against a CPU reference (and timed against
# cuBLAS on a GPU). Without a GPU each program says so and runs on the CPU
# emulator instead (small sizes, correctness only); the Blackwell matmuls run
# on the emulator unless the GPU is an sm_100 one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/setup.sh"
cd "$root"
cargo build --release -p examples --bin first_kernels --bin simt --bin fused --bin blackwell --bin attention_ladder --bin hopper
cargo build --release -p kernel-ops --bin norms_bench
target/release/first_kernels
target/release/simt
target/release/fused --quick
target/release/norms_bench --quick --csv target/norms_bench.csv
target/release/blackwell
target/release/attention_ladder --out target/attention-ladder
exec target/release/hopper "$@"
