#!/usr/bin/env bash
# Fourth H200 run, from the repository root with .device-ab/vb4.tar.xz:
# the variants' forward at head dim 128 (64-key blocks): the variants' GPU
# test (head dims 64 and 128, errors printed), then attention_bench
# --variants (head dim 64 with 32 heads, forward and backward; head dim
# 128 with 16 heads, forward only). smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/vb4.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
echo "## variants GPU test" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 200 "$D/gpu_tests" --ignored --nocapture --test-threads 1 attention > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"
grep -E "^test |^test result|panicked|error" "$L/gpu_tests.log" >> "$S"
echo "## attention_bench --variants" >> "$S"; date -u +%T >> "$S"
timeout 300 "$D/attention_bench" --variants --iters 30 --warmup-ms 400 --out "$OUT/bench" > "$L/variants.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\| [0-9]" "$L/variants.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
