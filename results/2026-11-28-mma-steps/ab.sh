#!/usr/bin/env bash
# A/B of Consumer::mma_steps (this session's ring change) on one machine
# start: "prev" = main at 3881eaf (the ring with a release counter, the
# final build of the first 2026-11-28 session) and "mma" = ba6ca47
# (mma_steps, the pending count), alternated in two rounds (prev first in
# round 1): the f16 persistent matmul at 4096x8192x4096 beside cuBLAS, the
# FP8 GEMMs at the same shape beside cuBLASLt, the grouped GEMM (--quick).
# Summary lines in $OUT/summary.txt, logs in $OUT/logs.tgz. Run from the
# repository root with .device-ab/s2.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/s2.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$D/logs"; mkdir -p "$L"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
one() { # version round
    local v=$1 r=$2
    echo "## $v round $r" >> "$S"
    timeout 150 "$D/$v/bench" --shape 4096x8192x4096 --only kernel_ops --only cuBLAS --rounds 3 --out "$L/b-$v-$r" > "$L/bench-$v-$r.log" 2>&1
    grep -E '^\| (kernel_ops|cuBLAS)' "$L/bench-$v-$r.log" >> "$S"
    timeout 150 "$D/$v/fp8_bench" --shape 4096x8192x4096 --rounds 3 --out "$L/f-$v-$r" > "$L/fp8-$v-$r.log" 2>&1
    grep -E '^\| 4096x8192x4096' "$L/fp8-$v-$r.log" >> "$S"
    timeout 150 "$D/$v/grouped_bench" --quick --out "$L/g-$v-$r" > "$L/grouped-$v-$r.log" 2>&1
    grep -E '^\|' "$L/grouped-$v-$r.log" | grep -v -- '---' | tail -n 4 | sed 's/^/grouped /' >> "$S"
}
for r in 1 2; do
    if [ $((r % 2)) = 1 ]; then one prev $r; one mma $r; else one mma $r; one prev $r; fi
done
tar czf "$OUT/logs.tgz" -C "$D" logs
