#!/usr/bin/env python3
"""Whole-file decode throughput, in one run on the same files: brevis native (one
thread and two, default and ``--fast-decode`` archives), zstd -3 -d, zstd -19 -d and
ZipNN decompression (single threaded), and the peak memory of brevis's streaming decode.

Run it with the bench venv's Python so ZipNN is importable (``bench/decode.sh`` does):

    bench/decode.sh                      # the BF16 corpus file, 7 runs each
    bench/decode.sh --runs 11 FILE...    # other files
    bench/decode.sh --write              # also replace the decode section of RESULTS.md
    bench/decode.sh --synthetic-gib 4    # also peak memory on a synthetic 4 GiB BF16 file
    bench/decode.sh --pooled             # also peak memory and two threads on the whole corpus
    bench/decode.sh --dedup              # also the same on the whole corpus twice (copies)
    BREVIS_BASELINE=/path/to/old/brevis bench/decode.sh   # add a column for an older build

What is timed (wall clock, best of ``--runs`` after one warm-up, input in the page cache;
the decoders of one file (brevis, zstd, ZipNN) take turns round by round, so the ratios
between them (brevis ÷ ZipNN, 2 threads ÷ 1) compare runs made at the same time):

- ``brevis verify ARCHIVE --threads N``: decodes every chunk, checks every chunk
  checksum and the file's digest (SHA-256, XXH3-128 for ``--fast-decode``), writes nothing (N = 1 and 2);
- ``zstd -d -c FILE.zst > /dev/null`` for the -3 and -19 frames (zstd checks its own
  content checksum); zstd decompression is single threaded;
- ZipNN 0.5.4 ``decompress()`` of the whole file compressed as one stream of the
  file's float dtype (``--zipnn-dtype``, default from the file name), in memory,
  ``threads=1``;
- ``brevis_decoder::decode_all`` of the default and ``--fast-decode`` archives held in
  memory, timed inside its process (``decoder-wasm/examples/decode_all.rs``, built by
  ``bench/decode.sh`` with ``--features simd,huge-pages``; skipped without ``DECODE_ALL_BIN``): the
  library's in-memory decode, every file rebuilt into memory, as ZipNN's ``decompress()``;
- and, writing the output to a file: ``brevis decompress ARCHIVE -o DIR --threads 1``
  and ``zstd -d -o FILE`` (both include the kernel's page-cache copy);
- the same ``brevis verify`` of an archive made with ``compress --fast-decode`` (the
  speed/size knob), and its size against the default archive's;
- the peak resident memory (``/usr/bin/time -f %M``: maximum RSS, which includes
  the mapped executable) of ``brevis verify`` with 1 and 2 threads, streaming the
  archive from disk; with ``--synthetic-gib N`` also on a synthetic N GiB BF16 file
  (``bench/make-synthetic.py``, compressed at ``--effort 0``), and with ``--pooled`` on
  one archive of every model file of the corpus (default and ``--fast-decode``), where
  only memory and the 1-/2-thread times are measured; with ``--dedup`` the same on one
  archive of the corpus's files twice, in two folders (default flags), whose second
  copies are stored as copies of the first (dedup): the decoder holds no copy's
  source when reading a file, but decodes it again.

Speeds are MB/s (10^6 bytes) of original data. The archives are made once per run in
``bench/out/decode/`` (gitignored) with ``brevis compress --threads`` all cores.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import load_manifest  # bench/bench.py: the corpus's manifest.tsv

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT = BENCH / "out" / "decode"
CORPUS = Path(os.environ.get("BREVIS_CORPUS", Path.home() / ".cache" / "brevis-corpus"))
DEFAULT_FILES = [CORPUS / "all-minilm-l6-v2-derived" / "model.bf16-derived.safetensors"]
RESULTS_MD = BENCH / "RESULTS.md"
RESULTS_JSON = BENCH / "decode-results.json"
START = "<!-- decode-bench:start -->"
END = "<!-- decode-bench:end -->"


def thp_policy() -> str:
    """The kernel's transparent huge page policy (what `huge-pages` can get), for the header."""
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "transparent huge pages: unknown"
    chosen = text[text.find("[") + 1 : text.find("]")] if "[" in text else text.strip()
    return f"transparent huge pages: {chosen}"


