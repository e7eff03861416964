"""The clock of bench/wasm/decode.mjs for native processes.

Reads one JSON array (a command line) per line on stdin, runs it with stdin and
stdout on /dev/null, and answers each with one line: its wall time in seconds,
or ``error: ...`` with what it printed on stderr.

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
import time


def main() -> int:
    for line in sys.stdin:
        argv = json.loads(line)
        t0 = time.perf_counter()
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        secs = time.perf_counter() - t0
        if r.returncode != 0:
            err = r.stderr.decode(errors="replace").replace("\n", " ")
            print(f"error: {' '.join(argv)} exited with {r.returncode}: {err}", flush=True)
        else:
            print(repr(secs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
