#!/usr/bin/env bash
# H200 run 5 (from the repository root, with .device-ab/w8d.tar.xz): run
# 1's with the 8-warp kernel on three ring slots of 128 keys instead of two
# (its merge buffer now reuses K's slots after the last step), after run
# 4's ncu: its warps stalled most on the long scoreboard (the ring's
# waits), then on shared-memory loads.
# 1. the decode GPU tests (every kernel of a bf16 cache at the benchmark's
#    shapes, FP8, paged, 4 tokens), checked against the f64 reference;
# 2. the Rust decode_bench, every row on each kernel in turn
#    (--kernels warp8,wgmma,warp), each run checked against the reference;
# 3. decode_bench.py in one process with torch (cuDNN through SDPA), every
#    contender captured in CUDA graphs (--graph); ours is the plan's own
#    choice (Auto: the 8-warp kernel where the plan has several splits of a
#    contiguous cache, at D 128 and at most 16 rows per KV head).
# smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/w8d.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## decode GPU tests" >> "$S"; date -u +%T >> "$S"
(cd kernel-ops && timeout 150 "$D/decode_test" --ignored --test-threads 1 > "$L/tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test |test result" "$L/tests.log" >> "$S"
echo "## decode_bench (Rust), warp8, wgmma, warp" >> "$S"; date -u +%T >> "$S"
timeout 240 "$D/decode_bench" --iters 50 --warmup-ms 300 --kernels warp8,wgmma,warp --out "$OUT/rust" > "$L/rust.log" 2>&1; echo "exit $?" >> "$S"; grep -E "^\|" "$L/rust.log" >> "$S"
echo "## decode_bench.py (graph)" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 200 python3 "$OLDPWD/python/bench/decode_bench.py" "$OUT/py-graph" --rounds 2 --iters 40 --warmup-ms 300 --graph > "$L/py-graph.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/py-graph.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
