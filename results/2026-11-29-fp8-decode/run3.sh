#!/usr/bin/env bash
# Third H200 run, from the repository root with .device-ab/fp8c.tar.xz:
# the FP8 decode kernel before (old/: df5afff, bf16 or f16 MMAs on bytes
# converted by shift, mask and multiply, K and V read per step) and after
# (new/: f16 MMAs with Q scaled per row into f16's range, one cvt per e4m3
# pair, K read one step ahead, Q's fragments in shared memory, O's rescale
# skipped while no row's maximum moves) in the Rust decode_bench
# (8x8x8192 rows), interleaved old, new, old, new; an ncu profile of the
# new FP8 kernel; then the new build's decode GPU tests, Python decode
# tests and decode_bench.py (every shape, FP8 at each). smi.csv: SM clock
# and power every 200 ms.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/fp8c.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
for r in 1 2; do for w in old new; do
  mkdir -p "$OUT/ab-$w-$r"
  date -u +"%T ab $w $r" >> "$S"
  timeout 120 "$D/decode_bench_$w" --only 8x8x8192 --iters 50 --warmup-ms 300 --out "$OUT/ab-$w-$r" > "$L/ab-$w-$r.log" 2>&1; echo "exit $?" >> "$S"
  grep -E "fp8|8x8x8192 " "$L/ab-$w-$r.log" | head -6 >> "$S"
done; done
echo "## ncu (new FP8 kernel)" >> "$S"
timeout 180 /usr/local/cuda/bin/ncu --set full --import-source no -k regex:decode_split_fp8 --launch-skip 2 -c 1 -o "$OUT/fp8new" "$D/decode_bench_new" --only "8x8x8192 fp8" --iters 3 --warmup-ms 0 > "$L/ncu.log" 2>&1; echo "exit $?" >> "$S"; tail -3 "$L/ncu.log" >> "$S"
/usr/local/cuda/bin/ncu -i "$OUT/fp8new.ncu-rep" --page details --csv > "$OUT/ncu-details.csv" 2>> "$L/ncu.log"
/usr/local/cuda/bin/ncu -i "$OUT/fp8new.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu-source.csv" 2>> "$L/ncu.log"
echo "## decode GPU tests" >> "$S"
(cd kernel-ops && timeout 120 "$D/decode_tests" --ignored --test-threads 1 > "$L/decode_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test result|panicked" "$L/decode_tests.log" >> "$S"
echo "## python decode tests" >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 120 python3 -m pytest -q -k "decode" "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 2 "$L/pytest.log" >> "$S"
echo "## decode_bench.py" >> "$S"
date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 300 python3 "$OLDPWD/python/bench/decode_bench.py" "$OUT/bench" --rounds 2 --iters 40 --warmup-ms 300 > "$L/decode_py.log" 2>&1); echo "exit $?" >> "$S"; grep -E '^\||FAIL|rror' "$L/decode_py.log" >> "$S"
kill $SMI
cat "$S"
