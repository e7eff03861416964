#!/usr/bin/env bash
# Does a change make the npm package decode faster? Builds the package at two git
# revisions and times both on the same archives in one Node process, A and B
# alternating (bench/wasm/ab.mjs): MB/s of the raw wasm call (bench/wasm/raw.mjs),
# `decodeArchive` and (where both builds have it) `verifyArchive`.
#
#   bench/wasm/ab.sh REV_A REV_B [FILE...]
#
# REV: a commit, a tag, or WORKTREE (the working tree as it is). Each revision is
# checked out in its own worktree under target/wasm-ab/ and built there with its
# own scripts/build-npm.sh (a first build of a revision takes minutes). FILEs
# (default: the BF16, FP16, FP32 and int8 corpus files of bench/wasm/run.sh) are
# compressed with this tree's brevis, `--fast-decode` unless FAST=0.
# Env: BREVIS_BIN, CORPUS, ROUNDS (default 7). Clean up with
# rm -rf target/wasm-ab && git worktree prune.
set -euo pipefail
# `package` runs in a command substitution: a failed build must stop the script.
shopt -s inherit_errexit
[[ $# -ge 2 ]] || { sed -n '2,15p' "$0"; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CORPUS=${CORPUS:-$HOME/.cache/brevis-corpus}
A=$1; B=$2; shift 2
WORK=$ROOT/target/wasm-ab
mkdir -p "$WORK"
log() { printf '[wasm-ab] %s\n' "$*" >&2; }

package() {  # package REV -> prints the unpacked package's directory
  local rev=$1 src out
  if [[ $rev == WORKTREE ]]; then
    src=$ROOT
  else
    # By commit, not by name: a worktree made for `HEAD` would serve later HEADs.
    rev=$(git -C "$ROOT" rev-parse --short "$rev^{commit}")
    src=$WORK/src-$rev
    [[ -d $src ]] || git -C "$ROOT" worktree add -q --detach "$src" "$rev" >&2
  fi
  log "building the npm package at $rev"
  local tgz
  tgz=$("$src/scripts/build-npm.sh" | tail -1)
  out=$WORK/pkg-$rev
  rm -rf "$out" && mkdir -p "$out"
  tar xzf "$tgz" -C "$out"
  echo "$out/package"
}
pkg_a=$(package "$A")
pkg_b=$(package "$B")

if [[ -z ${BREVIS_BIN:-} ]]; then
  (cd "$ROOT" && cargo build --release -q --bin brevis)
  BREVIS_BIN=$ROOT/target/release/brevis
fi
if [[ $# -eq 0 ]]; then
  set -- "$CORPUS/all-minilm-l6-v2-derived/model.bf16-derived.safetensors" \
    "$CORPUS/all-minilm-l6-v2-derived/model.f16-derived.safetensors" \
    "$CORPUS/all-minilm-l6-v2/model.safetensors" \
    "$CORPUS/all-minilm-l6-v2-int8-onnx/model.onnx"
fi
flags=(--fast-decode)
[[ ${FAST:-1} == 0 ]] && flags=()
archives=()
for f in "$@"; do
  brv=$WORK/$(basename "$f")${flags[*]:+.fast}.brv
  "$BREVIS_BIN" compress -q -f "${flags[@]}" -o "$brv" "$f"
  archives+=("$brv")
done
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
echo "Made by \`bench/wasm/ab.sh $A $B\`${FAST:+ (FAST=$FAST)} on $(date -u +%Y-%m-%d), $cpu, $(nproc) cores, Node $(node --version)."
label() { if [[ $1 == WORKTREE ]]; then echo "the working tree at $(git -C "$ROOT" rev-parse --short HEAD)"; else git -C "$ROOT" rev-parse --short "$1"; fi; }
echo "A = $(label "$A"), B = $(label "$B"); archives by $("$BREVIS_BIN" --version) ${flags[*]}; best of ${ROUNDS:-7} rounds, MB/s of output."
echo
node --expose-gc "$HERE/ab.mjs" --a "$pkg_a" --b "$pkg_b" --rounds "${ROUNDS:-7}" "${archives[@]}"
