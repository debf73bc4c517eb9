"""Benchmark: ``odeflow verify`` per integrator, at its default tolerances.

Prints (not a timed test), for each solve_ivp method, the wall time of
:func:`odeflow.verify` (all checks CF1-CF6, ``rtol = 1e-10``, ``atol = 1e-30``,
pass threshold ``1e-7``), whether every check passed and the largest relative
error of any check. The default method of ``odeflow verify`` is the fastest
one that passes every check.

Run: ``python benchmarks/bench_verify.py [--methods Radau DOP853 ...] [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import time

import odeflow
from odeflow.analysis.verification import DEFAULT_METHOD


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+",
                        default=["Radau", "BDF", "LSODA", "RK45", "DOP853"])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"odeflow verify, all checks; current default method: {DEFAULT_METHOD}")
    print(f"{'method':8s} {'wall [s]':>9s} {'all pass':>9s} {'max rel err':>12s}")
    for method in args.methods:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = odeflow.verify(method=method)
            best = min(best, time.perf_counter() - start)
        worst = report.max_rel_error
        print(f"{method:8s} {best:9.2f} {str(report.passed):>9s} {worst:12.2e}")


if __name__ == "__main__":
    main()
