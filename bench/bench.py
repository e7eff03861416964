#!/usr/bin/env python3
"""Brevis benchmark harness: compression ratio, speed and round trips on the real-weights corpus.

For every file listed in ``shared/corpus/manifest.tsv`` (optionally narrowed by
substring filters or ``--quick``) this script measures

* **brevis** (the subject): ``brevis compress FILE -o OUT.brv --threads 1`` and
  ``brevis decompress OUT.brv -o DIR``; the restored ``DIR/<basename>`` must have
  the original SHA-256 (PASS/FAIL),
* the **peers** in :data:`PEER_FACTORIES`: ``zstd -19``, ``xz -9`` (both single
  threaded CLI runs, round trip checked), and ZipNN 0.5.4, pcodec 1.1.0 and
  OpenZL 0.3.0 (each run in a subprocess per file through its Python API,
  several modes tried, every one verified, the smallest verified one reported),

and writes ``bench/RESULTS.md`` (human readable) and ``bench/results.json`` (raw
numbers).  Usually started through ``bench/run.sh``, which fetches the corpus,
prepares the virtual environment with the pinned ZipNN, pcodec and OpenZL and
builds brevis.

Adding a peer: write a ``measure(entry, scratch) -> Measurement`` callable (or use
:func:`stream_cli_tool` for a ``tool -c < file``-style compressor), wrap it in a
:class:`Tool` and append its factory to :data:`PEER_FACTORIES`.  The per-file and
pooled tables pick up every tool in :func:`build_tools`; the per-file table
columns are fixed in :func:`render_markdown`.

Exit status: 0 when everything passed, 1 when any brevis run failed or did not
restore the original bytes, 2 when only a peer failed (results are written first
in every case).

The script also contains the ZipNN, pcodec and OpenZL workers (``bench.py
_zipnn-worker ...``, ``_pcodec-worker``, ``_openzl-worker``) that the parent
starts in a subprocess (:func:`run_mode_worker`), so that a crash (ZipNN can
abort the whole process on some inputs) only loses that one measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
SHARED = REPO.parent / "shared"
MANIFEST = SHARED / "corpus" / "manifest.tsv"
DEFAULT_CORPUS = Path.home() / ".cache" / "brevis-corpus"
DEFAULT_BREVIS = REPO / "target" / "release" / "brevis"
WORK_DIR = BENCH_DIR / "out" / "work"  # scratch space (gitignored)
RESULTS_MD = BENCH_DIR / "RESULTS.md"
RESULTS_JSON = BENCH_DIR / "results.json"

ZIPNN_PIN = "0.5.4"
PCODEC_PIN = "1.1.0"
OPENZL_PIN = "0.3.0"
QUICK_MAX_BYTES = 30_000_000  # --quick keeps files smaller than this ...
QUICK_ALWAYS = ("silero-vad-v6/",)  # ... and every file under these prefixes
MB = 1_000_000  # sizes and speeds are decimal megabytes

# --------------------------------------------------------------------------
# Corpus manifest
# --------------------------------------------------------------------------

#: manifest dtype token -> dtype class shown in the tables
DTYPE_CLASS = {
    "fp32": "FP32", "fp16": "FP16", "bf16": "BF16",
    "f8_e4m3": "FP8", "f8_e5m2": "FP8",
    "i8": "INT8", "u8": "UINT8",
}
#: manifest dtype token -> ZipNN ``bytearray_dtype`` for float data
ZIPNN_FLOAT_DTYPE = {
    "fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
    "f8_e4m3": "float8_e4m3fn", "f8_e5m2": "float8_e5m2",
}
#: order of the classes in the pooled table (unknown classes go last)
CLASS_ORDER = ["FP32", "FP16", "BF16", "FP8", "INT8", "UINT8"]


@dataclass(frozen=True)
class Entry:
    """One corpus file, as described by a manifest row."""

    file: str  # path relative to the corpus dir, e.g. "silero-vad-v6/silero_vad.onnx"
    path: Path  # absolute path on this machine
    size: int
    sha256: str
    container: str
    dtype_mix: str
    registry: str

    @property
    def derived(self) -> bool:
        """True for the labelled stand-ins produced by derive.py (not native checkpoints)."""
        return self.registry == "derived"

    @property
    def dtype_shares(self) -> list[tuple[str, float]]:
        """Parse ``dtype_mix`` ("fp32 100.0%, i64 <0.1% [note]") into (token, percent) pairs."""
        mix = self.dtype_mix.split("[", 1)[0]
        shares = []
        for part in mix.split(","):
            bits = part.split()
            if len(bits) != 2:
                continue
            token, pct = bits
            pct = pct.rstrip("%")
            shares.append((token.lower(), 0.05 if pct.startswith("<") else float(pct)))
        return shares

    @property
    def dominant_dtype(self) -> str:
        """Manifest token of the dtype with the largest share of tensor bytes."""
        return max(self.dtype_shares, key=lambda s: s[1])[0]

    @property
    def dtype_class(self) -> str:
        """Table class: FP32, FP16, INT8, UINT8, GGUF-Q4/Q8, ``BF16 (derived)``, ..."""
        if self.container.startswith("gguf"):
            quants = []
            for token, pct in self.dtype_shares:
                if token.startswith("q") and pct >= 1.0:
                    q = "Q" + token[1:].split("_")[0]
                    if q not in quants:
                        quants.append(q)
            name = "GGUF-" + "/".join(quants or ["?"])
        else:
            name = DTYPE_CLASS.get(self.dominant_dtype, self.dominant_dtype.upper())
        return f"{name} (derived)" if self.derived else name


def load_manifest(corpus: Path) -> list[Entry]:
    """Read manifest.tsv into :class:`Entry` objects (paths resolved under ``corpus``)."""
    lines = MANIFEST.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    col = {name: i for i, name in enumerate(header)}
    entries = []
    for line in lines[1:]:
        if not line.strip():
            continue
        row = line.split("\t")
        entries.append(Entry(
            file=row[col["file"]],
            path=corpus / row[col["file"]],
            size=int(row[col["size_bytes"]]),
            sha256=row[col["sha256"]],
            container=row[col["container_format"]],
            dtype_mix=row[col["dtype_mix_by_bytes"]],
            registry=row[col["registry"]],
        ))
    return entries


def select_entries(entries: list[Entry], quick: bool, filters: list[str]) -> list[Entry]:
    """Apply ``--quick`` (small files only) and substring filters (any match keeps a file)."""
    out = []
    for e in entries:
        if quick and not (e.size < QUICK_MAX_BYTES or e.file.startswith(QUICK_ALWAYS)):
            continue
        if filters and not any(f in e.file for f in filters):
            continue
        out.append(e)
    return out


# --------------------------------------------------------------------------
# Measurements and tools
# --------------------------------------------------------------------------


@dataclass
class Measurement:
    """What one tool did with one file.  ``None`` means not measured."""

    compressed_bytes: int | None = None
    compress_s: float | None = None
    decompress_s: float | None = None
    roundtrip: bool | None = None  # restored bytes == original (None: not checked)
    mode: str | None = None  # how the tool was invoked, for tools with modes
    error: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """A usable size: no error and the round trip (if checked) passed."""
        return self.error is None and self.compressed_bytes is not None and self.roundtrip is not False


@dataclass(frozen=True)
class Tool:
    """A compressor under test.  ``measure(entry, scratch_dir)`` does one file."""

    key: str  # key in results.json ("brevis", "zstd19", ...)
    label: str  # column label ("zstd-19")
    version: str  # version string shown in RESULTS.md
    measure: Callable[[Entry, Path], Measurement]


class ToolError(RuntimeError):
    """A tool command failed (non-zero exit or missing output)."""


def sha256_file(path: Path) -> str:
    """SHA-256 hex digest of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def timed_run(argv: list[str], stdout_path: Path | None = None, timeout: float | None = None) -> float:
    """Run ``argv`` (stdout to ``stdout_path`` if given) and return its wall time in seconds.

    Raises :class:`ToolError` with the tail of stderr when the command fails.
    """
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, timeout=timeout)
        elapsed = time.perf_counter() - t0
    finally:
        if stdout_path:
            out.close()
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip()[-500:]
        raise ToolError(f"{shlex.join(argv)} exited {proc.returncode}: {tail}")
    return elapsed


