#!/usr/bin/env bash
# H200 run 4 (with run 3's .device-ab/w8c.tar.xz: the 8-warp kernel with
# S = Q K^T in four MMA chains, timed the same as run 1's two): where the
# 8-warp kernel's warps wait at 8x4x8192 G8 (the plan's 4 splits): ncu's
# per-reason stall metrics (warp-cycles stalled per issued instruction),
# the second launch; beside them the same for the wgmma kernel.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/w8c.tar.xz -C "$D" ./decode_bench
export KERNEL_OPS_CACHE="$D/none.tsv"
for k in warp8 wgmma; do
  timeout 200 /usr/local/cuda/bin/ncu --section WarpStateStats --section SchedulerStats --section SpeedOfLight -k 'regex:decode_split' --launch-skip 1 --launch-count 1 -o "$OUT/$k" "$D/decode_bench" --iters 2 --warmup-ms 0 --kernels $k --only "8x4x8192 G8" --out "$OUT/b-$k" > "$OUT/ncu-$k.log" 2>&1; echo "ncu $k exit $?"
  /usr/local/cuda/bin/ncu -i "$OUT/$k.ncu-rep" --page raw --csv > "$OUT/raw-$k.csv" 2>> "$OUT/ncu-$k.log"
  rm -f "$OUT/$k.ncu-rep"
  echo "== $k"
  python3 - "$OUT/raw-$k.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, units, vals = rows[0], rows[1], rows[2]
for h, u, v in zip(head, units, vals):
    if ("issue_stalled" in h and h.endswith("per_warp_active.pct")) or h in ("gpu__time_duration.sum", "smsp__warps_active.avg.per_cycle_active", "smsp__warps_eligible.avg.per_cycle_active"):
        try:
            if float(v.replace(",", "")) >= 1.0 or "time" in h or "warps" in h:
                print(f"{h} ({u}): {v}")
        except ValueError:
            pass
PY
done
