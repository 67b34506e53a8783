#!/usr/bin/env bash
# Final H200 run: the wheel's torch tests of the FP8 GEMMs and the matmul
# (-k "fp8 or matmul"), python/bench/fp8_bench.py (against torch._scaled_mm),
# `bench` at the decode rows with the two-CTAs-per-SM split-K kernel among
# the instances, and `matmul_table` (f16, bf16) with it.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/b8.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## torch tests" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 60 python3 -m pytest -q "$OLDPWD/python/tests/test_torch_cuda.py" -k "fp8 or matmul" > "$OUT/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 3 "$OUT/pytest.log" >> "$S"
echo "## fp8_bench" >> "$S"; date -u +%T >> "$S"
PYTHONPATH="$D/py" timeout 60 python3 python/bench/fp8_bench.py "$OUT/fp8" --rounds 1 --iters 30 --warmup-ms 200 > "$OUT/fp8_bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\||FAIL|note" "$OUT/fp8_bench.log" >> "$S"
SH=""
for m in 64 128 256; do for nk in 4096x4096 14336x4096 4096x14336 8192x8192; do SH="$SH --shape ${m}x${nk}"; done; done
echo "## bench" >> "$S"; date -u +%T >> "$S"
export KERNEL_OPS_CACHE="$OUT/matmul.tsv"
timeout 90 "$D/bench" $SH --only cuBLAS --only kernel_ops --rounds 2 --iters 30 --warmup-ms 150 --out "$OUT/bench" > "$L/bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "FAIL|error" "$L/bench.log" >> "$S"
for dt in f16 bf16; do
  echo "## matmul_table $dt" >> "$S"; date -u +%T >> "$S"
  timeout 45 "$D/matmul_table" --dtype $dt --out "$OUT/matmul_table.tsv" > "$L/table_$dt.log" 2>&1; echo "exit $?" >> "$S"
  tail -1 "$L/table_$dt.log" >> "$S"
  cp "$L/table_$dt.log" "$OUT/"
done
date -u +%T >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
