#!/usr/bin/env bash
# stmatrix epilogues, part B: before/after A/B of the FP8 GEMMs and the grouped GEMMs (partial-tile wait).
set -u
cd "$(dirname "$0")"
L=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $L $W
for d in before after; do mkdir -p $d && tar xJf $d.tar.xz -C $d; done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 500 > $W/smi.csv &
SMI=$!
for v in before after; do
  timeout 200 $v/fp8_bench --rounds 3 --shape 4096x8192x4096 --shape 8192x8192x8192 --out $W/fp8_$v > $W/fp8_$v.log 2>&1; echo "fp8 $v rc $?"
  grep -E "^\| " $W/fp8_$v.log | cut -c1-160 | head -30
done
for v in before after; do
  timeout 150 $v/grouped_bench --rounds 3 --out $W/grouped_$v > $W/grouped_$v.log 2>&1; echo "grouped $v rc $?"
  grep -E "^\| " $W/grouped_$v.log | cut -c1-160 | head -20
done
kill $SMI
tar czf $L/part_b.tgz -C $W .
