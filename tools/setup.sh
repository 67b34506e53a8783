#!/usr/bin/env bash
# One-time set-up for building kernels here: the nightly toolchain's rust-src
# (for -Zbuild-std=core on nvptx64-nvidia-cuda) and ptxas 13.0 in the user-level
# tools dir (~/.cache/kernel-tools/venv, linked from .tools/venv: see
# tools/install-ptxas.sh), where every kernels crate's build finds it.
# Idempotent and quiet when everything is already there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
toolchain="${KERNEL_NIGHTLY_TOOLCHAIN:-nightly}"
if ! rustup run "$toolchain" rustc --version > /dev/null 2>&1; then
    echo "setup: installing the $toolchain toolchain with rust-src"
    rustup toolchain install "$toolchain" --profile minimal --component rust-src
fi
sysroot="$(rustup run "$toolchain" rustc --print sysroot)"
if [ ! -f "$sysroot/lib/rustlib/src/rust/library/core/Cargo.toml" ]; then
    echo "setup: adding rust-src to $toolchain"
    rustup component add rust-src --toolchain "$toolchain"
fi
"$root/tools/install-ptxas.sh" > /dev/null
