#!/bin/bash
# simt helper's GPU run: the SIMT examples on the GPU, the math error table, and compute-sanitizer.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
./simt 2>&1 | tee $OUT/simt.log
echo "exit $?" >> $OUT/simt.log
for t in memcheck racecheck synccheck; do
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t ./simt > $OUT/sanitizer-$t.log 2>&1
  echo "$t exit $?"; tail -3 $OUT/sanitizer-$t.log
done
