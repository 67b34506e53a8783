#!/usr/bin/env bash
# The main job: build the example kernels for sm_90a/sm_100a and run them on
# the GPU: the first examples (each checked against a CPU reference), then
# the Blackwell matmuls (on the emulator unless the GPU is sm_100), then
# the Hopper matmuls checked and timed against cuBLAS. Without a GPU it says
# so and runs them on the CPU emulator (small sizes, correctness only).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/setup.sh"
cd "$root"
cargo build --release -p examples --bin first_kernels --bin hopper --bin blackwell
target/release/first_kernels
# Blackwell matmuls: on a compute-capability-10.0 GPU, else on the emulator.
target/release/blackwell
exec target/release/hopper "$@"
