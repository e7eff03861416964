#!/usr/bin/env bash
# Install what the tests need (skipping what is already there), then run every
# check and test: formatting, clippy, the no_std/wasm build of the decoder, the
# whole workspace's tests in release mode (the round trips are heavy), the format
# and decoder unit tests as WebAssembly under Node (scripts/test-wasi.sh), the npm
# package's Node tests (npm/test/run.sh: installs wasm-bindgen-cli and wasm-pack
# with cargo the first time, several minutes) and a short fuzz pass (cargo-fuzz,
# installed here where a nightly toolchain is).
#
#   scripts/test.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '\n[test] %s\n' "$*" >&2; }

# --- install ---------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (rustup) first" >&2
  exit 1
fi
if ! command -v cc >/dev/null 2>&1; then
  log "installing a C compiler (the zstd crate builds libzstd from source)"
  apt-get update -qq && apt-get install -y -qq build-essential >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  installed=$(rustup component list --installed 2>/dev/null || true)
  for c in rustfmt clippy; do
    grep -q "^$c" <<<"$installed" || { log "rustup component add $c"; rustup component add "$c"; }
  done
  rustup target list --installed | grep -q '^wasm32-unknown-unknown$' \
    || { log "rustup target add wasm32-unknown-unknown"; rustup target add wasm32-unknown-unknown || true; }
  rustup target list --installed | grep -q '^wasm32-wasip1$' \
    || { log "rustup target add wasm32-wasip1"; rustup target add wasm32-wasip1 || true; }
fi

# The fuzz pass at the end needs cargo-fuzz (and a nightly toolchain, which
# rustup may not be able to fetch here: without one the pass is skipped).
if cargo +nightly --version >/dev/null 2>&1 && ! cargo fuzz --version >/dev/null 2>&1; then
  log "cargo install cargo-fuzz (about half a minute, once)"
  cargo install cargo-fuzz --version 0.13.2 --locked || log "cargo-fuzz did not install: the fuzz pass will be skipped"
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm (Node 20 or later) are needed for the npm package's tests" >&2
  exit 1
fi

# --- checks ------------------------------------------------------------------
log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings

log "cargo doc (warnings are errors: every public item documented, links resolve)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

# As an rlib: the crate is also a cdylib (for wasm-pack, with `--features wasm`,
# which brings std); a no_std cdylib would need its own allocator and panic handler.
log "decoder builds without std"
cargo rustc --release -p brevis-decoder --no-default-features --lib --crate-type rlib
if rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  log "decoder builds for wasm32-unknown-unknown (no_std)"
  cargo rustc --release -p brevis-decoder --no-default-features --lib --crate-type rlib --target wasm32-unknown-unknown
  log "clippy on the wasm bindings (feature wasm, wasm32)"
  cargo clippy -p brevis-decoder --features wasm --target wasm32-unknown-unknown -- -D warnings
else
  log "wasm32 target unavailable: skipping the wasm32 build check"
fi

# --- tests -------------------------------------------------------------------
log "cargo test (release)"
cargo test --workspace --release

# The workspace build turns on brevis-format's `simd`, `recycle` and `huge-pages`
# features (the CLI asks for them); the format crate's own tests run again without them,
# on the safe code alone and zeroed buffers, as WebAssembly and other CPUs get it.
log "brevis-format without features simd, recycle and huge-pages: clippy and tests"
cargo clippy -p brevis-format --all-targets --release -- -D warnings
cargo test -p brevis-format --release -q

if rustup target list --installed 2>/dev/null | grep -q '^wasm32-wasip1$'; then
  log "format and decoder unit tests as WebAssembly (wasm32-wasip1, SIMD128) under Node"
  scripts/test-wasi.sh
else
  log "wasm32-wasip1 target unavailable: skipping the unit tests as WebAssembly"
fi

log "the main job: brevis with no arguments"
cargo run --release -q --bin brevis >/dev/null

log "npm package brevis-decoder: build, pack, Node tests (ONNX Runtime Web, transformers.js)"
npm/test/run.sh target/release/brevis

log "demo page www/: build, then browser tests in Chromium (playwright-core)"
BREVIS_TGZ=$(ls "$PWD"/npm/dist/brevis-decoder-*.tgz | tail -1) www/run-tests.sh target/release/brevis

log "a short fuzz pass (12 s a target; skipped without nightly and cargo-fuzz)"
scripts/fuzz.sh 12
log "all checks passed"
