#!/usr/bin/env bash
# Fifth H200 run, from the repository root with .device-ab/vb5.tar.xz: the
# wheel after the review's merge of the two Python backward bindings, its
# torch tests (plain and variant attention autograd, torch.compile,
# CUDA-graph capture among them).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
D=$(mktemp -d)
tar xJf .device-ab/vb5.tar.xz -C "$D"
S="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$S"
python3 -m pip install --quiet --no-index --no-deps --target "$D/py" "$D"/kernel_ops-*.whl > "$OUT/pip.log" 2>&1; echo "pip exit $?" >> "$S"
(cd /tmp && PYTHONPATH="$D/py" timeout 300 python3 -m pytest -q "$OLDPWD/python/tests/test_torch_cuda.py" "$OLDPWD/python/tests/test_norms_grad.py" > "$OUT/pytest.log" 2>&1); echo "exit $?" >> "$S"; tail -n 2 "$OUT/pytest.log" >> "$S"
cat "$S"
