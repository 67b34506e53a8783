#!/usr/bin/env bash
# The f16 matmul at the seed shape: main before the ring (base), the ring
# rebuild (new), and three variants of the persistent kernel's ring use
# (A: per-slot phase bits for the producer and consumer; B: the release
# predicated on the tile's step, k > 0, as the hand ring was; C: both),
# three rounds in rotated order; the summary lines in $OUT/variants.txt.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/var.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
S="$OUT/variants.txt"
order=(base new A B C)
for r in 1 2 3; do
    for i in 0 1 2 3 4; do
        v=${order[$(( (i + r) % 5 ))]}
        echo "## $v round $r" >> "$S"
        timeout 120 "$D/$v/bench" --shape 4096x8192x4096 --only kernel_ops --only cuBLAS --rounds 3 --out "$D/o-$v-$r" 2>&1 | grep -E '^\| (kernel_ops|cuBLAS)' >> "$S"
    done
done
