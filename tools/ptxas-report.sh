#!/usr/bin/env bash
# Prints the ptxas report (registers, stack, spills, barriers per kernel) of
# the last device build of a kernels crate, for each architecture:
#
#   tools/ptxas-report.sh            # every kernels crate built in this workspace
#   tools/ptxas-report.sh kernels    # one crate (its lib name)
#   cd ~/my-project && /path/to/this/repo/tools/ptxas-report.sh   # a workspace outside this repository
#
# The device build (kernel_host::build) keeps the report in
# <target>/nvptx-device/<crate>/<arch>.ptxas.txt; build first (e.g.
# `cargo build -p examples`). The target dir is `--target-dir DIR`, else
# $CARGO_TARGET_DIR, else that of the cargo workspace of the current
# directory (`cargo metadata`), else this repository's. `-v` prints
# ptxas's whole output.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
verbose=0
crates=()
target="${CARGO_TARGET_DIR:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    -v) verbose=1 ;;
    --target-dir) target="$2"; shift ;;
    --target-dir=*) target="${1#--target-dir=}" ;;
    *) crates+=("$1") ;;
  esac
  shift
done
if [ -z "$target" ]; then
  target="$(cargo metadata --no-deps --offline --format-version 1 2>/dev/null \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')" || true
fi
target="${target:-$root/target}"
mapfile -t reports < <(find "$target" -path '*/nvptx-device/*' -name '*.ptxas.txt' 2>/dev/null | sort)
found=0
for r in "${reports[@]}"; do
  crate="$(basename "$(dirname "$r")")"
  if [ ${#crates[@]} -gt 0 ] && [[ ! " ${crates[*]} " == *" $crate "* ]]; then continue; fi
  found=1
  echo "== $crate $(basename "$r" .ptxas.txt) ($r)"
  if [ "$verbose" = 1 ]; then cat "$r"; continue; fi
  awk '
    /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
    /bytes stack frame/ { gsub(/^[ \t]+/, ""); frame = $0 }
    /Used [0-9]+ registers/ { sub(/.*Used /, "Used "); printf "  %-40s %s; %s\n", name, $0, frame }
  ' "$r"
done
if [ "$found" = 0 ]; then
  echo "no ptxas report found under $target/**/nvptx-device/${crates[*]:-<crate>}/: build the kernels crate first (cargo build -p examples), with ptxas installed ($root/tools/install-ptxas.sh); outside this repository, run this from your workspace or pass --target-dir" >&2
  exit 1
fi
