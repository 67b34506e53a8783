#!/usr/bin/env bash
# The virtual environment of the Python checks, target/python-venv, with
# maturin, NumPy, ml_dtypes (bfloat16 NumPy arrays) and pytest: made on first use, brought up to date (pip,
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
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2" numpy ml_dtypes pytest >&2
echo "$venv"
