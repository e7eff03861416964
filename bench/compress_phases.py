#!/usr/bin/env python3
"""Where one-thread compression spends its time, per file and over the corpus.

    bench/compress_phases.py [--bin BREVIS] [--runs N] [--write] FILE...

Runs ``brevis compress --threads 1 --report`` on every file (``--runs`` times, keeping
each file's fastest run) and splits its wall time with the report's ``phase_seconds``:

* searched: the synthesizer on chunks it searched (on a sample for large tensor
  chunks), the build of the winning program's literals on the whole chunk included;
* from template: the synthesizer on chunks built from an earlier chunk's template;
* verify: decoding every chunk's record to check it rebuilds the chunk's bytes;
* rest: the difference to the wall time (reading, container parsing, the chunk
  checksums, the file digest, writing the archive, process start).

Prints a markdown table; ``--write`` also puts it in ``bench/RESULTS.md`` between the
``compress-phases`` markers. Issue 3 asks for default-effort compression at least half
as fast as ZipNN's: this is the map of what stands in the way."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- compress-phases:start -->", "<!-- compress-phases:end -->"


def git_rev() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def one_run(binary: str, path: str, scratch: Path) -> tuple[float, dict]:
    out, rep = scratch / "a.brv", scratch / "r.json"
    t = time.perf_counter()
    subprocess.run([binary, "compress", "-q", "-f", "--threads", "1", "-o", str(out), "--report", str(rep), path],
                   check=True)
    wall = time.perf_counter() - t
    r = json.loads(rep.read_text())
    out.unlink()
    return wall, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(ROOT / "target/release/brevis"), help="brevis binary")
    ap.add_argument("--runs", type=int, default=3, help="runs per file, the fastest kept (default 3)")
    ap.add_argument("--write", action="store_true", help="write the table into bench/RESULTS.md")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    rows, tot = [], {k: 0.0 for k in ("mb", "wall", "searched", "templated", "verify", "rest")}
    chunks_tot = [0, 0]
    with tempfile.TemporaryDirectory() as d:
        for f in args.files:
            wall, r = min((one_run(args.bin, f, Path(d)) for _ in range(args.runs)), key=lambda x: x[0])
            ph = r["phase_seconds"]
            chunks = [c for t in r["tensors"] for c in t["chunks"]]
            n_tpl = sum(1 for c in chunks if c["from_template"])
            mb = r["original_bytes"] / 1e6
            rest = wall - ph["searched"] - ph["from_template"] - ph["verify"]
            rows.append((os.path.relpath(f, os.path.dirname(os.path.dirname(f))), mb, wall, ph["searched"],
                         len(chunks) - n_tpl, ph["from_template"], n_tpl, ph["verify"], rest))
            for k, v in zip(("mb", "wall", "searched", "templated", "verify", "rest"),
                            (mb, wall, ph["searched"], ph["from_template"], ph["verify"], rest)):
                tot[k] += v
            chunks_tot[0] += len(chunks) - n_tpl
            chunks_tot[1] += n_tpl

    def share(x: float, wall: float) -> str:
        return f"{x:.2f} ({100 * x / wall:.0f}%)"

    lines = [
        f"- Command: `bench/compress_phases.py --runs {args.runs} --write FILE...` "
        f"(`brevis compress --threads 1 --report`, default effort; each file's fastest of {args.runs} runs)",
        f"- Build: git {git_rev()}; machine: {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "- Seconds of wall time (share of the file's). *searched*: the synthesizer on the chunks it searched, "
        "their winning program's literals built on the whole chunk included; *from template*: on the chunks "
        "built from an earlier chunk's template; *verify*: decoding each chunk's record to check it; *rest*: "
        "reading, parsing, checksums, the file digest, writing, process start.",
        "",
        "| file | MB | wall s | MB/s | searched s (chunks) | from template s (chunks) | verify s | rest s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, mb, wall, s, ns, t, nt, v, rest in rows:
        lines.append(f"| `{name}` | {mb:.1f} | {wall:.2f} | {mb / wall:.1f} | {share(s, wall)} ({ns}) | "
                     f"{share(t, wall)} ({nt}) | {share(v, wall)} | {share(rest, wall)} |")
    w = tot["wall"]
    lines.append(f"| **all** | {tot['mb']:.1f} | {w:.2f} | {tot['mb'] / w:.1f} | "
                 f"{share(tot['searched'], w)} ({chunks_tot[0]}) | {share(tot['templated'], w)} ({chunks_tot[1]}) | "
                 f"{share(tot['verify'], w)} | {share(tot['rest'], w)} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        res = ROOT / "bench/RESULTS.md"
        text = res.read_text()
        block = f"{START}\n## Where compression time goes\n\n{table}\n{END}"
        if START in text and END in text:
            text = text[: text.index(START)] + block + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        res.write_text(text)


if __name__ == "__main__":
    main()
