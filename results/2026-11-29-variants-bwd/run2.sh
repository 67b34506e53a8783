#!/usr/bin/env bash
# Second H200 run, from the repository root with .device-ab/vb2.tar.xz:
# 1. the variants' GPU test with its errors printed (--nocapture);
# 2. attention_bench --variants, the shipped variant forward (80-key
#    blocks, `base`) against the same build with 128-key blocks (`bn128`),
#    interleaved base, bn128, base, bn128;
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/vb2.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
echo "## variants GPU test" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 200 "$D/gpu_tests" --ignored --nocapture --test-threads 1 attention_variants > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"
grep -E "^test |^test result|panicked|errors" "$L/gpu_tests.log" >> "$S"
for r in 1 2; do for w in base bn128; do
  echo "## attention_bench --variants $w $r" >> "$S"; date -u +%T >> "$S"
  timeout 200 "$D/attention_bench_$w" --variants --iters 30 --warmup-ms 400 --out "$OUT/bench-$w-$r" > "$L/variants-$w-$r.log" 2>&1; echo "exit $?" >> "$S"
  grep -E "^\| [0-9]" "$L/variants-$w-$r.log" >> "$S"
done; done
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
