#!/usr/bin/env python3
"""Decompressing and verifying a deduplicated archive, several builds in turn.

    bench/dedup.py [--runs N] [--copies K] [--out DIR] [--write] --bin [LABEL=]BREVIS...

(``--bin`` once per build, the first one compressing; LABEL names it in the table.)

The corpus's model files K times over (default 2), each time in a folder of its own,
compressed into one archive by the first build (default flags): every file after the
first set is stored as copies of the first (dedup), so half the output (K = 2) is
copies. Each round, for every build in turn, at one and two threads:

- ``brevis decompress -q --threads N ARCHIVE -o DIR``, DIR emptied before each run
  (not timed); DIR is under ``/dev/shm`` where that exists, so that what is timed is
  the decoding and the copying into the page cache, not a disk;
- the same with the archive from a pipe (``cat ARCHIVE | brevis decompress ...
  /dev/stdin``), which the decoder cannot read twice;
- ``brevis verify -q --threads N ARCHIVE``, which writes nothing.

Prints the best wall time of each over ``--runs`` rounds (after a warm-up round) as
MB/s of output, the peak RSS of one more run of each (``/usr/bin/time -f %M``), and
checks that every decompressed folder holds the corpus's bytes (a byte comparison,
after the timed runs). With ``--write``, replaces the dedup section of
``bench/RESULTS.md``.

A streaming decoder must either hold each copied segment's bytes until its last copy
(memory growing with the model), decode the source again for each copy (CPU), or,
writing files, read the copy back from what it wrote: the builds compared here may
do any of the three."""

from __future__ import annotations

import argparse
import datetime as dt
import filecmp
import platform
import shutil
import subprocess
import time
from pathlib import Path

from decode import OUT, corpus_folder, peak_rss_mb, run, verify_argv, write_section

START, END = "<!-- dedup-bench:start -->", "<!-- dedup-bench:end -->"


def decompress_argv(brevis: str, archive: Path, threads: int, out: Path) -> list[str]:
    """``brevis decompress`` of ``archive`` into ``out`` on ``threads`` threads, quietly."""
    return [brevis, "decompress", "-q", "--threads", str(threads), str(archive), "-o", str(out)]


def labelled(arg: str) -> tuple[str, str]:
    """``LABEL=PATH`` or ``PATH`` (labelled by itself) as (label, path)."""
    label, sep, path = arg.partition("=")
    return (label, path) if sep and "/" not in label else (arg, arg)


