"""Formats bench/ablation.sh's raw results (config, file, bytes, wall s, CPU s) as Markdown:
prints bench/ABLATION.md and puts the same table in bench/RESULTS.md between the
``ablation`` markers (issue 3 asks for it there, beside the per-dtype table)."""
import datetime
import sys
from collections import OrderedDict

from decode import write_section  # the same RESULTS.md sections (bench/ is on sys.path)

START, END = "<!-- ablation:start -->", "<!-- ablation:end -->"

raw, githash, command = sys.argv[1], sys.argv[2], sys.argv[3]
rows = OrderedDict()
files = []
for line in open(raw):
    cfg, f, size, wall, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(cfg, {})[f] = (int(size), float(wall), float(cpu))
    if f not in files:
        files.append(f)
base = rows.get("astar e1 (default)")
body = [
    f"- date: {datetime.date.today().isoformat()}, git {githash}",
    f"- command: `{command}` (single thread: `brevis compress --threads 1`)",
    "- each cell: archive bytes / CPU seconds (user + system) of the whole compress (read, search, verify, write);",
    "  wall seconds are in the totals (the machine is shared, so CPU time is the steadier figure)",
    "- Δ: archive bytes against `astar e1 (default)` (the CLI's default)",
    "",
    "| config | " + " | ".join(files) + " | total bytes | Δ total | total CPU s | total wall s |",
    "|---|" + "---|" * (len(files) + 4),
]
for cfg, r in rows.items():
    cells = []
    for f in files:
        size, _, cpu = r[f]
        cells.append(f"{size:,} / {cpu:.1f}s")
    total = sum(r[f][0] for f in files)
    wall = sum(r[f][1] for f in files)
    cpu = sum(r[f][2] for f in files)
    if base:
        btotal = sum(base[f][0] for f in files)
        delta = f"{100.0 * (total - btotal) / btotal:+.3f}%"
    else:
        delta = "-"
    body.append(f"| {cfg} | " + " | ".join(cells) + f" | {total:,} | {delta} | {cpu:.1f} | {wall:.1f} |")
table = "\n".join(body) + "\n"
print("# Search ablation (issue 3)\n")
print(table, end="")
write_section(f"## Search ablation (issue 3)\n\nMade by `bench/ablation.sh` (also in `bench/ABLATION.md`).\n\n{table}", START, END)
