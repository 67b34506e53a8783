#!/usr/bin/env bash
# The sixth session's H200 run, from the repository root with
# .device-ab/s6.tar.xz: the kernel-ops GPU tests at this session's tree,
# then the norms' forward benchmark with the wheel before (old/: the
# cluster layer norm with one exchange per pass) and after (new/: one
# exchange of each slice's mean and m2), interleaved old, new, old, new.
# The SM clock and power are sampled every 200 ms beside it (smi.csv).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/s6.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
for w in old new; do python3 -m pip install --quiet --no-index --no-deps --target "$D/py-$w" "$D/$w"/kernel_ops-*.whl > "$L/pip-$w.log" 2>&1; echo "pip $w exit $?" >> "$S"; done
echo "## kernel-ops GPU tests" >> "$S"
date -u +%T >> "$S"
(cd kernel-ops && timeout 150 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test result|FAILED|panicked" "$L/gpu_tests.log" >> "$S"
echo "## torch norm tests (new wheel)" >> "$S"
(cd /tmp && PYTHONPATH="$D/py-new" timeout 90 python3 -m pytest -q -k "norm" "$OLDPWD/python/tests/test_torch_cuda.py" > "$L/pytest_norms.log" 2>&1); echo "exit $?" >> "$S"; tail -n 3 "$L/pytest_norms.log" >> "$S"
W=4096,16384,16392,24576,32768,50257,65536
for r in 1 2; do for w in old new; do
  mkdir -p "$OUT/fwd-$w-$r"
  date -u +"%T fwd $w $r" >> "$S"
  (cd /tmp && PYTHONPATH="$D/py-$w" timeout 150 python3 "$OLDPWD/python/bench/norms_bench.py" "$OUT/fwd-$w-$r" --warmup-ms 100 --iters 20 --dtype bf16,f32 --widths $W > "$L/fwd-$w-$r.log" 2>&1); echo "fwd $w $r exit $?" >> "$S"
done; done
kill $SMI
cat "$S"
