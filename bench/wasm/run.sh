#!/usr/bin/env bash
# Decode throughput of the npm package (wasm, under Node) against native
# brevis, zstd and zstddec, in one run: writes bench/wasm/RESULTS.md.
#
#   bench/wasm/run.sh [FILE...]     (default: the BF16, FP16, FP32 and int8 corpus files)
#
# Env: BREVIS_BIN (default: cargo build --release), CORPUS (default
# ~/.cache/brevis-corpus, fetched with ../shared/corpus/fetch.sh if missing),
# REPEAT (default 5). Compressed files are kept in bench/out/wasm/.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORPUS=${CORPUS:-$HOME/.cache/brevis-corpus}
log() { printf '[bench-wasm] %s\n' "$*" >&2; }

if [[ -z ${BREVIS_BIN:-} ]]; then
  (cd "$ROOT" && cargo build --release -q --bin brevis)
  BREVIS_BIN=$ROOT/target/release/brevis
fi
if [[ $# -eq 0 ]]; then
  [[ -d $CORPUS/all-minilm-l6-v2-derived ]] || "$ROOT/../shared/corpus/fetch.sh" "$CORPUS"
  set -- "$CORPUS/all-minilm-l6-v2-derived/model.bf16-derived.safetensors" \
    "$CORPUS/all-minilm-l6-v2-derived/model.f16-derived.safetensors" \
    "$CORPUS/all-minilm-l6-v2/model.safetensors" \
    "$CORPUS/all-minilm-l6-v2-int8-onnx/model.onnx"
fi
TGZ=$("$ROOT/scripts/build-npm.sh" | tail -1)
cd "$HERE"
npm ci --no-audit --no-fund --loglevel=error
npm install --no-save --no-audit --no-fund --loglevel=error "$TGZ"
WORK=$ROOT/bench/out/wasm
mkdir -p "$WORK"
rev=$(cd "$ROOT" && git rev-parse --short HEAD)
{
  echo "# Decode throughput: wasm (Node) vs native"
  echo
  echo "Made by \`bench/wasm/run.sh\` at $rev on $(date -u +%Y-%m-%d) (2-core machine, other work may run alongside)."
  echo "Native rows are whole processes (\`brevis verify --threads N\`: read, decode, every checksum and file digest;"
  echo "\`zstd -d -c > /dev/null\`), started and timed by \`bench/wasm/timer.py\` (Node's own fork costs more the more memory"
  echo "Node holds: see there); wasm rows are the calls alone on bytes in memory: the raw wasm call (\`bench/wasm/raw.mjs\`:"
  echo "the archive copied into wasm memory, each file decoded by one \`ArchiveHandle.read_file\` and copied out),"
  echo "\`verifyArchive\` and the \`BrevisDecompressionStream\` fed 64 KiB pieces, \`decodeArchive\`, and zstddec's"
  echo "\`decode\` of the zstd -19 file."
  echo "\"wasm verify\" (\`verifyArchive\`) is the like-for-like figure for native \`verify\`: both decode every chunk and"
  echo "check every digest, and neither hands the decoded bytes on. \"wasm stream\" does that work and more: it copies"
  echo "every decoded chunk out of wasm memory into a new array for the stream's reader. Neither fills an array the size"
  echo "of the file (\"raw\" does: Node touches that fresh memory page by page)."
  echo "\"native 1T to a pipe\" is the stream's native twin: \`brevis decompress -c --threads 1\` (every file's bytes"
  echo "handed on, each chunk once its checksums pass) into a pipe that \`timer.py\` empties on the other core, as the"
  echo "next command of a shell pipeline would; the kernel copies each byte into the pipe, as the stream copies it out."
  echo "The package's APIs (verify, stream, \`decodeArchive\`) hash SHA-256 files with node:crypto, as native \`verify\`"
  echo "uses the CPU's SHA instructions; the raw call hashes them in wasm."
  echo
  node --expose-gc decode.mjs --brevis "$BREVIS_BIN" --work "$WORK" --repeat "${REPEAT:-5}" "$@"
  fast=()
  for f in "$@"; do fast+=("$WORK/$(basename "$f").fast.brv"); done
  echo
  echo "## Where the stream's time goes"
  echo
  echo "\`node bench/wasm/stream-cost.mjs --repeat $((3 * ${REPEAT:-5}))\` on the \`--fast-decode\` archives above: each way adds one cost"
  echo "to the way before, all fed 64 KiB pieces (see the script). \"events\" is the wasm decoder's own work, as"
  echo "\`verifyArchive\` does it; \"+ copy\" copies each decoded chunk out into one reused array; \"+ new arrays\" into an"
  echo "array of its own, as the stream hands its reader (memory in no cache yet); \"+ JS events\" is the package's"
  echo "decoder around the same calls; \"stream\" is \`BrevisDecompressionStream\` through \`pipeThrough\`. Costs are"
  echo "differences of bests and of medians over the rounds, so one may come out below zero when the machine is noisy."
  echo
  node stream-cost.mjs --repeat $((3 * ${REPEAT:-5})) "${fast[@]}"
} > RESULTS.md.tmp
mv RESULTS.md.tmp RESULTS.md
log "wrote bench/wasm/RESULTS.md"