def first_line(argv: list[str]) -> str:
    """First line of a command's combined output ('unknown' when it cannot run)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        text = (proc.stdout or proc.stderr).strip()
        return text.splitlines()[0] if text else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def make_brevis_tool(brevis_bin: Path, overridden: bool) -> Tool:
    """The subject: the brevis CLI, single threaded, with a byte-exact round trip check."""

    def measure(entry: Entry, scratch: Path) -> Measurement:
        archive = scratch / (entry.path.name + ".brv")
        restore_dir = scratch / "restored"
        restore_dir.mkdir()
        m = Measurement(mode="--threads 1")
        m.compress_s = timed_run([str(brevis_bin), "compress", str(entry.path), "-o", str(archive),
                                  "--threads", "1"])
        if not archive.is_file():
            raise ToolError(f"brevis compress wrote no {archive.name}")
        m.compressed_bytes = archive.stat().st_size
        m.decompress_s = timed_run([str(brevis_bin), "decompress", str(archive), "-o", str(restore_dir)])
        restored = restore_dir / entry.path.name
        if not restored.is_file():
            m.roundtrip = False
            m.error = f"decompress did not restore {restored.name} (found: {sorted(os.listdir(restore_dir))})"
        else:
            m.roundtrip = sha256_file(restored) == entry.sha256
        return m

    rev = git_rev()
    version = f"git {rev}"
    reported = first_line([str(brevis_bin), "--version"])
    if reported != "unknown" and "usage" not in reported.lower():
        version += f" ({reported})"
    version += f"; binary {brevis_bin}" + (" (BREVIS_BIN override)" if overridden else "")
    return Tool("brevis", "brevis", version, measure)


def stream_cli_tool(key: str, label: str, compress_argv: list[str], decompress_argv: list[str],
                    version_argv: list[str]) -> Tool:
    """A peer driven like ``zstd``/``xz``: ``ARGV FILE`` writes the compressed stream to stdout.

    Compression and decompression are timed as whole process runs writing to a
    file (decompression writes the restored file, as brevis does), and the
    restored bytes are checked against the manifest SHA-256.
    """

    def measure(entry: Entry, scratch: Path) -> Measurement:
        archive = scratch / "stream"
        restored = scratch / "restored"
        m = Measurement(mode=shlex.join(compress_argv))
        m.compress_s = timed_run(compress_argv + [str(entry.path)], stdout_path=archive)
        m.compressed_bytes = archive.stat().st_size
        m.decompress_s = timed_run(decompress_argv + [str(archive)], stdout_path=restored)
        m.roundtrip = sha256_file(restored) == entry.sha256
        return m

    return Tool(key, label, first_line(version_argv), measure)


# ---- ZipNN ----------------------------------------------------------------

#: ZipNN modes.  "file:<dtype>" compresses the whole file as one ZipNN byte stream
#: of that element type (the trailing len % width bytes are counted as stored);
#: "file:bytes" is ZipNN's only one-byte path (its FP8 path: Huffman on bytes);
#: "tensors" is the safetensors-aware mode (see _zipnn_tensors).
ZIPNN_WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2, "bytes": 1}
ZIPNN_BYTE_DTYPE = "float8_e4m3fn"
ZIPNN_MODE_TEXT = {
    "tensors": "safetensors per tensor: float tensors compressed in their own dtype (as ZipNN's "
               "compress_safetensors script does), header and other tensors stored; no index charged",
    "file:float32": "whole file as one float32 stream",
    "file:float16": "whole file as one float16 stream",
    "file:bfloat16": "whole file as one bfloat16 stream",
    "file:bytes": "whole file as bytes (ZipNN's one-byte FP8 path; it has no int8/uint8 mode)",
}


def zipnn_candidate_modes(entry: Entry) -> list[str]:
    """All ZipNN modes tried for a file, the one picked from the file type first:
    per tensor for safetensors, else the whole file as its dominant float dtype,
    else bytes.  The smallest verified result is reported."""
    dominant = ZIPNN_FLOAT_DTYPE.get(entry.dominant_dtype)
    modes = ["tensors"] if entry.container == "safetensors" else []
    modes.append(f"file:{dominant}" if dominant in ZIPNN_WIDTH else "file:bytes")
    for mode in ("file:float32", "file:float16", "file:bfloat16", "file:bytes"):
        if mode not in modes:
            modes.append(mode)
    return modes


def zipnn_primary_mode(entry: Entry) -> str:
    """The mode a user would pick from the file type alone (see zipnn_candidate_modes)."""
    return zipnn_candidate_modes(entry)[0]


def run_mode_worker(python: str, worker: str, label: str, entry: Entry, modes: list[str],
                    primary_mode: str) -> Measurement:
    """Run ``bench.py <worker> FILE MODE...`` and turn its JSON lines into a Measurement.

    The worker prints ``{"start": mode}`` before each mode and one result record
    (``compressed_bytes``, ``compress_s``, ``decompress_s``, ``roundtrip`` or
    ``error``) after it.  Every candidate mode is verified by the worker
    (decompress and compare); the smallest verified one is reported, with the
    mode, and all candidates go to ``extra["candidates"]``.  When the worker dies
    (ZipNN can abort the process), the mode it was on is recorded as crashed and
    the rest are retried in a fresh process.
    """
    remaining = list(modes)
    results: dict[str, dict] = {}
    while remaining:
        proc = subprocess.run(
            [python, str(Path(__file__).resolve()), worker, str(entry.path), *remaining],
            capture_output=True, text=True, timeout=3600)
        started = None
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            else:
                results[rec["mode"]] = rec
        remaining = [m for m in remaining if m not in results]
        if not remaining:
            break
        # The worker died (or skipped modes): blame the mode it had started, else the next one.
        culprit = started if started in remaining else remaining[0]
        how = (f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exit {proc.returncode}")
        results[culprit] = {"mode": culprit,
                            "error": f"worker died in this mode ({how}): {proc.stderr.strip()[-300:]}"}
        remaining.remove(culprit)
    candidates = [results[m] for m in modes]
    good = [c for c in candidates if c.get("roundtrip") is True]
    if not good:
        errors = "; ".join(f"{c['mode']}: {c.get('error') or 'round trip FAILED'}" for c in candidates)
        return Measurement(roundtrip=False if any(c.get("roundtrip") is False for c in candidates) else None,
                           error=f"no {label} mode verified ({errors})",
                           extra={"primary_mode": primary_mode, "candidates": candidates})
    best = min(good, key=lambda c: c["compressed_bytes"])
    return Measurement(compressed_bytes=best["compressed_bytes"], compress_s=best["compress_s"],
                       decompress_s=best["decompress_s"], roundtrip=True, mode=best["mode"],
                       extra={"primary_mode": primary_mode, "candidates": candidates})


def run_worker_modes(path: str, modes: list[str], run_mode: Callable[[bytes, str], dict]) -> int:
    """Worker side of :func:`run_mode_worker`: run each mode on ``path`` and print
    ``{"start": mode}`` before it and one JSON result line after it (an exception
    is recorded as that mode's error)."""
    data = Path(path).read_bytes()
    for mode in modes:
        print(json.dumps({"start": mode}), flush=True)
        try:
            rec = run_mode(data, mode)
        except Exception as exc:  # noqa: BLE001 - recorded per mode
            rec = {"error": f"{type(exc).__name__}: {exc}"}
        rec["mode"] = mode
        print(json.dumps(rec), flush=True)
    return 0


def make_zipnn_tool(python: str) -> Tool:
    """ZipNN 0.5.4 run by :func:`zipnn_worker` in one subprocess per file (see
    :func:`run_mode_worker`: every mode verified, the smallest verified one reported)."""

    def measure(entry: Entry, scratch: Path) -> Measurement:
        return run_mode_worker(python, "_zipnn-worker", "ZipNN", entry, zipnn_candidate_modes(entry),
                               zipnn_primary_mode(entry))

    try:
        from importlib.metadata import version as pkg_version
        version = f"zipnn {pkg_version('zipnn')}"
        if pkg_version("zipnn") != ZIPNN_PIN:
            version += f" (WARNING: pinned {ZIPNN_PIN})"
        version += f" (torch {pkg_version('torch')}, numpy {pkg_version('numpy')})"
    except Exception as exc:  # noqa: BLE001 - report, the worker will fail loudly
        version = f"zipnn not importable: {exc}"
    return Tool("zipnn", "ZipNN", version, measure)


def _zipnn_roundtrip(zipnn, buf: bytes, dtype: str) -> tuple[bytes, float, float, bool]:
    """Compress ``buf`` as ``dtype`` (single threaded), decompress with a fresh
    ZipNN object, and return (compressed, compress_s, decompress_s, equal)."""
    work = bytearray(buf)  # ZipNN reorders its input buffer in place: hand it a private copy
    z = zipnn.ZipNN(bytearray_dtype=dtype, threads=1)
    t0 = time.perf_counter()
    comp = z.compress(work)
    tc = time.perf_counter() - t0
    d = zipnn.ZipNN(threads=1)
    t0 = time.perf_counter()
    out = d.decompress(comp)
    td = time.perf_counter() - t0
    return bytes(comp), tc, td, memoryview(out) == memoryview(buf)


def _zipnn_whole(zipnn, data: bytes, mode: str) -> dict:
    """Whole file as one ZipNN stream.  Only the part whose length is a multiple of
    the element width goes to ZipNN (0.5.4 corrupts its heap otherwise); the last
    ``len % width`` bytes count as stored."""
    name = mode.split(":", 1)[1]
    dtype = ZIPNN_BYTE_DTYPE if name == "bytes" else name
    n = len(data) - len(data) % ZIPNN_WIDTH[name]
    comp, tc, td, ok = _zipnn_roundtrip(zipnn, data[:n], dtype)
    return {"compressed_bytes": len(comp) + (len(data) - n), "compress_s": tc, "decompress_s": td,
            "roundtrip": ok, "tail_stored": len(data) - n}


def _zipnn_tensors(zipnn, data: bytes) -> dict:
    """safetensors-aware ZipNN, as ZipNN's own compress_safetensors script does it:
    every float tensor compressed on its own with its dtype, kept raw when that
    does not shrink it; header and non-float tensors stored.  Counted size =
    stored bytes + ZipNN blobs (no container index is charged, which favours ZipNN).
    The file is reassembled from the pieces and compared byte for byte."""
    st_dtype = {"F32": "float32", "F16": "float16", "BF16": "bfloat16",
                "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
    hlen = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    spans = sorted((base + v["data_offsets"][0], base + v["data_offsets"][1], v["dtype"])
                   for k, v in header.items() if k != "__metadata__")
    pieces: list[tuple[bytes, bool]] = [(data[:base], False)]  # (bytes, is_zipnn_blob)
    pos, tc_sum, td_sum, ok, n_comp = base, 0.0, 0.0, True, 0
    restored = [data[:base]]
    for start, end, dt in spans:
        if start > pos:  # gap between tensors: stored
            pieces.append((data[pos:start], False))
            restored.append(data[pos:start])
        seg = data[start:end]
        dtype = st_dtype.get(dt)
        if dtype is None or not seg:
            pieces.append((seg, False))
            restored.append(seg)
        else:
            comp, tc, td, eq = _zipnn_roundtrip(zipnn, seg, dtype)
            tc_sum += tc
            td_sum += td
            ok &= eq
            if len(comp) < len(seg):
                pieces.append((comp, True))
                n_comp += 1
            else:
                pieces.append((seg, False))
            restored.append(seg if eq else b"")
        pos = max(pos, end)
    pieces.append((data[pos:], False))
    restored.append(data[pos:])
    ok &= b"".join(restored) == data
    return {"compressed_bytes": sum(len(p) for p, _ in pieces), "compress_s": tc_sum,
            "decompress_s": td_sum, "roundtrip": ok, "tensors_compressed": n_comp,
            "tensors": len(spans)}


def zipnn_worker(path: str, modes: list[str]) -> int:
    """Subprocess entry: run each ZipNN mode on ``path``, print one JSON line per mode."""
    import warnings

    warnings.filterwarnings("ignore")  # torch.jit deprecation noise on import
    import zipnn  # noqa: PLC0415 - only the worker needs ZipNN (and torch)

    return run_worker_modes(path, modes, lambda data, mode: _zipnn_tensors(zipnn, data) if mode == "tensors"
                            else _zipnn_whole(zipnn, data, mode))


# ---- shared by pcodec and OpenZL -----------------------------------------

#: safetensors dtype -> numpy dtype name of the same width (floats as floats, the
#: rest as integers of their width; FP8 and BOOL as uint8).  BF16 is "bfloat16":
#: each peer says how it hands it over (numpy has no bfloat16).
ST_NUMPY = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
            "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
            "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8",
            "F8_E4M3": "uint8", "F8_E5M2": "uint8", "BOOL": "uint8"}
#: manifest dtype token -> the float dtype whole-file modes use
FILE_FLOAT = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _float_file_mode(entry: Entry, fallback: str) -> str:
    """``file:<dtype>`` for the manifest's dominant float dtype, else ``fallback``."""
    dominant = FILE_FLOAT.get(entry.dominant_dtype)
    return f"file:{dominant}" if dominant else fallback


def _peer_candidate_modes(entry: Entry, all_modes: Iterable[str], fallback: str) -> list[str]:
    """Every mode of a peer, the one picked from the file type first: per tensor for
    safetensors, else the dominant float dtype of the manifest, else ``fallback``."""
    modes = ["tensors"] if entry.container == "safetensors" else []
    modes.append(_float_file_mode(entry, fallback))
    modes += [m for m in all_modes if m != "tensors" and m not in modes]
    return modes


def _safetensors_per_tensor(data: bytes, codec: Callable[[bytes, str], tuple | None]) -> dict:
    """Per-tensor compression of a safetensors file.  ``codec(seg, st_dtype)``
    returns (compressed, compress_s, decompress_s, restored_bytes) or None for a
    tensor it does not take.  A tensor is kept raw when its blob is not smaller;
    header, gaps and untaken tensors are stored.  Counted size = stored bytes +
    blobs (no container index is charged, which favours the peer).  The file is
    reassembled from the restored pieces and compared byte for byte."""
    hlen = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    spans = sorted((base + v["data_offsets"][0], base + v["data_offsets"][1], v["dtype"])
                   for k, v in header.items() if k != "__metadata__")
    size, pos, tc_sum, td_sum, n_comp = base, base, 0.0, 0.0, 0
    restored = [data[:base]]
    for start, end, dt in spans:
        if start > pos:  # gap between tensors: stored
            size += start - pos
            restored.append(data[pos:start])
        seg = data[start:end]
        got = codec(seg, dt) if seg else None
        if got is None:
            size += len(seg)
            restored.append(seg)
        else:
            comp, tc, td, back = got
            tc_sum += tc
            td_sum += td
            if len(comp) < len(seg):
                size += len(comp)
                n_comp += 1
            else:
                size += len(seg)
            restored.append(back)
        pos = max(pos, end)
    size += len(data) - pos
    restored.append(data[pos:])
    return {"compressed_bytes": size, "compress_s": tc_sum, "decompress_s": td_sum,
            "roundtrip": b"".join(restored) == data, "tensors_compressed": n_comp, "tensors": len(spans)}


def _whole_file(data: bytes, width: int, codec: Callable[[bytes], tuple]) -> dict:
    """Whole file through ``codec(buf) -> (compressed, compress_s, decompress_s,
    restored_bytes)``; only the prefix whose length is a multiple of ``width`` goes
    to the codec, the last ``len % width`` bytes count as stored."""
    n = len(data) - len(data) % width
    comp, tc, td, back = codec(data[:n])
    return {"compressed_bytes": len(comp) + (len(data) - n), "compress_s": tc, "decompress_s": td,
            "roundtrip": back == data[:n], "tail_stored": len(data) - n}


def _pkg_version(name: str, pin: str) -> str:
    """``name X.Y.Z`` from the installed metadata, flagged when it is not the pin."""
    from importlib.metadata import version as pkg_version
    have = pkg_version(name)
    return f"{name} {have}" + ("" if have == pin else f" (WARNING: pinned {pin})")


# ---- pcodec ---------------------------------------------------------------

#: pcodec modes.  pcodec (Pco) compresses 1-D numeric arrays: f16/f32/f64 and
#: 8..64-bit integers (8-bit only with ChunkConfig(enable_8_bit=True)); it has no
#: bfloat16, so BF16 is widened exactly to float32 (bits << 16, narrowed back on
#: decompression; the widening and narrowing are timed).
PCODEC_WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1}
PCODEC_MODE_TEXT = {
    "tensors": "safetensors per tensor: each tensor as an array of its dtype (F32/F16/F64 floats, BF16 "
               "widened to float32, integers as such, FP8/I8/U8/BOOL as 8-bit integers), kept raw when "
               "that does not shrink it; header stored; no index charged",
    "file:float32": "whole file as one float32 array",
    "file:float16": "whole file as one float16 array",
    "file:bfloat16": "whole file as one bfloat16 array, widened exactly to float32 (pcodec has no bfloat16)",
    "file:uint8": "whole file as one uint8 array (`enable_8_bit=True`; pcodec's mode for INT8 / UINT8 / FP8)",
    "file:int8": "whole file as one int8 array (`enable_8_bit=True`; two's complement order, values near 0 "
                 "adjacent)",
}


