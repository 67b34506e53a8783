#!/usr/bin/env bash
# Grouped block-scaled FP8 registers: 240/240/24 against 232/232/40, alternating (A B A B).
cd "$(dirname "$0")"
for r in 1 2; do for v in 240_24 232_40; do
  timeout 200 ./g_$v --out $OUT/${v}_$r > $OUT/${v}_$r.log 2>&1
  echo "$v run $r"; grep "^|" $OUT/${v}_$r.log | cut -d'|' -f2-7,10 | tr -d ' ' | tr '\n' ' '; echo
done; done
