#!/usr/bin/env bash
# `npm run train`: trains gptlens's own model again, from scratch, with the shape and recipe the
# shipped one was trained with (assets/models/gptlens-shakespeare/training.json) on the corpus the
# setup fetched, into target/train/gptlens-shakespeare (GPTLENS_TRAIN_OUT), then checks that its
# loss over the whole validation part is within 0.05 nats/byte of the shipped model's, and draws its
# loss curve. About 19 minutes on 2 cores (GPTLENS_THREADS: the worker threads, default all).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

SHIPPED=assets/models/gptlens-shakespeare
OUT=${GPTLENS_TRAIN_OUT:-target/train/gptlens-shakespeare}
CORPUS=assets/data/shakespeare.txt
if [ ! -f "$CORPUS" ]; then
  echo "the corpus $CORPUS is missing: npm run setup (or bash scripts/fetch-shakespeare.sh) fetches it" >&2
  exit 1
fi

cargo build --release --quiet
rm -rf "$OUT"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) before the run"
target/release/gptlens --threads "${GPTLENS_THREADS:-0}" train --config "$SHIPPED/training.json" --data "$CORPUS" --out "$OUT"
echo "machine: load $(cut -d' ' -f1-3 /proc/loadavg) after the run"
node scripts/loss-curve.mjs "$OUT/training.json" "$OUT/loss-curve.svg"
node - "$SHIPPED/training.json" "$OUT/training.json" <<'JS'
const { readFileSync } = require('node:fs');
const [shipped, again] = process.argv.slice(2).map((path) => JSON.parse(readFileSync(path, 'utf8')));
const difference = Math.abs(again.held_out_loss - shipped.held_out_loss);
console.log(
  `validation loss (whole held-out part): shipped ${shipped.held_out_loss.toFixed(4)}, this run ${again.held_out_loss.toFixed(4)}` +
    ` (|difference| ${difference.toFixed(4)}, allowed 0.05); this run took ${(again.seconds / 60).toFixed(1)} min` +
    ` (the shipped one ${(shipped.seconds / 60).toFixed(1)} min)`,
);
if (!(difference <= 0.05)) {
  console.error('not reproduced: the difference is over 0.05');
  process.exit(1);
}
JS
