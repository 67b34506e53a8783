#!/usr/bin/env bash
# First H200 run of the variants' backward, from the repository root with
# .device-ab/vb.tar.xz: the attention GPU tests (the variants forward and
# backward against the f64 references at ragged shapes, the plain
# backward's), then attention_bench --variants (forward and backward of
# each variant beside the plain kernels, S 16384, 32 heads, D 64, f16).
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/vb.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
echo "## attention GPU tests" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 300 "$D/gpu_tests" --ignored --test-threads 1 attention > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"
grep -E "^test |^test result|panicked|errors" "$L/gpu_tests.log" >> "$S"
echo "## attention_bench --variants" >> "$S"; date -u +%T >> "$S"
timeout 240 "$D/attention_bench" --variants --iters 30 --warmup-ms 400 --out "$OUT/bench" > "$L/variants.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\|" "$L/variants.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
