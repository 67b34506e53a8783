#!/usr/bin/env bash
# Builds, here, what the multi-GPU run needs into .device-mgpu/ (ignored by
# git), packed as one xz tarball: the multi_gpu benchmark and the test
# binaries whose ignored tests need 2 GPUs (tests/tests/peer.rs,
# kernel-ops/tests/collective.rs, kernel-ops/tests/reduce_scatter.rs), plus the ptxas reports. Then, with the
# device tool on a machine of 2+ GPUs: carry `.device-mgpu`, run
# `bash tools/multi-gpu-run.sh`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools/setup.sh
cargo build --release -p examples --bin multi_gpu --bin reduce_scatter_bench
test_exe() {
    cargo test --release "$@" --no-run --message-format=json 2>/dev/null | python3 -c 'import sys, json
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' | tail -1
}
peer_tests=$(test_exe -p kernel-tests --test peer)
collective_tests=$(test_exe -p kernel-ops --test collective)
reduce_scatter_tests=$(test_exe -p kernel-ops --test reduce_scatter)
stage=$(mktemp -d)
cp target/release/multi_gpu "$stage/"
cp "$peer_tests" "$stage/peer_tests"
cp "$collective_tests" "$stage/collective_tests"
cp "$reduce_scatter_tests" "$stage/reduce_scatter_tests"
cp target/release/reduce_scatter_bench "$stage/"
out_dir=$(ls -td target/release/build/kernels-*/out | head -1)
cp "$out_dir"/kernels_sm_90a.ptxas.txt "$stage/"
strip "$stage"/multi_gpu "$stage"/peer_tests "$stage"/collective_tests "$stage"/reduce_scatter_tests "$stage"/reduce_scatter_bench
rm -rf .device-mgpu && mkdir -p .device-mgpu
tar -C "$stage" -cJf .device-mgpu/bundle.tar.xz .
rm -rf "$stage"
ls -la .device-mgpu
