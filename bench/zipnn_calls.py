#!/usr/bin/env python3
"""ZipNN's in-memory ``decompress()`` of one file, called N times in one process, as
``bench/decode.py`` times it (the same compression: one stream of the file's float
dtype, ``threads=1``). For counting what a call costs beside the decoding, such as
the page faults of its fresh output:

    perf stat -e page-faults bench/.venv/bin/python bench/zipnn_calls.py FILE --calls 1
    perf stat -e page-faults bench/.venv/bin/python bench/zipnn_calls.py FILE --calls 21

(the difference over 20 is one call's). Prints the best call's seconds."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode import zipnn_decoder, zipnn_dtype  # noqa: E402 - the bench's own helpers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--calls", type=int, default=1, help="timed calls after the round-trip check (default 1)")
    args = ap.parse_args()
    call, note = zipnn_decoder(args.file.read_bytes(), zipnn_dtype(args.file))
    if call is None:
        print(note, file=sys.stderr)
        return 1
    best = float("inf")
    for _ in range(args.calls):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    print(f"{args.file}: {note}; best of {args.calls} calls {best:.4f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
