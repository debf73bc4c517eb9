"""Seed-aggregated view of compare.py's rows: per method, per cell, the shift (H_pred - HB T)
relative to the study's MC shift (mean over seeds, and each seed), and max distance in seed sd."""
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

out = subprocess.run([sys.executable, str(Path(__file__).with_name("compare.py"))],
                     capture_output=True, text=True, check=True).stdout.splitlines()
hdr = [l for l in out if l.startswith("| method")][0]
cells = [c.strip() for c in hdr.split("|")[2:-3]]
agg = defaultdict(lambda: defaultdict(list)); cost = {}
for l in out:
    if not l.startswith("| ") or l.startswith("| method") or l.startswith("| cell") or l.startswith("|---"):
        continue
    parts = [p.strip() for p in l.split("|")[1:-1]]
    if len(parts) != len(cells) + 3: continue
    meth = re.sub(r" s\d+$", "", parts[0])
    cost.setdefault(meth, (parts[-2], parts[-1]))
    for c, v in zip(cells, parts[1:-2]):
        m = re.match(r"([\d.]+) \(Δ([+-]\d+)%; ([\d.]+) sd\)", v)
        if m: agg[meth][c].append((int(m.group(2)), float(m.group(3))))
print("| method (seeds) | " + " | ".join(cells) + " | misses within 1 sd |")
print("|---|" + "---|" * (len(cells) + 1))
for meth, d in agg.items():
    ns = max(len(v) for v in d.values()); row = []; ok = []
    for c in cells:
        v = d.get(c, [])
        if not v: row.append("–"); continue
        row.append("shift err " + "/".join(f"{e:+d}%" for e, _ in v) + "; " + "/".join(f"{s:.2f}" for _, s in v) + " sd")
        if c != "m1_ez1_r5": ok += [s < 1 for _, s in v]
    print(f"| {meth} ({ns}) | " + " | ".join(row) + f" | {sum(ok)}/{len(ok)} |")
