#!/usr/bin/env python3
"""Order-0 entropy bounds of a safetensors file's tensors, per dtype.

    python3 bench/entropy.py FILE.safetensors [DTYPE]

For every tensor (of DTYPE, if given) it sums, in bytes:
  - the order-0 entropy of each tensor's elements taken as whole words
    (the bound for any coder that models each element independently with one
    table per tensor, tables free);
  - the same with one table per block of 16 rows (tables still free);
  - the entropy of each element given the exponent bits of the previous one
    (bits 3..6 of an FP8 E4M3 byte; meaningful for 1-byte dtypes only).
Used to show how far a file's float bytes can go without modelling beyond
order 0 (bench/RESULTS.md, closing notes). Standard library only.
"""
import collections
import json
import math
import struct
import sys

SIZE = {"F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "F16": 2, "BF16": 2, "F32": 4}


def entropy_bits(items):
    c = collections.Counter(items)
    n = sum(c.values())
    return -sum(x * math.log2(x / n) for x in c.values())


def main(path, only=None):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    base = 8 + n
    total = whole = blocks = ctx = 0.0
    for name, v in header.items():
        if name == "__metadata__" or v["dtype"] not in SIZE or (only and v["dtype"] != only):
            continue
        w = SIZE[v["dtype"]]
        a, e = v["data_offsets"]
        data = b[base + a:base + e]
        words = [data[i:i + w] for i in range(0, len(data), w)]
        total += len(data)
        whole += entropy_bits(words)
        row = v["shape"][-1] if len(v["shape"]) > 1 else len(words)
        blk = row * 16
        blocks += sum(entropy_bits(words[i:i + blk]) for i in range(0, len(words), blk))
        if w == 1:
            pairs = collections.Counter()
            prev = collections.Counter()
            for i in range(1, len(data)):
                c = (data[i - 1] >> 3) & 0xF
                pairs[(c, data[i])] += 1
                prev[c] += 1
            ctx += -sum(x * math.log2(x / prev[c]) for (c, _), x in pairs.items())
    print(f"tensor bytes: {int(total)}")
    print(f"order-0 entropy, one table per tensor: {whole / 8:.0f} bytes ({whole / total:.4f} bits/byte)")
    print(f"order-0 entropy, one table per 16 rows (tables not counted): {blocks / 8:.0f} bytes")
    if ctx:
        print(f"given the previous element's exponent: {ctx / 8:.0f} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
