#!/usr/bin/env bash
# On the GPU machine (torch installed, no Rust): install the kernel_ops wheel
# built here (`maturin build --release --manifest-path python/Cargo.toml
# --out DIR`), run the torch/CUDA tests and the same-process benchmark.
#   tools/python-gpu.sh WHEEL_DIR OUT_DIR
set -euo pipefail
wheels="$1"; out="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
python3 -m pip install --quiet --no-index --no-deps --force-reinstall "$wheels"/kernel_ops-*.whl
cd /tmp
python3 -m pytest -q -rs "$here/python/tests" 2>&1 | tail -15
python3 "$here/python/bench/torch_bench.py" "$out"
