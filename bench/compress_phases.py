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

A second table says what the search chose, from the same reports' ``usage``: per file, how
many chunk programs are a bare ``Lit`` at the root (the search found no operator that paid:
issue 3's fallback rate), how many chunks fell back to raw after failing verification, and
how often each operator and each literal encoding occurs in the programs.

Prints both as markdown; ``--write`` also puts them in ``bench/RESULTS.md`` between the
``compress-phases`` markers. Issue 3 asks for default-effort compression at least half
as fast as ZipNN's: the first table is the map of what stands in the way."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from decode import write_section  # the same RESULTS.md sections (bench/ is on sys.path)

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
    # (file, the report's usage, its chunks stored raw after failing verification, stored
    # chunk bytes, those of bare-literal chunks)
    usages = []
    with tempfile.TemporaryDirectory() as d:
        for f in args.files:
            wall, r = min((one_run(args.bin, f, Path(d)) for _ in range(args.runs)), key=lambda x: x[0])
            ph = r["phase_seconds"]
            chunks = [c for t in r["tensors"] for c in t["chunks"]]
            n_tpl = sum(1 for c in chunks if c["from_template"])
            mb = r["original_bytes"] / 1e6
            rest = wall - ph["searched"] - ph["from_template"] - ph["verify"]
            name = os.path.relpath(f, os.path.dirname(os.path.dirname(f)))
            rows.append((name, mb, wall, ph["searched"], len(chunks) - n_tpl, ph["from_template"], n_tpl,
                         ph["verify"], rest))
            # Stored bytes of all chunks and of those whose program is a bare literal.
            stored = sum(c["bytes"] for c in chunks)
            bare_stored = sum(c["bytes"] for c in chunks if c["program"].startswith("Lit."))
            usages.append((name, r["usage"], r["verified_raw_fallbacks"], stored, bare_stored))
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
    table = "\n".join(lines) + "\n\n" + usage_table(usages)
    print(table)
    if args.write:
        write_section(f"## Where compression time goes, and what the search chose\n\n{table}", START, END)


def usage_table(usages: list[tuple[str, dict, int, int, int]]) -> str:
    """What the search chose, per file and over all of them: chunk programs that are a
    bare ``Lit`` (the fallback rate), raw fallbacks after a failed verification, and the
    count of each operator and each literal encoding in the programs."""
    # Every report names every operator and encoding, in the encoder's order.
    ops_names = list(usages[0][1]["operators"]) if usages else []
    enc_names = list(usages[0][1]["literal_encodings"]) if usages else []
    lines = [
        "What the search chose (the same runs' `--report` `usage`): *bare Lit*, chunk programs that are a "
        "single literal at the root, where no operator paid for itself (issue 3's fallback rate; often the right "
        "program: a container's opaque bytes, a small tensor, int8 weights coded whole), and their share of the "
        "chunks' stored bytes; *raw after "
        "verify*, chunks whose program failed verification and were stored raw instead; then how many times "
        "each operator and each literal encoding occurs in the chunks' programs.",
        "",
        "| file | chunks | bare Lit | bare Lit, of stored bytes | raw after verify | " + " | ".join(ops_names)
        + " | " + " | ".join(f"`{e}`" for e in enc_names) + " |",
        "| --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in ops_names + enc_names) + " |",
    ]
    total = {"chunks": 0, "bare_lit": 0, "raw": 0, "stored": 0, "bare_stored": 0,
             "operators": dict.fromkeys(ops_names, 0), "literal_encodings": dict.fromkeys(enc_names, 0)}

    def row(name: str, chunks: int, bare: int, stored: int, bare_stored: int, raw: int, ops: dict,
            encs: dict) -> str:
        rate = f"{bare} ({100 * bare / chunks:.1f}%)" if chunks else "0"
        of_bytes = f"{100 * bare_stored / stored:.1f}%" if stored else "-"
        return (f"| {name} | {chunks} | {rate} | {of_bytes} | {raw} | "
                + " | ".join(str(ops[o]) for o in ops_names) + " | " + " | ".join(str(encs[e]) for e in enc_names)
                + " |")

    for name, u, raw, stored, bare_stored in usages:
        lines.append(row(f"`{name}`", u["chunks"], u["bare_lit"], stored, bare_stored, raw, u["operators"],
                         u["literal_encodings"]))
        total["chunks"] += u["chunks"]
        total["bare_lit"] += u["bare_lit"]
        total["raw"] += raw
        total["stored"] += stored
        total["bare_stored"] += bare_stored
        for key in ("operators", "literal_encodings"):
            for n, count in u[key].items():
                total[key][n] += count
    lines.append(row("**all**", total["chunks"], total["bare_lit"], total["stored"], total["bare_stored"],
                     total["raw"], total["operators"], total["literal_encodings"]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
