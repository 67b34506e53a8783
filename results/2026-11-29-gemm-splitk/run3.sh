#!/usr/bin/env bash
# ncu of the decode rows on the H200: the split-K kernel (the tuned winner,
# from run 2's cache: no tuning here) and cuBLAS's kernels for the same call
# (`cublasGemmEx`, B N x K: every kernel of one call), at 64x4096x4096 and
# 64x8192x8192. `--set full`, clocks unlocked (`--clock-control none`).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
D=$(mktemp -d)
tar xJf .device-ab/b2.tar.xz -C "$D"
L="$OUT/logs"; S="$OUT/summary.txt"
NCU=/usr/local/cuda/bin/ncu
export KERNEL_OPS_CACHE="$PWD/.device-ab/matmul.tsv"
for sh in 64x4096x4096 64x8192x8192; do
  echo "## ncu ours $sh" >> "$S"
  timeout 120 $NCU --clock-control none --set full --import-source no -k regex:matmul_splitk --launch-skip 2 -c 1 -o "$OUT/ours_$sh" "$D/bench" --shape $sh --only kernel_ops --rounds 1 --iters 3 --warmup-ms 0 > "$L/ncu_ours_$sh.log" 2>&1; echo "exit $?" >> "$S"
  $NCU -i "$OUT/ours_$sh.ncu-rep" --page details --csv > "$OUT/ours_$sh.csv" 2>> "$L/ncu.log"
  echo "## ncu cublas $sh" >> "$S"
  timeout 150 $NCU --clock-control none --set full --import-source no -k "regex:^(?!matmul)" --launch-skip 0 -c 2 -o "$OUT/blas_$sh" "$D/bench" --shape $sh --only cuBLAS --rounds 1 --iters 3 --warmup-ms 0 > "$L/ncu_blas_$sh.log" 2>&1; echo "exit $?" >> "$S"
  $NCU -i "$OUT/blas_$sh.ncu-rep" --page details --csv > "$OUT/blas_$sh.csv" 2>> "$L/ncu.log"
  rm -f "$OUT"/*.ncu-rep
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$S"