def pcodec_candidate_modes(entry: Entry) -> list[str]:
    """pcodec modes tried for a file, the by-file-type one first (else uint8)."""
    return _peer_candidate_modes(entry, PCODEC_MODE_TEXT, "file:uint8")


def _pcodec_roundtrip(pcodec, buf: bytes, dtype: str) -> tuple[bytes, float, float, bytes]:
    """``buf`` as a ``dtype`` array through pcodec's standalone format at the default
    level; returns (compressed, compress_s, decompress_s, restored bytes)."""
    import numpy as np  # noqa: PLC0415 - worker only

    from pcodec import standalone  # noqa: PLC0415
    eight_bit = dtype != "bfloat16" and np.dtype(dtype).itemsize == 1
    cfg = pcodec.ChunkConfig(enable_8_bit=True) if eight_bit else pcodec.ChunkConfig()
    t0 = time.perf_counter()
    if dtype == "bfloat16":
        arr = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        arr = np.frombuffer(buf, dtype)
    comp = standalone.simple_compress(arr, cfg)
    tc = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = standalone.simple_decompress(comp)
    if dtype == "bfloat16":
        out = (out.view(np.uint32) >> 16).astype(np.uint16)
    td = time.perf_counter() - t0
    return bytes(comp), tc, td, out.tobytes()


