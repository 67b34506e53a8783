#!/usr/bin/env bash
# 2 x H200: the reduce-scatter matmul with f16 partials and the deferred
# signal: its GPU tests (every group size the machine has; run 5 also
# the all-gather matmul's, after `PeerGmem::remote` changed), then its
# benchmark at both shapes (5 back-to-back calls per sample), with the
# cuBLAS partials alone as the bound.
set -u
export SKIP_PEER_TESTS=1
out="$OUT/logs"; mkdir -p "$out/rs"
tar -C /tmp -xJf .device-mgpu/bundle.tar.xz --one-top-level=mgpu 2>/dev/null || { mkdir -p /tmp/mgpu && tar -C /tmp/mgpu -xJf .device-mgpu/bundle.tar.xz; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
mkdir -p /tmp/mgpu/lib
[ -n "$nccl_dir" ] && ln -sf "$nccl_dir/libnccl.so.2" /tmp/mgpu/lib/libnccl.so
export LD_LIBRARY_PATH="/tmp/mgpu/lib:${LD_LIBRARY_PATH:-}"
{ nvidia-smi; nvidia-smi topo -m; date -u; } > "$out/topology.txt" 2>&1
cd /tmp/mgpu
s=0
timeout 150 ./collective_tests --ignored --nocapture > "$out/collective_tests.txt" 2>&1 || s=1
tail -n 4 "$out/collective_tests.txt"
timeout 150 ./reduce_scatter_tests --ignored --nocapture > "$out/reduce_scatter_tests.txt" 2>&1 || s=1
tail -n 8 "$out/reduce_scatter_tests.txt"
timeout 200 ./reduce_scatter_bench --devices 2 --reps 5 --iters 20 --rounds 3 --out "$out/rs" > "$out/rs/reduce_scatter.txt" 2>&1 || s=1
tail -n 30 "$out/rs/reduce_scatter.txt"
exit $s
