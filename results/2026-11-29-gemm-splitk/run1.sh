#!/usr/bin/env bash
# Baseline of issue 40's decode rows on the H200 (before split-K): the GEMM
# benchmark (`bench`: cuBLAS, cuBLASLt best-of-heuristics, kernel_ops::matmul
# tuned over its instances) at M = 64, 128, 256 against four weight shapes,
# plus the suite's 8192 x 8192 x 1024 and 16896 x 640 x 512, f16.
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/b1.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
SH=""
for m in 64 128 256; do for nk in 4096x4096 14336x4096 4096x14336 8192x8192; do SH="$SH --shape ${m}x${nk}"; done; done
SH="$SH --shape 8192x8192x1024 --shape 16896x512x640"
echo "## bench decode rows" >> "$S"; date -u +%T >> "$S"
export KERNEL_OPS_CACHE="$OUT/matmul.tsv"
timeout 500 "$D/bench" $SH --only cuBLAS --only kernel_ops --rounds 2 --iters 30 --warmup-ms 200 --out "$OUT/bench" > "$L/bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\||FAIL" "$L/bench.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
