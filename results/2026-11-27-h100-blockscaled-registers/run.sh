#!/usr/bin/env bash
# Block-scaled FP8 registers: 240/240/24 (main) against 232/232/40, alternating (A B A B), all fp8_bench shapes.
cd "$(dirname "$0")"
for r in 1 2; do for v in 240_24 232_40; do
  timeout 200 ./fp8_bench_$v --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  echo "$v run $r"; grep "^|" $OUT/${v}_$r.log | grep blockscaled | cut -d'|' -f2,5,6,7
done; done
