#!/usr/bin/env bash
# npm start: builds the engine (both wasm builds), the gptlens package and the page, then serves
# the page with Vite on http://127.0.0.1:${GPTLENS_PORT:-5173}, cross-origin isolated (COOP/COEP)
# so the engine runs on threads, with the models of assets/models/ and the test fixtures listed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

bash scripts/build-wasm.sh   # skips a build whose inputs are unchanged; builds the package too
npm run --silent build -w web
echo "gptlens: open http://127.0.0.1:${GPTLENS_PORT:-5173}/  (Ctrl-C stops the server)"
exec vite preview web
