"""The clock of bench/wasm/decode.mjs for native processes.

Reads one JSON array (a command line) per line on stdin, runs it with stdin and
stdout on /dev/null, and answers each with one line: its wall time in seconds,
or ``error: ...`` with what it printed on stderr.

Why not Node's own ``spawnSync``: it forks Node, and a fork copies the page
tables of everything the process has mapped, so its cost grows with the heap,
the archives read and the wasm memory of the measures beside it. On the 2-core
machine, ``spawnSync('/bin/true')`` took 1.6 ms from a fresh Node and 16 ms with
300 MiB of arrays alive, best of 15; a ``brevis verify`` of a 74 MB archive took
51 ms that way against 37 ms from Python. This process is started before any of
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
