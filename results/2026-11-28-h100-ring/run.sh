#!/usr/bin/env bash
# The ring rebuild's A/B on one GPU machine start: the binaries of main
# before the ring type (660a16d, "base") and after (the ring rebuild, "new"),
# alternated in three rounds (base first in odd rounds, new first in even
# ones), each contender warmed to the steady clock by the benchmarks
# themselves; then the kernel-ops GPU tests and the Hopper examples (built on
# emit_pipeline) on the new build. Run from the repository root with the
# bundle in .device-ab/ab.tar.xz; logs go to $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/ab.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/no-tuning.tsv"   # every run uses the default instances
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
run_one() { # version round
    local v=$1 r=$2
    timeout 150 "$D/$v/bench" --shape 4096x8192x4096 --only kernel_ops --only cuBLAS --rounds 3 --out "$OUT/bench-$v-$r" > "$OUT/bench-$v-$r.log" 2>&1; echo "exit $?" >> "$OUT/bench-$v-$r.log"
    timeout 150 "$D/$v/fp8_bench" --shape 4096x8192x4096 --rounds 3 --out "$OUT/fp8-$v-$r" > "$OUT/fp8-$v-$r.log" 2>&1; echo "exit $?" >> "$OUT/fp8-$v-$r.log"
    timeout 150 "$D/$v/attention_bench" --only 16384,128 --out "$OUT/attn-$v-$r" > "$OUT/attn-$v-$r.log" 2>&1; echo "exit $?" >> "$OUT/attn-$v-$r.log"
    timeout 150 "$D/$v/attention_bench" --backward --only 16384,128 --out "$OUT/attnbwd-$v-$r" > "$OUT/attnbwd-$v-$r.log" 2>&1; echo "exit $?" >> "$OUT/attnbwd-$v-$r.log"
}
for r in 1 2 3; do
    if [ $((r % 2)) = 1 ]; then run_one base $r; run_one new $r; else run_one new $r; run_one base $r; fi
done
timeout 200 "$D/new/ops_tests" --ignored --test-threads 1 > "$OUT/ops_tests.log" 2>&1; echo "exit $?" >> "$OUT/ops_tests.log"
timeout 120 "$D/new/hopper" > "$OUT/hopper.log" 2>&1; echo "exit $?" >> "$OUT/hopper.log"
tail -n 3 "$OUT"/*.log
