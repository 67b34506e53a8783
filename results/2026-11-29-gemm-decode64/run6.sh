#!/usr/bin/env bash
# Run 5 again after the benchmarks also share their set-up (matmul_bench.py's
# start: the checks, the output folder, TF32 off, device, date, Smi; one shape each, one
# round), on the wheel of run 3.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
S="$OUT/summary.txt"
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" .device-ab/kernel_ops-*.whl > /dev/null 2>&1; echo "pip exit $?" >> "$S"
cd python/bench
for cmd in "matmul_bench.py $OUT/m --shape 64x4096x4096 --dtype bf16" "fp8_bench.py $OUT/f --shape 64x4096x4096" "grouped_bench.py $OUT/g --problem 8x4096x7168x2048" "grouped_bench.py $OUT/g --iters 0"; do
  echo "## $cmd" >> "$S"
  # The common options first: a case's own (--iters 0: the refusal) win.
  PYTHONPATH="$D/py" timeout 120 python3 ${cmd%% *} --rounds 1 --iters 10 --warmup-ms 100 ${cmd#* } >> "$S" 2>&1; echo "exit $?" >> "$S"
done
cat "$S"
