#!/usr/bin/env bash
# After the shared tile epilogue (WgAcc::store_tile): kernel-ops GPU tests and the seed-shape GEMM bench.
set -u
cd "$(dirname "$0")"
L=${OUT:-/tmp/out}; mkdir -p $L
timeout 200 ./ops_tests --ignored --test-threads 1 > $L/ops_tests.log 2>&1; echo "ops_tests rc $?"; grep "test result" $L/ops_tests.log
timeout 240 ./bench --rounds 3 --only cuBLAS --only kernel_ops --only "step4 128x256 s4 w8" --only "step5 128x256 s4 w8" --only "step6 128x256 s4 w8" --shape 4096x4096x8192 --shape 8192x8192x4096 --out $L > $L/bench.log 2>&1; echo "bench rc $?"
grep -E "^\|" $L/bench.log | cut -d'|' -f2-9
