#!/usr/bin/env bash
# The final H200 run of the third 2026-11-28 session: the kernel-ops GPU
# tests (the e5m2 x e4m3 FP8 GEMM and the attention variants among them),
# attention_bench --variants (the forward variants beside the plain
# kernel), fp8_bench at 4096x8192x4096 (e5m2 x e4m3 beside e4m3 and
# cuBLASLt), the kernel_ops wheel's Python tests on torch CUDA tensors
# (bf16 through ml_dtypes, kernels! changes, the attention variants), and
# the norms at the new widths when the bundle has norms_bench. Summary in
# $OUT/summary.txt, CSVs and logs in $OUT/logs.tgz. Run from the
# repository root with .device-ab/final3.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/final3.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$D/logs"; mkdir -p "$L"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
echo "## kernel-ops GPU tests" >> "$S"
(cd kernel-ops && timeout 240 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test |^test result" "$L/gpu_tests.log" >> "$S"; grep -E "relative Frobenius|O error" "$L/gpu_tests.log" | grep -iE "e5m2|variant" >> "$S"
echo "## attention_bench --variants" >> "$S"
timeout 150 "$D/attention_bench" --variants --warmup-ms 300 --iters 30 --out "$L/variants" > "$L/variants.log" 2>&1; echo "exit $?" >> "$S"; grep -E '^\|' "$L/variants.log" >> "$S"
echo "## fp8_bench" >> "$S"
timeout 150 "$D/fp8_bench" --shape 4096x8192x4096 --shape 8192x8192x1024 --rounds 2 --out "$L/fp8" > "$L/fp8.log" 2>&1; echo "exit $?" >> "$S"; grep -E '^\| [0-9]' "$L/fp8.log" >> "$S"
python3 -m pip install --quiet --no-index --no-deps --force-reinstall "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## python tests (torch CUDA)" >> "$S"
(cd /tmp && timeout 200 python3 -m pytest -q -rs "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 12 "$L/pytest.log" >> "$S"
if [ -x "$D/norms_bench" ]; then
    echo "## norms_bench" >> "$S"
    timeout 150 "$D/norms_bench" $NORMS_ARGS > "$L/norms.log" 2>&1; echo "exit $?" >> "$S"; grep -ciE "fail" "$L/norms.log" | sed 's/^/lines with FAIL: /' >> "$S"; tail -n 30 "$L/norms.log" >> "$S"
fi
cp "$L"/variants/*.csv "$L"/fp8/*.csv "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$D" logs
cat "$S"
