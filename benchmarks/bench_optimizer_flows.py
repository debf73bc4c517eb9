"""Optimiser flows against the training runs they predict, horizons 1e2 to 1e6 (issue 34).

Prints (not a timed test), side by side in one run with one BLAS thread, for syn-small
and syn-medium-10 (Level E from seed 0's uniform start, ``eta_Y = eta_Z = 1``: the rates
of the Fig. 4 protocol) and each horizon ``H``:

- the heavy ball (``Momentum(0.9)``) solved three ways, each to step ``H`` with the default
  output: the full state by :func:`odeflow.solve` (``method="auto"``), and in two phases
  by :func:`odeflow.fields.optimizers.slow_manifold.solve_slow_manifold` (the ODE until
  its velocity has relaxed, then the first-order slow manifold; ``switch`` is the step
  where it switched, ``-`` where it did not);
- Adam (``Adam()``) by :func:`odeflow.solve`;
- the training run of ``H`` steps (:func:`odeflow.training.protocol.train`, seed 0, batch
  128, ``T = 128``, the Fig. 6 protocol with momentum 0.9 or Adam), measured up to
  ``--train-max`` steps and past that extrapolated from its measured time per step
  (marked ``~``);
- each flow's accuracy: the largest relative difference of its loss from that of a tight
  full-state solve (``rtol = 1e-10``, ``atol = 1e-12``) at steps 10, 100, ... up to ``H``
  and the reference's horizon (``--ref-max``; syn-medium-10's at most ``1e4``).

A solve that fails (budget, stiffness) prints ``fail`` and its reason below the table.

Usage: ``python benchmarks/bench_optimizer_flows.py [--presets syn-small syn-medium-10]
[--horizons 1e2 1e3 1e4 1e5 1e6] [--train-max 1e4] [--ref-max 1e6] [--full-max 1e6]
[--cpu]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

import odeflow
from odeflow import Adam, Momentum
from odeflow.errors import SolveError
from odeflow.experiments import paper
from odeflow.fields import ExactFlow
from odeflow.fields.optimizers import OptimizerFlow
from odeflow.fields.optimizers.slow_manifold import solve_slow_manifold
from odeflow.training import training_start
from odeflow.training.protocol import train

RATES = {"eta_y": 1.0, "eta_z": 1.0}
#: The clock of every time in the tables: wall seconds, or CPU seconds with ``--cpu``
#: (steadier on a machine shared with other work).
CLOCK = {"now": time.perf_counter}
#: syn-medium-10's reference and full-state solves stop here (a 202,800-number state).
MEDIUM_CAP = 1e4


def checks(horizon: float) -> np.ndarray:
    """Steps 10, 100, ... up to ``horizon``."""
    return 10.0 ** np.arange(1, int(round(np.log10(horizon))) + 1)


def output_steps(data, start, optimizer, horizon: float) -> np.ndarray:
    """The flow's default output steps with the check steps added."""
    flow = OptimizerFlow(ExactFlow(data, start=start, **RATES), optimizer)
    return np.union1d(flow.default_steps(0.0, horizon), checks(horizon))


def losses_at(traj, steps) -> np.ndarray:
    """The loss ``-J`` of ``traj`` at ``steps`` (which are among its output steps)."""
    index = np.searchsorted(traj.t, steps)
    return -np.asarray(traj.objective)[index]


def full_state(data, start, optimizer, horizon: float, **options):
    """``(seconds, trajectory or the failure's message)`` of :func:`odeflow.solve`."""
    t = CLOCK['now']()
    try:
        traj = odeflow.solve(data, "exact", start=start, t_span=(0, horizon),
                             t_eval=output_steps(data, start, optimizer, horizon),
                             optimizer=optimizer, progress=False, **RATES, **options)
    except SolveError as err:
        return CLOCK['now']() - t, str(err).split(":")[-1].strip()[:90]
    return CLOCK['now']() - t, traj


def two_phase(data, start, horizon: float):
    """``(seconds, trajectory)`` of the heavy ball's two-phase solve: ``odeflow.solve`` with
    ``Momentum(0.9, slow_manifold=1e-5)`` where the solver runs phased flows, else
    :func:`solve_slow_manifold` (the same phases on ``solve_ivp``)."""
    optimizer = Momentum(0.9, slow_manifold=1e-5)
    steps = output_steps(data, start, optimizer, horizon)
    t = CLOCK["now"]()
    try:
        traj = odeflow.solve(data, "exact", start=start, t_span=(0, horizon),
                             t_eval=steps, optimizer=optimizer, progress=False, **RATES)
    except SolveError as err:
        if "solved in phases" not in str(err):
            raise
        flow = OptimizerFlow(ExactFlow(data, start=start, **RATES),
                             Momentum(0.9))
        t = CLOCK["now"]()
        traj = solve_slow_manifold(flow, horizon, t_eval=steps, tol=1e-5)
    return CLOCK["now"]() - t, traj


def training_seconds(data, kind: str, horizons, train_max: float) -> dict:
    """Seconds of the training run of each horizon: measured up to ``train_max`` steps,
    past that the time per step of the longest measured run times the horizon."""
    protocol = paper.FIG6 if kind == "momentum" else paper.FIG6.replace(optimizer="adam")
    out, per_step = {}, None
    for horizon in sorted(horizons):
        if horizon <= train_max:
            t = CLOCK['now']()
            train(data, **protocol.replace(steps=int(horizon), **RATES).options(), seeds=[0],
                  progress=False)
            out[horizon] = (CLOCK['now']() - t, False)
            per_step = out[horizon][0] / horizon
        else:
            out[horizon] = (per_step * horizon, True)
    return out


