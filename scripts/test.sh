#!/usr/bin/env bash
# Every test of the project. Run through `npm test`, which runs scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
source target/setup.env

# Mesa (lavapipe) and Chromium's GPU process want a runtime directory: a private one, removed at exit.
XDG_RUNTIME_DIR=$(mktemp -d)
export XDG_RUNTIME_DIR
trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT

# --- lint: the Rust is formatted (rustfmt.toml) and clippy-clean, so a reader meets one style and
# no warning hides a new one. The TypeScript is type-checked by the package's and the page's builds.
echo "== lint: cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings

# --- native. crate/tests/gpu.rs runs the PyTorch parity fixtures on a GPU (Mesa's lavapipe here):
# with the Vulkan driver installed, REQUIRE_GPU=1 makes a missing adapter a failure, not a skip.
if [ "${GPU:-0}" = 1 ]; then
  echo "== native: unit, parity with PyTorch on the CPU and on the GPU (lavapipe, REQUIRE_GPU=1), sessions, bad input, CLI, tokenizer"
  REQUIRE_GPU=1 cargo test --workspace
else
  echo "== native: unit, parity with PyTorch on the CPU, sessions, bad input, CLI, tokenizer"
  echo "   (the GPU tests, crate/tests/gpu.rs, will say SKIPPED: no Vulkan driver, GPU=${GPU:-unset}; see scripts/setup.sh)"
  cargo test --workspace
fi

# --- npm package `gptlens` (crate/js): the wasm builds (skipped when unchanged), the packed tarball
# installed into a fresh project and run in Node, then the same tarball in headless Chromium:
# threaded build on an isolated page, single-thread fallback elsewhere, bit-identical logits.
if [ "$WASM" = 1 ] && [ "$WASM_BINDGEN" = 1 ] && [ "$WASM_PACK" = 1 ]; then
  echo "== npm package: build, pack, install the tarball, run it in Node"
  tests/package/run.sh
  if [ "$BROWSER" = 1 ] && [ "$THREADS" = 1 ]; then
    echo "== npm package in headless Chromium: threads, fallback, same logits"
    # Chromium has a WebGPU adapter (SwiftShader): the WebGPU cases must find it.
    REQUIRE_GPU=1 tests/support/run-node-tests.sh browser tests/browser/threads.test.mjs
  else
    echo "== SKIPPED npm package in Chromium: needs Chromium (BROWSER=$BROWSER) and the nightly for the threaded build (THREADS=$THREADS); see scripts/setup.sh"
  fi
else
  echo "== SKIPPED npm package: needs the wasm32 target, wasm-bindgen and wasm-pack (WASM=$WASM WASM_BINDGEN=$WASM_BINDGEN WASM_PACK=$WASM_PACK); see scripts/setup.sh"
fi

# --- wasm bindings and SIMD128 kernels (crate/tests/wasm.rs, the tests in crate/src/kernels/simd128.rs):
# the PyTorch fixtures through the JS API, and the explicit SIMD kernels bit for bit against their
# portable twins, in Node and then in headless Chromium (flags in crate/webdriver.json).
# The WebGPU tests (crate/tests/wasm_gpu.rs, every test name has `webgpu`): the PyTorch fixtures and
# sessions on the browser's GPU (SwiftShader with --enable-unsafe-webgpu). Node has no WebGPU, so
# the Node run leaves them out (`--skip webgpu`; the runner says "no tests to run!" for that file)
# and Chromium runs them.
# wasm has no environment at run time: REQUIRE_GPU is compiled into the tests (option_env!), set
# for both runs alike so that the second run does not rebuild them; with it, no adapter = failure.
if [ "$WASM" = 1 ] && [ "$WASM_BINDGEN" = 1 ]; then
  export REQUIRE_GPU=$BROWSER
  echo "== wasm in Node: bindings, parity, SIMD128 kernels (WebGPU tests left out: Node has no WebGPU)"
  cargo test --target wasm32-unknown-unknown --tests -- --skip webgpu
  if [ "$BROWSER" = 1 ]; then
    echo "== wasm in headless Chromium: the same tests, and the WebGPU tests on its GPU (REQUIRE_GPU=1)"
    WASM_BINDGEN_USE_BROWSER=1 WASM_BINDGEN_TEST_TIMEOUT=${WASM_BINDGEN_TEST_TIMEOUT:-120} \
      cargo test --target wasm32-unknown-unknown --tests
  else
    echo "== SKIPPED wasm tests in Chromium, and with them the WebGPU tests: needs chromium and chromedriver (BROWSER=$BROWSER); see scripts/setup.sh"
  fi
  unset REQUIRE_GPU
else
  echo "== SKIPPED wasm tests (and the WebGPU tests): need the wasm32 target and wasm-bindgen-test-runner (WASM=$WASM WASM_BINDGEN=$WASM_BINDGEN); see scripts/setup.sh"
fi

# --- the live page (web/, issue 4): built like `npm start` builds it, served by Vite's preview
# server with COOP/COEP on a free 127.0.0.1 port, driven in headless Chromium by playwright-core:
# typing, every head's canvas, probabilities against the package, a bad file, threads, step and
# generate, screenshots of every view (tests/output/web/), keystroke → redraw timings.
if [ "$BROWSER" = 1 ] && [ "$WASM" = 1 ] && [ "$WASM_BINDGEN" = 1 ] && [ "$WASM_PACK" = 1 ]; then
  echo "== web page in headless Chromium"
  bash scripts/build-wasm.sh
  npm run --silent build -w web
  REQUIRE_GPU=1 tests/support/run-node-tests.sh web tests/web/web.test.mjs
else
  echo "== SKIPPED web page: needs Chromium (BROWSER=$BROWSER) and the wasm build tools (WASM=$WASM WASM_BINDGEN=$WASM_BINDGEN WASM_PACK=$WASM_PACK); see scripts/setup.sh"
fi

# --- fuzzing (crate/fuzz, issue 16): each cargo-fuzz target for a short while from the committed
# seeds (ASan, one worker); SKIPPED without the dated nightly and cargo-fuzz. The first run builds
# the targets (~4.5 min). Long runs: FUZZ_SECONDS=600 bash scripts/fuzz-smoke.sh <target>.
echo "== fuzz smoke: GGUF reader, safetensors + config.json, tokenizer.json, BPE encoding, sampler"
FUZZ_SECONDS=${FUZZ_SECONDS:-10} bash scripts/fuzz-smoke.sh
