#!/usr/bin/env bash
# The final H200 run of this session (main with decode, varlen, the norms
# for any width, and the Python serving ops): the kernel_ops wheel
# installed, the Python tests on torch CUDA tensors (decode in a CUDA graph,
# FP8 and paged decode, varlen autograd, the earlier ops), decode beside
# SDPA cuDNN/FA2 and a K/V copy in one process (decode_bench.py), the
# norms beside torch and a copy in one process (norms_bench.py), and the
# decode GPU tests and the Rust norms_bench (every width and fused op checked on the GPU). Summary in
# $OUT/summary.txt, CSVs and logs in $OUT/logs.tgz. Run from the
# repository root with .device-ab/final2.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/final2.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$D/logs"; mkdir -p "$L"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
python3 -m pip install --quiet --no-index --no-deps --force-reinstall "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## python tests (torch CUDA)" >> "$S"
(cd /tmp && timeout 200 python3 -m pytest -q -rs "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 12 "$L/pytest.log" >> "$S"
echo "## decode_bench.py" >> "$S"
(cd /tmp && timeout 200 python3 "$OLDPWD/python/bench/decode_bench.py" "$L/decode" --rounds 2 --iters 40 --warmup-ms 300 > "$L/decode_py.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/decode_py.log" >> "$S"
echo "## norms_bench.py" >> "$S"
(cd /tmp && timeout 150 python3 "$OLDPWD/python/bench/norms_bench.py" "$L/norms" --iters 40 --warmup-ms 200 > "$L/norms_py.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/norms_py.log" >> "$S"
echo "## decode GPU tests" >> "$S"
timeout 120 "$D/decode_tests" --ignored --test-threads 1 > "$L/decode_tests.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^test |^test result" "$L/decode_tests.log" >> "$S"
echo "## norms_bench (Rust: every width and op checked on the GPU, fused ones included; quick timing)" >> "$S"
timeout 120 "$D/norms_bench" --csv "$L/norms_rust.csv" > "$L/norms_rust.log" 2>&1; echo "exit $?" >> "$S"; grep -ciE "fail" "$L/norms_rust.log" | sed 's/^/lines with FAIL: /' >> "$S"; tail -n 4 "$L/norms_rust.log" >> "$S"
cp "$L/decode/decode_bench.csv" "$L/norms/norms_bench.csv" "$L/norms_rust.csv" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$D" logs
