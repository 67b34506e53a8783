#!/usr/bin/env bash
# Final H200 run of the session, from the repository root with
# .device-ab/vb3.tar.xz (the tree of the variants' forward on 128-key
# blocks, its producer on an elected lane): every kernel-ops GPU test
# (the variants' with their errors printed), attention_bench --variants,
# the wheel's torch tests and python/bench/variants_bench.py (ours against
# torch's compiled flex_attention, forward and forward+backward).
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/vb3.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## kernel-ops GPU tests" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 300 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"
grep -E "^test |^test result|panicked" "$L/gpu_tests.log" >> "$S"
(cd kernel-ops && timeout 100 "$D/gpu_tests" --ignored --nocapture --test-threads 1 attention_variants > "$L/gpu_variants.log" 2>&1); echo "exit $?" >> "$S"
grep -E "errors|error [0-9]|^test result" "$L/gpu_variants.log" >> "$S"
echo "## attention_bench --variants" >> "$S"; date -u +%T >> "$S"
timeout 200 "$D/attention_bench" --variants --iters 30 --warmup-ms 400 --out "$OUT/bench" > "$L/variants.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\| [0-9]" "$L/variants.log" >> "$S"
echo "## python torch tests" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 300 python3 -m pytest -q "$OLDPWD/python/tests/test_torch_cuda.py" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 2 "$L/pytest.log" >> "$S"
echo "## variants_bench.py" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 400 python3 "$OLDPWD/python/bench/variants_bench.py" --out "$OUT/py-bench" > "$L/py-bench.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror|^#' "$L/py-bench.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
