#!/usr/bin/env bash
# The virtual environment of the Python checks, target/python-venv, with
# maturin, NumPy, ml_dtypes (bfloat16 NumPy arrays), pytest and JAX (CPU
# wheels from PyPI: kernel_ops.jax's tests on JAX's CPU backend, whose FFI
# targets run on the emulator): made on first use, brought up to date (pip,
# quiet; nothing to download once they are there), and its path printed.
# Used by tools/python-test.sh and tools/template-check.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/target/python-venv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
# maturin >= 1.9.4 sets PYO3_BUILD_EXTENSION_MODULE (pyo3 0.30 has no
# other way to leave libpython out of an extension module).
# jax >= 0.5 has jax.ffi (ffi_call, register_ffi_target); kernel_ops.jax
# was checked with 0.5.3 and 0.10.2 (0.11 on the GPU machine): < 0.12.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2" numpy ml_dtypes pytest "jax>=0.5,<0.12" >&2
echo "$venv"
