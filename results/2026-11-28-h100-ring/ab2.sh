#!/usr/bin/env bash
# Second A/B on the same machine start as run.sh: four rounds, base and new
# alternated (base first in odd rounds); only the summary lines of each
# benchmark are kept, in $OUT/summary.txt (the first run's logs did not all
# come back). Run from the repository root with .device-ab/ab.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/ab.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/no-tuning.tsv"
S="$OUT/summary.txt"
one() { # version round
    local v=$1 r=$2
    echo "## $v round $r" >> "$S"
    timeout 150 "$D/$v/bench" --shape 4096x8192x4096 --only kernel_ops --only cuBLAS --rounds 3 --out "$D/b-$v-$r" 2>&1 | grep -E '^\| (kernel_ops|cuBLAS)' >> "$S"
    timeout 150 "$D/$v/fp8_bench" --shape 4096x8192x4096 --rounds 3 --out "$D/f-$v-$r" 2>&1 | grep -E '^\| 4096x8192x4096' >> "$S"
    timeout 150 "$D/$v/attention_bench" --backward --only 16384,128 --out "$D/a-$v-$r" 2>&1 | grep -E '^\| S16384' >> "$S"
}
for r in 1 2 3 4; do
    if [ $((r % 2)) = 1 ]; then one base $r; one new $r; else one new $r; one base $r; fi
done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv >> "$S"
wc -l "$S"
