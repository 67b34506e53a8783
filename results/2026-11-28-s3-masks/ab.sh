#!/usr/bin/env bash
# A/B of the third 2026-11-28 session's loop changes on one machine start:
# "prev" = main at b1a09f1 and "new" = 32-bit mask positions in the
# attention forward/backward softmax and `Consumer::peek` in the grouped
# block-scaled FP8 GEMM, alternated in two rounds (prev first in round 1):
# attention forward and backward at S 16384, D 64 and 128 (causal and
# not), the grouped block-scaled FP8 GEMM (--quick) and the block-scaled
# FP8 GEMM at 4096x8192x4096. Summary in $OUT/summary.txt, logs in
# $OUT/logs.tgz. Run from the repository root with .device-ab/s3.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/s3.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$D/logs"; mkdir -p "$L"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
one() { # version round
    local v=$1 r=$2
    echo "## $v round $r" >> "$S"
    for sd in 16384,64 16384,128; do
        timeout 120 "$D/$v/attention_bench" --only $sd --warmup-ms 300 --out "$L/a-$v-$r-$sd" > "$L/attn-$v-$r-$sd.log" 2>&1
        grep -E '^\| S' "$L/attn-$v-$r-$sd.log" | sed 's/^/fwd /' >> "$S"
        timeout 120 "$D/$v/attention_bench" --backward --only $sd --warmup-ms 300 --out "$L/b-$v-$r-$sd" > "$L/bwd-$v-$r-$sd.log" 2>&1
        grep -E '^\| S' "$L/bwd-$v-$r-$sd.log" | sed 's/^/bwd /' >> "$S"
    done
    timeout 150 "$D/$v/grouped_fp8_bench" --quick --rounds 2 --out "$L/g-$v-$r" > "$L/gfp8-$v-$r.log" 2>&1
    grep -E '^\|' "$L/gfp8-$v-$r.log" | grep -v -- '---' | tail -n 4 | sed 's/^/gfp8 /' >> "$S"
    timeout 150 "$D/$v/fp8_bench" --shape 4096x8192x4096 --rounds 2 --out "$L/f-$v-$r" > "$L/fp8-$v-$r.log" 2>&1
    grep -E '^\| 4096x8192x4096' "$L/fp8-$v-$r.log" | sed 's/^/fp8 /' >> "$S"
}
for r in 1 2; do
    if [ $((r % 2)) = 1 ]; then one prev $r; one new $r; else one new $r; one prev $r; fi
done
tar czf "$OUT/logs.tgz" -C "$D" logs
cat "$S"
