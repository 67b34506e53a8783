#!/usr/bin/env bash
# Installs ptxas 13.0 (from the PyPI wheel nvidia-cuda-nvcc==13.0.88, ptxas
# only: no dependencies) into .tools/venv, where the device build finds it.
# Idempotent; needs python3 with venv and pip, and access to PyPI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.tools/venv"
ptxas_glob="$venv/lib/python3*/site-packages/nvidia/cu13/bin/ptxas"
if compgen -G "$ptxas_glob" > /dev/null; then
    echo "ptxas already installed: $(echo $ptxas_glob)"
    exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps nvidia-cuda-nvcc==13.0.88
p=$(echo $ptxas_glob)
"$p" --version | tail -1
echo "ptxas installed: $p"
