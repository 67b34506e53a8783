#!/usr/bin/env bash
# 2 x H200, run 2 (as run1.sh, with the all-reduce matmul): the GPU tests
# (the reduce-scatter's now also check run_all_reduce, f16 and bf16), the
# Python torch test of the three collectives, and reduce_scatter_bench in
# f16 and bf16: the reduce-scatter at its two shapes, then the all-reduce
# (ours against cuBLAS + NCCL all-reduce) at 512 x 8192 x 8192 and
# 256 x 4096 x 8192 (5 calls a sample).
set -u
OUT=${OUT:-/tmp/out}
out="$OUT/logs"; mkdir -p "$out/rs-f16" "$out/rs-bf16"
S="$OUT/summary.txt"
mkdir -p /tmp/mgpu && tar -C /tmp/mgpu -xJf .device-mgpu/bundle.tar.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
mkdir -p /tmp/mgpu/lib
[ -n "$nccl_dir" ] && ln -sf "$nccl_dir/libnccl.so.2" /tmp/mgpu/lib/libnccl.so
export LD_LIBRARY_PATH="/tmp/mgpu/lib:${LD_LIBRARY_PATH:-}"
export KERNEL_OPS_CACHE=/tmp/mgpu/none.tsv
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv; date -u; } > "$S" 2>&1
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv -lms 500 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target /tmp/mgpu/py .device-mgpu/kernel_ops-*.whl > "$out/pip.log" 2>&1; echo "pip exit $?" >> "$S"
root=$PWD
cd /tmp/mgpu
for t in collective_tests reduce_scatter_tests; do
  echo "## $t" >> "$S"; date -u +%T >> "$S"
  timeout 200 ./$t --ignored --nocapture > "$out/$t.txt" 2>&1; echo "exit $?" >> "$S"; grep -E "^test |test result" "$out/$t.txt" >> "$S"
done
echo "## python torch tests (collectives)" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH=/tmp/mgpu/py timeout 200 python3 -m pytest -q -x "$root/python/tests/test_torch_cuda.py" -k "collective" > "$out/pytest.txt" 2>&1); echo "exit $?" >> "$S"; tail -n 5 "$out/pytest.txt" >> "$S"
for dt in f16 bf16; do
  echo "## reduce_scatter_bench $dt" >> "$S"; date -u +%T >> "$S"
  timeout 240 ./reduce_scatter_bench --devices 2 --dtype $dt --reps 5 --iters 20 --rounds 3 --out "$out/rs-$dt" > "$out/rs-$dt/run.txt" 2>&1; echo "exit $?" >> "$S"
  grep -E "^\||^## " "$out/rs-$dt/run.txt" >> "$S"
done
kill $SMI
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$out"
cat "$S"
