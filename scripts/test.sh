#!/usr/bin/env bash
# Install what the tests need (skipping what is already there), then run every
# check and test: formatting, clippy, the no_std/wasm build of the decoder, and
# the whole workspace's tests in release mode (the round trips are heavy).
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
fi

# --- checks ------------------------------------------------------------------
log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings

log "cargo doc (warnings are errors: every public item documented, links resolve)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet

log "decoder builds without std"
cargo build --release -p brevis-decoder --no-default-features
if rustup target list --installed 2>/dev/null | grep -q '^wasm32-unknown-unknown$'; then
  log "decoder builds for wasm32-unknown-unknown (no_std)"
  cargo build --release -p brevis-decoder --no-default-features --target wasm32-unknown-unknown
else
  log "wasm32 target unavailable: skipping the wasm32 build check"
fi

# --- tests -------------------------------------------------------------------
log "cargo test (release)"
cargo test --workspace --release

log "the main job: brevis with no arguments"
cargo run --release -q --bin brevis >/dev/null

log "a short fuzz pass (12 s a target; skipped without nightly and cargo-fuzz)"
scripts/fuzz.sh 12
log "all checks passed"
