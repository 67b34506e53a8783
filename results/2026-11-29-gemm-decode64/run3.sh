#!/usr/bin/env bash
# The kept build (the 64 x 64 and 128 x 64 split-K tiles, the new shipped
# table) on the H200: the wheel's torch matmul tests, python/bench/
# matmul_bench.py (ours at the first call, built-in choice, and tune=True,
# against torch.matmul), `bench` at the decode rows again (tuned over the
# 12 instances), the same with an experiment build whose tensor maps ask
# for 256-byte L2 promotion (bench_p256, not kept unless it wins), then ncu (`--set full`, clocks unlocked) of our tuned
# winner and cuBLAS's kernel at 64x8192x8192 (64 x 64 tiles, no split).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/b3.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
SMI=$!
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$L/pip.log" 2>&1; echo "pip exit $?" >> "$S"
echo "## torch tests" >> "$S"; date -u +%T >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 120 python3 -m pytest -q "$OLDPWD/python/tests/test_torch_cuda.py" -k matmul > "$L/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 1 "$L/pytest.log" >> "$S"
echo "## matmul_bench" >> "$S"; date -u +%T >> "$S"
PYTHONPATH="$D/py" timeout 240 python3 python/bench/matmul_bench.py "$OUT/py" --rounds 2 --iters 30 --warmup-ms 250 > "$L/matmul_bench.log" 2>&1; echo "exit $?" >> "$S"
grep -E "^\||FAIL" "$L/matmul_bench.log" >> "$S"
SH=""
for m in 64 128 256; do for nk in 4096x4096 14336x4096 4096x14336 8192x8192; do SH="$SH --shape ${m}x${nk}"; done; done
echo "## bench" >> "$S"; date -u +%T >> "$S"
export KERNEL_OPS_CACHE="$OUT/matmul.tsv"
timeout 150 "$D/bench" $SH --only cuBLAS --only kernel_ops --rounds 2 --iters 30 --warmup-ms 200 --out "$OUT/bench" > "$L/bench.log" 2>&1; echo "exit $?" >> "$S"
echo "## bench_p256 (experiment: TMA L2 promotion 256 B instead of 128 B)" >> "$S"; date -u +%T >> "$S"
KERNEL_OPS_CACHE="$OUT/matmul_p256.tsv" timeout 150 "$D/bench_p256" $SH --only cuBLAS --only kernel_ops --rounds 2 --iters 30 --warmup-ms 200 --out "$OUT/bench_p256" > "$L/bench_p256.log" 2>&1; echo "exit $?" >> "$S"
date -u +%T >> "$S"
kill $SMI
NCU=/usr/local/cuda/bin/ncu
for sh in 64x8192x8192; do
  echo "## ncu ours $sh" >> "$S"
  timeout 90 $NCU --clock-control none --set full --import-source no -k regex:matmul_splitk --launch-skip 2 -c 1 -o "$OUT/ours_$sh" "$D/bench" --shape $sh --only kernel_ops --rounds 1 --iters 3 --warmup-ms 0 > "$L/ncu_ours_$sh.log" 2>&1; echo "exit $?" >> "$S"
  $NCU -i "$OUT/ours_$sh.ncu-rep" --page details --csv > "$L/ours_$sh.csv" 2>> "$L/ncu.log"
  echo "## ncu cublas $sh" >> "$S"
  timeout 90 $NCU --clock-control none --set full --import-source no -k "regex:^(?!matmul)" --launch-skip 0 -c 2 -o "$OUT/blas_$sh" "$D/bench" --shape $sh --only cuBLAS --rounds 1 --iters 3 --warmup-ms 0 > "$L/ncu_blas_$sh.log" 2>&1; echo "exit $?" >> "$S"
  $NCU -i "$OUT/blas_$sh.ncu-rep" --page details --csv > "$L/blas_$sh.csv" 2>> "$L/ncu.log"
  rm -f "$OUT"/*.ncu-rep
done
date -u +%T >> "$S"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
