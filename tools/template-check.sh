#!/usr/bin/env bash
# Builds the template (docs/template: my-kernels, my-host, my-python) the
# way a user would: from a copy in a fresh directory OUTSIDE this
# repository, with its path dependencies pointing at this checkout. Then
# prints the ptxas report of my-kernels, runs my-host (GPU if there is one,
# else the CPU emulator) and its tests, builds my-python's wheel with
# maturin (debug profile, the venv of tools/python-venv.sh) and runs its
# pytest tests on the emulator with NumPy arrays.
#
#   tools/template-check.sh
#
# ptxas must be found (KERNEL_REQUIRE_PTXAS=1), without KERNEL_PTXAS set by
# this script where the build can find it by itself. The build reuses the
# repository's target directory (target/, or CARGO_TARGET_DIR), so the
# project's crates compiled by the test suite are not compiled again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
start=$SECONDS

copy="$(mktemp -d "${TMPDIR:-/tmp}/kernel-template.XXXXXX")"
trap 'rm -rf "$copy"' EXIT
case "$copy/" in
  "$root"/*) echo "error: the copy $copy is inside the repository $root; set TMPDIR to a directory outside it" >&2; exit 1 ;;
esac
cp -R "$root/docs/template/." "$copy/"
# The template's path dependencies are relative to docs/template
# (`path = "../../../kernel-device"`); point them at this checkout.
for toml in "$copy"/*/Cargo.toml; do
  sed -i -E "s#path = \"(\.\./){3}([^\"]+)\"#path = \"$root/\2\"#" "$toml"
  if grep -nE 'path = "\.\./\.\./' "$toml"; then
    echo "error: $toml still has a path dependency into the repository after the rewrite (above)" >&2
    exit 1
  fi
  # The repository's versions of the registry crates: nothing new to
  # download, and the compiled dependencies in the target dir are reused.
  cp "$root/Cargo.lock" "$(dirname "$toml")/Cargo.lock"
done
echo "template copied to $copy (outside $root):"
grep -h 'path = ' "$copy"/*/Cargo.toml | sed 's/^/  /'

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export KERNEL_REQUIRE_PTXAS=1
cd "$copy/my-host"
build() { cargo build --bins --tests 2>&1 | tee "$copy/build.log"; return "${PIPESTATUS[0]}"; }
# No fallback: a newcomer's crate must find the ptxas that tools/setup.sh
# installed (the user-level tools dir) by itself.
build

echo "== ptxas report of my-kernels"
"$root/tools/ptxas-report.sh" my_kernels
echo "== my-host"
cargo run --quiet --bin my-host
echo "== cargo test (my-host)"
cargo test --quiet

echo "== my-python: the wheel (maturin) and its pytest tests (NumPy, the emulator)"
py_start=$SECONDS
venv="$("$root/tools/python-venv.sh")"
cd "$copy/my-python"
"$venv/bin/maturin" build --quiet --out "$copy/wheels" --interpreter "$venv/bin/python"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$copy"/wheels/my_python-*.whl
# pytest exits 5 when it collected no test: that is a failure here too.
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests || { rc=$?; [ "$rc" = 5 ] && echo "error: pytest collected no test" >&2; exit "$rc"; }
echo "my-python checked in $((SECONDS - py_start)) s"
echo "template check passed in $((SECONDS - start)) s"