def best_of(fn, runs: int) -> float:
    """Best wall time of ``runs`` calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def best_of_each(fns: dict, runs: int) -> dict:
    """Best wall time of each of ``fns`` over ``runs`` rounds (after a warm-up
    round), taking turns within a round so that a slow spell of the machine hits
    them all alike: the ratios between them (two threads over one) are fairer
    than from back-to-back series."""
    for fn in fns.values():
        fn()
    best = {k: float("inf") for k in fns}
    for _ in range(runs):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def run(argv: list[str], stdout=subprocess.DEVNULL) -> None:
    subprocess.run(argv, check=True, stdout=stdout, stderr=subprocess.PIPE)


def run_pair(argv: list[str]) -> None:
    """Two runs of ``argv`` at once: both started, then both waited for. Two
    independent one-thread decodes share nothing but the machine, so their
    throughput together over one's is the most two threads of one process can
    get here (two cores that share caches, memory bandwidth, and on a virtual
    machine perhaps one physical core)."""
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            raise subprocess.CalledProcessError(p.returncode, argv, stderr=err)


def verify_argv(brevis: str, archive: Path, threads: int) -> list[str]:
    """``brevis verify`` of ``archive`` on ``threads`` threads, quietly."""
    return [brevis, "verify", str(archive), "-q", "--threads", str(threads)]


def peak_rss_mb(argv: list[str], stdin=None) -> float:
    """Maximum resident set size of one run of ``argv`` (MB), as GNU time reports it.

    Through ``/usr/bin/time`` rather than ``os.wait4`` from here: Linux counts the
    forked copy of the parent in the child's peak, and this process has imported
    ZipNN (and torch), hundreds of MB."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], check=True, stdin=stdin, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return int(r.stderr.strip().splitlines()[-1]) * 1024 / 1e6


def decode_all_seconds(binary: str, archive: Path, threads: int = 1) -> float:
    """Seconds of one ``brevis_decoder::decode_all`` call on ``archive`` held in memory
    (every file rebuilt into memory, every check made, one thread), as
    ``decoder-wasm/examples/decode_all.rs`` times it after a warm-up call; with
    ``threads`` > 1, of ``decode_all_threads`` (each file's chunks on that many threads)."""
    argv = [binary, "--runs", "1", "--threads", str(threads), str(archive)]
    r = subprocess.run(argv, check=True, capture_output=True, text=True)
    return float(json.loads(r.stdout.splitlines()[-1])["best"])


def zipnn_dtype(path: Path) -> str:
    name = path.name.lower()
    if "bf16" in name or "bfloat16" in name:
        return "bfloat16"
    if "f16" in name or "fp16" in name:
        return "float16"
    return "float32"


def zipnn_decoder(data: bytes, dtype: str):
    """A call that decompresses ``data`` compressed by ZipNN as one stream of ``dtype``
    (checked once against ``data``), and a note on what was compressed; the call is
    ``None`` (the note says why) when ZipNN is missing or fails the round trip."""
    try:
        import zipnn  # noqa: PLC0415 - optional (bench/.venv)
    except ImportError as exc:
        return None, f"ZipNN not importable ({exc}); run bench/run.sh once to create bench/.venv"
    width = {"bfloat16": 2, "float16": 2, "float32": 4}[dtype]
    n = len(data) - len(data) % width  # ZipNN 0.5.4 corrupts its heap on a ragged tail
    work = bytearray(data[:n])  # compress() reorders its input in place: a private copy
    comp = bytes(zipnn.ZipNN(bytearray_dtype=dtype, threads=1).compress(work))
    d = zipnn.ZipNN(threads=1)
    out = d.decompress(comp)
    if memoryview(out) != memoryview(data[:n]):
        return None, "ZipNN round trip FAILED"
    return (lambda: d.decompress(comp)), f"{dtype}, {len(comp)} B (+{len(data) - n} B tail)"


