#!/usr/bin/env bash
# H200 run 2 (from the repository root, with run 1's .device-ab/w8.tar.xz):
# 1. the 8-warp kernel's split count swept (2 to 32) at the rows with
#    several splits (each timing checked against the reference first);
# 2. ncu (full set) of the 8-warp kernel at 8x4x8192 G8 (the plan's 4
#    splits), the second launch; details as CSV, the key rows printed.
#    cuDNN's kernel on that shape: results/2026-11-29-fp8-decode/run6.
# (Reading K one step ahead in the 8-warp kernel, Kv16's K_AHEAD, spilled
# 244 bytes at one CTA per SM: not built.)
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/w8.tar.xz -C "$D" ./decode_bench
export KERNEL_OPS_CACHE="$D/none.tsv"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$S"
echo "## split sweep, warp8" >> "$S"
for o in "8x8x8192" "8x4x8192 G8" "1x8x32768"; do
  timeout 90 "$D/decode_bench" --iters 40 --warmup-ms 200 --kernels warp8 --splits 2,4,8,16,32 --only "$o" --out "$OUT/s" > "$OUT/sweep.log" 2>&1; echo "exit $?" >> "$S"
  grep -E "^\| [0-9]" "$OUT/sweep.log" | grep -v fp8 | grep -v paged | grep -v T4 >> "$S"
  cp "$OUT/s/decode_bench.csv" "$OUT/splits-$(echo $o | tr ' ' _).csv"
done
echo "## ncu warp8 at 8x4x8192 G8" >> "$S"
timeout 250 /usr/local/cuda/bin/ncu --set full --import-source no -k 'regex:decode_split' --launch-skip 1 --launch-count 1 -o "$OUT/warp8" "$D/decode_bench" --iters 2 --warmup-ms 0 --kernels warp8 --only "8x4x8192 G8" --out "$OUT/b-warp8" > "$OUT/ncu-warp8.log" 2>&1; echo "ncu exit $?" >> "$S"
/usr/local/cuda/bin/ncu -i "$OUT/warp8.ncu-rep" --page details --csv > "$OUT/details-warp8.csv" 2>> "$OUT/ncu-warp8.log"
rm -f "$OUT/warp8.ncu-rep"
grep -E '"(Duration|DRAM Throughput|Memory Throughput|Registers Per Thread|Achieved Active Warps Per SM|Executed Instructions|Issue Slots Busy|No Eligible|Theoretical Occupancy|Achieved Occupancy|L2 Hit Rate|Block Limit Registers|Block Limit Shared Mem|Dynamic Shared Memory Per Block|One or More Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction|Grid Size|Block Size)"' "$OUT/details-warp8.csv" | awk -F'","' '{print $(NF-2)" ("$(NF-1)"): "$NF}' | sed 's/"$//' | sort -u >> "$S"
cat "$S"
