#!/usr/bin/env python3
"""A synthetic fine-tune of a safetensors file, for the --base figures.

    python3 bench/finetune.py BASE.safetensors OUT.safetensors [--frac 0.1] [--scale 1e-3] [--seed 0]

Every F32 tensor keeps its bytes except a random `frac` of its elements, each
multiplied by (1 + e) with e uniform in [-scale, scale] (a small update touching
10% of the weights by default). Other dtypes and the header are unchanged, so the
output has the same names, dtypes and shapes as the base. Pure Python (no numpy).
"""
import argparse
import array
import json
import random
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--frac", type=float, default=0.1)
    ap.add_argument("--scale", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    raw = bytearray(open(a.base, "rb").read())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    start = 8 + n
    touched = total = 0
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        lo, hi = t["data_offsets"]
        xs = array.array("f")
        xs.frombytes(bytes(raw[start + lo : start + hi]))
        k = int(len(xs) * a.frac)
        for i in rng.sample(range(len(xs)), k):
            xs[i] = xs[i] * (1.0 + rng.uniform(-a.scale, a.scale))
        raw[start + lo : start + hi] = xs.tobytes()
        touched += k
        total += len(xs)
    open(a.out, "wb").write(raw)
    print(f"{a.out}: {touched} of {total} F32 weights changed (frac {a.frac}, scale {a.scale}, seed {a.seed})")


if __name__ == "__main__":
    main()
