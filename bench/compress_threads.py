#!/usr/bin/env python3
"""How `brevis compress` scales with threads, in one run on the same files.

    bench/compress_threads.py [--runs N] [--threads T] [--bin [LABEL=]BREVIS ...] [--write] FILE...

For each file, every round runs ``brevis compress -q --threads 1`` and ``--threads T``
(default 2) of every build in turn and keeps each one's best wall time over ``--runs``
rounds (after a warm-up round, which also fills the page cache): builds and thread
counts see the same spells of a shared machine, so their ratios compare like with like.
Every archive of a file must be byte-identical across thread counts (the archive does
not depend on ``--threads``), else the script fails. Prints one line per file and
build; ``--write`` also replaces the compress-threads section of ``bench/RESULTS.md``
(between its markers, leaving the rest) for the first build, and with several builds
adds how much faster the first is than each other one (e.g. ``--bin
/tmp/new --bin f191b07=/tmp/old``: an encoder change timed in the same rounds).

Issue 3 asks that the default effort "scales with --threads"; ``bench/run.sh`` times
one thread only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import filecmp
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from decode import write_section  # the same RESULTS.md sections (bench/ is on sys.path)

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
START = "<!-- compress-threads:start -->"
END = "<!-- compress-threads:end -->"


def compress(binary: str, src: Path, out: Path, threads: int) -> float:
    t = time.perf_counter()
    subprocess.run([binary, "compress", "-q", "-f", "--threads", str(threads), str(src), "-o", str(out)], check=True)
    return time.perf_counter() - t


def git_rev() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append",
                    help="a brevis binary, optionally LABEL=PATH (repeat for several; default "
                         "target/release/brevis)")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--threads", type=int, default=2, help="the thread count set against one (default 2)")
    ap.add_argument("--write", action="store_true", help="replace the section of bench/RESULTS.md")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    specs = args.bin or [str(REPO / "target" / "release" / "brevis")]
    # LABEL=PATH or PATH (labelled by itself).
    labels = {spec.partition("=")[2] or spec: spec.partition("=")[0] for spec in specs}
    bins = list(labels)
    counts = (1, args.threads)
    rows = []
    others = []  # (file, label, 1-thread s, T-thread s) of every build but the first
    with tempfile.TemporaryDirectory(prefix="brevis-compress-threads-") as tmp:
        for src in args.files:
            runs = [(b, t) for b in bins for t in counts]
            outs = {r: Path(tmp) / f"{i}.brv" for i, r in enumerate(runs)}
            best = {r: float("inf") for r in runs}
            for rnd in range(args.runs + 1):
                for r in runs:
                    s = compress(r[0], src, outs[r], r[1])
                    if rnd > 0:
                        best[r] = min(best[r], s)
            for b in bins:
                if not filecmp.cmp(outs[(b, 1)], outs[(b, args.threads)], shallow=False):
                    raise SystemExit(f"{src}: {b} wrote different archives at 1 and {args.threads} threads")
                one, many = best[(b, 1)], best[(b, args.threads)]
                mb = src.stat().st_size / 1e6
                print(f"{src}  {b}  1 thread {one:.2f} s  {args.threads} threads {many:.2f} s  "
                      f"{args.threads} / 1 = {one / many:.2f}x")
                if b == bins[0]:
                    rows.append((src, mb, one, many))
                else:
                    others.append((src, labels[b], one, many, rows[-1]))
    if args.write:
        corpus = os.environ.get("BREVIS_CORPUS", str(Path.home() / ".cache" / "brevis-corpus"))
        name = lambda p: str(p).removeprefix(corpus).lstrip("/")  # noqa: E731
        t = args.threads
        lines = [
            "## Compression across threads",
            "",
            f"- Command: `bench/compress_threads.py --runs {args.runs} --threads {t} --write "
            + "".join(f"--bin {spec} " for spec in (specs if len(specs) > 1 else []))
            + " ".join(name(p) for p, *_ in rows) + "` (paths under the corpus)",
            f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; brevis git {git_rev()}; "
            f"nproc {os.cpu_count()}, {platform.machine()}",
            "- Best wall time of each over the rounds, the thread counts taking turns; `brevis compress "
            "--threads N` (default effort), whole process. The archives are byte-identical at 1 and "
            f"{t} threads (checked).",
            "",
            f"| file | MB | 1 thread s | {t} threads s | 1 thread MB/s | {t} threads MB/s | {t} ÷ 1 |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for p, mb, one, many in rows:
            lines.append(f"| `{name(p)}` | {mb:.1f} | {one:.2f} | {many:.2f} | {mb / one:.1f} | "
                         f"{mb / many:.1f} | {one / many:.2f}x |")
        if others:
            first = labels[bins[0]]
            lines += [
                "",
                f"The same rounds, other builds: how much faster the table's build (`{first}`) is "
                "than each (the other build's time ÷ its, at the same thread count).",
                "",
                f"| file | build | 1 thread s | {t} threads s | `{first}` faster, 1 thread | "
                f"`{first}` faster, {t} threads |",
                "| --- | --- | ---: | ---: | ---: | ---: |",
            ]
            for p, label, one, many, (_, _, first_one, first_many) in others:
                lines.append(f"| `{name(p)}` | `{label}` | {one:.2f} | {many:.2f} | {one / first_one:.2f}x | "
                             f"{many / first_many:.2f}x |")
            for label in dict.fromkeys(o[1] for o in others):
                mine = [o for o in others if o[1] == label]
                sums = [sum(o[i] for o in mine) for i in (2, 3)]
                firsts = [sum(o[4][i] for o in mine) for i in (2, 3)]
                lines.append(f"| all files (total time) | `{label}` | {sums[0]:.2f} | {sums[1]:.2f} | "
                             f"{sums[0] / firsts[0]:.2f}x | {sums[1] / firsts[1]:.2f}x |")
        write_section("\n".join(lines) + "\n", START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
