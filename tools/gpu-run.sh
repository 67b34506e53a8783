#!/usr/bin/env bash
# Runs on a GPU machine (no Rust there): the binaries that tools/gpu-bundle.sh
# put in .device/. Writes logs to $OUT (or ./gpu-out) and prints a summary.
#   bash tools/gpu-run.sh
set -uo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/.device"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
status=0
run() { # name, command...
    local name=$1; shift
    echo "== $name: $*"
    "$@" > "$out/$name.log" 2>&1
    local rc=$?
    cat "$out/$name.log"
    echo "== $name: exit $rc"
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
run first_kernels "$dir/first_kernels"
run hopper "$dir/hopper" "$@"
run gpu_tests "$dir/gpu_tests" --ignored --nocapture --test-threads=1
run runtime_tests "$dir/runtime_tests" --ignored --test-threads=1
if [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    for tool in memcheck racecheck synccheck; do
        run "sanitizer_$tool" /usr/local/cuda/bin/compute-sanitizer --tool "$tool" --error-exitcode 3 "$dir/first_kernels"
    done
    run sanitizer_memcheck_hopper /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 "$dir/hopper" --quick
fi
if [ -x /usr/local/cuda/bin/cuobjdump ]; then
    for c in "$dir"/*.cubin; do
        [ -e "$c" ] || continue
        /usr/local/cuda/bin/cuobjdump -sass "$c" > "$out/$(basename "$c" .cubin).sass" 2>&1
    done
    # Which SASS instructions each kernel uses (HGMMA = wgmma, UTMALDG/UTMASTG = TMA).
    for s in "$out"/*.sass; do
        [ -e "$s" ] || continue
        awk '/Function :/ {f=$3} /HGMMA|UTMALDG|UTMASTG|UBLKCP|SYNCS/ {for(i=1;i<=NF;i++) if ($i ~ /^(HGMMA|UTMALDG|UTMASTG|SYNCS)/) {split($i,a,"."); n[f" "a[1]]++}} END {for (k in n) print k, n[k]}' "$s" | sort > "$out/sass_summary.txt"
        cat "$out/sass_summary.txt"
    done
fi
echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
