#!/usr/bin/env bash
# First GPU look at issue 38's decode and varlen attention (branches dec and
# varlen merged on 3881eaf+mma_steps, snapshot 8b60add): their ignored GPU
# tests, decode_bench (ours, Rust), the torch baselines of decode
# (python decode_bench.py without our wheel: SDPA cuDNN, FA2, copy), the
# varlen bench, and the dense attention forward/backward of "new" against
# "prev" (3881eaf) for non-regression. Summary in $OUT/summary.txt, logs in
# $OUT/logs.tgz. Run from the repository root with .device-ab/r2.tar.xz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/r2.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$D/logs"; mkdir -p "$L"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
echo "## decode GPU tests" >> "$S"
timeout 240 "$D/new/decode_tests" --ignored --test-threads 1 > "$L/decode_tests.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^test |^test result" "$L/decode_tests.log" >> "$S"
echo "## decode_bench (ours)" >> "$S"
timeout 240 "$D/new/decode_bench" --out "$L/decode" > "$L/decode_bench.log" 2>&1; echo "exit $?" >> "$S"; grep -E '^\|' "$L/decode_bench.log" >> "$S"
echo "## torch baselines (decode_bench.py, no wheel)" >> "$S"
timeout 300 python3 "$D/decode_bench.py" "$L/py" --rounds 1 --iters 40 --warmup-ms 300 > "$L/decode_py.log" 2>&1; echo "exit $?" >> "$S"; grep -E '^\||FAIL|Error' "$L/decode_py.log" >> "$S"
echo "## varlen GPU tests" >> "$S"
timeout 240 "$D/new/varlen_tests" --ignored --test-threads 1 > "$L/varlen_tests.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^test |^test result" "$L/varlen_tests.log" >> "$S"
echo "## attention_bench --varlen" >> "$S"
timeout 240 "$D/new/attention_bench" --varlen --out "$L/varlen" > "$L/varlen_bench.log" 2>&1; echo "exit $?" >> "$S"; grep -E '^\|' "$L/varlen_bench.log" >> "$S"
for v in prev new; do
  echo "## dense attention $v" >> "$S"
  timeout 150 "$D/$v/attention_bench" --only 16384,128 --out "$L/a-$v" > "$L/attn-$v.log" 2>&1
  grep -E '^\| S16384' "$L/attn-$v.log" | sed 's/^/fwd /' >> "$S"
  timeout 150 "$D/$v/attention_bench" --backward --only 16384,128 --out "$L/ab-$v" > "$L/attnbwd-$v.log" 2>&1
  grep -E '^\| S16384' "$L/attnbwd-$v.log" | sed 's/^/bwd /' >> "$S"
done
tar czf "$OUT/logs.tgz" -C "$D" logs
