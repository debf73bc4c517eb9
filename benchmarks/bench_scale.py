"""Benchmark: Levels R and E at scale (many classes, large vocabulary).

Setup (issue: scale): ``M = 50,000``; ``K`` classes, 10 per query token (``K/10``
query tokens); each class has 49 distinct tokens and the 20 tokens shared by
all classes (so ``L = 49 K + 20`` active tokens), with random probabilities
(seed 0) and uniform weights; next and query tokens are the last ``K + K/10``
ids;
``eta_Y = 1``, ``eta_Z = 0.1``, ``Y(0) = Z(0) = 0``, ``rtol = 1e-8``,
``atol = 1e-10``.

Prints (not a timed test), each case in a fresh process so that its peak
resident memory (``ru_maxrss``) is its own:

1. ``--case R1000``: Level R, ``K = 1000``, to ``t = 1e8`` with ``method="auto"``:
   wall time, method, nfev, peak memory.
2. ``--case R10-old``: Level R, ``K = 10``: right-hand side and trajectory
   (DOP853, ``rtol = 1e-10``) against the previous dense implementation
   (``--old``: a folder or a git revision, default ``15b421f``), max abs difference.
3. ``--case E100``: Level E, ``K = 100``, to ``t = 1e8`` (auto).
4. ``--case E1000``: Level E, ``K = 1000``, to ``t = 1e4`` (auto; output at
   ``t = 0`` and ``1e4`` only: one Level E state is 0.4 GB there).
5. ``--case rhs``: cost of one right-hand side for ``K = 10, 100, 1000``
   (best of 5 batches).

Run: ``python benchmarks/bench_scale.py`` (all cases) or ``--case NAME``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from old_checkout import DEFAULT_OLD, old_checkout

CASES = ("rhs", "R10-old", "R1000", "E100", "E1000")
SETTINGS = {"eta_y": 1.0, "eta_z": 0.1, "rtol": 1e-8, "atol": 1e-10, "progress": False}


def scale_model(K: int, M: int = 50_000, per_query: int = 10, distinct: int = 49,
                shared: int = 20, seed: int = 0):
    """The issue's setup as a DataModel (built from sparse tables, no dense rows)."""
    import odeflow

    rng = np.random.default_rng(seed)
    q = K // per_query
    assert K * distinct + shared <= M and K + q <= M, "tokens do not fit in M"
    # context tokens: shared 0..19, then the distinct blocks; next and query tokens
    # are the last K + q ids (they may also be context tokens of other classes)
    next_tokens = M - K + np.arange(K)
    query_tokens = M - K - q + np.arange(q)
    shared_tokens = np.arange(shared)
    first = shared
    classes = []
    for k in range(K):
        toks = np.concatenate([shared_tokens, first + k * distinct + np.arange(distinct)])
        p = rng.uniform(0.5, 1.5, size=toks.size)
        probs = dict(zip(toks.tolist(), (p / p.sum()).tolist(), strict=True))
        classes.append(odeflow.SequenceClass(int(next_tokens[k]),
                                             int(query_tokens[k // per_query]), probs,
                                             normalize=True))
    return odeflow.DataModel(M, classes)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def case_solve(flow: str, K: int, t_end: float, t_eval=None) -> dict:
    import odeflow

    data = scale_model(K)
    start = time.perf_counter()
    traj = odeflow.solve(data, flow=flow, t_span=(0.0, t_end), t_eval=t_eval, **SETTINGS)
    wall = time.perf_counter() - start
    s = traj.stats
    out = {"case": f"{flow} K={K} to t={t_end:g}", "wall_s": round(wall, 2),
           "method": s["method"], "nfev": s["nfev"], "n_state": s["n_state"],
           "peak_MB": round(peak_mb(), 1)}
    if flow == "reduced":
        out["h_end"] = float(traj.series["margin"][-1, 0])
    return out


def case_rhs() -> list:
    from odeflow.fields.exact import ExactFlow
    from odeflow.fields.reduced import ReducedFlow

    rows = []
    for K in (10, 100, 1000):
        data = scale_model(K)
        for cls in (ReducedFlow, ExactFlow):
            field = cls(data, 1.0, 0.1)
            y = field.initial_state()
            y += 1e-3 * np.random.default_rng(1).normal(size=y.size)
            field.rhs(0.0, y)
            number = max(1, int(0.2 / _time_one(field, y)))
            best = min(_time_many(field, y, number) for _ in range(5))
            rows.append({"flow": field.name, "K": K, "n_state": field.size,
                         "rhs_ms": round(1e3 * best, 3)})
    return rows


def _time_one(field, y) -> float:
    start = time.perf_counter()
    field.rhs(0.0, y)
    return max(time.perf_counter() - start, 1e-6)


def _time_many(field, y, number) -> float:
    start = time.perf_counter()
    for _ in range(number):
        field.rhs(0.0, y)
    return (time.perf_counter() - start) / number


OLD_SCRIPT = r"""
import sys, json, numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import odeflow
assert odeflow.__file__.startswith(sys.argv[1]), odeflow.__file__
from bench_scale import scale_model
from odeflow.fields.reduced import ReducedFlow
data = scale_model(10)
field = ReducedFlow(data, 1.0, 0.1)
y = np.load(sys.argv[3])["y_dense"]
traj = odeflow.solve(data, flow="reduced", eta_y=1.0, eta_z=0.1, t_span=(0, 1e8),
                     method="DOP853", rtol=1e-10, atol=1e-12, progress=False)
np.savez(sys.argv[4], rhs=field.rhs(0.0, y), t=traj.t, z=traj.z_active,
         h=traj.series["margin"])
"""


def case_old(old: str) -> dict:
    """Level R K = 10 against the dense implementation of the ``old`` checkout."""
    import odeflow
    from odeflow.fields.reduced import ReducedFlow

    data = scale_model(10)
    field = ReducedFlow(data, 1.0, 0.1)
    rng = np.random.default_rng(3)
    y = field.initial_state()
    y[field._sl_h] = rng.uniform(0, 8, size=field.K)
    y[field._sl_z] = rng.normal(size=field.n_logits)
    # the old state: h, Z over (q, L) (zero where no class of the query attends), B, Gamma
    q, L = data.query_tokens.size, data.active_tokens.size
    Z = np.zeros((q, L))
    cols = np.searchsorted(data.active_tokens, field.logit_token)
    Z[field.logit_query, cols] = y[field._sl_z]
    y_dense = np.concatenate([y[field._sl_h], Z.ravel(), y[field._sl_b], y[field._sl_g]])
    with tempfile.TemporaryDirectory() as tmp:
        inp, outp = Path(tmp, "in.npz"), Path(tmp, "out.npz")
        np.savez(inp, y_dense=y_dense)
        subprocess.run([sys.executable, "-c", OLD_SCRIPT, old, str(Path(__file__).parent),
                        str(inp), str(outp)], check=True)
        ref = dict(np.load(outp))
    new = field.rhs(0.0, y)
    dZ = np.zeros((q, L))
    dZ[field.logit_query, cols] = new[field._sl_z]
    new_dense = np.concatenate([new[field._sl_h], dZ.ravel(), new[field._sl_b],
                                new[field._sl_g]])
    traj = odeflow.solve(data, flow="reduced", eta_y=1.0, eta_z=0.1, t_span=(0, 1e8),
                         method="DOP853", rtol=1e-10, atol=1e-12, t_eval=ref["t"],
                         progress=False)
    return {"case": "reduced K=10 vs old dense implementation",
            "rhs_max_abs_diff": float(np.abs(new_dense - ref["rhs"]).max()),
            "rhs_max_abs": float(np.abs(ref["rhs"]).max()),
            "traj_z_max_abs_diff": float(np.abs(traj.z_active - ref["z"]).max()),
            "traj_h_max_abs_diff": float(np.abs(traj.series["margin"] - ref["h"]).max())}


def run_case(name: str, old: str):
    if name == "rhs":
        return case_rhs()
    if name == "R10-old":
        return case_old(old)
    if name == "R1000":
        return case_solve("reduced", 1000, 1e8)
    if name == "E100":
        return case_solve("exact", 100, 1e8)
    if name == "E1000":
        return case_solve("exact", 1000, 1e4, t_eval=[0.0, 1e4])
    raise SystemExit(f"unknown case {name!r}; choose from {CASES}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=CASES)
    parser.add_argument("--old", default=DEFAULT_OLD, help="checkout folder or git revision "
                        f"of the old main ({DEFAULT_OLD})")
    parser.add_argument("--json", action="store_true", help="print one JSON line per case")
    args = parser.parse_args()
    if args.case:
        result = run_case(args.case, old_checkout(args.old) if args.case == "R10-old" else args.old)
        print(json.dumps(result))
        return
    for name in CASES:
        cmd = [sys.executable, __file__, "--case", name, "--old", args.old]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             env=dict(os.environ)).stdout.strip().splitlines()[-1]
        result = json.loads(out)
        print(f"== {name}")
        for row in result if isinstance(result, list) else [result]:
            print("   " + ", ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
