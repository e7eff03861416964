#!/usr/bin/env bash
# Makes everything the demo page needs that is not in git, into www/ (all of
# it ignored by git):
#   1. the packed npm package (scripts/build-npm.sh -> npm/dist/*.tgz) and the
#      page's dependencies: `npm ci`, then `npm install --no-save <tgz>`, so the
#      page and its tests use exactly what users get from the registry;
#   2. the real model fixtures (npm/test/fixtures.sh: int8 all-MiniLM-L6-v2 as
#      a transformers.js folder, Silero VAD), made only when missing;
#   3. www/public/: the archives made by the `brevis` CLI, a corrupt and a
#      truncated copy, the plain model (the page's reference), a JSON of sizes
#      beside each archive (zstd -19 of the same files, measured here), the
#      Service Worker example's model.onnx.brv with its size, and ONNX Runtime
#      Web's .wasm files (served locally; the page never leaves 127.0.0.1).
#
#   www/scripts/prepare.sh [BREVIS_BIN]     (default: target/release/brevis)
# Env: BREVIS_TGZ=path skips building the package; BREVIS_WWW_SKIP_NPM=1
# skips step 1 entirely.
set -euo pipefail
WWW=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=$(cd "$WWW/.." && pwd)
BREVIS=${1:-${BREVIS_BIN:-$ROOT/target/release/brevis}}
BREVIS=$(cd "$(dirname "$BREVIS")" && pwd)/$(basename "$BREVIS")
log() { printf '[www-prepare] %s\n' "$*" >&2; }
[[ -x $BREVIS ]] || { log "no brevis binary at $BREVIS (cargo build --release first)"; exit 1; }
command -v zstd > /dev/null || { log "zstd (the CLI) is needed for the comparison figures"; exit 1; }

# ------------------------------------------------------------ 1. packages
if [[ ${BREVIS_WWW_SKIP_NPM:-0} != 1 ]]; then
  TGZ=${BREVIS_TGZ:-}
  [[ -n $TGZ ]] || TGZ=$("$ROOT/scripts/build-npm.sh" | tail -1)
  cd "$WWW"
  # Install scripts are skipped: onnxruntime-node (pulled in by transformers.js,
  # unused in a browser) would download GPU libraries from outside the registry.
  log "npm ci"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  log "npm install --no-save $TGZ"
  npm install --no-save --ignore-scripts --no-audit --no-fund --loglevel=error "$TGZ"
fi

# ------------------------------------------------------------ 2. fixtures
FX=$ROOT/npm/test/fixtures
MODEL=$FX/models/Xenova/all-MiniLM-L6-v2
if [[ ! -f $MODEL/onnx/model_quantized.onnx || ! -f $MODEL/tokenizer.json || ! -f $FX/silero_vad_16k.safetensors ]]; then
  log "making the model fixtures (npm/test/fixtures.sh)"
  "$ROOT/npm/test/fixtures.sh" "$BREVIS"
fi

# ------------------------------------------------------------ 3. public/
PUB=$WWW/public
mkdir -p "$PUB/demo" "$PUB/edge" "$PUB/models/Xenova" "$PUB/ort" "$PUB/ort-tjs"
rm -rf "$PUB/models/Xenova/all-MiniLM-L6-v2"
cp -r "$MODEL" "$PUB/models/Xenova/all-MiniLM-L6-v2"

# compress OUT INPUT: remade only when older than its input or the binary.
compress() {
  local out=$1 in=$2
  if [[ -f $out && $out -nt $BREVIS && -z $(find "$in" -newer "$out" -print -quit) ]]; then
    return
  fi
  log "brevis compress $(basename "$in") -> ${out#"$WWW"/}"
  "$BREVIS" compress -q -f -o "$out" "$in"
}
compress "$PUB/demo/all-MiniLM-L6-v2.brv" "$MODEL"
compress "$PUB/demo/silero_vad_16k.brv" "$FX/silero_vad_16k.safetensors"
# The edge example's archive holds the model under the name it is served as.
EDGE_SRC=$WWW/.edge-src
mkdir -p "$EDGE_SRC"
[[ $EDGE_SRC/model.onnx -nt $MODEL/onnx/model_quantized.onnx ]] || cp "$MODEL/onnx/model_quantized.onnx" "$EDGE_SRC/model.onnx"
compress "$PUB/edge/model.onnx.brv" "$EDGE_SRC/model.onnx"

