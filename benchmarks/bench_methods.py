"""Benchmark: integrators on the exact flow, and the cost of one right-hand side vs M.

Prints (not a timed test):

1. shared-query-small, Level E, t in [0, 1e5], rtol = 1e-8, atol = 1e-10: for Radau,
   BDF, LSODA, RK45 and DOP853 the wall time (best of ``--repeat``), nfev,
   njev, and the max error of z against a Radau reference at rtol = 1e-12.
2. The cost of one right-hand side at M = 1e3, 1e4, 1e5 with the same active
   set (3 classes, 40 active tokens): it should be flat in M.

Run: ``python benchmarks/bench_methods.py [--repeat 3] [--eta-z 0.1]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import odeflow
from odeflow.fields.exact import ExactFlow


def bench_methods(eta_y: float, eta_z: float, t_end: float, repeat: int) -> None:
    data = odeflow.DataModel.preset("shared-query-small")
    ref = odeflow.solve(data, eta_y=eta_y, eta_z=eta_z, t_span=(0, t_end), method="Radau",
                        rtol=1e-12, atol=1e-14)
    print(f"shared-query-small, exact flow, eta_y={eta_y:g}, eta_z={eta_z:g}, t in [0, {t_end:g}], "
          "rtol=1e-8, atol=1e-10")
    print(f"{'method':8s} {'wall [s]':>9s} {'nfev':>7s} {'njev':>5s} {'nlu':>5s} "
          f"{'max|dz|':>9s}")
    for method in ("Radau", "BDF", "LSODA", "RK45", "DOP853"):
        best = np.inf
        for _ in range(repeat):
            traj = odeflow.solve(data, eta_y=eta_y, eta_z=eta_z, t_span=(0, t_end),
                                 method=method, t_eval=ref.t)
            best = min(best, traj.stats["wall_time"])
        err = np.abs(traj.z_active - ref.z_active).max()
        s = traj.stats
        print(f"{method:8s} {best:9.4f} {s['nfev']:7d} {s['njev']:5d} {s['nlu']:5d} {err:9.1e}")
    auto = odeflow.solve(data, eta_y=eta_y, eta_z=eta_z, t_span=(0, t_end))
    print(f"method='auto' chooses {auto.stats['method']}")


def bench_rhs_vs_vocab(repeat: int) -> None:
    print("\none right-hand side, 3 classes, 40 active tokens (same active set)")
    print(f"{'M':>8s} {'state':>6s} {'rhs [us]':>10s}")
    rng = np.random.default_rng(0)
    for M in (1_000, 10_000, 100_000):
        classes = []
        for k in range(3):
            toks = list(range(10)) + list(range(10 + 10 * k, 20 + 10 * k))
            p = rng.uniform(0.5, 1.5, size=20)
            classes.append(odeflow.SequenceClass(M - 1 - k, 0, dict(zip(toks, p / p.sum(),
                                                                        strict=True))))
        field = ExactFlow(odeflow.DataModel(M, classes), 1.0, 0.1)
        y = field.initial_state() + rng.normal(scale=0.1, size=field.size)
        n = 2000
        best = np.inf
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(n):
                field.rhs(0.0, y)
            best = min(best, (time.perf_counter() - start) / n)
        print(f"{M:8d} {field.size:6d} {best * 1e6:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--eta-y", type=float, default=1.0)
    parser.add_argument("--eta-z", type=float, default=0.1)
    parser.add_argument("--t-end", type=float, default=1e5)
    args = parser.parse_args()
    bench_methods(args.eta_y, args.eta_z, args.t_end, args.repeat)
    bench_rhs_vs_vocab(args.repeat)


if __name__ == "__main__":
    main()
