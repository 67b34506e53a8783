#!/usr/bin/env bash
# On a GPU machine of 2+ GPUs (no Rust needed), after tools/multi-gpu-bundle.sh:
# the GPU topology, the ignored 2-GPU tests, and the multi_gpu benchmark;
# logs and tables into $OUT/logs (or ./multi-gpu-out/logs), written as they
# come (a run cut short by a time limit keeps what it finished).
set -uo pipefail
out="${OUT:-$PWD/multi-gpu-out}"
logs="$out/logs"
mkdir -p "$logs" /tmp/mgpu
tar -C /tmp/mgpu -xJf .device-mgpu/bundle.tar.xz
# NVLink multicast stays off (the machine's rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
# cudarc opens libnccl.so; pip's NCCL ships libnccl.so.2.
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
mkdir -p /tmp/mgpu/lib
[ -n "$nccl_dir" ] && ln -sf "$nccl_dir/libnccl.so.2" /tmp/mgpu/lib/libnccl.so
export LD_LIBRARY_PATH="/tmp/mgpu/lib:${LD_LIBRARY_PATH:-}"
status=0
{ nvidia-smi; nvidia-smi topo -m; nvidia-smi topo -p2p r; date -u; } > "$logs/topology.txt" 2>&1
cd /tmp/mgpu
# Each binary under a time limit: a hang (a kernel waiting on a flag that
# never comes) is reported as a failure, and the rest still runs.
[ -n "${SKIP_TESTS:-}${SKIP_PEER_TESTS:-}" ] || timeout 150 ./peer_tests --ignored --nocapture > "$logs/peer_tests.txt" 2>&1 || status=1
[ -n "${SKIP_TESTS:-}" ] || timeout 150 ./collective_tests --ignored --nocapture > "$logs/collective_tests.txt" 2>&1 || status=1
[ -n "${SKIP_TESTS:-}" ] || timeout 150 ./reduce_scatter_tests --ignored --nocapture > "$logs/reduce_scatter_tests.txt" 2>&1 || status=1
# MULTI_GPU_DEVICES: the group sizes to benchmark, one run each (default 2).
for n in ${MULTI_GPU_DEVICES:-2}; do
    mkdir -p "$logs/devices-$n"
    timeout "${MULTI_GPU_TIMEOUT:-240}" ./multi_gpu --devices "$n" --out "$logs/devices-$n" ${MULTI_GPU_ARGS:-} > "$logs/devices-$n/multi_gpu.txt" 2>&1 || status=1
done
tail -n 40 "$logs"/*.txt "$logs"/devices-*/multi_gpu.txt
echo "multi-gpu-run: status $status"
exit $status