def reference(data, start, optimizer, horizon: float):
    """A tight full-state solve to ``horizon`` at the check steps (LSODA with the analytic
    Jacobian where the dense Jacobian fits: syn-small's heavy ball; else DOP853)."""
    method = "LSODA" if data.vocab_size < 100 and isinstance(optimizer, Momentum) else "DOP853"
    traj = odeflow.solve(data, "exact", start=start, t_span=(0, horizon),
                         t_eval=checks(horizon), optimizer=optimizer, method=method,
                         rtol=1e-10, atol=1e-12, progress=False, max_nfev=2_000_000, **RATES)
    return checks(horizon), losses_at(traj, checks(horizon))


def accuracy(traj, ref) -> str:
    """Largest relative loss difference of ``traj`` from the reference ``(steps, loss)``
    at the steps both have."""
    if isinstance(traj, str) or ref is None:
        return "-"
    steps, want = ref
    inside = steps <= traj.t[-1]
    if not inside.any():
        return "-"
    got = losses_at(traj, steps[inside])
    return f"{np.max(np.abs(got / want[inside] - 1.0)):.1e}"


def seconds(value) -> str:
    return f"{value:8.2f}" if value is not None else f"{'-':>8}"


def bench_preset(name: str, horizons, args, failures: list) -> None:
    """The table of one preset (module docstring)."""
    data = odeflow.DataModel.preset(name)
    start = training_start(data, 0)
    cap = MEDIUM_CAP if name != "syn-small" else np.inf
    ref_end = min(args.ref_max, cap, max(horizons))
    t = CLOCK['now']()
    refs = {"momentum": reference(data, start, Momentum(0.9), ref_end)}
    try:
        refs["adam"] = reference(data, start, Adam(), min(ref_end, args.adam_ref_max))
    except SolveError as err:
        refs["adam"] = None
        failures.append(f"{name} Adam reference: {err}")
    print(f"\n{name} (M = {data.vocab_size}), references to step {ref_end:g} "
          f"(Adam {min(ref_end, args.adam_ref_max):g}): {CLOCK['now']() - t:.0f} s")
    trains = {kind: training_seconds(data, kind, horizons, args.train_max)
              for kind in ("momentum", "adam")}
    print(f"{'steps':>8} | {'HB full s':>9} {'acc':>7} | {'HB 2-ph s':>9} {'switch':>7} "
          f"{'acc':>7} | {'train s':>9} | {'Adam s':>8} {'acc':>7} | {'train s':>9}")
    for horizon in horizons:
        row = {}
        full = horizon <= min(args.full_max, cap)
        hb_s, hb = full_state(data, start, Momentum(0.9), horizon) if full else (None, "-")
        tp_s, tp = two_phase(data, start, horizon)
        ad_s, ad = full_state(data, start, Adam(), horizon) if full else (None, "-")
        for label, traj in (("HB full", hb), ("Adam", ad)):
            if isinstance(traj, str) and traj != "-":
                failures.append(f"{name} {label} to {horizon:g}: {traj}")
        switch = tp.stats["switch_step"]
        row = [f"{horizon:8.0e}", seconds(hb_s if not isinstance(hb, str) else None),
               f"{accuracy(hb, refs['momentum']):>7}", seconds(tp_s),
               f"{switch:7.0f}" if switch is not None else f"{'-':>7}",
               f"{accuracy(tp, refs['momentum']):>7}", _train(trains["momentum"][horizon]),
               seconds(ad_s if not isinstance(ad, str) else None),
               f"{accuracy(ad, refs['adam']):>7}", _train(trains["adam"][horizon])]
        print(f"{row[0]} | {row[1]:>9} {row[2]} | {row[3]:>9} {row[4]} {row[5]} | {row[6]} | "
              f"{row[7]} {row[8]} | {row[9]}", flush=True)


def _train(entry) -> str:
    value, extrapolated = entry
    return f"{'~' if extrapolated else ' '}{value:8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["syn-small", "syn-medium-10"])
    parser.add_argument("--horizons", nargs="+", type=float,
                        default=[1e2, 1e3, 1e4, 1e5, 1e6])
    parser.add_argument("--train-max", type=float, default=1e4,
                        help="longest training run measured; longer ones extrapolated")
    parser.add_argument("--ref-max", type=float, default=1e6,
                        help="horizon of the tight reference (syn-medium-10: at most 1e4)")
    parser.add_argument("--adam-ref-max", type=float, default=1e5,
                        help="horizon of Adam's tight reference")
    parser.add_argument("--full-max", type=float, default=1e6,
                        help="longest full-state solve (syn-medium-10: at most 1e4)")
    parser.add_argument("--cpu", action="store_true",
                        help="CPU seconds (time.process_time) instead of wall seconds")
    args = parser.parse_args()
    if args.cpu:
        CLOCK["now"] = time.process_time
    print(f"odeflow optimiser flows vs training; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; one BLAS thread; "
          f"{'CPU' if args.cpu else 'wall'} seconds")
    failures: list[str] = []
    with threadpool_limits(1, user_api="blas"):
        for name in args.presets:
            bench_preset(name, sorted(args.horizons), args, failures)
    for line in failures:
        print(f"fail: {line}")


if __name__ == "__main__":
    main()
