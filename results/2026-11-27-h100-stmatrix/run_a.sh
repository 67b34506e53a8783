#!/usr/bin/env bash
# stmatrix epilogues: GPU tests, the SIMT example, then before/after A/B of the GEMM bench and SwiGLU.
set -u
cd "$(dirname "$0")"
L=${OUT:-/tmp/out}; mkdir -p $L
for d in before after; do mkdir -p $d && tar xJf $d.tar.xz -C $d; done
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 500 > $L/smi.csv &
SMI=$!
timeout 60 after/simt > $L/simt.log 2>&1; echo "simt rc $?"; grep -E "smem_matrices|FAIL" $L/simt.log
timeout 240 after/ops_tests --ignored --test-threads 1 > $L/ops_tests.log 2>&1; echo "ops_tests rc $?"; grep "test result" $L/ops_tests.log
for v in before after; do
  timeout 150 $v/bench --rounds 3 --only cuBLAS --only kernel_ops --shape 4096x4096x8192 --shape 8192x8192x4096 --out $L/bench_$v > $L/bench_$v.log 2>&1; echo "bench $v rc $?"
  grep -E "^\| (kernel_ops|cuBLAS)" $L/bench_$v.log | cut -c1-150
done
for v in before after after before; do
  timeout 60 $v/swiglu_bench --rounds 3 --out $L/swiglu_$v > $L/swiglu_$v.$RANDOM.log 2>&1; echo "swiglu $v rc $?"
done
grep -h "swiglu takes" $L/swiglu_*.log
kill $SMI
