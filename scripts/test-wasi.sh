#!/usr/bin/env bash
# The format and decoder crates' unit tests compiled to WebAssembly (wasm32-wasip1,
# with SIMD128 as the npm package is built) and run under Node's WASI: the code
# paths only WebAssembly takes (`cfg(target_arch = "wasm32")`: the SIMD unpacking,
# the one-loop-for-every-width unpacking, the Huffman refills' byte swap) are held
# to the same tests (and clippy) as the native ones. Criterion benches run the
# same way:
#
#   scripts/test-wasi.sh                       the tests
#   scripts/test-wasi.sh bench [FILTER...]     cargo bench -p brevis-format --bench coders
#
# Needs the wasm32-wasip1 target (rustup target add wasm32-wasip1) and Node 20+.
# Builds into target/wasi, so that RUSTFLAGS never invalidate the native build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_WASM32_WASIP1_RUNNER="node --no-warnings $ROOT/scripts/wasi-runner.mjs"
export RUSTFLAGS="-C target-feature=+simd128"
common=(--target wasm32-wasip1 --target-dir target/wasi)
if [[ ${1:-} == bench ]]; then
  shift
  exec cargo bench -p brevis-format "${common[@]}" --bench coders -- "$@"
fi
common+=(--release)
cargo clippy -q -p brevis-format -p brevis-decoder "${common[@]}" -- -D warnings
cargo test -q -p brevis-format "${common[@]}" --lib
cargo test -q -p brevis-decoder "${common[@]}" --lib