def same_tree(a: Path, b: Path) -> bool:
    """Whether folders ``a`` and ``b`` hold the same names with the same bytes."""
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(a / d, b / d) for d in cmp.common_dirs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="a brevis build (repeat to compare)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--out", type=Path, help="where to decompress (default: /dev/shm if there, else bench/out)")
    ap.add_argument("--write", action="store_true", help="replace the dedup section of bench/RESULTS.md")
    args = ap.parse_args()
    builds = [labelled(b) for b in args.bin]
    shm = Path("/dev/shm")
    out = args.out or ((shm if shm.is_dir() else OUT) / "brevis-dedup-out")
    src, entries, size = corpus_folder(args.copies)
    archive = OUT / f"{src.name}.brv"
    t = time.perf_counter()
    run([builds[0][1], "compress", str(src), "-o", str(archive), "-f", "-q"])
    compress_s = time.perf_counter() - t

    def empty_out() -> None:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)

    def decompress(brevis: str, threads: int) -> float:
        empty_out()
        t = time.perf_counter()
        run(decompress_argv(brevis, archive, threads, out))
        return time.perf_counter() - t

    def piped(argv: list[str]) -> None:
        """``argv`` (reading ``/dev/stdin``) with the archive piped in by ``cat``."""
        with subprocess.Popen(["cat", str(archive)], stdout=subprocess.PIPE) as cat:
            subprocess.run(argv, check=True, stdin=cat.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def decompress_piped(brevis: str, threads: int) -> float:
        empty_out()
        t = time.perf_counter()
        piped(decompress_argv(brevis, Path("/dev/stdin"), threads, out))
        return time.perf_counter() - t

    def verify(brevis: str, threads: int) -> float:
        t = time.perf_counter()
        run(verify_argv(brevis, archive, threads))
        return time.perf_counter() - t

    ways = {"decompress": decompress, "decompress from a pipe": decompress_piped, "verify": verify}
    keys = [(i, way, n) for i in range(len(builds)) for way in ways for n in (1, 2)]
    best = {k: float("inf") for k in keys}
    for rnd in range(args.runs + 1):  # the first round warms up
        for i, way, n in keys:
            secs = ways[way](builds[i][1], n)
            if rnd:
                best[(i, way, n)] = min(best[(i, way, n)], secs)
    rss = {}
    exact = {}
    for i, (_, brevis) in enumerate(builds):
        for n in (1, 2):
            rss[(i, "verify", n)] = peak_rss_mb(verify_argv(brevis, archive, n))
            empty_out()
            rss[(i, "decompress", n)] = peak_rss_mb(decompress_argv(brevis, archive, n, out))
            exact[(i, "decompress")] = exact.get((i, "decompress"), True) and same_tree(out, src)
            empty_out()
            with subprocess.Popen(["cat", str(archive)], stdout=subprocess.PIPE) as cat:
                argv = decompress_argv(brevis, Path("/dev/stdin"), n, out)
                rss[(i, "decompress from a pipe", n)] = peak_rss_mb(argv, stdin=cat.stdout)
            way = (i, "decompress from a pipe")
            exact[way] = exact.get(way, True) and same_tree(out, src)
    shutil.rmtree(out, ignore_errors=True)
    archive_bytes = archive.stat().st_size
    archive.unlink()
    shutil.rmtree(src)

    lines = [
        "## Deduplicated archives: decompress and verify",
        "",
        f"- Command: `bench/dedup.py --runs {args.runs} --copies {args.copies} "
        + " ".join(f"--bin {b}" for b in args.bin)
        + "`",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.machine()}, "
        f"Linux {platform.release()}; decompressed into `{out.parent}`",
        f"- The corpus's {len(entries)} model files {args.copies} times, each time in a folder of its own: "
        f"{size / 1e6:,.0f} MB in one archive of {archive_bytes / 1e6:,.0f} MB (default flags, made by the "
        f"first build in {compress_s:.0f} s), all but the first set stored as copies. Best of {args.runs} "
        "rounds after a warm-up, the builds and ways taking turns; MB/s of output; peak RSS of one more run.",
        "",
        "| build | way | 1 thread MB/s | 2 threads MB/s | 2 ÷ 1 | peak RSS 1 thread MB | peak RSS 2 threads MB |"
        + (" 1 thread ÷ first build | 2 threads ÷ first build |" if len(builds) > 1 else "")
        + " output exact |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if len(builds) > 1 else "") + " --- |",
    ]
    for i, (label, _) in enumerate(builds):
        for way in ways:
            mbs = {n: size / best[(i, way, n)] / 1e6 for n in (1, 2)}
            row = (
                f"| {label} | {way} | {mbs[1]:,.0f} | {mbs[2]:,.0f} | {mbs[2] / mbs[1]:.2f}x "
                f"| {rss[(i, way, 1)]:.1f} | {rss[(i, way, 2)]:.1f} |"
            )
            if len(builds) > 1:
                row += "".join(f" {best[(0, way, n)] / best[(i, way, n)]:.2f}x |" for n in (1, 2))
            lines.append(row + (" — |" if way == "verify" else " yes |" if exact[(i, way)] else " **no** |"))
    text = "\n".join(lines) + "\n"
    print(text)
    if not all(exact.values()):
        raise SystemExit("a decompressed folder differs from the corpus")
    if args.write:
        write_section(text, START, END)


if __name__ == "__main__":
    main()
