#!/usr/bin/env bash
# H200 run 2 (the machine of run 1, same bundle): the split count of each
# kernel, every bf16 row at 1-32 splits and the plan's own (0), both
# kernels in turn.
D=$(mktemp -d); tar xJf .device-ab/wd.tar.xz -C $D ./decode_bench; export KERNEL_OPS_CACHE=$D/none.tsv; mkdir -p $OUT
for o in "8x8x8192" "8x4x8192 G8" "1x8x32768" "64x8x2048" "128x8x1024"; do
  timeout 100 $D/decode_bench --iters 40 --warmup-ms 200 --kernels wgmma,warp --splits 0,1,2,4,8,16,32 --only "$o" --out $OUT/s 2>&1 | grep -E "^\| [0-9]" | grep -v fp8 | grep -v paged | grep -v T4
  cp $OUT/s/decode_bench.csv "$OUT/splits-$(echo $o | tr ' ' _).csv"
done