def measure(path: Path, brevis: str, baseline: str | None, runs: int, dtype: str | None) -> dict:
    OUT.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    stem = OUT / path.name
    brv, z3, z19 = Path(f"{stem}.brv"), Path(f"{stem}.zst3"), Path(f"{stem}.zst19")
    run([brevis, "compress", str(path), "-o", str(brv), "-f", "-q"])
    run(["zstd", "-3", "-T1", "-q", "-f", str(path), "-o", str(z3)])
    run(["zstd", "-19", "-T1", "-q", "-f", str(path), "-o", str(z19)])
    rebuilt = OUT / "rebuilt"
    secs: dict[str, float | None] = {}

    fast = Path(f"{stem}.fast.brv")
    run([brevis, "compress", str(path), "-o", str(fast), "-f", "-q", "--fast-decode"])
    zipnn, zipnn_note = zipnn_decoder(path.read_bytes(), dtype or zipnn_dtype(path))
    measures = {
        f"{name}_{t}t": lambda a=archive, t=t: run(verify_argv(brevis, a, t))
        for name, archive in (("brevis", brv), ("fast", fast)) for t in (1, 2)
    }
    for name, archive in (("brevis", brv), ("fast", fast)):
        measures[f"{name}_pair"] = lambda a=archive: run_pair(verify_argv(brevis, a, 1))
    for key, frame in (("zstd3", z3), ("zstd19", z19)):
        measures[key] = lambda f=frame: run(["zstd", "-d", "-q", "-c", str(f)])
    if zipnn:
        measures["zipnn"] = zipnn
    if baseline:
        measures["baseline_1t"] = lambda: run(verify_argv(baseline, brv, 1))
    # The library's in-memory decode (`decode_all`): its own timing of one call
    # after a warm-up call in the same process, so the process's start and the
    # archive's read are not counted (as ZipNN's are not); the best over the rounds.
    in_memory: dict[str, list[float]] = {}
    decode_all_bin = os.environ.get("DECODE_ALL_BIN")
    if decode_all_bin:
        for name, archive in (("brevis", brv), ("fast", fast)):
            for t in (1, 2):
                key = f"{name}_mem_{t}t"
                in_memory[key] = []
                measures[key] = lambda a=archive, k=key, t=t: in_memory[k].append(
                    decode_all_seconds(decode_all_bin, a, t)
                )
    secs.update(best_of_each(measures, runs))
    for name, times in in_memory.items():
        secs[name] = min(times)
    secs.setdefault("zipnn", None)
    rss = {f"{t}t": peak_rss_mb(verify_argv(brevis, brv, t)) for t in (1, 2)}
    # The same decoders writing the rebuilt file.
    secs["brevis_1t_file"] = best_of(
        lambda: run([brevis, "decompress", str(brv), "-o", str(rebuilt), "-f", "-q", "--threads", "1"]), runs
    )
    out_file = rebuilt / path.name
    if out_file.read_bytes() != path.read_bytes():
        raise SystemExit(f"brevis rebuilt {path} wrongly")
    secs["zstd3_file"] = best_of(lambda: run(["zstd", "-d", "-q", "-f", str(z3), "-o", str(out_file)]), runs)
    shutil.rmtree(rebuilt, ignore_errors=True)
    mbs = {k: (size / v / 1e6 if v else None) for k, v in secs.items()}
    # Two decodes at once: their throughput together.
    for k in ("brevis_pair", "fast_pair"):
        mbs[k] = 2 * size / secs[k] / 1e6
    return {
        "file": str(path.relative_to(CORPUS)) if path.is_relative_to(CORPUS) else str(path),
        "bytes": size,
        "sizes": {
            "brevis": brv.stat().st_size,
            "brevis_fast": fast.stat().st_size,
            "zstd3": z3.stat().st_size,
            "zstd19": z19.stat().st_size,
        },
        "peak_rss_mb": rss,
        "seconds": secs,
        "mb_s": mbs,
        "zipnn": zipnn_note,
    }


