#!/usr/bin/env bash
# The wheel with split-K and the shipped table on the H200: the torch tests
# (test_torch_cuda.py: matmul, norms, attention, CUDA-graph capture,
# torch.compile), then python/bench/matmul_bench.py (kernel_ops.matmul's
# built-in choice, i.e. the shipped table, and tune=True against
# torch.matmul, f16 and bf16, the suite and the decode rows).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/b5.tar.xz -C "$D"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$OUT/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## torch tests" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 240 python3 -m pytest -q "$OLDPWD/python/tests/test_torch_cuda.py" $PYTEST_ARGS > "$OUT/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 2 "$OUT/pytest.log" >> "$S"
echo "## matmul_bench" >> "$S"; date -u +%T >> "$S"
PYTHONPATH="$D/py" timeout 420 python3 python/bench/matmul_bench.py "$OUT/bench" --rounds 2 --iters 30 --warmup-ms 250 > "$OUT/matmul_bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\||FAIL" "$OUT/matmul_bench.log" >> "$S"
date -u +%T >> "$S"
cat "$S"
