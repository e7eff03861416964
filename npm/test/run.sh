#!/usr/bin/env bash
# Builds and packs brevis-decoder, installs the tarball (what users get from
# `npm install`) with the test dependencies, makes the fixtures and runs the
# Node tests.
#
#   npm/test/run.sh [BREVIS_BIN]      (default: target/release/brevis)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
log() { printf '[npm-test] %s\n' "$*" >&2; }

# The brevis binary, as an absolute path (the steps below change directory).
BREVIS=${1:-${BREVIS_BIN:-$ROOT/target/release/brevis}}
BREVIS=$(cd "$(dirname "$BREVIS")" && pwd)/$(basename "$BREVIS")

TGZ=$("$ROOT/scripts/build-npm.sh" | tail -1)
cd "$HERE"
# onnxruntime-node (a dependency of transformers.js) has an install script that
# downloads GPU libraries from outside the registry; its CPU binaries are in
# the package itself, so scripts are skipped.
log "npm ci (onnxruntime-web, @huggingface/transformers)"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
log "npm install $TGZ"
npm install --no-save --ignore-scripts --no-audit --no-fund --loglevel=error "$TGZ"
"$HERE/fixtures.sh" "$BREVIS"
log "tsc: the package's types against a file that uses every export"
npx --no-install tsc -p tsconfig.json
log "node --test"
node --test api.test.mjs dedup.test.mjs ort.test.mjs transformers.test.mjs
