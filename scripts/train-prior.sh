#!/usr/bin/env bash
# Rebuilds the A* search's default prior, encoder/prior/default.json, from part
# of the public corpus (see docs/PRIOR.md for the file and for why these samples).
#
#   scripts/train-prior.sh [CORPUS_DIR] [OUT]
#
# CORPUS_DIR defaults to ~/.cache/brevis-corpus. Samples, one per dtype family
# the search meets, small where possible:
#   silero-vad-v6/silero_vad.onnx                 FP32 in ONNX (small, every chunk)
#   easyocr-en/english_g2.pth                     FP32 in a PyTorch zip
#   criscross-fp16/criscross_seqonly_finetuned.fp16.pt  FP16 in a PyTorch zip
#   isnet-bg-removal/isnet_quint8.onnx            UINT8 quantized ONNX
#   all-minilm-l6-v2-derived/model.bf16-derived.safetensors  BF16
#   all-minilm-l6-v2-derived/model.f8-derived.safetensors    FP8 (E4M3)
# BF16 and FP8 only exist in the corpus as these derived files (also in the
# ablation), so only one chunk in four of every file is searched (--every 4).
set -euo pipefail
C="${1:-$HOME/.cache/brevis-corpus}"
OUT="${2:-$(dirname "$0")/../encoder/prior/default.json}"
BREVIS="${BREVIS:-cargo run --release -q -p brevis-encoder --bin brevis --}"
$BREVIS train-prior --every 4 -o "$OUT" \
  "$C/silero-vad-v6/silero_vad.onnx" \
  "$C/easyocr-en/english_g2.pth" \
  "$C/criscross-fp16/criscross_seqonly_finetuned.fp16.pt" \
  "$C/isnet-bg-removal/isnet_quint8.onnx" \
  "$C/all-minilm-l6-v2-derived/model.bf16-derived.safetensors" \
  "$C/all-minilm-l6-v2-derived/model.f8-derived.safetensors"
