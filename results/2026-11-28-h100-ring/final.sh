#!/usr/bin/env bash
# The final A/B of issue 37 on one machine start: main before the ring
# (660a16d, "base") and the merged work ("final": the ring with per-slot
# consumer parity, element-generic kernels, vector memory, the build
# diagnostics), alternated in three rounds (base first in odd rounds);
# then, on the final build, the kernel-ops GPU tests, the occupancy GPU
# test, the SIMT examples (the split-KV decode example among them) and the
# Hopper examples (emit_pipeline). Summary lines in $OUT/summary.txt, every
# log in $OUT/logs.tgz. Run from the repository root with
# .device-ab/final.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/final.tar.xz -C "$D"
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
    timeout 150 "$D/$v/attention_bench" --only 16384,128 --out "$L/a-$v-$r" > "$L/attn-$v-$r.log" 2>&1
    grep -E '^\| S16384' "$L/attn-$v-$r.log" | sed 's/^/fwd /' >> "$S"
    timeout 150 "$D/$v/attention_bench" --backward --only 16384,128 --out "$L/ab-$v-$r" > "$L/attnbwd-$v-$r.log" 2>&1
    grep -E '^\| S16384' "$L/attnbwd-$v-$r.log" | sed 's/^/bwd /' >> "$S"
    timeout 150 "$D/$v/grouped_bench" --quick --out "$L/g-$v-$r" > "$L/grouped-$v-$r.log" 2>&1
    grep -E '^\|' "$L/grouped-$v-$r.log" | grep -v -- '---' | tail -n 4 | sed 's/^/grouped /' >> "$S"
}
for r in 1 2 3; do
    if [ $((r % 2)) = 1 ]; then one base $r; one final $r; else one final $r; one base $r; fi
done
echo "## final GPU tests" >> "$S"
timeout 200 "$D/final/ops_tests" --ignored --test-threads 1 > "$L/ops_tests.log" 2>&1; echo "ops_tests exit $?" >> "$S"; grep -E "^test result" "$L/ops_tests.log" >> "$S"
timeout 120 "$D/final/gpu_tests" --ignored occupancy --test-threads 1 > "$L/gpu_tests.log" 2>&1; echo "gpu_tests (occupancy) exit $?" >> "$S"; grep -E "^test |^test result" "$L/gpu_tests.log" >> "$S"
timeout 120 "$D/final/simt" > "$L/simt.log" 2>&1; echo "simt exit $?" >> "$S"; grep -E "^(ok|FAIL|error)" "$L/simt.log" >> "$S"
timeout 120 "$D/final/hopper" > "$L/hopper.log" 2>&1; echo "hopper exit $?" >> "$S"; grep -cE "^ok" "$L/hopper.log" >> "$S"
(cd "$L" && tar czf "$OUT/logs.tgz" *.log)
wc -l "$S"
