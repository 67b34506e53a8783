#!/usr/bin/env bash
# Small K: ncu of ours beside cuBLAS(Lt) at 8192 x 8192 x 1024 (f16 and FP8): the third launch of every distinct kernel.
cd "$(dirname "$0")"
export KERNEL_OPS_CACHE=/tmp/tune.tsv
NCU=/usr/local/cuda/bin/ncu
M=gpu__time_duration.sum,sm__cycles_elapsed.avg,gpc__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,dram__bytes_read.sum,launch__grid_size,launch__cluster_dim_x,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
timeout 240 $NCU --clock-control none --kernel-id "::regex:^(nvjet|sm90|matmul_persistent_ws__128_256_4_8):3" --metrics $M -o $OUT/f16 ./bench --shape 8192x8192x1024 --only cuBLAS --only "step4 128x256 s4 w8" --rounds 1 --warmup-ms 100 --out /tmp/b > $OUT/f16.log 2>&1; echo "f16 ncu exit $?"
$NCU --import $OUT/f16.ncu-rep --csv --page raw --metrics $M > $OUT/f16.csv 2>&1
timeout 240 $NCU --clock-control none --kernel-id "::regex:^(nvjet|sm90|matmul_fp8__128_256_4_8):3" --metrics $M -o $OUT/fp8 ./fp8_bench --shape 8192x8192x1024 --rounds 1 --warmup-ms 100 --out /tmp/f > $OUT/fp8.log 2>&1; echo "fp8 ncu exit $?"
$NCU --import $OUT/fp8.ncu-rep --csv --page raw --metrics $M > $OUT/fp8.csv 2>&1
python3 - <<'PY'
import csv, os
out = os.environ['OUT']
keys = ['gpu__time_duration.sum','sm__cycles_elapsed.avg','gpc__cycles_elapsed.avg.per_second','smsp__inst_executed.sum','sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed','sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed','smsp__issue_active.avg.pct_of_peak_sustained_elapsed','launch__grid_size','launch__cluster_dim_x']
for f in ('f16', 'fp8'):
    try:
        rows = list(csv.DictReader(open(f'{out}/{f}.csv')))[1:]
    except Exception as e:
        print(f, e); continue
    for r in rows:
        print(f, r.get('Kernel Name','')[:60], ' | '.join(str(r.get(k,'?')) for k in keys))
PY
grep -h "^|" $OUT/f16.log $OUT/fp8.log | head -20
cd $OUT && tar cJf ncu.tar.xz *.ncu-rep && rm -f *.ncu-rep
