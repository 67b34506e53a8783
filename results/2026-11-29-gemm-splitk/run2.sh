#!/usr/bin/env bash
# Split-K on the H200: the kernel-ops GPU tests (every matmul instance at
# ragged shapes, split-K's bits repeated at decode rows), the GEMM benchmark
# at the decode rows and two suite shapes (cuBLAS, cuBLASLt best of its
# heuristics, kernel_ops::matmul tuned over its instances, split-K among
# them), then `matmul_table` (the tuner over the shape-class grid, f16).
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
echo "## GPU tests" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 200 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"
grep -E "^test |^test result|panicked" "$L/gpu_tests.log" >> "$S"
SH=""
for m in 64 128 256; do for nk in 4096x4096 14336x4096 4096x14336 8192x8192; do SH="$SH --shape ${m}x${nk}"; done; done
SH="$SH --shape 1024x8192x8192 --shape 8192x8192x1024 --shape 16896x512x640"
echo "## bench" >> "$S"; date -u +%T >> "$S"
export KERNEL_OPS_CACHE="$OUT/matmul.tsv"
timeout 300 "$D/bench" $SH --only cuBLAS --only kernel_ops --rounds 2 --iters 30 --warmup-ms 200 --out "$OUT/bench" > "$L/bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "FAIL|error" "$L/bench.log" >> "$S"
echo "## matmul_table f16" >> "$S"; date -u +%T >> "$S"
timeout 280 "$D/matmul_table" --out "$OUT/matmul_table.tsv" > "$L/table.log" 2>&1; echo "exit $?" >> "$S"
tail -3 "$L/table.log" >> "$S"; date -u +%T >> "$S"
cp "$L/table.log" "$OUT/table.log"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