def measure_synthetic(gib: float, brevis: str, runs: int) -> list[dict]:
    """Peak memory and 1-/2-thread decode time on a synthetic ``gib`` GiB BF16 file,
    compressed at ``--effort 0``, then the same with ``--fast-decode``: on a file this
    large a process's fixed costs (start-up, the first touch of its peak memory, which
    two threads' read-ahead makes larger) weigh nothing, unlike on the corpus files."""
    OUT.mkdir(parents=True, exist_ok=True)
    src = OUT / f"synthetic-{gib:g}gib.safetensors"
    subprocess.run([sys.executable, str(BENCH / "make-synthetic.py"), str(src), "--gib", str(gib)], check=True)
    rows = scaling_rows(src, src.stat().st_size, brevis, runs, [["--effort", "0"], ["--effort", "0", "--fast-decode"]])
    for r in rows:
        r["label"] = f"{src.name} (`bench/make-synthetic.py`, `{r['flags']}`, compressed in {r['compress_s']:.0f} s)"
    src.unlink()
    return rows


def measure_pooled(brevis: str, runs: int, copies: int = 1) -> list[dict]:
    """Peak memory and 1-/2-thread decode time on one archive of every model file of
    the corpus (``shared/corpus/manifest.tsv``), default and ``--fast-decode``: real
    weights of every dtype, many files and tensors, and enough of them (0.81 GB) that
    a process's fixed costs weigh little beside the decode, unlike on a single file.
    With ``copies`` > 1, the files that many times over, each time in a folder of its
    own, at default flags only: all but the first stored as copies (dedup)."""
    src, entries, size = corpus_folder(copies)
    out = scaling_rows(src, size, brevis, runs, [[], ["--fast-decode"]] if copies == 1 else [[]])
    for r in out:
        flags = f"`{r['flags']}`" if r["flags"] else "default"
        what = f"the corpus's {len(entries)} files" + ("" if copies == 1 else f" {copies} times (copies)")
        r["label"] = f"{what} in one archive ({flags}, compressed in {r['compress_s']:.0f} s)"
    shutil.rmtree(src)
    return out


def corpus_folder(copies: int = 1) -> tuple[Path, list, int]:
    """A folder of every model file of the corpus (hard links where possible), or of
    them ``copies`` times over, each time in a folder of its own (``copyK/``); with
    the manifest's entries and the folder's size in bytes."""
    entries = load_manifest(CORPUS)
    src = OUT / ("pooled-corpus" if copies == 1 else f"pooled-corpus-x{copies}")
    shutil.rmtree(src, ignore_errors=True)
    for copy in range(copies):
        for e in entries:
            dst = src / (f"copy{copy}" if copies > 1 else "") / e.file
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(e.path, dst)
            except OSError:  # another file system: a copy
                shutil.copyfile(e.path, dst)
    return src, entries, copies * sum(e.path.stat().st_size for e in entries)


