#!/usr/bin/env bash
# Whole-file decode throughput (brevis 1 and 2 threads, the library's in-memory decode,
# zstd -3/-19, ZipNN) on the same files in one run; see bench/decode.py. Builds brevis
# unless BREVIS_BIN is set (and the in-memory timer unless DECODE_ALL_BIN is), and uses
# bench/.venv (made by bench/run.sh) for ZipNN when it exists.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z ${BREVIS_BIN:-} ]]; then
  cargo build --release -p brevis-encoder --manifest-path "$REPO/Cargo.toml" >&2
  BREVIS_BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/brevis
fi
# The library's in-memory decode (`decode_all`), built as the CLI is (with `simd`
# and `huge-pages`).
if [[ -z ${DECODE_ALL_BIN:-} ]]; then
  cargo build --release -p brevis-decoder --features simd,huge-pages --example decode_all --manifest-path "$REPO/Cargo.toml" >&2
  DECODE_ALL_BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/examples/decode_all
fi
PY=python3
[[ -x $REPO/bench/.venv/bin/python ]] && PY=$REPO/bench/.venv/bin/python
export BREVIS_BIN DECODE_ALL_BIN BENCH_COMMAND="bench/decode.sh $*"
exec "$PY" "$REPO/bench/decode.py" "$@"
