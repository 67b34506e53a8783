#!/usr/bin/env bash
# The grouped GEMM from Python against torch._grouped_mm and a loop of
# torch.matmul (python/bench/grouped_bench.py, new), bf16 then f16, on the
# wheel of run 3; the wheel's torch grouped tests first.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" .device-ab/kernel_ops-*.whl > "$OUT/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## torch tests" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 60 python3 -m pytest -q "$OLDPWD/python/tests/test_torch_cuda.py" -k grouped > "$OUT/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 1 "$OUT/pytest.log" >> "$S"
for dt in bf16 f16; do
  echo "## grouped_bench $dt" >> "$S"; date -u +%T >> "$S"
  PYTHONPATH="$D/py" timeout 200 python3 python/bench/grouped_bench.py "$OUT/$dt" --dtype $dt --rounds 2 --iters 30 --warmup-ms 250 > "$OUT/grouped_bench_$dt.log" 2>&1; echo "exit $?" >> "$S"
  grep -E "^\||FAIL|note|Error" "$OUT/grouped_bench_$dt.log" >> "$S"
done
date -u +%T >> "$S"
cat "$S"
