#!/usr/bin/env python3
"""Decoding an archive that is not in the page cache, and decoding it again after.

    bench/cold.py [--rounds N] [--warm N] --bin OLD --bin NEW ARCHIVE...

A model loaded from disk is read once from the disk, and then, while the page cache
keeps it, from memory: how the first reader brought the archive into the cache (in
pieces of 4 KiB or of 2 MiB) changes what every later decode pays to map it. Each
round, for every archive and build in turn: the archive is dropped from the page
cache (``posix_fadvise(POSIX_FADV_DONTNEED)``, which needs no privileges and drops
only pages no process maps), ``brevis verify -q --threads 1`` reads it cold, then
``--warm`` runs at one thread and as many at two read it from the cache that build
left. Prints, per archive and build: the best and median cold time, the best warm
times, and (builds after the first) the paired ratios to the first build: the
median over the rounds of this build's time ÷ the first build's in the same round
(cold, and warm best of the round at one and two threads).

Where ``/proc/kpageflags`` can be read (root), also prints how many 4 KiB pages the
archive's cached folios held on average after each build's runs of the last round.

Linux only. The drop is advisory: pages another process maps stay cached, and then
"cold" is not; the folio line shows it (folios stay as they were)."""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import struct

from threads import verify  # bench/threads.py: one timed `brevis verify -q --threads N`


def drop_from_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def mean_folio_pages(path: str) -> float | None:
    """Pages per cached folio of `path`, on average (None where the kernel's page
    flags cannot be read). Maps the file and touches every page, so call it after
    the timings."""
    page = mmap.PAGESIZE
    try:
        kpageflags = open("/proc/kpageflags", "rb")
    except OSError:
        return None
    with open(path, "rb") as f, kpageflags, open("/proc/self/pagemap", "rb") as pagemap:
        stat = os.fstat(f.fileno())
        size, inode = stat.st_size, stat.st_ino
        if size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            base = None
            # The map's address: find it among this process's mappings by inode.
            for line in open("/proc/self/maps"):
                fields = line.split()
                if len(fields) >= 5 and int(fields[4]) == inode:
                    base = int(fields[0].split("-")[0], 16)
                    break
            if base is None:
                return None
            heads = pages = 0
            for i in range(0, size, page):
                _ = m[i]  # fault it in (from the cache the runs left)
                pagemap.seek((base // page + i // page) * 8)
                entry = struct.unpack("<Q", pagemap.read(8))[0]
                if not entry >> 63 & 1:
                    continue
                pfn = entry & ((1 << 55) - 1)
                if pfn == 0:
                    return None  # page frame numbers hidden (not root)
                kpageflags.seek(pfn * 8)
                flags = struct.unpack("<Q", kpageflags.read(8))[0]
                pages += 1
                compound_tail = flags >> 16 & 1
                heads += 0 if compound_tail else 1  # a head, or a page of its own
            return pages / heads if heads else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, help="a brevis binary (repeat for several)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--warm", type=int, default=5, help="warm runs per thread count and round (default 5)")
    ap.add_argument("archives", nargs="+")
    args = ap.parse_args()

    # (archive, build) -> list of (cold, warm 1 thread best, warm 2 threads best) per round
    rounds: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    folios: dict[tuple[str, str], float | None] = {}
    for rnd in range(args.rounds):
        builds = args.bin if rnd % 2 == 0 else args.bin[::-1]
        for a in args.archives:
            for b in builds:
                drop_from_cache(a)
                cold = verify(b, a, 1)
                one = min(verify(b, a, 1) for _ in range(args.warm))
                two = min(verify(b, a, 2) for _ in range(args.warm))
                rounds.setdefault((a, b), []).append((cold, one, two))
                if rnd == args.rounds - 1:
                    folios[(a, b)] = mean_folio_pages(a)
    for a in args.archives:
        first = args.bin[0]
        for b in args.bin:
            r = rounds[(a, b)]
            cold = [x[0] for x in r]
            line = (
                f"{a}  {b}  cold best {min(cold) * 1e3:.1f} ms median {statistics.median(cold) * 1e3:.1f} ms"
                f"  warm best 1 thread {min(x[1] for x in r) * 1e3:.2f} ms 2 threads {min(x[2] for x in r) * 1e3:.2f} ms"
            )
            if folios.get((a, b)) is not None:
                line += f"  pages per folio {folios[(a, b)]:.1f}"
            if b != first:
                ref = rounds[(a, first)]
                paired = [statistics.median(x[k] / y[k] for x, y in zip(r, ref)) for k in range(3)]
                line += (
                    f"  paired ÷ {first}: cold {paired[0]:.3f}, warm 1 thread {paired[1]:.3f},"
                    f" 2 threads {paired[2]:.3f}"
                )
            print(line)


if __name__ == "__main__":
    main()