def _pcodec_mode(pcodec, data: bytes, mode: str) -> dict:
    if mode == "tensors":
        return _safetensors_per_tensor(
            data, lambda seg, dt: _pcodec_roundtrip(pcodec, seg, ST_NUMPY[dt]) if dt in ST_NUMPY else None)
    name = mode.split(":", 1)[1]
    return _whole_file(data, PCODEC_WIDTH[name], lambda buf: _pcodec_roundtrip(pcodec, buf, name))


def pcodec_worker(path: str, modes: list[str]) -> int:
    """Subprocess entry: run each pcodec mode on ``path``, print one JSON line per mode."""
    import pcodec  # noqa: PLC0415 - only the worker needs it

    return run_worker_modes(path, modes, lambda data, mode: _pcodec_mode(pcodec, data, mode))


def make_pcodec_tool(python: str) -> Tool:
    """pcodec, run by :func:`pcodec_worker` in a subprocess per file (see :func:`run_mode_worker`)."""

    def measure(entry: Entry, scratch: Path) -> Measurement:
        modes = pcodec_candidate_modes(entry)
        return run_mode_worker(python, "_pcodec-worker", "pcodec", entry, modes, modes[0])

    try:
        import pcodec  # noqa: PLC0415
        version = (_pkg_version("pcodec", PCODEC_PIN) + f" (standalone format, default level "
                   f"{pcodec.DEFAULT_COMPRESSION_LEVEL}, single threaded)")
    except Exception as exc:  # noqa: BLE001 - report, the worker will fail loudly
        version = f"pcodec not importable: {exc}"
    return Tool("pcodec", "pcodec", version, measure)


# ---- OpenZL ---------------------------------------------------------------

#: OpenZL modes.  OpenZL's Python API (openzl.ext) compresses typed inputs through
#: a graph of codecs; Compress is its generic graph ("a generic compression
#: backend"; for serial input it behaves like zstd), Float32/Float16/BFloat16
#: Deconstruct split floats into exponent and sign+fraction streams, and
#: BruteForce keeps the smallest of its successor graphs.  Frames use the newest
#: format version; compression level and everything else are the defaults.
OPENZL_WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2}
OPENZL_MODE_TEXT = {
    "tensors": "safetensors per tensor: each tensor as a typed numeric input of its width; F32/F16/BF16 "
               "through BruteForce(float deconstruct, generic Compress), other dtypes (FP8, integers) "
               "through Compress; kept raw when that does not shrink it; header stored; no index charged",
    "serial": "whole file as one serial (byte) input through the generic Compress graph",
    "file:float32": "whole file as one 32-bit numeric input through BruteForce(Float32Deconstruct, Compress)",
    "file:float16": "whole file as one 16-bit numeric input through BruteForce(Float16Deconstruct, Compress)",
    "file:bfloat16": "whole file as one 16-bit numeric input through BruteForce(BFloat16Deconstruct, Compress)",
}


def openzl_candidate_modes(entry: Entry) -> list[str]:
    """OpenZL modes tried for a file, the by-file-type one first (else serial)."""
    return _peer_candidate_modes(entry, OPENZL_MODE_TEXT, "serial")


def _openzl_roundtrip(buf: bytes, kind: str) -> tuple[bytes, float, float, bytes]:
    """``buf`` through OpenZL as ``kind``: "serial", "uint<N>" (numeric, generic
    Compress) or a float dtype (numeric, BruteForce of the float deconstruction and
    Compress).  One frame; returns (compressed, compress_s, decompress_s, restored)."""
    import numpy as np  # noqa: PLC0415 - worker only
    import openzl.ext as zl  # noqa: PLC0415

    deconstruct = {"float32": zl.nodes.Float32Deconstruct, "float16": zl.nodes.Float16Deconstruct,
                   "bfloat16": zl.nodes.BFloat16Deconstruct}
    compressor = zl.Compressor()
    if kind in deconstruct:
        split = deconstruct[kind]()(compressor, zl.graphs.Compress(), zl.graphs.Compress())
        graph = zl.graphs.BruteForce([split, zl.graphs.Compress()(compressor)])(compressor)
        inp = zl.Input(zl.Type.Numeric, np.frombuffer(buf, f"uint{8 * OPENZL_WIDTH[kind]}"))
    else:
        graph = zl.graphs.Compress()(compressor)
        inp = (zl.Input(zl.Type.Serial, np.frombuffer(buf, np.uint8)) if kind == "serial"
               else zl.Input(zl.Type.Numeric, np.frombuffer(buf, kind)))
    compressor.select_starting_graph(graph)
    cctx = zl.CCtx()
    cctx.ref_compressor(compressor)
    cctx.set_parameter(zl.CParam.FormatVersion, zl.MAX_FORMAT_VERSION)
    t0 = time.perf_counter()
    comp = cctx.compress([inp])
    tc = time.perf_counter() - t0
    t0 = time.perf_counter()
    outs = zl.DCtx().decompress(comp)
    arrays = [o.content.as_nparray() for o in outs]
    td = time.perf_counter() - t0
    back = arrays[0].tobytes() if len(arrays) == 1 else b"<%d outputs>" % len(arrays)
    return bytes(comp), tc, td, back


