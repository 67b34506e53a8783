#!/usr/bin/env bash
# Builds the book (docs/, mdBook) into target/book and prints where it is:
#
#   tools/book.sh            # HTML in target/book/index.html
#   tools/book.sh serve      # mdbook serve: rebuilds and reloads on edits
#
# mdBook is optional and not installed by tools/setup.sh (compiling it takes
# minutes): `cargo install mdbook --version 0.5.x --locked`, with x the
# latest 0.5 release (`cargo search mdbook`). CI does not build the HTML: it
# compiles the book's Rust code blocks with `cargo test -p kernel-book`
# (docs/doctest) and builds the template of the "Your own
# kernels crate" chapter with tools/template-check.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v mdbook > /dev/null; then
  echo "error: mdbook is not installed; install it with \`cargo install mdbook --version 0.5.x --locked\` (x: the latest 0.5 release), or read docs/src/*.md directly" >&2
  exit 1
fi
case "$(mdbook --version)" in
  "mdbook v0.5."*) ;;
  *) echo "warning: $(mdbook --version) found; the book is written for mdBook 0.5" >&2 ;;
esac
cd "$root/docs"
if [ "${1:-}" = serve ]; then
  exec mdbook serve
fi
mdbook build
echo "the book: $root/target/book/index.html"
