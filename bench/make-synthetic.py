#!/usr/bin/env python3
"""Writes a large synthetic BF16 safetensors file for memory measurements of streaming decode.

    bench/.venv/bin/python bench/make-synthetic.py OUT.safetensors --gib 2

Tensors of 64 Mi elements each (128 MiB), normal(0, 0.02) rounded to BF16, each tensor from its
own fixed seed (the file is the same on every run). Random-ish weights: the archive is about 1.5x
smaller than the file, so the decoder has real entropy-decoding work, as with a trained model.
"""
import argparse
import json
import struct

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--gib", type=float, default=2.0)
a = ap.parse_args()
per = 64 << 20  # elements per tensor
count = max(1, int(a.gib * (1 << 30) / (2 * per)))
header, off = {}, 0
for i in range(count):
    header[f"layers.{i}.weight"] = {"dtype": "BF16", "shape": [per // 4096, 4096], "data_offsets": [off, off + 2 * per]}
    off += 2 * per
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(a.out, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for i in range(count):
        x = np.random.default_rng(i).normal(0, 0.02, per).astype(np.float32)
        f.write(((x.view(np.uint32) + 0x8000) >> 16).astype("<u2").tobytes())
print(f"{a.out}: {count} tensors, {off + 8 + len(h)} bytes")
