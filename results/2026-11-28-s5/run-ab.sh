#!/usr/bin/env bash
# The fifth session's second H200 run, from the repository root with
# .device-ab/s5b.tar.xz: the kernel-ops GPU tests and the torch norm tests
# at the merged main (norms at odd widths with 16-byte accesses: `Peel`;
# the norms' backward with SMEM running sums), then the norms' forward
# benchmark with the wheel before (old/) and after (new/), interleaved
# old, new, old, new, and the backward benchmark after.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/s5b.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary-ab.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
for w in old new; do python3 -m pip install --quiet --no-index --no-deps --target "$D/py-$w" "$D/$w"/kernel_ops-*.whl > "$L/pip-$w.log" 2>&1; echo "pip $w exit $?" >> "$S"; done
echo "## kernel-ops GPU tests" >> "$S"
(cd kernel-ops && timeout 120 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test result|FAILED|panicked" "$L/gpu_tests.log" >> "$S"
echo "## torch norm tests (new wheel)" >> "$S"
(cd /tmp && PYTHONPATH="$D/py-new" timeout 90 python3 -m pytest -q -k "norm" "$OLDPWD/python/tests/test_torch_cuda.py" > "$L/pytest_norms.log" 2>&1); echo "exit $?" >> "$S"; tail -n 3 "$L/pytest_norms.log" >> "$S"
W=768,1001,1024,4096,4099,5120,7001,8192,12291,16383,16384,32768,50257,65536
for r in 1 2; do for w in old new; do
  mkdir -p "$OUT/fwd-$w-$r"
  (cd /tmp && PYTHONPATH="$D/py-$w" timeout 150 python3 "$OLDPWD/python/bench/norms_bench.py" "$OUT/fwd-$w-$r" --warmup-ms 100 --iters 20 --dtype bf16,f32 --widths $W > "$L/fwd-$w-$r.log" 2>&1); echo "fwd $w $r exit $?" >> "$S"
done; done
echo "## norms_backward_bench (new wheel)" >> "$S"
(cd /tmp && PYTHONPATH="$D/py-new" timeout 100 python3 "$OLDPWD/python/bench/norms_backward_bench.py" "$OUT" --warmup-ms 100 --iters 20 --dtype bf16,f32 > "$L/norms_bwd.log" 2>&1); echo "exit $?" >> "$S"; cat "$L/norms_bwd.log" >> "$S"
cat "$S"
