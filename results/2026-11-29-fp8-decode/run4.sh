#!/usr/bin/env bash
# Fourth (final) H200 run, from the repository root with
# .device-ab/fp8d.tar.xz, this session's final kernels: the Rust
# decode_bench (every shape in bf16 and FP8, paged and multi-token rows,
# each checked against the f64 reference), then decode_bench.py in one
# process with torch, eagerly (one call between CUDA events: the host's
# per-call work shows where it outlasts a kernel) and with every
# contender captured in CUDA graphs (--graph). smi.csv: SM clock and
# power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/fp8d.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## decode_bench (Rust)" >> "$S"
timeout 200 "$D/decode_bench" --iters 50 --warmup-ms 300 --out "$OUT/rust" > "$L/rust.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^\|" "$L/rust.log" >> "$S"
for mode in eager graph; do
  echo "## decode_bench.py ($mode)" >> "$S"; date -u +%T >> "$S"
  flag=""; [ $mode = graph ] && flag="--graph"
  (cd /tmp && PYTHONPATH="$D/py" timeout 240 python3 "$OLDPWD/python/bench/decode_bench.py" "$OUT/py-$mode" --rounds 2 --iters 40 --warmup-ms 300 $flag > "$L/py-$mode.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/py-$mode.log" >> "$S"
done
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
