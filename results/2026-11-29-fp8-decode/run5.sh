#!/usr/bin/env bash
# Fifth H200 run, from the repository root with .device-ab/fp8e.tar.xz:
# the FP8 decode kernel of run 4 (prev/: a producer warp, 2 CTAs of 5
# warps per SM) against this one (new/: the producer in lane 0 of warp 0,
# 3 CTAs of 4 warps per SM, the O exchange through the ring's memory) in
# the Rust decode_bench (every row), interleaved prev, new, prev, new;
# then the new build's decode GPU tests, Python decode tests and
# decode_bench.py --graph. smi.csv: SM clock and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/fp8e.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
for r in 1 2; do for w in prev new; do
  date -u +"%T $w $r" >> "$S"
  timeout 150 "$D/decode_bench_$w" --iters 40 --warmup-ms 200 --out "$OUT/rust-$w-$r" > "$L/rust-$w-$r.log" 2>&1; echo "exit $?" >> "$S"
  grep -E "^\| [0-9]" "$L/rust-$w-$r.log" >> "$S"
done; done
echo "## decode GPU tests" >> "$S"
(cd kernel-ops && timeout 120 "$D/decode_tests" --ignored --test-threads 1 > "$L/decode_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test result|panicked" "$L/decode_tests.log" >> "$S"
echo "## python decode tests" >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 120 python3 -m pytest -q -k "decode" "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 2 "$L/pytest.log" >> "$S"
echo "## decode_bench.py --graph" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 240 python3 "$OLDPWD/python/bench/decode_bench.py" "$OUT/py-graph" --rounds 2 --iters 40 --warmup-ms 300 --graph > "$L/py-graph.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/py-graph.log" >> "$S"
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
