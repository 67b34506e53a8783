#!/usr/bin/env bash
# The Python package's tests on the CPU emulator (NumPy arrays; no GPU or
# torch needed): builds the `kernel_ops` wheel with maturin (debug profile,
# the `testing` feature: a planted race for the EmulatorReport test) into a
# venv under target/, installs it, runs pytest on python/tests. The torch and
# CUDA tests (python/tests/test_torch_cuda.py) skip visibly without them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="$(tools/python-venv.sh)"
rm -rf target/wheels-test
"$venv/bin/maturin" build --quiet --manifest-path python/Cargo.toml --features testing --out target/wheels-test --interpreter "$venv/bin/python"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels-test/*.whl
# pytest exits 5 when it collected no test: that is a failure here too.
cd python/tests
"$venv/bin/python" -m pytest -q -rs . || { rc=$?; [ "$rc" = 5 ] && echo "error: pytest collected no test" >&2; exit "$rc"; }
