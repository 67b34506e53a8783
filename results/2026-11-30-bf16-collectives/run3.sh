#!/usr/bin/env bash
# 2 x H200, run 3: after the review moved the stream bridge of every Python
# op into kernel_py::run_on (kernel_py::run is run_on of one device), the
# whole torch test file (every op on torch tensors, a side stream, CUDA
# graphs, the collectives on both GPUs) with the new wheel.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/py "$OUT"
python3 -m pip install --quiet --no-index --no-deps --target /tmp/py .device-mgpu/kernel_ops-*.whl > "$OUT/pip.log" 2>&1; echo "pip exit $?"
root=$PWD
cd /tmp && PYTHONPATH=/tmp/py timeout 400 python3 -m pytest -q "$root/python/tests/test_torch_cuda.py" > "$OUT/pytest.txt" 2>&1; echo "exit $?"
tail -n 8 "$OUT/pytest.txt"