def _openzl_mode(data: bytes, mode: str) -> dict:
    if mode == "tensors":
        def codec(seg: bytes, dt: str):
            np_name = ST_NUMPY.get(dt)
            if np_name is None:
                return None
            if np_name in OPENZL_WIDTH:
                return _openzl_roundtrip(seg, np_name)
            import numpy as np  # noqa: PLC0415 - worker only
            return _openzl_roundtrip(seg, f"uint{8 * np.dtype(np_name).itemsize}")
        return _safetensors_per_tensor(data, codec)
    if mode == "serial":
        return _whole_file(data, 1, lambda buf: _openzl_roundtrip(buf, "serial"))
    name = mode.split(":", 1)[1]
    return _whole_file(data, OPENZL_WIDTH[name], lambda buf: _openzl_roundtrip(buf, name))


def openzl_worker(path: str, modes: list[str]) -> int:
    """Subprocess entry: run each OpenZL mode on ``path``, print one JSON line per mode."""
    return run_worker_modes(path, modes, _openzl_mode)


def make_openzl_tool(python: str) -> Tool:
    """OpenZL, run by :func:`openzl_worker` in a subprocess per file (see :func:`run_mode_worker`)."""

    def measure(entry: Entry, scratch: Path) -> Measurement:
        modes = openzl_candidate_modes(entry)
        return run_mode_worker(python, "_openzl-worker", "OpenZL", entry, modes, modes[0])

    try:
        version = _pkg_version("openzl", OPENZL_PIN)
        import openzl.ext as zl  # noqa: PLC0415
        version += (f" (library {zl.LIBRARY_VERSION_MAJOR}.{zl.LIBRARY_VERSION_MINOR}."
                    f"{zl.LIBRARY_VERSION_PATCH}, format version {zl.MAX_FORMAT_VERSION}, default "
                    "compression level, single threaded)")
    except Exception as exc:  # noqa: BLE001 - report, the worker will fail loudly
        version = f"openzl not importable: {exc}"
    return Tool("openzl", "OpenZL", version, measure)


# ---- tool table -----------------------------------------------------------

#: Peers, in column order.  Each factory returns a Tool; add new peers here.
PEER_FACTORIES: list[Callable[[], Tool]] = [
    lambda: stream_cli_tool("zstd19", "zstd-19", ["zstd", "-19", "-T1", "-q", "-c"],
                            ["zstd", "-d", "-q", "-c"], ["zstd", "--version"]),
    lambda: stream_cli_tool("xz9", "xz-9", ["xz", "-9", "-T1", "-c"],
                            ["xz", "-d", "-T1", "-c"], ["xz", "--version"]),
    lambda: make_zipnn_tool(sys.executable),
    lambda: make_pcodec_tool(sys.executable),
    lambda: make_openzl_tool(sys.executable),
]


def build_tools(brevis_bin: Path, overridden: bool, only: Iterable[str] | None = None) -> list[Tool]:
    """brevis first, then every peer; ``only`` restricts to the given keys."""
    tools = [make_brevis_tool(brevis_bin, overridden)] + [f() for f in PEER_FACTORIES]
    if only:
        wanted = set(only)
        tools = [t for t in tools if t.key in wanted]
    return tools


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def git_rev() -> str:
    """Short git revision of the repo, or 'uncommitted' when there is none."""
    try:
        proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=30)
    except OSError:
        return "uncommitted"
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "uncommitted"


def machine_info() -> dict:
    """nproc, CPU model, memory, kernel and Python of this machine."""
    cpu = "unknown"
    mem_kb = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
                break
    except OSError:
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"nproc": nproc, "cpu": cpu,
            "memory_gib": round(mem_kb / 1024 / 1024, 1) if mem_kb else None,
            "kernel": platform.release(), "python": platform.python_version()}


def run_file(entry: Entry, tools: list[Tool]) -> dict:
    """Measure one file with every tool (each in its own scratch dir, removed afterwards)."""
    record = {"file": entry.file, "dtype_class": entry.dtype_class, "derived": entry.derived,
              "container": entry.container, "dtype_mix": entry.dtype_mix,
              "original_bytes": entry.size, "sha256": entry.sha256, "tools": {}}
    actual = entry.path.stat().st_size if entry.path.is_file() else None
    if actual != entry.size:
        record["error"] = f"corpus file missing or wrong size ({actual} != {entry.size})"
        return record
    for tool in tools:
        scratch = WORK_DIR / tool.key
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            m = tool.measure(entry, scratch)
        except (ToolError, OSError, subprocess.SubprocessError, ValueError) as exc:
            m = Measurement(error=str(exc))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        record["tools"][tool.key] = dataclasses.asdict(m)
        status = ("FAIL" if m.roundtrip is False else "ok") if m.error is None else "ERROR"
        size = f"{m.compressed_bytes:>12,}" if m.compressed_bytes is not None else " " * 12
        print(f"    {tool.label:<8} {size} B  {status}"
              + (f"  [{m.mode}]" if tool.key in MODE_PEERS and m.mode else "")
              + (f"  {m.error}" if m.error else ""), file=sys.stderr, flush=True)
    return record


#: Container labels for the per-container table, from the manifest's container_format.
CONTAINER_LABEL = {"safetensors": "safetensors", "onnx": "ONNX", "pt (zip)": "PyTorch zip",
                   "pt (legacy pickle)": "PyTorch legacy pickle", "pt (torchscript zip)": "TorchScript zip",
                   "gguf": "GGUF", "other: CTranslate2 model.bin": "CTranslate2"}


def container_label(container: str) -> str:
    """Short container name for a manifest container_format."""
    return CONTAINER_LABEL.get(container, container)


def _class_rank(name: str) -> tuple:
    base = name.replace(" (derived)", "")
    order = CLASS_ORDER.index(base) if base in CLASS_ORDER else len(CLASS_ORDER)
    return (name.endswith("(derived)"), order, name)


def pooled(files: list[dict], tools: list[Tool]) -> list[dict]:
    """Per dtype class (plus 'All native' and 'All files'): summed original and
    compressed bytes per tool.  A tool missing on any file of a group gets None."""
    groups: dict[str, list[dict]] = {}
    for f in files:
        groups.setdefault(f["dtype_class"], []).append(f)
    rows = [(name, groups[name]) for name in sorted(groups, key=_class_rank)]
    native = [f for f in files if not f["derived"]]
    if native and len(native) != len(files):
        rows.append(("All native", native))
    rows.append(("All files", files))
    return _pool_rows(rows, tools)


