#!/usr/bin/env bash
# Counts the lines of the five idioms that bridged the GPU and the CPU
# emulator in host code before the unified launch path (issue 15), at a
# commit (default b7a560a, main before the change), for the architecture
# chapter's "Bridging code, before and after" table:
#
#   docs/bridging-lines.sh [commit]
#
# An "item" is counted from its first line (with the doc comments and
# attributes right above it) to the line where its braces close (or the
# `;` that ends a declaration).
set -euo pipefail
rev="${1:-b7a560a}"
cd "$(dirname "$0")/.."
show() { git show "$rev:$1"; }
# items FILE REGEX: lines of the items whose first line matches REGEX.
items() {
  show "$1" | awk -v re="$2" '
    function braces(s,   t) { t = s; o = gsub(/\{/, "", t); t = s; c = gsub(/\}/, "", t); return o - c }
    depth > 0 { n++; depth += braces($0); if (depth <= 0) depth = 0; next }
    /^[ \t]*(\/\/\/|#\[)/ { pending++; next }
    $0 ~ re {
      n += pending + 1; d = braces($0)
      if (d > 0) depth = d
    }
    { pending = 0 }
    END { print n + 0 }'
}
emulated=$(show examples/host/src/emulated.rs | wc -l)
blackwell=$(items examples/host/src/blackwell.rs 'macro_rules! dispatch|fn (emulated_matmul|gpu_matmul)\(')
ladder=$(items examples/host/src/blackwell_ladder.rs 'macro_rules! dispatch|fn (emulate|emulate_report|gpu_run)\(')
simt=$(items examples/host/src/simt.rs 'enum Target|match t \{')
norms=$(items kernel-ops/src/norms.rs 'fn [a-z_]+_emu[<(]')
emulate=$(show kernel-host/src/emulate.rs | wc -l)
printf '%-62s %5s\n' "examples/host/src/emulated.rs (whole file)" "$emulated"
printf '%-62s %5s\n' "blackwell.rs: dispatch! + emulated_matmul + gpu_matmul" "$blackwell"
printf '%-62s %5s\n' "blackwell_ladder.rs: dispatch! + emulate(_report) + gpu_run" "$ladder"
printf '%-62s %5s\n' "simt.rs: enum Target + its match t { .. } blocks" "$simt"
printf '%-62s %5s\n' "kernel-ops norms.rs: the *_emu functions and NormElem::*_emu" "$norms"
printf '%-62s %5s\n' "kernel-host/src/emulate.rs (whole file)" "$emulate"
printf '%-62s %5s\n' "total" "$((emulated + blackwell + ladder + simt + norms + emulate))"
