#!/usr/bin/env bash
# 4 x H200: the collective and reduce-scatter GPU tests (every group size
# up to 4), the all-gather matmul at Pallas's shape on 4 devices
# (1024 x 4096 x 4096 shards, 20 back-to-back calls per sample) and at
# 4096 x 8192 x 8192, then the reduce-scatter matmul on 4 devices.
set -u
export MULTI_GPU_DEVICES=4 SKIP_PEER_TESTS=1 MULTI_GPU_TIMEOUT=170
export MULTI_GPU_ARGS="--skip-exchange --shapes 1024x4096x4096 --reps 20 --iters 30 --rounds 3"
bash tools/multi-gpu-run.sh
s=$?
cd /tmp/mgpu
mkdir -p "$OUT/logs/big" "$OUT/logs/rs"
timeout 200 ./multi_gpu --devices 4 --skip-exchange --shapes 4096x8192x8192 --rounds 3 --out "$OUT/logs/big" > "$OUT/logs/big/multi_gpu.txt" 2>&1 || s=1
tail -n 14 "$OUT/logs/big/multi_gpu.txt"
timeout 150 ./reduce_scatter_bench --devices 4 --reps 5 --iters 20 --rounds 3 --out "$OUT/logs/rs" > "$OUT/logs/rs/reduce_scatter.txt" 2>&1 || s=1
tail -n 24 "$OUT/logs/rs/reduce_scatter.txt"
exit $s
