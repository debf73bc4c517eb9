"""Benchmark: integrators on the reduced flow (Level R) at a large learning-rate ratio.

Prints (not a timed test), for shared-query-small at ``eta_Y / eta_Z = 1e3`` (default
``eta_Y = 1``, ``eta_Z = 1e-3``), ``t`` in ``[0, t_end]``, ``rtol = 1e-8``,
``atol = 1e-10``: for ``method="auto"`` and for Radau, BDF, LSODA, RK45,
DOP853 and RK23 the solver's ``nfev`` (right-hand sides, Jacobian columns not
included) and ``njev``, the wall time (best of ``--repeat``), the ratio of
RK45's ``nfev`` to the method's, and the max error of ``z`` and ``h`` against a
DOP853 reference at ``rtol = 1e-13``.

Run: ``python benchmarks/bench_reduced.py [--eta-y 1] [--ratio 1e3] [--t-end 1e4 1e6]
[--repeat 3]``.
"""

from __future__ import annotations

import argparse

import numpy as np

import odeflow

METHODS = ("auto", "Radau", "BDF", "LSODA", "RK45", "DOP853", "RK23")


def bench(eta_y: float, eta_z: float, t_end: float, repeat: int) -> None:
    data = odeflow.DataModel.preset("shared-query-small")
    common = {"flow": "reduced", "eta_y": eta_y, "eta_z": eta_z, "t_span": (0.0, t_end),
              "progress": False}
    ref = odeflow.solve(data, method="DOP853", rtol=1e-13, atol=1e-16, **common)
    print(f"shared-query-small, reduced flow, eta_y={eta_y:g}, eta_z={eta_z:g} "
          f"(eta_y/eta_z={eta_y / eta_z:g}), t in [0, {t_end:g}], rtol=1e-8, atol=1e-10")
    print(f"{'method':8s} {'nfev':>7s} {'njev':>5s} {'nlu':>5s} {'wall [s]':>9s} "
          f"{'RK45/this':>9s} {'max|dz|':>9s} {'max|dh|':>9s}")
    rows = {}
    for method in METHODS:
        best = np.inf
        for _ in range(repeat):
            traj = odeflow.solve(data, method=method, t_eval=ref.t, **common)
            best = min(best, traj.stats["wall_time"])
        rows[method] = (traj, best)
    rk45 = rows["RK45"][0].stats["nfev"]
    for method, (traj, best) in rows.items():
        s = traj.stats
        name = f"auto={s['method']}" if method == "auto" else method
        dz = np.abs(traj.z_active - ref.z_active).max()
        dh = np.abs(traj.series["margin"] - ref.series["margin"]).max()
        print(f"{name:8s} {s['nfev']:7d} {s['njev']:5d} {s['nlu']:5d} {best:9.4f} "
              f"{rk45 / s['nfev']:9.2f} {dz:9.1e} {dh:9.1e}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eta-y", type=float, default=1.0)
    parser.add_argument("--ratio", type=float, default=1e3, help="eta_y / eta_z (1e3)")
    parser.add_argument("--t-end", type=float, nargs="+", default=[1e4, 1e6])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for t_end in args.t_end:
        bench(args.eta_y, args.eta_y / args.ratio, t_end, args.repeat)


if __name__ == "__main__":
    main()
