#!/usr/bin/env bash
# The H200 runs of the fourth 2026-11-28 session, from the repository root
# with .device-ab/s4.tar.xz (release binaries and the kernel_ops wheel):
#   run.sh soak SECONDS   the soak binary's mix for SECONDS (issue 42 item 5)
#   run.sh rest           the kernel-host GPU tests (the asynchronous fault
#                         naming its launch), the kernel-ops GPU tests, the
#                         Python tests (torch, and JAX inside jax.jit on
#                         CUDA), attention_bench --varlen, compute-sanitizer
#                         memcheck and racecheck on the soak's small mix,
#                         python/bench/norms_bench.py (kernel_ops beside
#                         torch and a copy) at every width and dtype.
# Summary in $OUT/summary-MODE.txt, logs in $OUT/logs-MODE.tgz.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/s4.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
L="$D/logs"; mkdir -p "$L"
MODE=$1
S="$OUT/summary-$MODE.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
if [ "$MODE" = soak ]; then
    # Clock and power every 30 s beside the soak.
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,memory.used --format=csv -l 30 > "$L/smi.csv" 2>&1 &
    SMI=$!
    "$D/soak" --seconds "$2" --seed 20261128 > "$L/soak.log" 2>&1; echo "soak exit $?" >> "$S"
    kill $SMI
    grep -E 'FAIL' "$L/soak.log" | head -20 >> "$S"; tail -n 16 "$L/soak.log" >> "$S"
    cat "$L/smi.csv" >> "$S"
else
    # Logs go to $OUT as each step ends (a run cut at its limit keeps them).
    L="$OUT/logs"; mkdir -p "$L"
    echo "## kernel-host GPU tests (trap, async fault)" >> "$S"
    (cd kernel-host && timeout 60 "$D/host_gpu_tests" --ignored --test-threads 1 gpu_trap > "$L/host_gpu.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test |test result|ASYNC_RESULT" "$L/host_gpu.log" | head >> "$S"
    echo "## kernel-ops GPU tests" >> "$S"
    (cd kernel-ops && timeout 120 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test result|FAILED|panicked" "$L/gpu_tests.log" >> "$S"
    python3 -m pip install --quiet --no-index --no-deps --force-reinstall "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
    echo "## python tests (torch and JAX on CUDA; JAX CPU)" >> "$S"
    (cd /tmp && timeout 150 python3 -m pytest -q -rs "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; grep -E "passed|failed|FAILED|Error" "$L/pytest.log" | tail -n 25 >> "$S"
    echo "## attention_bench --varlen (the offsets pre-pass)" >> "$S"
    timeout 90 "$D/attention_bench" --varlen --iters 20 --warmup-ms 200 --out "$L/varlen" > "$L/varlen.log" 2>&1; echo "exit $?" >> "$S"; grep -E '^\|' "$L/varlen.log" >> "$S"
    echo "## compute-sanitizer memcheck (soak --small)" >> "$S"
    timeout 75 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/soak" --small --seconds 25 --seed 7 > "$L/memcheck.log" 2>&1; echo "exit $?" >> "$S"; grep -E 'ERROR SUMMARY|FAIL|steps in' "$L/memcheck.log" | head -8 >> "$S"; tail -n 12 "$L/memcheck.log" >> "$S"
    echo "## compute-sanitizer racecheck (soak --small)" >> "$S"
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$D/soak" --small --seconds 15 --seed 8 > "$L/racecheck.log" 2>&1; echo "exit $?" >> "$S"; grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|FAIL|steps in' "$L/racecheck.log" | head -8 >> "$S"; tail -n 12 "$L/racecheck.log" >> "$S"
    echo "## python/bench/norms_bench.py (kernel_ops beside torch and a copy)" >> "$S"
    (cd /tmp && timeout 120 python3 "$OLDPWD/python/bench/norms_bench.py" "$OUT" --warmup-ms 100 --iters 20 > "$L/norms_py.log" 2>&1); echo "exit $?" >> "$S"; cat "$L/norms_py.log" >> "$S"
fi
[ "$MODE" = soak ] && tar czf "$OUT/logs-$MODE.tgz" -C "$D" logs
cat "$S"