def scaling_rows(src: Path, size: int, brevis: str, runs: int, flag_sets: list[list[str]]) -> list[dict]:
    """For each set of ``brevis compress`` flags: ``src`` (a file or a folder of ``size``
    bytes) compressed with them, then the best of ``runs`` `verify` at 1 and 2 threads
    and of two 1-thread `verify` at once, and the peak RSS at 1 and 2 threads."""
    brv = OUT / f"{src.name}.brv"
    rows = []
    for flags in flag_sets:
        t = time.perf_counter()
        run([brevis, "compress", str(src), "-o", str(brv), "-f", "-q", *flags])
        compress_s = time.perf_counter() - t
        measures = {f"{n}t": lambda n=n: run(verify_argv(brevis, brv, n)) for n in (1, 2)}
        measures["pair"] = lambda: run_pair(verify_argv(brevis, brv, 1))
        secs = best_of_each(measures, runs)
        mbs = {k: size / v / 1e6 for k, v in secs.items()}
        mbs["pair"] *= 2
        rss = {f"{n}t": peak_rss_mb(verify_argv(brevis, brv, n)) for n in (1, 2)}
        rows.append(
            {
                "file": src.name,
                "flags": " ".join(flags),
                "bytes": size,
                "archive_bytes": brv.stat().st_size,
                "compress_s": compress_s,
                "seconds": secs,
                "mb_s": mbs,
                "peak_rss_mb": rss,
            }
        )
        brv.unlink()
    return rows


def fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "—" if not a or not b else f"{a / b:.2f}x"


