#!/usr/bin/env bash
# Runs on a GPU machine (no Rust there): the binaries that tools/gpu-bundle.sh
# put in .device/. Writes logs to $OUT (or ./gpu-out) and prints a summary.
#   bash tools/gpu-run.sh            # everything (about 8 minutes on an H100)
#   ONLY="swiglu_bench ops_tests" bash tools/gpu-run.sh   # the named steps only
#   ONLY="bench bench_bf16" bash tools/gpu-run.sh          # the GEMM benchmark, f16 and bf16
set -uo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/.device"
out="${OUT:-$(pwd)/gpu-out}"
mkdir -p "$out"
status=0
summary=()
run() { # name, command...
    local name=$1; shift
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
    echo "== $name: $*"
    "$@" > "$out/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.log"
    echo "== $name: exit $rc"
    summary+=("$name: exit $rc")
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/device.txt"
run first_kernels "$dir/first_kernels"
run hopper "$dir/hopper" --quick
run simt "$dir/simt"
run fused "$dir/fused" --quick
run blackwell "$dir/blackwell"
run norms_bench "$dir/norms_bench" --quick
export KERNEL_OPS_CACHE="$out/matmul-tune.tsv"
run bench "$dir/bench" --quick --out "$out/bench"
# The same contenders in bf16: kernel_ops::matmul's bf16 kernels against
# cuBLAS/cuBLASLt bf16 (its tuning cached apart from f16's in the same file).
run bench_bf16 "$dir/bench" --quick --dtype bf16 --out "$out/bench_bf16"
run swiglu_bench "$dir/swiglu_bench" --out "$out/swiglu"
run fp8_bench "$dir/fp8_bench" --out "$out/fp8"
run attention_bench "$dir/attention_bench" --dump /tmp/attn --out "$out/attention"
run attention_ladder "$dir/attention_ladder" --out "$out/attention_ladder"
run attention_baselines python3 "$dir/attention_baselines.py" /tmp/attn "$out/attention/baselines.csv"
rm -rf /tmp/attn
run attention_bwd_bench "$dir/attention_bench" --backward --dump /tmp/attn_bwd --out "$out/attention"
run attention_bwd_baselines python3 "$dir/attention_baselines.py" --backward /tmp/attn_bwd "$out/attention/baselines_bwd.csv"
rm -rf /tmp/attn_bwd
if [ -d "$dir/wheels" ]; then
    run python_gpu bash "$dir/../tools/python-gpu.sh" "$dir/wheels" "$out"
fi
run gpu_tests "$dir/gpu_tests" --ignored --nocapture --test-threads=1
run arrays_tests "$dir/arrays_tests" --ignored --nocapture --test-threads=1
run ops_tests "$dir/ops_tests" --ignored --nocapture --test-threads=1
run runtime_tests "$dir/runtime_tests" --ignored --test-threads=1
run one_program_tests "$dir/one_program_tests" --ignored --nocapture --test-threads=1
if [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    for tool in memcheck racecheck synccheck; do
        run "sanitizer_$tool" /usr/local/cuda/bin/compute-sanitizer --tool "$tool" --error-exitcode 3 "$dir/first_kernels"
        run "sanitizer_${tool}_simt" /usr/local/cuda/bin/compute-sanitizer --tool "$tool" --error-exitcode 3 "$dir/simt"
    done
    run sanitizer_memcheck_hopper /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 "$dir/hopper" --quick
fi
if [ -x /usr/local/cuda/bin/cuobjdump ] && [ -e "$dir/kernels_sm_90a.cubin" ] && [ -z "${ONLY:-}" ]; then
    { /usr/local/cuda/bin/cuobjdump -sass "$dir/kernels_sm_90a.cubin"; /usr/local/cuda/bin/cuobjdump -sass "$dir/kernel_ops_kernels_sm_90a.cubin"; } > "$out/kernels_sm_90a.sass" 2>&1
    # Which SASS instructions each kernel uses (HGMMA = 16-bit wgmma, QGMMA = FP8 wgmma, UTMALDG/UTMASTG = TMA).
    awk '/Function :/ {f=$3} /HGMMA|QGMMA|UTMALDG|UTMASTG|SYNCS/ {for(i=1;i<=NF;i++) if ($i ~ /^(HGMMA|QGMMA|UTMALDG|UTMASTG|SYNCS)/) {split($i,a,"."); n[f" "a[1]]++}} END {for (k in n) print k, n[k]}' "$out/kernels_sm_90a.sass" | sort > "$out/sass_summary.txt"
    gzip -f "$out/kernels_sm_90a.sass"
fi
printf '%s\n' "${summary[@]}"
echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
