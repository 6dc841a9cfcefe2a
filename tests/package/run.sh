#!/usr/bin/env bash
# Packs the npm package (npm run pack), installs the tarball into a fresh project in a temporary
# folder, and runs package.test.mjs there with node's test runner. Ends on "package: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/env.sh
repo=$PWD

npm run --silent pack >&2
version=$(node -p 'require("./crate/js/package.json").version')
tarball=$repo/dist/gptlens-$version.tgz

project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
cd "$project"
echo '{ "name": "gptlens-package-test", "private": true, "type": "module" }' > package.json
npm install --no-audit --no-fund --loglevel=error "$tarball" >&2
mkdir tests && cp -r "$repo/tests/package" "$repo/tests/support" tests/

GPTLENS_FIXTURES=$repo/tests/fixtures GPTLENS_MODELS=$repo/assets/models "$repo/tests/support/run-node-tests.sh" package tests/package/package.test.mjs tests/package/crash.test.mjs
