#!/usr/bin/env bash
# Installs ptxas 13.0 (from the PyPI wheel nvidia-cuda-nvcc==13.0.88, ptxas
# only: --no-deps) into the user-level tools directory, where the device
# build (kernel_host::build::find_ptxas) finds it for EVERY kernels crate,
# inside this repository or not:
#
#   ${KERNEL_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kernel-tools}/venv
#
# and links this repository's .tools/venv to it (when .tools/venv does not
# exist yet). Idempotent and quiet (one line) when ptxas is already there; a
# ptxas already in .tools/venv (an older set-up) is copied rather than
# downloaded again. Needs python3 with venv and pip, and access to PyPI
# (nothing else). With none of KERNEL_TOOLS_DIR, XDG_CACHE_HOME, HOME set,
# or that directory not writable, it installs into .tools/venv only.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wheel="nvidia-cuda-nvcc==13.0.88"
repo_venv="$root/.tools/venv"
if [ -n "${KERNEL_TOOLS_DIR:-}" ]; then
    tools="$KERNEL_TOOLS_DIR"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
    tools="$XDG_CACHE_HOME/kernel-tools"
elif [ -n "${HOME:-}" ]; then
    tools="$HOME/.cache/kernel-tools"
else
    tools=""
fi
venv="${tools:+$tools/venv}"
venv="${venv:-$repo_venv}"

# The wheel's ptxas inside a venv, or nothing.
ptxas_in() {
    local p
    for p in "$1"/lib/python3*/site-packages/nvidia/cu13/bin/ptxas; do
        if [ -f "$p" ]; then echo "$p"; return 0; fi
    done
    return 1
}

if ! p="$(ptxas_in "$venv")" && [ "$venv" != "$repo_venv" ] \
    && ! { mkdir -p "$(dirname "$venv")" 2> /dev/null && [ -w "$(dirname "$venv")" ]; }; then
    echo "install-ptxas: $(dirname "$venv") is not writable: installing into $repo_venv (only this repository's crates find it there; set KERNEL_TOOLS_DIR to a writable directory for the others)" >&2
    venv="$repo_venv"
fi
if ! p="$(ptxas_in "$venv")"; then
    mkdir -p "$(dirname "$venv")"
    if [ "$venv" != "$repo_venv" ] && [ ! -L "$repo_venv" ] && ptxas_in "$repo_venv" > /dev/null; then
        # An older set-up installed it into this repository only: share that copy.
        cp -a "$repo_venv" "$venv"
        # New times, so builds waiting for ptxas here see a change.
        touch "$venv" "$(ptxas_in "$venv")"
    else
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "$wheel"
    fi
    p="$(ptxas_in "$venv")"
    "$p" --version | tail -1
fi
# This repository's crates find it through .tools/venv too.
if [ "$venv" != "$repo_venv" ] && [ ! -e "$repo_venv" ]; then
    mkdir -p "$root/.tools"
    ln -sfn "$venv" "$repo_venv"
fi
echo "ptxas: $p (found by the device build of any kernels crate)"
