#!/usr/bin/env bash
# H200 run 4: ncu (full set) of the two 16-bit decode kernels at 8x4x8192
# (G 8, 4 splits each: the plan's count) through the Rust decode_bench of
# run 3 (.device-ab/wd3.tar.xz), the second launch of each (the first is
# the checked run); details as CSV. cuDNN's kernel on the same shape was
# profiled on 2026-11-29 (results/2026-11-29-fp8-decode/run6).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/wd3.tar.xz -C "$D" ./decode_bench
export KERNEL_OPS_CACHE="$D/none.tsv"
for k in warp wgmma; do
  timeout 250 /usr/local/cuda/bin/ncu --set full --import-source no -k 'regex:decode_split' --launch-skip 1 --launch-count 1 -o "$OUT/$k" "$D/decode_bench" --iters 2 --warmup-ms 0 --kernels $k --only "8x4x8192 G8" --out "$OUT/b-$k" > "$OUT/ncu-$k.log" 2>&1; echo "ncu $k exit $?"
  /usr/local/cuda/bin/ncu -i "$OUT/$k.ncu-rep" --page details --csv > "$OUT/details-$k.csv" 2>> "$OUT/ncu-$k.log"
  rm -f "$OUT/$k.ncu-rep"
done
for k in warp wgmma; do
  echo "== $k"; grep -E '"(Duration|DRAM Throughput|Memory Throughput|Registers Per Thread|Achieved Active Warps Per SM|Executed Instructions|Issue Slots Busy|No Eligible|Theoretical Occupancy|Achieved Occupancy|L2 Hit Rate|Block Limit Registers|Block Limit Shared Mem|Dynamic Shared Memory Per Block|One or More Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction)"' "$OUT/details-$k.csv" | awk -F'","' '{print $(NF-2)" ("$(NF-1)"): "$NF}' | sed 's/"$//' | sort -u
done
