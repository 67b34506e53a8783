#!/usr/bin/env bash
# The H200 runs of the fifth 2026-11-28 session, from the repository root
# with .device-ab/s5.tar.xz (release binaries and the kernel_ops wheel):
#   run.sh tests   the kernel-ops GPU tests (the norms' backward against the
#                  f64 reference among them), the Python tests (torch
#                  autograd of the norms and fused norms, CUDA-graph replay,
#                  JAX inside jax.jit), python/bench/norms_backward_bench.py;
#                  then starts the soak (issue 42 item 5) in its own
#                  process session, so that it outlives this call:
#                  `soak --seconds 610 --seed 20261129 --check-every 4`
#                  with nvidia-smi every 30 s (in /tmp/s5soak).
#   run.sh soak    waits for that soak to end (at most 590 s), then copies
#                  its log and the clock/power samples to $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
MODE=$1
S="$OUT/summary-$MODE.txt"
K=/tmp/s5soak
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
if [ "$MODE" = tests ]; then
    D=$(mktemp -d)
    tar xJf .device-ab/s5.tar.xz -C "$D"
    export KERNEL_OPS_CACHE="$D/none.tsv"
    L="$OUT/logs"; mkdir -p "$L"
    echo "## kernel-ops GPU tests" >> "$S"
    (cd kernel-ops && timeout 150 "$D/gpu_tests" --ignored --test-threads 1 > "$L/gpu_tests.log" 2>&1); echo "exit $?" >> "$S"; grep -E "^test |^test result|FAILED|panicked" "$L/gpu_tests.log" >> "$S"
    python3 -m pip install --quiet --no-index --no-deps --force-reinstall "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
    echo "## python tests (torch and JAX on CUDA)" >> "$S"
    (cd /tmp && timeout 170 python3 -m pytest -q -rs "$OLDPWD/python/tests" > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; grep -E "passed|failed|FAILED|Error|SKIP" "$L/pytest.log" | tail -n 30 >> "$S"
    echo "## python/bench/norms_backward_bench.py" >> "$S"
    (cd /tmp && timeout 100 python3 "$OLDPWD/python/bench/norms_backward_bench.py" "$OUT" --warmup-ms 100 --iters 20 --dtype bf16,f32 > "$L/norms_bwd.log" 2>&1); echo "exit $?" >> "$S"; cat "$L/norms_bwd.log" >> "$S"
    echo "## soak started $(date -u +%T)" >> "$S"
    rm -rf "$K"; mkdir -p "$K"; cp "$D/soak" "$K/"
    setsid bash -c "nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,memory.used --format=csv -l 30 > $K/smi.csv 2>&1 & S=\$!; $K/soak --seconds 610 --seed 20261129 --check-every 4 > $K/soak.log 2>&1; echo \$? > $K/exit; kill \$S" < /dev/null > /dev/null 2>&1 &
    sleep 5; head -5 "$K/soak.log" >> "$S"
else
    for i in $(seq 590); do [ -f "$K/exit" ] && break; sleep 1; done
    echo "soak exit $(cat $K/exit 2>/dev/null || echo 'still running')" >> "$S"
    grep -E 'FAIL' "$K/soak.log" | head -20 >> "$S"; tail -n 20 "$K/soak.log" >> "$S"
    cat "$K/smi.csv" >> "$S"
    cp "$K/soak.log" "$K/smi.csv" "$OUT/"
fi
cat "$S"
