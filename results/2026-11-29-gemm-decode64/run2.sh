#!/usr/bin/env bash
# The split-K tiles in clusters of 2 with A multicast (splitk2 ...) beside the
# plain ones on the H200: the matmul GPU tests, the GEMM benchmark at the
# decode rows (tuned over the 16 instances), then `matmul_table` for f16 and bf16.
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/b2.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
echo "## GPU tests (matmul)" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 150 "$D/gpu_tests" --ignored --test-threads 1 matmul split_k ragged tuning refused > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"
grep -E "^test |^test result|panicked" "$L/gpu_tests.log" >> "$S"
SH=""
for m in 64 128 256; do for nk in 4096x4096 14336x4096 4096x14336 8192x8192; do SH="$SH --shape ${m}x${nk}"; done; done
echo "## bench" >> "$S"; date -u +%T >> "$S"
export KERNEL_OPS_CACHE="$OUT/matmul.tsv"
timeout 200 "$D/bench" $SH --only cuBLAS --only kernel_ops --rounds 2 --iters 30 --warmup-ms 200 --out "$OUT/bench" > "$L/bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "FAIL|error" "$L/bench.log" >> "$S"
for dt in f16 bf16; do
  echo "## matmul_table $dt" >> "$S"; date -u +%T >> "$S"
  timeout 120 "$D/matmul_table" --dtype $dt --out "$OUT/matmul_table.tsv" > "$L/table_$dt.log" 2>&1; echo "exit $?" >> "$S"
  tail -2 "$L/table_$dt.log" >> "$S"
done
date -u +%T >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
