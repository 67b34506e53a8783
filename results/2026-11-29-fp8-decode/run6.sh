#!/usr/bin/env bash
# Sixth H200 run: ncu (full set) of our bf16 and FP8 decode kernels and
# SDPA cuDNN's kernel on the same inputs (ncu_decode.py), the third call of
# each at 8x4x8192 and 8x8x8192, with the wheel of runs 3-4's kernels
# (.device-ab/fp8f.tar.xz). Details as CSV.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/fp8f.tar.xz -C "$D"
export KERNEL_OPS_CACHE="$D/none.tsv"
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$OUT/pip.log" 2>&1
PYTHONPATH="$D/py" timeout 400 /usr/local/cuda/bin/ncu --set full --import-source no -k 'regex:decode_split|sdpa|fmha|cudnn|flash' -o "$OUT/decode" python3 results/2026-11-29-fp8-decode/ncu_decode.py > "$OUT/ncu.log" 2>&1; echo "ncu exit $?"
/usr/local/cuda/bin/ncu -i "$OUT/decode.ncu-rep" --page details --csv > "$OUT/details.csv" 2>> "$OUT/ncu.log"
rm -f "$OUT/decode.ncu-rep"
tail -5 "$OUT/ncu.log"
grep -c . "$OUT/details.csv"
