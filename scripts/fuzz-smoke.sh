#!/usr/bin/env bash
# Runs every cargo-fuzz target in crate/fuzz for a short while (default 20 s each, one at a time,
# one worker: the machine's cores are shared), starting from the committed seeds in
# crate/fuzz/corpus/<target>/. New inputs go to a scratch corpus, so the repo's stays small.
#
#   bash scripts/fuzz-smoke.sh            # every target, 20 s each
#   FUZZ_SECONDS=600 bash scripts/fuzz-smoke.sh gguf
#
# Needs the dated nightly and cargo-fuzz; without them it prints one SKIPPED line and exits 0.
# A crash fails the script and leaves the input in crate/fuzz/artifacts/<target>/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
toolchain="${FUZZ_TOOLCHAIN:-nightly-2026-05-20}"
seconds="${FUZZ_SECONDS:-20}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf safetensors tokenizer_json bpe_encode sampler)

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
  echo "fuzz smoke: SKIPPED (toolchain $toolchain is not installed: rustup toolchain install $toolchain)"
  exit 0
fi
if ! cargo "+$toolchain" fuzz --version >/dev/null 2>&1; then
  echo "fuzz smoke: SKIPPED (cargo-fuzz is not installed: cargo install cargo-fuzz --locked)"
  exit 0
fi

cd "$root/crate/fuzz"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
  mkdir -p "$scratch/$target"
  echo "fuzz smoke: $target for ${seconds}s"
  # ASan (cargo-fuzz's default sanitizer); -rss_limit_mb: a load over 2 GB is a finding.
  cargo "+$toolchain" fuzz run "$target" "$scratch/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 2>"$scratch/$target.log" || {
    tail -n 60 "$scratch/$target.log"
    echo "fuzz smoke: $target FAILED (input in crate/fuzz/artifacts/$target/)"
    exit 1
  }
  grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$scratch/$target.log" | tail -n 2 | sed "s/^/  $target: /"
done
echo "fuzz smoke: ${#targets[@]} targets passed"