def pooled_by_container(files: list[dict], tools: list[Tool]) -> list[dict]:
    """Per (container, dtype class): summed original and compressed bytes per tool."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for f in files:
        groups.setdefault((container_label(f["container"]), f["dtype_class"]), []).append(f)
    keys = sorted(groups, key=lambda k: (k[0], _class_rank(k[1])))
    rows = _pool_rows([(f"{c} · {d}", groups[(c, d)]) for c, d in keys], tools)
    for row, (c, d) in zip(rows, keys):
        row["container"], row["dtype_class"] = c, d
    return rows


def _pool_rows(rows: list[tuple[str, list[dict]]], tools: list[Tool]) -> list[dict]:
    out = []
    for name, members in rows:
        row = {"class": name, "files": len(members),
               "original_bytes": sum(f["original_bytes"] for f in members), "compressed_bytes": {}}
        for t in tools:
            sizes = [f["tools"].get(t.key) for f in members]
            good = all(s and s["error"] is None and s["compressed_bytes"] is not None
                       and s["roundtrip"] is not False for s in sizes)
            row["compressed_bytes"][t.key] = sum(s["compressed_bytes"] for s in sizes) if good else None
        out.append(row)
    return out


# --------------------------------------------------------------------------
# Dedup and fine-tune deltas
# --------------------------------------------------------------------------

#: The corpus files the extras use (skipped when absent).
DEDUP_FILE = "silero-vad-v6/silero_vad.onnx"
DELTA_BASE = "all-minilm-l6-v2/model.safetensors"
#: The synthetic fine-tune (bench/finetune.py): 10% of the F32 weights, each times
#: (1 + e), e uniform in [-1e-3, 1e-3], seed 0.
DELTA_ARGS = ["--frac", "0.1", "--scale", "1e-3", "--seed", "0"]


def _brevis_size(brevis_bin: Path, inputs: list[Path], out: Path, extra: list[str]) -> tuple[int, float]:
    """Compress ``inputs`` into ``out`` (single threaded); its size and the wall time."""
    secs = timed_run([str(brevis_bin), "compress", *map(str, inputs), "-o", str(out), "--threads", "1", *extra])
    return out.stat().st_size, secs


def _restores(brevis_bin: Path, archive: Path, dest: Path, extra: list[str], want: dict[str, str]) -> bool:
    """Decompress ``archive`` into ``dest`` and compare every wanted file's SHA-256."""
    timed_run([str(brevis_bin), "decompress", str(archive), "-o", str(dest), *extra])
    return all((dest / name).is_file() and sha256_file(dest / name) == sha for name, sha in want.items())


def _stream_size(argv: list[str], path: Path, out: Path) -> int:
    timed_run(argv + [str(path)], stdout_path=out)
    return out.stat().st_size


