#!/usr/bin/env bash
# The main job. Until the web page lands: the CLI on the bundled fixture model.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo build --release --bin gptlens
./target/release/gptlens run --model tests/fixtures/gpt2-tiny-f32 --prompt "${GPTLENS_PROMPT:-The tokenizer learns 12 pieces, but it}" --top 10
