"""The clock of bench/wasm/decode.mjs for native processes.

Reads one JSON array (a command line) per line on stdin, runs it with stdin and
stdout on /dev/null, and answers each with one line: its wall time in seconds,
or ``error: ...`` with what it printed on stderr. A line ``{"argv": [...],
"drain": true}`` runs the command with its stdout a pipe that this process reads
to the end (1 MiB at a time) and discards: a consumer of the bytes, on the other
core, as a shell pipeline's next command would be; the wall time is until the
command has exited and the pipe is empty.

Why not Node's own ``spawnSync``: it forks Node, and a fork copies the page
tables of everything the process has mapped, so its cost grows with the heap,
the archives read and the wasm memory of the measures beside it.
``node bench/wasm/spawn-cost.mjs [CMD ARG...]`` times a command both ways (best
of 15, the 2-core machine): ``/bin/true`` took 1.17 ms by ``spawnSync`` from a
Node holding little memory, 12.08 ms holding 300 MiB of arrays, and 0.74 ms
through this timer; a one-thread ``brevis verify`` of the 74 MB ``--fast-decode``
FP32 corpus archive 40.6-43.0, 52.0-54.2 and 41.0-48.5 ms (three runs). This
process is started before any of
that is allocated, and Python starts children with ``vfork`` where it can, as
bench/decode.py does, so a native figure here is what a shell would see.
"""

import json
import subprocess
import sys
import tempfile
import time


def main() -> int:
    for line in sys.stdin:
        request = json.loads(line)
        drain = isinstance(request, dict) and request.get("drain", False)
        argv = request["argv"] if isinstance(request, dict) else request
        t0 = time.perf_counter()
        if drain:
            returncode, stderr = drained(argv)
        else:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            returncode, stderr = r.returncode, r.stderr
        secs = time.perf_counter() - t0
        if returncode != 0:
            err = stderr.decode(errors="replace").replace("\n", " ")
            print(f"error: {' '.join(argv)} exited with {returncode}: {err}", flush=True)
        else:
            print(repr(secs), flush=True)
    return 0


def drained(argv: list[str]) -> tuple[int, bytes]:
    """Runs ``argv`` with its stdout a pipe read to the end and discarded (its
    stderr to a file, so that neither pipe waits on the other); returns its exit
    status and what it printed on stderr."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        while p.stdout.read1(1 << 20):
            pass
        returncode = p.wait()
        err.seek(0)
        return returncode, err.read()


if __name__ == "__main__":
    sys.exit(main())
