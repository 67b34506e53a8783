#!/usr/bin/env bash
# 2 x H200: the collective GPU tests (run, run_persistent, run_forwarding),
# then the all-gather matmul at Pallas's shape (1024 x 4096 x 4096 shards,
# 20 back-to-back calls per sample) and at 4096 x 8192 x 8192.
set -u
export MULTI_GPU_DEVICES=2 SKIP_PEER_TESTS=1 MULTI_GPU_TIMEOUT=170
export MULTI_GPU_ARGS="--skip-exchange --shapes 1024x4096x4096 --reps 20 --iters 30 --rounds 3"
bash tools/multi-gpu-run.sh
s=$?
cd /tmp/mgpu
mkdir -p "$OUT/logs/big"
timeout 240 ./multi_gpu --devices 2 --skip-exchange --shapes 4096x8192x8192 --rounds 3 --out "$OUT/logs/big" > "$OUT/logs/big/multi_gpu.txt" 2>&1 || s=1
tail -n 30 "$OUT/logs/big/multi_gpu.txt"
exit $s
