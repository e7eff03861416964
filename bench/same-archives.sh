#!/usr/bin/env bash
# Do two builds of brevis write byte-identical archives of the corpus?
#
#   bench/same-archives.sh REV_A REV_B [EFFORT...]
#
# Builds each git revision (a commit, a tag, or "WORKTREE" for the working tree
# as it is) in its own worktree and target directory under target/same-archives/,
# then compresses every corpus file of ../shared/corpus/manifest.tsv with both at
# each effort (default: 0 1), single threaded, and compares the archives with
# cmp. Prints one line per file and effort: both builds' compress seconds and
# "same" or "DIFFERENT" (with both sizes); exits 1 if any archive differs. For changes meant to
# speed the encoder up without changing what it writes. The worktrees and builds
# stay for the next run (rm -rf target/same-archives && git worktree prune).
#
# Environment: BREVIS_CORPUS (default ~/.cache/brevis-corpus), EXTRA (more
# `brevis compress` flags, e.g. "--fast-decode"), ONLY (keep the files whose
# manifest path contains this substring).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,19p' "$0"; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${BREVIS_CORPUS:-$HOME/.cache/brevis-corpus}
MANIFEST=$REPO/../shared/corpus/manifest.tsv
A=$1; B=$2; shift 2
EFFORTS=("${@:-0 1}")
# shellcheck disable=SC2206
EFFORTS=(${EFFORTS[*]})
WORK=$REPO/target/same-archives
mkdir -p "$WORK"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

build() {  # build REV -> prints the binary's path
  local rev=$1 src name
  if [[ $rev == WORKTREE ]]; then
    src=$REPO name=WORKTREE
  else
    # Named by commit, not by the name given: "HEAD" must not reuse a
    # worktree made for an older HEAD.
    name=$(git -C "$REPO" rev-parse --short "$rev^{commit}")
    src=$WORK/src-$name
    [[ -d $src ]] || git -C "$REPO" worktree add -q --detach "$src" "$name" >&2
  fi
  CARGO_TARGET_DIR=$WORK/target-$name cargo build --release -q -p brevis-encoder --manifest-path "$src/Cargo.toml" >&2
  echo "$WORK/target-$name/release/brevis"
}
bin_a=$(build "$A")
bin_b=$(build "$B")

differ=0
while IFS=$'\t' read -r _ _ _ _ file _; do
  [[ $file == *"${ONLY:-}"* ]] || continue
  [[ -f $CORPUS/$file ]] || { echo "missing: $CORPUS/$file (run ../shared/corpus/fetch.sh)" >&2; exit 2; }
  for e in "${EFFORTS[@]}"; do
    line="$file effort $e:"
    for side in a b; do
      bin=bin_$side
      start=$(date +%s%N)
      # shellcheck disable=SC2086
      "${!bin}" compress -q -f --threads 1 --effort "$e" ${EXTRA:-} -o "$tmp/$side.brv" "$CORPUS/$file"
      ns=$(($(date +%s%N) - start))
      line+=$(printf ' %s %d.%02d s,' "$side" $((ns / 1000000000)) $((ns / 10000000 % 100)))
    done
    if cmp -s "$tmp/a.brv" "$tmp/b.brv"; then
      line+=" same"
    else
      sa=$(stat -c %s "$tmp/a.brv") sb=$(stat -c %s "$tmp/b.brv")
      line+=" DIFFERENT (a $sa B, b $sb B, $(python3 -c "print(f'{($sb - $sa) / $sa * 100:+.4f}%')"))"
      differ=1
    fi
    echo "$line"
  done
done < <(tail -n +2 "$MANIFEST")
exit $differ
