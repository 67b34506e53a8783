#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the binaries built
# here copied into $DIR (default .device-hopper): the benchmark over the
# whole shape suite (autotuning the kernel_ops matmul from scratch), then
# ncu profiles of the last two ladder steps at the seed's shape. Logs, the
# CSV and the markdown table go to $OUT.
#   bash tools/gpu-bench.sh [bench|profile|all]
set -uo pipefail
DIR=${DIR:-.device-hopper}
OUT=${OUT:-/tmp/out}
what=${1:-all}
mkdir -p "$OUT"
export KERNEL_OPS_CACHE="$OUT/matmul-tune.tsv"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
if [ "$what" = bench ] || [ "$what" = all ]; then
    "$DIR/bench" --retune --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
    echo "bench exit $?" >> "$OUT/bench.log"
fi
if [ "$what" = profile ] || [ "$what" = all ]; then
    ncu=/usr/local/cuda/bin/ncu
    while IFS='|' read -r inst entry; do
        [ -z "$inst" ] && continue
        tag=$(echo "$entry" | tr -c 'A-Za-z0-9_\n' '_')
        timeout 240 $ncu --clock-control none -k "regex:^${entry}\$" -c 1 \
            --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy \
            --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio \
            "$DIR/bench" --shape 4096x8192x4096 --only "$inst" --iters 1 --warmup 0 --out "$OUT/prof" > "$OUT/ncu-$tag.txt" 2>&1
        echo "ncu exit $?" >> "$OUT/ncu-$tag.txt"
    done <<< "${PROFILE:-step4 128x256 s4 w8|matmul_persistent_ws__f16_128_256_4_8
step5 128x256 s4 w8|matmul_persistent_ws_cluster__f16_128_256_128_4_8}"
fi
tail -n 40 "$OUT/bench.log" 2>/dev/null
grep -h -E 'Compiling entry|tensor_op_hmma|stalled|Throughput|Duration|ncu exit' "$OUT"/ncu-*.txt 2>/dev/null | head -60