# Damaged copies: one byte flipped in the middle, and the first 60 %.
python3 - "$PUB/demo/silero_vad_16k.brv" "$PUB/demo/corrupt.brv" "$PUB/demo/truncated.brv" <<'PY'
import sys
src, corrupt, truncated = sys.argv[1:]
data = bytearray(open(src, 'rb').read())
mid = len(data) // 2
data[mid] ^= 0x5A
open(corrupt, 'wb').write(data)
open(truncated, 'wb').write(open(src, 'rb').read()[: len(data) * 6 // 10])
PY

# Sizes beside each archive: original files, the archive, zstd -19 of each
# file (the same files compressed one by one), measured with the zstd CLI.
sizes() {  # sizes ARCHIVE INPUT (a file or a folder)
  local brv=$1 in=$2 json=$1.json
  if [[ -f $json && $json -nt $brv ]]; then return; fi
  log "zstd -19 of $(basename "$in") (for ${json#"$WWW"/})"
  python3 - "$brv" "$in" "$json" "$(zstd --version)" <<'PY'
import hashlib, json, os, subprocess, sys
brv, src, out, zver = sys.argv[1:]
if os.path.isdir(src):
    paths = sorted(os.path.relpath(os.path.join(d, f), src).replace(os.sep, '/')
                   for d, _, fs in os.walk(src) for f in fs)
    full = lambda p: os.path.join(src, p)
else:
    paths = [os.path.basename(src)]
    full = lambda p: src
files = []
for p in paths:
    data = open(full(p), 'rb').read()
    z = subprocess.run(['zstd', '-19', '-q', '-c'], input=data, capture_output=True, check=True).stdout
    files.append({'path': p, 'size': len(data), 'sha256': hashlib.sha256(data).hexdigest(), 'zstd19': len(z)})
doc = {
    'archive': os.path.basename(brv),
    'archiveSize': os.path.getsize(brv),
    'originalSize': sum(f['size'] for f in files),
    'zstd19Size': sum(f['zstd19'] for f in files),
    'zstd': zver + ' (-19, each file on its own)',
    'files': files,
}
json.dump(doc, open(out, 'w'), indent=1)
PY
}
sizes "$PUB/demo/all-MiniLM-L6-v2.brv" "$MODEL"
sizes "$PUB/demo/silero_vad_16k.brv" "$FX/silero_vad_16k.safetensors"
# The Service Worker's sidecar: the size it sends as content-length.
python3 - "$MODEL/onnx/model_quantized.onnx" "$PUB/edge/model.onnx.brv.json" <<'PY'
import hashlib, json, os, sys
src, out = sys.argv[1:]
data = open(src, 'rb').read()
json.dump({'path': 'model.onnx', 'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}, open(out, 'w'))
PY

cat > "$PUB/demo/index.json" <<'JSON'
[
  {"url": "/demo/all-MiniLM-L6-v2.brv", "title": "all-MiniLM-L6-v2 (int8 ONNX + tokenizer)", "note": "a transformers.js model folder"},
  {"url": "/demo/silero_vad_16k.brv", "title": "Silero VAD v6 (FP32 safetensors)", "note": "a voice-activity model"},
  {"url": "/demo/corrupt.brv", "title": "A damaged archive", "note": "one byte flipped"},
  {"url": "/demo/truncated.brv", "title": "A truncated archive", "note": "cut at 60 %"}
]
JSON

# ONNX Runtime Web's wasm (the page's own copy, and the one transformers.js pins).
cp "$WWW"/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.{wasm,mjs} "$PUB/ort/"
TJS_ORT=$WWW/node_modules/@huggingface/transformers/node_modules/onnxruntime-web/dist
[[ -d $TJS_ORT ]] || TJS_ORT=$WWW/node_modules/onnxruntime-web/dist
cp "$TJS_ORT"/ort-wasm-simd-threaded*.wasm "$TJS_ORT"/ort-wasm-simd-threaded*.mjs "$PUB/ort-tjs/"
ls -l "$PUB/demo" "$PUB/edge" >&2
