#!/usr/bin/env bash
# Every test of the project. Run through `npm test`, which runs scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
source target/setup.env

echo "== native: unit, parity with PyTorch, sessions, bad input, CLI, tokenizer"
cargo test --workspace
