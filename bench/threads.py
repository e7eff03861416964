#!/usr/bin/env python3
"""Two-thread scaling of one or more brevis builds on the same archives.

    bench/threads.py [--runs N] --bin OLD --bin NEW ARCHIVE...

Every round runs ``brevis verify -q --threads 1`` and ``--threads 2`` of every build on
every archive in turn, and keeps each one's best wall time over ``--runs`` rounds
(after a warm-up round): builds, archives and thread counts see the same spells of a
shared machine, so their ratios compare like with like (archives of one file made by
two encoder builds, too). Prints one line per archive and
build: both times and the 2 ÷ 1 ratio. What ``bench/decode.sh`` measures for the
RESULTS.md table, for builds side by side (before and after a change).

With several builds, each line after the first build's also gives the paired ratio at
each thread count: the median, over the rounds, of this build's time ÷ the first
build's in the same round. Best times need a quiet spell for each run; on a busy
shared machine the paired ratio shows a change of 1-2% that best times may not."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time


def verify(binary: str, archive: str, threads: int) -> float:
    """Wall seconds of one `brevis verify -q --threads THREADS ARCHIVE` by `binary`."""
    t = time.perf_counter()
    subprocess.run([binary, "verify", "-q", "--threads", str(threads), archive], check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, help="a brevis binary (repeat for several)")
    ap.add_argument("--runs", type=int, default=15, help="rounds (default 15)")
    ap.add_argument("archives", nargs="+")
    args = ap.parse_args()

    # Every round runs every archive with every build at both thread counts, so
    # archives of one model made by two encoders (say, two chunk sizes) compare in
    # the same spells too.
    runs = [(a, b, t) for a in args.archives for b in args.bin for t in (1, 2)]
    times: dict[tuple[str, str, int], list[float]] = {r: [] for r in runs}
    for rnd in range(args.runs + 1):
        for a, b, t in runs:
            s = verify(b, a, t)
            if rnd > 0:  # round 0 warms the page cache and the binaries
                times[(a, b, t)].append(s)
    for archive in args.archives:
        first = args.bin[0]
        for b in args.bin:
            one, two = min(times[(archive, b, 1)]), min(times[(archive, b, 2)])
            line = f"{archive}  {b}  1 thread {one:.4f} s  2 threads {two:.4f} s  2 / 1 = {one / two:.3f}x"
            if b != first:
                paired = [
                    statistics.median(x / y for x, y in zip(times[(archive, b, t)], times[(archive, first, t)]))
                    for t in (1, 2)
                ]
                line += f"  paired ÷ {first}: 1 thread {paired[0]:.3f}, 2 threads {paired[1]:.3f}"
            print(line)


if __name__ == "__main__":
    main()
