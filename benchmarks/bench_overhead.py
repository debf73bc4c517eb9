"""Benchmark: per-call cost of one right-hand side on syn-small, old vs new, side by side.

Prints (not a timed test) the cost of one right-hand side of Level E and
Level R on this checkout's ``syn-small`` preset (the same data model, passed
as a dict to both), for this checkout and for a checkout of the
previous implementation (``--old``: a folder or a git revision, default
:data:`old_checkout.DEFAULT_OLD`), each measured in a
fresh process (best of ``--repeat`` batches of calls), alternating old and new
so that both see the same machine load; with and without one BLAS thread
(``threadpoolctl``).

Run: ``python benchmarks/bench_overhead.py [--old REV|DIR] [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from old_checkout import DEFAULT_OLD, old_checkout

NEW = str(Path(__file__).resolve().parents[1])

MEASURE = r"""
import sys, json, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import odeflow
assert odeflow.__file__.startswith(sys.argv[1]), odeflow.__file__
from odeflow.fields.exact import ExactFlow
from odeflow.fields.reduced import ReducedFlow
from threadpoolctl import threadpool_limits
data = odeflow.DataModel.from_dict(json.load(open(sys.argv[3])))
out = {}
for one_thread in (False, True):
    for cls in (ExactFlow, ReducedFlow):
        field = cls(data, 1.0, 0.1)
        y = field.initial_state() + 0.1
        with threadpool_limits(1 if one_thread else None):
            for _ in range(200):
                field.rhs(0.0, y)
            best = float("inf")
            for _ in range(int(sys.argv[2])):
                n = 2000
                t0 = time.perf_counter()
                for _ in range(n):
                    field.rhs(0.0, y)
                best = min(best, (time.perf_counter() - t0) / n)
        out[f"{cls.name}{' 1-thread' if one_thread else ''}"] = (field.size, 1e6 * best)
out["M"] = data.vocab_size
print(json.dumps(out))
"""


def measure(root: str, repeat: int, model: str) -> dict:
    res = subprocess.run([sys.executable, "-c", MEASURE, root, str(repeat), model], check=True,
                         capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default=DEFAULT_OLD, help="checkout folder or git revision "
                        f"of the previous code ({DEFAULT_OLD})")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="alternating old/new rounds")
    args = parser.parse_args()
    args.old = old_checkout(args.old)
    sys.path.insert(0, NEW)
    import odeflow

    model = Path(tempfile.mkdtemp()) / "syn-small.json"
    model.write_text(json.dumps(odeflow.DataModel.preset("syn-small").to_dict()))
    best = {"old": {}, "new": {}}
    M = {}
    for _ in range(args.rounds):
        for label, root in (("old", args.old), ("new", NEW)):
            res = measure(root, args.repeat, str(model))
            M[label] = res.pop("M")
            for key, (size, us) in res.items():
                prev = best[label].get(key, (size, float("inf")))
                best[label][key] = (size, min(prev[1], us))
    print(f"syn-small right-hand side, best of {args.rounds} x {args.repeat} batches of 2000 "
          f"calls (old: {args.old}; new: {NEW}; syn-small of the new checkout, M = {M['new']})")
    print(f"{'field':22s} {'state old':>9s} {'old [us]':>9s} {'state new':>9s} "
          f"{'new [us]':>9s} {'old/new':>8s}")
    for key in best["new"]:
        so, uo = best["old"].get(key, (0, float("nan")))
        sn, un = best["new"][key]
        print(f"{key:22s} {so:9d} {uo:9.1f} {sn:9d} {un:9.1f} {uo / un:8.2f}")


if __name__ == "__main__":
    main()
