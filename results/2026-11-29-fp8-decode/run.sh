#!/usr/bin/env bash
# This session's H200 run (FP8 decode on warp-level MMAs), from the
# repository root with .device-ab/fp8.tar.xz: the SIMT examples on the GPU
# (warp_mma: mma.sync m16n8k16 bf16/f16 against the CPU reference), the
# decode GPU tests, the Python decode tests on torch CUDA tensors, then
# decode_bench.py (ours bf16 and FP8 at every shape beside SDPA cuDNN /
# FA2 and a copy, one process). The SM clock and power are sampled every
# 200 ms beside it (smi.csv). Summary in $OUT/summary.txt.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/fp8.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## simt examples" >> "$S"
timeout 60 "$D/simt" > "$L/simt.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^(ok|FAIL)" "$L/simt.log" >> "$S"
echo "## decode GPU tests" >> "$S"
(cd kernel-ops && timeout 120 "$D/decode_tests" --ignored --test-threads 1 > "$L/decode_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test |^test result|panicked" "$L/decode_tests.log" >> "$S"
echo "## python decode tests" >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 120 python3 -m pytest -q -k "decode" "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 4 "$L/pytest.log" >> "$S"
echo "## decode_bench.py" >> "$S"
date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 300 python3 "$OLDPWD/python/bench/decode_bench.py" "$OUT/bench" --rounds 2 --iters 40 --warmup-ms 300 > "$L/decode_py.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/decode_py.log" >> "$S"
kill $SMI
cat "$S"