def render(results: dict) -> str:
    base = any("baseline_1t" in r["mb_s"] for r in results["files"])
    head = "| file | MB | brevis 1 thread | brevis 2 threads |" + (" baseline brevis 1 thread |" if base else "")
    head += " zstd -3 -d | zstd -19 -d | ZipNN | brevis ÷ ZipNN | brevis ÷ zstd -3 | 2 threads ÷ 1 |"
    head += " two processes ÷ one |"
    head += " brevis in memory | in memory ÷ ZipNN | in memory 2 threads ÷ 1 |"
    head += " brevis 1 thread → file | zstd -3 -d → file |"
    cols = head.count("|") - 1
    lines = [
        "## Decode throughput",
        "",
        f"- Command: `{results['command']}`",
        f"- Date: {results['date']}; brevis git {results['git']}; {results['zstd']}; {results['machine']}",
        f"- Best of {results['runs']} wall-clock runs after a warm-up, input in the page cache; MB/s of original",
        "  data. brevis = `brevis verify --threads N` (decodes, checks chunk checksums and file digests, writes",
        "  nothing); zstd = `zstd -d -c > /dev/null`; ZipNN 0.5.4 = in-memory `decompress()`, `threads=1`, whole",
        "  file as one stream of its float dtype. The `→ file` columns write the rebuilt file. The machine is",
        "  shared (other builds run at the same time): single runs vary by ±30%, hence best-of. The decoders",
        "  of a file (brevis at 1 and 2 threads on the default and `--fast-decode` archives, zstd, ZipNN) take",
        "  turns in each round, so a slow spell hits them alike.",
        "- brevis in memory = the Rust library's `brevis_decoder::decode_all` on the archive held in memory,",
        "  every file rebuilt into a buffer of its own and every check made, one thread, timed inside the process",
        "  (`decoder-wasm/examples/decode_all.rs`, `--features simd,huge-pages`, as the CLI is built): the same shape of call",
        "  as ZipNN's `decompress()`, bytes in and the whole file out, where `brevis verify` hashes each chunk's",
        "  output and drops it. Its ratio to ZipNN compares like with like; `brevis verify`'s does not (it writes",
        "  no output, and counts its process's start). With the feature `huge-pages` the library asks the",
        "  kernel for transparent huge pages for each file's buffer (`madvise`), so filling it takes a page",
        "  fault every 2 MiB instead of every 4 KiB; ZipNN's `decompress()` does not ask. In memory 2",
        "  threads = `brevis_decoder::decode_all_threads` with 2 threads (each file's chunks decoded on both,",
        "  timed the same way): no process start and no thread pool's to count, unlike `verify --threads 2`.",
        "- two processes ÷ one = two `brevis verify --threads 1` of the archive run at once (`run_pair`),",
        "  their throughput together over one's: what this machine's two cores give two decodes that share",
        "  nothing but the machine, the most that two threads of one process can get here.",
        "",
        head,
        "|" + " --- |" * 2 + " ---: |" * (cols - 2),
    ]
    for r in results["files"]:
        m = r["mb_s"]
        cells = [f"`{r['file']}`", f"{r['bytes'] / 1e6:.1f}", fmt(m["brevis_1t"]), fmt(m["brevis_2t"])]
        if base:
            cells.append(fmt(m.get("baseline_1t")))
        cells += [fmt(m["zstd3"]), fmt(m["zstd19"]), fmt(m["zipnn"])]
        cells += [ratio(m["brevis_1t"], m["zipnn"]), ratio(m["brevis_1t"], m["zstd3"])]
        cells += [ratio(m["brevis_2t"], m["brevis_1t"]), ratio(m.get("brevis_pair"), m["brevis_1t"])]
        cells += [fmt(m.get("brevis_mem_1t")), ratio(m.get("brevis_mem_1t"), m["zipnn"])]
        cells += [ratio(m.get("brevis_mem_2t"), m.get("brevis_mem_1t"))]
        cells += [fmt(m["brevis_1t_file"]), fmt(m["zstd3_file"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Targets (issue 4): brevis 1 thread ≥ 1.5x ZipNN and ≥ 1.0x zstd -3; 2 threads ≥ 1.7x one.")
    lines.append("")
    for r in results["files"]:
        lines.append(f"ZipNN mode on `{r['file']}`: {r['zipnn']}.")
    lines += [
        "",
        "The speed/size knob: the same files compressed with `brevis compress --fast-decode` (no",
        "context-coded literals; split Huffman literals, `Lit.hsplit`, for float words and fields; a",
        "slower-decoding literal encoding only where it is 3% smaller; 1 MiB chunks; XXH3-128 file digests instead of",
        "SHA-256), decoded the same way (`brevis verify`, best of the same runs).",
        "",
        "| file | default archive B | `--fast-decode` archive B | size | fast 1 thread | fast ÷ default 1 thread |"
        " fast 2 threads | fast 2 threads ÷ 1 | fast: two processes ÷ one | fast ÷ ZipNN | fast ÷ zstd -3 |"
        " fast in memory | fast in memory ÷ ZipNN | fast in memory 2 threads | fast in memory 2 threads ÷ 1 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["files"]:
        m, z = r["mb_s"], r["sizes"]
        delta = (z["brevis_fast"] / z["brevis"] - 1) * 100
        cells = [f"`{r['file']}`", f"{z['brevis']:,}", f"{z['brevis_fast']:,}", f"{delta:+.2f}%"]
        cells += [fmt(m["fast_1t"]), ratio(m["fast_1t"], m["brevis_1t"]), fmt(m["fast_2t"])]
        cells += [ratio(m["fast_2t"], m["fast_1t"]), ratio(m.get("fast_pair"), m["fast_1t"])]
        cells += [ratio(m["fast_1t"], m["zipnn"]), ratio(m["fast_1t"], m["zstd3"])]
        cells += [fmt(m.get("fast_mem_1t")), ratio(m.get("fast_mem_1t"), m["zipnn"])]
        cells += [fmt(m.get("fast_mem_2t")), ratio(m.get("fast_mem_2t"), m.get("fast_mem_1t"))]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Peak memory of streaming decode (maximum RSS of `brevis verify --threads N`, MB, the executable's",
        "mapped pages included; issue 4's target: under 64 MiB = 67.1 MB on every file):",
        "",
        "| file | original MB | archive MB | 1 thread | 2 threads | 1 thread MB/s | 2 threads MB/s | 2 ÷ 1 |"
        " two processes ÷ one |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["files"]:
        lines.append(
            f"| `{r['file']}` | {r['bytes'] / 1e6:.1f} | {r['sizes']['brevis'] / 1e6:.1f} | "
            f"{r['peak_rss_mb']['1t']:.1f} | {r['peak_rss_mb']['2t']:.1f} | "
            f"{fmt(r['mb_s']['brevis_1t'])} | {fmt(r['mb_s']['brevis_2t'])} | "
            f"{ratio(r['mb_s']['brevis_2t'], r['mb_s']['brevis_1t'])} | "
            f"{ratio(r['mb_s'].get('brevis_pair'), r['mb_s']['brevis_1t'])} |"
        )
    for r in results.get("pooled", []) + results.get("dedup", []) + results.get("synthetic", []):
        lines.append(
            f"| {r['label']} | "
            f"{r['bytes'] / 1e6:,.0f} | {r['archive_bytes'] / 1e6:,.0f} | {r['peak_rss_mb']['1t']:.1f} | "
            f"{r['peak_rss_mb']['2t']:.1f} | {fmt(r['mb_s']['1t'])} | {fmt(r['mb_s']['2t'])} | "
            f"{ratio(r['mb_s']['2t'], r['mb_s']['1t'])} | {ratio(r['mb_s'].get('pair'), r['mb_s']['1t'])} |"
        )
    return "\n".join(lines) + "\n"


def write_section(text: str, start: str = START, end: str = END) -> None:
    """Replaces (or appends) the section of RESULTS.md between the markers
    ``start`` and ``end`` (by default the decode section), leaving the rest
    (``bench/compress_threads.py`` writes its own section with it)."""
    md = RESULTS_MD.read_text(encoding="utf-8") if RESULTS_MD.exists() else ""
    block = f"{start}\n{text}{end}\n"
    if start in md and end in md:
        pre, rest = md.split(start, 1)
        post = rest.split(end, 1)[1].lstrip("\n")
        # A blank line between the section and what follows, as Markdown wants.
        md = pre + block + ("\n" + post if post else "")
    else:
        md = md.rstrip("\n") + "\n\n" + block
    RESULTS_MD.write_text(md, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, default=DEFAULT_FILES)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--brevis", default=os.environ.get("BREVIS_BIN", str(REPO / "target" / "release" / "brevis")))
    ap.add_argument("--baseline", default=os.environ.get("BREVIS_BASELINE"), help="an older brevis to compare")
    ap.add_argument("--zipnn-dtype", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--write", action="store_true", help="replace the decode section of bench/RESULTS.md")
    ap.add_argument("--synthetic-gib", type=float, help="also measure memory on a synthetic file this large")
    ap.add_argument(
        "--pooled", action="store_true", help="also measure memory and two threads on one archive of the whole corpus"
    )
    ap.add_argument(
        "--dedup", action="store_true", help="also measure memory and two threads on the whole corpus twice (copies)"
    )
    args = ap.parse_args()
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    zstd = subprocess.run(["zstd", "-V"], capture_output=True, text=True).stdout.strip()
    results = {
        "command": os.environ.get("BENCH_COMMAND", " ".join(["bench/decode.sh", *sys.argv[1:]])),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git": git.stdout.strip(),
        "zstd": zstd.replace("*** ", "").replace(" ***", "").split(", by")[0],
        "machine": f"nproc {os.cpu_count()}, {platform.machine()}, Linux {platform.release()}, {thp_policy()}",
        "runs": args.runs,
        "files": [measure(f, args.brevis, args.baseline, args.runs, args.zipnn_dtype) for f in args.files],
    }
    if args.pooled:
        results["pooled"] = measure_pooled(args.brevis, min(args.runs, 5))
    if args.dedup:
        results["dedup"] = measure_pooled(args.brevis, min(args.runs, 3), copies=2)
    if args.synthetic_gib:
        results["synthetic"] = measure_synthetic(args.synthetic_gib, args.brevis, min(args.runs, 3))
    text = render(results)
    print(text)
    RESULTS_JSON.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if args.write:
        write_section(text)
        print(f"wrote the decode section of {RESULTS_MD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