def run_extras(brevis_bin: Path, corpus: Path) -> dict:
    """Dedup (one model file stored twice in a folder) and a fine-tune stored as a
    delta over its base (``--base``), each round-tripped by hash."""
    work = WORK_DIR / "extras"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out: dict = {}
    try:
        src = corpus / DEDUP_FILE
        if src.is_file():
            folder = work / "twice"
            folder.mkdir()
            shutil.copyfile(src, folder / "model.onnx")
            shutil.copyfile(src, folder / "model_copy.onnx")
            sha = sha256_file(src)
            once, _ = _brevis_size(brevis_bin, [src], work / "once.brv", [])
            twice, _ = _brevis_size(brevis_bin, [folder], work / "twice.brv", [])
            nodedup, _ = _brevis_size(brevis_bin, [folder], work / "nodedup.brv", ["--no-dedup"])
            tar = work / "twice.tar"
            subprocess.run(["tar", "-cf", str(tar), "-C", str(folder), "."], check=True)
            out["dedup"] = {
                "file": DEDUP_FILE, "original_bytes": src.stat().st_size, "once": once, "twice": twice,
                "twice_no_dedup": nodedup,
                "zstd19_tar": _stream_size(["zstd", "-19", "-T1", "-c"], tar, work / "tar.zst"),
                "xz9_tar": _stream_size(["xz", "-9", "-T1", "-c"], tar, work / "tar.xz"),
                "roundtrip": _restores(brevis_bin, work / "twice.brv", work / "twice-out", [],
                                       {"model.onnx": sha, "model_copy.onnx": sha}),
            }
        base = corpus / DELTA_BASE
        if base.is_file():
            tuned = work / "finetuned.safetensors"
            subprocess.run([sys.executable, str(BENCH_DIR / "finetune.py"), str(base), str(tuned), *DELTA_ARGS],
                           check=True, stdout=subprocess.DEVNULL)
            sha = sha256_file(tuned)
            alone, alone_s = _brevis_size(brevis_bin, [tuned], work / "alone.brv", [])
            delta, delta_s = _brevis_size(brevis_bin, [tuned], work / "delta.brv", ["--base", str(base)])
            out["delta"] = {
                "base": DELTA_BASE, "construction": "bench/finetune.py " + " ".join(DELTA_ARGS),
                "original_bytes": tuned.stat().st_size, "standalone": alone, "delta": delta,
                "standalone_s": alone_s, "delta_s": delta_s,
                "zstd19": _stream_size(["zstd", "-19", "-T1", "-c"], tuned, work / "tuned.zst"),
                "roundtrip": _restores(brevis_bin, work / "delta.brv", work / "delta-out",
                                       ["--base", str(base)], {tuned.name: sha}),
            }
    except (OSError, subprocess.SubprocessError, ToolError) as exc:
        out["error"] = str(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def render_extras(extras: dict) -> list[str]:
    """The "Dedup and fine-tune deltas" section."""
    lines = ["", "## Dedup and fine-tune deltas", ""]
    if "error" in extras:
        lines.append(f"Not measured: {extras['error']}")
    d = extras.get("dedup")
    if d:
        lines += [
            f"**Dedup.** A folder holding `{d['file']}` twice (`model.onnx`, `model_copy.onnx`), "
            "compressed as one archive with `brevis compress DIR --threads 1`: identical tensors are "
            "stored once and the second file's segments refer to the first's.",
            "",
            "| stored | bytes | vs the file alone |",
            "| --- | ---: | ---: |",
            f"| the file alone (`brevis`) | {d['once']:,} | 1.000 |",
            f"| folder, twice (`brevis`, dedup) | {d['twice']:,} | {d['twice'] / d['once']:.3f} |",
            f"| folder, twice (`brevis --no-dedup`) | {d['twice_no_dedup']:,} | {d['twice_no_dedup'] / d['once']:.3f} |",
            f"| tar of the folder, `zstd -19` | {d['zstd19_tar']:,} | {d['zstd19_tar'] / d['once']:.3f} |",
            f"| tar of the folder, `xz -9` | {d['xz9_tar']:,} | {d['xz9_tar'] / d['once']:.3f} |",
            "",
            f"Round trip of the dedup archive (both files by SHA-256): {'PASS' if d['roundtrip'] else 'FAIL'}.",
            "",
        ]
    t = extras.get("delta")
    if t:
        lines += [
            f"**Fine-tune delta.** A synthetic fine-tune of `{t['base']}` made by `{t['construction']}` "
            "(10% of the F32 weights each multiplied by 1 + e, e uniform in ±0.001; a stand-in, not a real "
            "fine-tune), stored alone and as a program over its base (`brevis compress FT --base BASE`, "
            "decompressed with `--base BASE`).",
            "",
            "| stored | bytes | ratio | vs stand-alone | compress s |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| stand-alone (`brevis`) | {t['standalone']:,} | {t['original_bytes'] / t['standalone']:.3f} | 1.000 "
            f"| {t['standalone_s']:.1f} |",
            f"| delta over the base (`brevis --base`) | {t['delta']:,} | {t['original_bytes'] / t['delta']:.3f} "
            f"| {t['delta'] / t['standalone']:.3f} | {t['delta_s']:.1f} |",
            f"| `zstd -19` | {t['zstd19']:,} | {t['original_bytes'] / t['zstd19']:.3f} "
            f"| {t['zstd19'] / t['standalone']:.3f} | |",
            "",
            f"Round trip with the base (SHA-256): {'PASS' if t['roundtrip'] else 'FAIL'}.",
        ]
    return lines


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _ratio(orig: int, comp: int | None) -> str:
    return f"{orig / comp:.3f}" if comp else "—"


def _smaller(ours: int | None, theirs: int | None) -> str:
    """'% smaller' of ours vs theirs (negative: ours is larger)."""
    return f"{(1 - ours / theirs) * 100:+.1f}%" if ours and theirs else "—"


def _speed(nbytes: int, seconds: float | None) -> str:
    if not seconds:
        return "—"
    v = nbytes / MB / seconds
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def _size_of(rec: dict, key: str) -> int | None:
    m = rec["tools"].get(key)
    return m["compressed_bytes"] if m and m["error"] is None and m["roundtrip"] is not False else None


def _time_of(rec: dict, key: str, which: str) -> float | None:
    m = rec["tools"].get(key)
    return m[which] if m and m["error"] is None else None


def peer_primary_mode_of(rec: dict, key: str) -> str:
    """The by-file-type mode of a mode-trying peer recorded for a results.json file record."""
    return rec["tools"][key]["extra"].get("primary_mode", "—")


def zipnn_primary_mode_of(rec: dict) -> str:
    """The by-file-type ZipNN mode recorded for a results.json file record."""
    return peer_primary_mode_of(rec, "zipnn")


_WHOLE_FILE_NOTE = ("Whole-file modes hand {lib} only the part whose length is a multiple of the element "
                    "width and count the 1–3 trailing bytes as stored. \"by file type\" is the mode one would "
                    "pick without trying: per tensor for safetensors, else the dominant float dtype of the "
                    "manifest, else {fallback}. ")
_TRY_EVERY_MODE = ("{lib} has no mode for whole model containers, so every file is tried in each of these "
                   "modes, every result is verified (decompress and compare), and the smallest verified one "
                   "is reported:")

#: Peers that try several modes per file: key -> (label, mode descriptions, intro, notes),
#: rendered as a "<label> mode per file" section each.
MODE_PEERS = {
    "zipnn": ("ZipNN", ZIPNN_MODE_TEXT,
              "ZipNN 0.5.4 has no mode for whole model containers, so every file is tried in each "
              "of these modes, every result is verified (decompress and compare), and the smallest "
              "verified one is reported:",
              "Whole-file modes hand ZipNN only the part whose length is a multiple of the element "
              "width (0.5.4 corrupts its heap otherwise) and count the 1–3 trailing bytes as stored. "
              "\"by file type\" is the mode one would pick without trying: per tensor for "
              "safetensors, else the dominant float dtype of the manifest, else bytes. ZipNN runs "
              "with its defaults otherwise (method AUTO, 256 KiB chunks), `threads=1`."),
    "pcodec": ("pcodec", PCODEC_MODE_TEXT,
               _TRY_EVERY_MODE.format(lib=f"pcodec {PCODEC_PIN} (numeric arrays only)"),
               _WHOLE_FILE_NOTE.format(lib="pcodec", fallback="uint8")
               + "pcodec runs `pcodec.standalone.simple_compress` with a default `ChunkConfig` (level 8, "
               "automatic mode and delta detection), `enable_8_bit=True` for 8-bit arrays only; it is "
               "single threaded. Times are the in-memory `simple_compress` / `simple_decompress` calls."),
    "openzl": ("OpenZL", OPENZL_MODE_TEXT,
               _TRY_EVERY_MODE.format(lib=f"OpenZL {OPENZL_PIN} (Python `openzl.ext`; no model-format "
                                          "profile)"),
               _WHOLE_FILE_NOTE.format(lib="OpenZL", fallback="serial")
               + "Each input is one OpenZL frame (`CCtx.compress`, newest format version, default "
               "compression level), decompressed with `DCtx.decompress`; single threaded. Times are those "
               "in-memory calls (graph construction excluded)."),
}


def render_markdown(results: dict, tools: list[Tool]) -> str:
    """RESULTS.md text from the results dict."""
    keys = {t.key for t in tools}
    mi = results["machine"]
    lines = [
        "# Brevis benchmark results",
        "",
        "Generated by `bench/bench.py` (overwritten on every run; raw numbers in `bench/results.json`).",
        "",
        f"- Command: `{results['command']}`",
        f"- Date: {results['date']} (run took {results['elapsed_s'] / 60:.1f} min)",
        f"- Machine: nproc {mi['nproc']}, {mi['cpu']}, {mi['memory_gib']} GiB RAM, "
        f"Linux {mi['kernel']}, Python {mi['python']}",
        f"- Corpus: `{results['corpus']}` ({len(results['files'])} files"
        + (", --quick" if results["quick"] else "")
        + (f", filters {results['filters']}" if results["filters"] else "") + ")",
        "- Versions:",
    ]
    lines += [f"  - {t.label}: {t.version}" for t in tools]
    lines += [
        "",
        "Ratio = original / compressed (higher is better). \"% smaller\" = 1 − brevis/peer "
        "(negative: brevis is larger). Speeds are MB/s (10^6 bytes) of *original* data, wall "
        "time, single threaded (brevis `--threads 1`, `zstd -T1`, `xz -T1`, ZipNN `threads=1`, "
        "pcodec and OpenZL are single threaded). CLI times are whole process runs writing the output "
        "file; ZipNN, pcodec and OpenZL times are their `compress`/`decompress` calls in memory. "
        "Files marked † are derived stand-ins, "
        "not native checkpoints.",
        "",
        "## Per file",
        "",
        "| file | dtype class | orig MB | brevis | zstd-19 | xz-9 | ZipNN | pcodec | OpenZL "
        "| brevis vs zstd-19 | brevis vs ZipNN | brevis round trip | brevis c MB/s | brevis d MB/s "
        "| ZipNN c MB/s | ZipNN d MB/s | zstd-19 d MB/s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: "
        "| ---: | ---: | ---: |",
    ]
    for f in results["files"]:
        o = f["original_bytes"]
        b = f["tools"].get("brevis")
        if f.get("error"):
            rt = "ERROR"
        elif b is None:
            rt = "—"
        elif b["error"] and b["roundtrip"] is not False:
            rt = "ERROR"
        else:
            rt = "PASS" if b["roundtrip"] else "FAIL"
        name = f["file"] + (" †" if f["derived"] else "")
        lines.append(
            f"| `{name}` | {f['dtype_class']} | {o / MB:.1f} | {_ratio(o, _size_of(f, 'brevis'))} "
            f"| {_ratio(o, _size_of(f, 'zstd19'))} | {_ratio(o, _size_of(f, 'xz9'))} "
            f"| {_ratio(o, _size_of(f, 'zipnn'))} | {_ratio(o, _size_of(f, 'pcodec'))} "
            f"| {_ratio(o, _size_of(f, 'openzl'))} "
            f"| {_smaller(_size_of(f, 'brevis'), _size_of(f, 'zstd19'))} "
            f"| {_smaller(_size_of(f, 'brevis'), _size_of(f, 'zipnn'))} | {rt} "
            f"| {_speed(o, _time_of(f, 'brevis', 'compress_s'))} "
            f"| {_speed(o, _time_of(f, 'brevis', 'decompress_s'))} "
            f"| {_speed(o, _time_of(f, 'zipnn', 'compress_s'))} "
            f"| {_speed(o, _time_of(f, 'zipnn', 'decompress_s'))} "
            f"| {_speed(o, _time_of(f, 'zstd19', 'decompress_s'))} |")

    # "brevis vs" columns of the pooled table: the peers the targets are stated against.
    vs_peers = [t for t in tools if t.key in ("zstd19", "zipnn", "pcodec", "openzl")] if "brevis" in keys else []
    lines += ["", "## Pooled per dtype class", "",
              "Sum of original bytes / sum of compressed bytes per tool (— when a tool failed on a file "
              "of the group).", "",
              "| dtype class | files | orig MB | " + " | ".join(t.label for t in tools)
              + "".join(f" | brevis vs {t.label}" for t in vs_peers) + " |",
              "| --- | ---: | ---: | " + " | ".join("---:" for _ in tools)
              + "".join(" | ---:" for _ in vs_peers) + " |"]
    for row in results["pooled"]:
        cb = row["compressed_bytes"]
        cells = [_ratio(row["original_bytes"], cb.get(t.key)) for t in tools]
        cells += [_smaller(cb.get("brevis"), cb.get(t.key)) for t in vs_peers]
        label = f"**{row['class']}**" if row["class"].startswith("All") else row["class"]
        lines.append(f"| {label} | {row['files']} | {row['original_bytes'] / MB:.1f} | "
                     + " | ".join(cells) + " |")

    if results.get("pooled_by_container"):
        peers = [t for t in tools if t.key != "brevis"]
        lines += ["", "## Per container and dtype", "",
                  "The same files grouped by container and dtype class (ratios pooled as above; the "
                  "last columns say how much smaller brevis is than each peer, negative where larger).",
                  "",
                  "| container | dtype class | files | orig MB | " + " | ".join(t.label for t in tools)
                  + "".join(f" | vs {t.label}" for t in peers if "brevis" in keys) + " |",
                  "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in tools)
                  + "".join(" | ---:" for _ in peers if "brevis" in keys) + " |"]
        for row in results["pooled_by_container"]:
            cb = row["compressed_bytes"]
            cells = [_ratio(row["original_bytes"], cb.get(t.key)) for t in tools]
            if "brevis" in keys:
                cells += [_smaller(cb.get("brevis"), cb.get(t.key)) for t in peers]
            lines.append(f"| {row['container']} | {row['dtype_class']} | {row['files']} "
                         f"| {row['original_bytes'] / MB:.1f} | " + " | ".join(cells) + " |")

    if results.get("extras"):
        lines += render_extras(results["extras"])

    for key, (label, mode_text, intro, notes) in MODE_PEERS.items():
        if key not in keys:
            continue
        lines += ["", f"## {label} mode per file", "", intro, ""]
        lines += [f"- `{k}`: {v}" for k, v in mode_text.items()]
        lines += ["", notes, "",
                  "| file | reported mode | by file type | size per mode (bytes) |",
                  "| --- | --- | --- | --- |"]
        for f in results["files"]:
            z = f["tools"].get(key)
            if not z:
                continue
            cands = z["extra"].get("candidates", [])
            sizes = ", ".join(
                f"{c['mode']} {c['compressed_bytes']:,}" + ("" if c.get("roundtrip") else " (FAILED)")
                if c.get("compressed_bytes") is not None
                else f"{c['mode']} error ({(c.get('error') or '?')[:120].replace('|', '/')})" for c in cands)
            mode = f"`{z['mode']}`" if z["mode"] else f"— ({z['error']})"
            lines.append(f"| `{f['file']}` | {mode} | `{peer_primary_mode_of(f, key)}` | {sizes} |")

    problems = []
    for f in results["files"]:
        if f.get("error"):
            problems.append(f"- `{f['file']}`: {f['error']}")
        for key, m in f["tools"].items():
            if m["error"] or m["roundtrip"] is False:
                problems.append(f"- `{f['file']}` / {key}: "
                                + (m["error"] or "round trip FAILED (restored bytes differ)"))
    lines += ["", "## Failures", ""] + (problems or ["None: every tool restored every file byte for byte."])
    lines += ["", "## Caveats", "",
              "- `all-minilm-l6-v2-derived/*` (†, classes `… (derived)`) are FP32 weights rounded to "
              "BF16/FP16/FP8 by `shared/corpus/derive.py`: stand-ins, not native checkpoints. Their "
              "low mantissa bits and exponents do not look like natively trained or quantised weights; "
              "treat those numbers as indicative only.",
              "- Timings are single runs on a possibly shared machine; small files have noisy speeds.",
              ""]
    return "\n".join(lines)


def write_outputs(results: dict, tools: list[Tool]) -> None:
    """Write results.json and RESULTS.md."""
    RESULTS_JSON.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    md = render_markdown(results, tools)
    # Keep the sections bench/decode.py, bench/compress_threads.py,
    # bench/compress_phases.py and bench/ablation.sh maintain.
    old = RESULTS_MD.read_text(encoding="utf-8") if RESULTS_MD.exists() else ""
    for name in ("decode-bench", "compress-threads", "compress-phases", "ablation"):
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if start in old and end in old:
            md = md.rstrip("\n") + "\n\n" + start + old.split(start, 1)[1].split(end, 1)[0] + end + "\n"
    RESULTS_MD.write_text(md, encoding="utf-8")


def file_failed_brevis(rec: dict) -> bool:
    """True when the file could not be measured or brevis errored / did not restore it exactly."""
    if rec.get("error"):
        return True
    m = rec["tools"].get("brevis")
    return m is not None and not (m["error"] is None and m["roundtrip"] is True)


def main(argv: list[str]) -> int:
    """Parse arguments, measure every selected file, write the reports, return the exit status."""
    workers = {"_zipnn-worker": zipnn_worker, "_pcodec-worker": pcodec_worker,
               "_openzl-worker": openzl_worker}
    if argv and argv[0] in workers:
        return workers[argv[0]](argv[1], argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"only small files (< {QUICK_MAX_BYTES // MB} MB, plus {', '.join(QUICK_ALWAYS)}*)")
    ap.add_argument("--tools", help="comma-separated tool keys to run (default: all: "
                                    "brevis,zstd19,xz9,zipnn,pcodec,openzl)")
    ap.add_argument("--no-extras", action="store_true",
                    help="skip the dedup and fine-tune delta measurements")
    ap.add_argument("filters", nargs="*", help="keep files whose manifest path contains any of these")
    args = ap.parse_args(argv)

    corpus = Path(os.environ.get("BREVIS_CORPUS") or DEFAULT_CORPUS)
    brevis_bin = Path(os.environ.get("BREVIS_BIN") or DEFAULT_BREVIS)
    command = os.environ.get("BREVIS_BENCH_CMD") or shlex.join(["python", "bench/bench.py", *argv])

    entries = select_entries(load_manifest(corpus), args.quick, args.filters)
    if not entries:
        print("no corpus file matches the selection", file=sys.stderr)
        return 2
    tools = build_tools(brevis_bin, "BREVIS_BIN" in os.environ,
                        args.tools.split(",") if args.tools else None)

    results = {"command": command,
               "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
               "machine": machine_info(), "versions": {t.key: t.version for t in tools},
               "corpus": str(corpus), "quick": args.quick, "filters": args.filters,
               "files": [], "pooled": [], "elapsed_s": 0.0}
    t0 = time.perf_counter()
    for i, entry in enumerate(entries, 1):
        print(f"[{i}/{len(entries)}] {entry.file} ({entry.size / MB:.1f} MB, {entry.dtype_class})",
              file=sys.stderr, flush=True)
        results["files"].append(run_file(entry, tools))
        results["elapsed_s"] = time.perf_counter() - t0
        RESULTS_JSON.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")  # partial
    results["pooled"] = pooled(results["files"], tools)
    results["pooled_by_container"] = pooled_by_container(results["files"], tools)
    if not args.no_extras and any(t.key == "brevis" for t in tools):
        print("[extras] dedup and fine-tune delta", file=sys.stderr, flush=True)
        results["extras"] = run_extras(brevis_bin, corpus)
    results["elapsed_s"] = time.perf_counter() - t0
    write_outputs(results, tools)
    shutil.rmtree(WORK_DIR, ignore_errors=True)
    if WORK_DIR.parent.is_dir() and not any(WORK_DIR.parent.iterdir()):
        WORK_DIR.parent.rmdir()
    print(f"wrote {RESULTS_MD} and {RESULTS_JSON} ({results['elapsed_s'] / 60:.1f} min)", file=sys.stderr)

    brevis_failed = any(file_failed_brevis(f) for f in results["files"])
    peer_failed = any(not Measurement(**m).ok for f in results["files"]
                      for k, m in f["tools"].items() if k != "brevis")
    if brevis_failed:
        print("FAIL: brevis failed or did not round-trip at least one file (see RESULTS.md)", file=sys.stderr)
        return 1
    if peer_failed:
        print("WARNING: a peer failed on at least one file (see RESULTS.md)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
