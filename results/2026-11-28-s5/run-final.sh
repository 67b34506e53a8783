#!/usr/bin/env bash
# The fifth session's third H200 run (the tree as committed, with
# .device-ab/s5c.tar.xz): kernel-ops GPU tests, the torch norm tests, and
# the forward norms benchmark at the widths whose route changed after the
# A/B of run-ab.sh (f32 7001, 12291, 16383; 16-bit 16383) and the odd widths.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/s5c.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary-final.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D/new"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## kernel-ops GPU tests" >> "$S"
(cd kernel-ops && timeout 120 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test result|FAILED|panicked" "$L/gpu_tests.log" >> "$S"
echo "## torch norm tests" >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 90 python3 -m pytest -q -k "norm" "$OLDPWD/python/tests/test_torch_cuda.py" > "$L/pytest_norms.log" 2>&1); echo "exit $?" >> "$S"; tail -n 1 "$L/pytest_norms.log" >> "$S"
mkdir -p "$OUT/fwd"
(cd /tmp && PYTHONPATH="$D/py" timeout 150 python3 "$OLDPWD/python/bench/norms_bench.py" "$OUT/fwd" --warmup-ms 100 --iters 20 --dtype bf16,f32 --widths 1001,4099,7001,12291,16383,50257 > "$L/fwd.log" 2>&1); echo "fwd exit $?" >> "$S"
cat "$S"
