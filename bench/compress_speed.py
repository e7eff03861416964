#!/usr/bin/env python3
"""Pooled single-thread compression speed of brevis and ZipNN from bench/run.sh's results.

    bench/compress_speed.py [RESULTS.json ...]   (default bench/results.json)

Sums the original bytes and each tool's compress time over every file of a run (ZipNN's
time is that of the mode RESULTS.md reports for the file) and prints MB/s for both and
brevis ÷ ZipNN: issue 3's "default effort compresses at least half as fast as ZipNN".
"""
import json
import sys

for path in sys.argv[1:] or ["bench/results.json"]:
    run = json.load(open(path))
    original = brevis = zipnn = 0.0
    for f in run["files"]:
        original += f["original_bytes"]
        brevis += f["tools"]["brevis"]["compress_s"]
        zipnn += f["tools"]["zipnn"]["compress_s"]
    print(f"{path} ({run['date']}, {len(run['files'])} files, {original / 1e6:,.1f} MB): "
          f"brevis {original / brevis / 1e6:.1f} MB/s ({brevis:.1f} s), "
          f"ZipNN {original / zipnn / 1e6:.1f} MB/s ({zipnn:.1f} s), brevis / ZipNN {zipnn / brevis:.3f}x")
