#!/usr/bin/env bash
# SwiGLU: the early-silu split (new) against the tree before it (old), alternating; then the kernel-ops GPU tests.
set -u
cd "$(dirname "$0")"
L=${OUT:-/tmp/out}; mkdir -p $L
for i in 1 2; do
  for v in old new; do
    mkdir -p $L/$v-$i
    timeout 120 ./swiglu_bench_$v --rounds 3 --warmup-ms 500 --out $L/$v-$i > $L/$v-$i/swiglu.log 2>&1; echo "$v-$i rc $?"
    grep -E "^\| swiglu|^\| 2 x" $L/$v-$i/swiglu.log | cut -d'|' -f2-6
  done
done
timeout 200 ./ops_tests --ignored --test-threads 1 > $L/ops_tests.log 2>&1; echo "ops_tests rc $?"; grep "test result" $L/ops_tests.log
