#!/usr/bin/env bash
# FP8 GEMMs with even-waves grids (per-tensor also with a CTA on every SM) against cuBLASLt FP8.
set -u
cd "$(dirname "$0")"
L=${OUT:-/tmp/out}; mkdir -p $L
SECONDS=0
timeout 500 ./fp8_bench --rounds 3 --out $L > $L/fp8_bench.log 2>&1; echo "fp8_bench rc $? in ${SECONDS}s"
grep -E "^\|" $L/fp8_bench.log | cut -d'|' -f2-6 | head -50
