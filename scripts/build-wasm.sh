#!/usr/bin/env bash
# Builds what the npm package `gptlens` (crate/js) ships:
#   crate/js/wasm/st   single-thread build, SIMD128, with the WebGPU backend (feature `gpu`)
#                      (stable Rust, .cargo/config.toml)
#   crate/js/wasm/mt   threaded build (wasm-bindgen-rayon; nightly + .cargo/threads.toml), CPU only:
#                      wgpu's browser objects cannot be shared across threads, so a page that runs
#                      on WebGPU loads the single-thread build. Built when target/setup.env says THREADS=1
#   crate/js/dist      the TypeScript layer, compiled against the single-thread build's declarations
# `--target web` serves both browsers and Node: the package hands the glue the .wasm bytes in Node.
# A build whose inputs (sources, lock file, cargo config, toolchain) are unchanged is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
[ -f target/setup.env ] && source target/setup.env

NIGHTLY=nightly-2026-05-20
OUT=crate/js/wasm
note() { echo "build-wasm: $*" >&2; }

# wasm-pack would otherwise download a wasm-opt from GitHub or fall back to Debian's binaryen,
# which corrupts wasm-bindgen 0.2.130 output; env.sh puts npm's binaryen first on PATH.
if [ "$(command -v wasm-opt)" != "$PWD/node_modules/.bin/wasm-opt" ]; then
  note "wasm-opt must come from npm's binaryen (run npm ci); found: $(command -v wasm-opt || echo none)"
  exit 1
fi

# Everything that decides a build's output, hashed; stored beside the output.
fingerprint() {
  { rustc --version; wasm-bindgen --version; wasm-opt --version; echo "$*"
    find crate/src crate/Cargo.toml Cargo.toml Cargo.lock .cargo -type f -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-32
}

# build NAME [cargo args…]: wasm-pack into $OUT/NAME unless its fingerprint is unchanged.
build() {
  local name=$1; shift
  local key; key=$(fingerprint "$name" "$@")
  if [ "$(cat "$OUT/$name/.fingerprint" 2>/dev/null)" = "$key" ]; then
    note "$name: up to date"
    return
  fi
  local started=$SECONDS
  rm -rf "${OUT:?}/$name"
  # --no-pack: the package's own package.json lists these files; wasm-pack's would shadow it.
  local cargo_args=(); [ $# -gt 0 ] && cargo_args=(-- "$@")
  wasm-pack --quiet build crate --mode no-install --release --target web --no-pack --out-dir "js/wasm/$name" "${cargo_args[@]}"
  rm -f "$OUT/$name/.gitignore"
  echo "$key" > "$OUT/$name/.fingerprint"
  note "$name: built in $((SECONDS - started)) s, $(du -k "$OUT/$name"/*.wasm | cut -f1) KiB wasm"
}

build st

if [ "${THREADS:-0}" = 1 ]; then
  # wasm-pack runs cargo in crate/, so the config path must be absolute. CARGO_TARGET_DIR repeats
  # the config's target-dir because wasm-pack looks for the .wasm via `cargo metadata`, which does
  # not see --config: without it, it would package a stale single-thread .wasm from target/.
  RUSTUP_TOOLCHAIN=$NIGHTLY CARGO_TARGET_DIR=$PWD/target/threads build mt --no-default-features --features threads --config "$PWD/.cargo/threads.toml"
  # wasm-bindgen-rayon's worker script imports the glue as '../../..', a directory that only
  # bundlers resolve (via package.json). Naming the file works for bundlers and plain browsers alike.
  helper=$(ls "$OUT"/mt/snippets/wasm-bindgen-rayon-*/src/workerHelpers.js)
  if grep -q "import('../../..')" "$helper"; then
    sed -i "s|import('../../..')|import('../../../gptlens.js')|" "$helper"
  elif ! grep -q "import('../../../gptlens.js')" "$helper"; then
    note "wasm-bindgen-rayon's workerHelpers.js changed: check how it imports the glue"
    exit 1
  fi
else
  rm -rf "${OUT:?}/mt"  # never ship a threaded build older than the sources
  note "mt: skipped (THREADS=${THREADS:-unset} in target/setup.env: no $NIGHTLY toolchain; run scripts/setup.sh)"
fi

npm run --silent build -w gptlens
