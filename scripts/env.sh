# Sourced by the scripts: tool paths in the order that matters.
# npm's binaryen (wasm-opt 132) must come before any Debian binaryen, which corrupts
# wasm-bindgen 0.2.130 output.
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export RUSTUP_AUTO_INSTALL=0
