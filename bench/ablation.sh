#!/usr/bin/env bash
# Search ablation (issue 3): archive bytes and single-thread compress time on a
# few corpus files for effort 0/1/2, A* vs the menu search, prior on/off,
# context-coded literals on/off, sampled search of large tensor chunks on/off,
# like chunks built from an earlier one's program shape on/off
# and the --fast-decode knob, all in one run.
# Writes bench/ABLATION.md and the same table into bench/RESULTS.md.
#
#   bench/ablation.sh [CORPUS_DIR]
#
# BREVIS: the binary to run (default: target/release/brevis, built first).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
C="${1:-$HOME/.cache/brevis-corpus}"
if [ -z "${BREVIS:-}" ]; then
  (cd "$here/.." && cargo build --release -q -p brevis-encoder)
  BREVIS="${CARGO_TARGET_DIR:-$here/../target}/release/brevis"
fi
FILES=(
  "$C/all-minilm-l6-v2-derived/model.bf16-derived.safetensors"
  "$C/all-minilm-l6-v2-derived/model.f16-derived.safetensors"
  "$C/all-minilm-l6-v2-derived/model.f8-derived.safetensors"
  "$C/all-minilm-l6-v2/model.safetensors"
  "$C/all-minilm-l6-v2-int8-onnx/model.onnx"
  "$C/silero-vad-v6/silero_vad_16k.safetensors"
)
CONFIGS=(
  "menu e0|--search menu --effort 0"
  "menu e1|--search menu --effort 1"
  "menu e2|--search menu --effort 2"
  "menu e1 no-ctx|--search menu --effort 1 --no-ctx"
  "astar e0|--search astar --effort 0"
  "astar e1 (default)|--search astar --effort 1"
  "astar e2|--search astar --effort 2"
  "astar e0 prior=none|--search astar --effort 0 --prior none"
  "astar e1 prior=none|--search astar --effort 1 --prior none"
  "astar e1 no-ctx|--search astar --effort 1 --no-ctx"
  "astar e1 no-sample|--search astar --effort 1 --no-sample"
  "astar e1 no-reuse|--search astar --effort 1 --no-reuse"
  "astar e1 fast-decode|--search astar --effort 1 --fast-decode"
)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
raw="$tmp/results.tsv"
for cfg in "${CONFIGS[@]}"; do
  name="${cfg%%|*}"; flags="${cfg#*|}"
  for f in "${FILES[@]}"; do
    # Wall seconds, and user + system CPU seconds (steadier on a shared machine).
    # shellcheck disable=SC2086
    /usr/bin/time -f '%e %U %S' -o "$tmp/time" "$BREVIS" -q compress "$f" -o "$tmp/out.brv" -f --threads 1 $flags
    read -r wall user sys < "$tmp/time"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(basename "$f")" "$(stat -c %s "$tmp/out.brv")" "$wall" "$(echo "$user + $sys" | bc)" >> "$raw"
    echo "$name $(basename "$f") $(stat -c %s "$tmp/out.brv")" >&2
  done
done
python3 "$here/ablation_table.py" "$raw" "$(cd "$here/.." && git rev-parse --short HEAD)" "$0 $*" > "$here/ABLATION.md"
echo "wrote $here/ABLATION.md" >&2
