#!/usr/bin/env bash
# H200 run 3 (from the repository root, with .device-ab/wd3.tar.xz): the
# 16-bit decode: the plan's own choice (Auto: warp MMAs with pages of 16 or
# 32 keys or one split, else wgmma; the split count as the wgmma kernel's)
# beside the wgmma kernel.
# 1. the Rust decode_bench, every row on both kernels in turn
#    (--kernels wgmma,auto), each run checked against the reference first;
# 2. decode_bench.py in one process with torch (cuDNN through SDPA), every
#    contender captured in CUDA graphs (--graph); ours is the plan's own
#    choice .
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/wd3.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## decode_bench (Rust), wgmma then auto" >> "$S"; date -u +%T >> "$S"
timeout 220 "$D/decode_bench" --iters 50 --warmup-ms 300 --kernels wgmma,auto --out "$OUT/rust" > "$L/rust.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^\|" "$L/rust.log" >> "$S"
echo "## decode_bench.py (graph)" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 200 python3 "$OLDPWD/python/bench/decode_bench.py" "$OUT/py-graph" --rounds 2 --iters 40 --warmup-ms 300 --graph > "$L/py-graph.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/py-graph.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
