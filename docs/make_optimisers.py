"""Measure how closely each optimiser ODE follows its discrete optimiser (``docs/optimisers.md``).

The optimiser flows' start and discreteness, measured not fitted: on syn-small, the
optimiser flow (:func:`odeflow.solve` with ``optimizer=``) against the
deterministic discrete optimiser on the same level with the population
gradient at unit steps (:func:`odeflow.optimizer_steps`), same rates, same
start, for each choice of

- start: ``rest`` / ``limit`` (``u(0) = 0``, moments from zero) or ``first_step``
  (the first step taken exactly, the ODE from ``s = 1``);
- heavy ball, reading offset: step ``k`` is the ODE (started at rest) at ``s = k
  + offset`` (``1/2``: the staggered reading of the recursion as the ODE's
  midpoint rule; ``1``: the one-step lag of the plain ODE under a constant
  gradient), derived in ``derivations/heavy_ball_modified_equation.py``;
- rates: the plain ones (heavy ball ``u' = F - (1 - mu) u``; Adam ``1 - b``) or the
  matched ones (``modified=True``: ``-ln mu``, ``-ln b``, exact for a constant
  gradient), derived in the same module.

Cases: Level E from zero (Fig. 4: ``eta_Y = eta_Z = 1``, momentum 0.9), Level T
(``T = 128``, 64 sequences a class) from the uniform start of training seed 0
(Fig. 6's start) at ``eta_Y = eta_Z = 1`` and at ``eta_Y = 10, eta_Z = 1``, and
Adam (Fig. 5) at ``eta_Z = 0.1`` from zero (Level E) and from the uniform start
(Level T). Distances over steps ``k = 1..100``:

``param``
    ``max_k ||theta_flow(k) - theta_k|| / max_k ||theta_k - theta_0||``
    (the parameters' flat state, Euclidean norm);
``loss``
    ``max_k |L_ode - L_k|`` with ``L = -J`` the level's population loss (Level T:
    its sample-average loss);
``log-loss``
    ``max_k |ln L_ode - ln L_k|``: the same on the log scale on which the loss is
    plotted (it falls over four decades in 50 steps of Fig. 4), i.e. the largest
    relative gap, over the steps where both losses exceed ``1e-12``; ``loss`` is
    dominated by the first steps.

``--grid``: the Fig. 6 grid instead (64 cells: syn-medium-1/3/5/10 x ``eta_Z`` x
``eta_Y/eta_Z``, Level T as ``odeflow reproduce fig6`` solves it, from the uniform
start of training seed 0, 100 steps): the distinct-token entropy of the heavy-ball
flow with the plain and with the matched rates (both read half a step later)
against the discrete heavy ball's, at step 100 and the largest over the steps;
one row per cell into ``--out`` (CSV) and a summary printed. Neither table looks at
a training run.

Run: ``python docs/make_optimisers.py [--steps 100] [--samples-per-class 64]``;
prints a markdown table (a few minutes on one core);
``python docs/make_optimisers.py --grid [--out docs/optimisers_grid.csv]`` (about a
minute).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import odeflow
from odeflow.fields import ExactFlow, FiniteTFlow

MOMENTUM_VARIANTS = [  # (label, Momentum options)
    ("plain ODE, at rest at step 0 (offset 0)", {"modified": False, "offset": 0.0}),
    ("plain ODE, first step exact (offset 0)", {"modified": False, "offset": 0.0,
                                               "start": "first_step"}),
    ("plain ODE, offset 1/2", {"modified": False, "offset": 0.5}),
    ("plain ODE, offset 1", {"modified": False, "offset": 1.0}),
    ("matched rates, offset 0", {"modified": True, "offset": 0.0}),
    ("matched rates, offset 1/2 (default)", {"modified": True, "offset": 0.5}),
]
ADAM_VARIANTS = [
    ("plain rates 1 - b, from the limits", {"modified": False, "start": "limit"}),
    ("plain rates 1 - b, first step exact", {"modified": False, "exact_steps": 1,
                                            "offset": 0.0}),
    ("matched rates -ln b, from the limits", {"modified": True, "start": "limit"}),
    ("matched rates -ln b, first step exact", {"modified": True, "exact_steps": 1,
                                               "offset": 0.0}),
    ("matched rates, first step exact, offset 1/2", {"modified": True, "exact_steps": 1,
                                                     "offset": 0.5}),
    ("matched rates, exact steps auto, offset 0", {"modified": True, "exact_steps": "auto",
                                                   "offset": 0.0}),
    ("matched rates, exact steps auto, offset 1/2 (default)",
     {"modified": True, "exact_steps": "auto", "offset": 0.5}),
]


#: Losses at or below this are left out of ``log-loss``.
LOG_FLOOR = 1e-12


def cases(samples: int):
    """``(label, level factory, solve options, optimiser kind)`` of each measured case."""
    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = odeflow.training_start(data, 0)
    t_opts = {"seq_len": 128, "sample_size": samples, "seed": 0}

    def level_e(ey, ez):
        return lambda: ExactFlow(data, ey, ez), {"flow": "exact", "eta_y": ey, "eta_z": ez}

    def level_t(ey, ez, zero=False):
        start = {} if zero else {"start": (y0, z0)}
        return (lambda: FiniteTFlow(data, ey, ez, **start, **t_opts),
                {"flow": "finite_t", "eta_y": ey, "eta_z": ez, **start, **t_opts})

    return data, [
        ("E, zero start, eta 1/1", *level_e(1.0, 1.0), "momentum"),
        ("T, uniform start, eta 1/1", *level_t(1.0, 1.0), "momentum"),
        ("T, uniform start, eta 10/1", *level_t(10.0, 1.0), "momentum"),
        ("E, zero start, eta 1/0.1", *level_e(1.0, 0.1), "adam"),
        ("T, uniform start, eta 1/0.1", *level_t(1.0, 0.1), "adam"),
        ("T, zero start, eta 1/0.1", *level_t(1.0, 0.1, zero=True), "adam"),
        ("T, zero start, eta 1/1", *level_t(1.0, 1.0, zero=True), "adam"),
    ]


def distances(data, make_level, options, optimizer, steps):
    """``(param, loss, log-loss)`` distances of the optimiser flow to the recursion over
    steps 1..steps, and the solve's statistics."""
    level = make_level()
    n = level.size
    disc = odeflow.optimizer_steps(level, optimizer, steps)
    theta_d = disc.y[:n].T
    ode = odeflow.solve(data, optimizer=optimizer, t_span=(0, steps), t_eval=np.arange(steps + 1),
                        rtol=1e-9, atol=1e-11, progress=False, max_nfev=400_000, **options)
    theta_o = ode.y[:n].T
    scale = np.linalg.norm(theta_d - theta_d[0], axis=1).max()
    param = np.linalg.norm(theta_o[1:] - theta_d[1:], axis=1).max() / scale
    loss_d = -np.array([level.objective(th) for th in theta_d])
    loss_o = -np.array([level.objective(th) for th in theta_o])
    # on the log scale only where both losses are above 1e-12 (Adam drives Level E's loss
    # to exact zeros, whose ratio means nothing)
    keep = (loss_o[1:] > LOG_FLOOR) & (loss_d[1:] > LOG_FLOOR)
    log_gap = (np.abs(np.log(loss_o[1:][keep]) - np.log(loss_d[1:][keep])).max()
               if keep.any() else float("nan"))
    return param, np.abs(loss_o[1:] - loss_d[1:]).max(), log_gap, ode.stats


def grid_rows(steps: int) -> list[dict]:
    """The Fig. 6 grid: the plain and the matched heavy-ball readings against the discrete
    heavy ball on Level T, distinct-token entropy (module docstring, ``--grid``)."""
    from odeflow.analysis.measures import distinct_entropy
    from odeflow.experiments import paper
    from odeflow.families import family_named

    flow, options = paper.OPTFLOWS["T"]
    rows = []
    for size in paper.SYN_MEDIUM_SIZES:
        data = odeflow.DataModel.preset(f"syn-medium-{size}")
        y0, z0 = odeflow.training_start(data, 0)
        for eta_z in paper.FIG6_ETA_Z:
            for ratio in paper.FIG6_RATIO:
                p = paper.FIG6.replace(eta_z=eta_z, eta_y=eta_z * ratio, steps=steps)
                opts = {"seq_len": p.seq_len, **options}
                field_class = family_named("scan_snap").field_class(flow)
                level = field_class(data, p.eta_y, p.eta_z, start=(y0, z0), **opts)
                disc = odeflow.optimizer_steps(level, odeflow.Momentum(p.momentum), steps,
                                               progress=False)
                H_disc = distinct_entropy(data, disc.z_active)
                row = {"preset": f"syn-medium-{size}", "eta_z": eta_z, "ratio": ratio,
                       "eta_y": p.eta_y, "steps": steps}
                for name, modified in (("spec", False), ("matched", True)):
                    ode = paper.optimizer_flows(
                        data, p, np.arange(steps + 1.0), {"level": (flow, options)},
                        start=(y0, z0),
                        optimizer=odeflow.Momentum(p.momentum, modified=modified))["level"]
                    gap = distinct_entropy(data, ode.z_active) - H_disc
                    row[f"{name}_final"] = float(gap[-1])
                    row[f"{name}_max"] = float(np.abs(gap).max())
                rows.append(row)
                print(f"{row['preset']:>14} {eta_z:>4g} {ratio:>4g}  spec {row['spec_final']:+.2e} "
                      f"(max {row['spec_max']:.2e})  matched {row['matched_final']:+.2e} "
                      f"(max {row['matched_max']:.2e})", flush=True)
    return rows


def grid_summary(rows: list[dict]) -> str:
    """Markdown lines: how often and by how much each reading is nearer the recursion."""
    spec = np.abs([r["spec_final"] for r in rows])
    matched = np.abs([r["matched_final"] for r in rows])
    spec_max = np.array([r["spec_max"] for r in rows])
    matched_max = np.array([r["matched_max"] for r in rows])
    above = sum(r["spec_final"] > 0 for r in rows)
    return "\n".join([
        "| reading | median abs(gap) at step 100 | largest | median of the largest over "
        "the steps | cells where it is the nearer (step 100 / all steps) |",
        "|---|---|---|---|---|",
        f"| plain rates, offset 1/2 | {np.median(spec):.2e} | {spec.max():.2e} | "
        f"{np.median(spec_max):.2e} | {int((spec < matched).sum())} / "
        f"{int((spec_max < matched_max).sum())} of {len(rows)} |",
        f"| matched rates, offset 1/2 | {np.median(matched):.2e} | {matched.max():.2e} | "
        f"{np.median(matched_max):.2e} | {int((matched < spec).sum())} / "
        f"{int((matched_max < spec_max).sum())} of {len(rows)} |",
        "",
        f"(gap = flow minus discrete heavy ball, nats; the plain reading ends above the "
        f"recursion's entropy in {above} of {len(rows)} cells)"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--samples-per-class", type=int, default=64)
    parser.add_argument("--grid", action="store_true",
                        help="the Fig. 6 grid table instead (module docstring)")
    parser.add_argument("--out", default="docs/optimisers_grid.csv",
                        help="CSV of --grid's rows")
    parser.add_argument("--kind", choices=("momentum", "adam"), default=None,
                        help="only the cases of this optimiser")
    args = parser.parse_args(argv)
    if args.grid:
        from pathlib import Path

        from odeflow.cli.reproduce import csv_text
        from odeflow.io import atomic_write_text

        rows = grid_rows(args.steps)
        atomic_write_text(Path(args.out), csv_text(rows))
        print(f"wrote {args.out}")
        print(grid_summary(rows))
        return
    data, measured = cases(args.samples_per_class)
    print("| case | ODE, start, reading | param | loss | log-loss | ODE rhs | s |")
    print("|---|---|---|---|---|---|---|")
    for label, make_level, options, kind in measured:
        if args.kind not in (None, kind):
            continue
        variants = MOMENTUM_VARIANTS if kind == "momentum" else ADAM_VARIANTS
        for name, opts in variants:
            opt = odeflow.Momentum(0.9, **opts) if kind == "momentum" else odeflow.Adam(**opts)
            start = time.perf_counter()
            param, loss, log_gap, stats = distances(data, make_level, options, opt, args.steps)
            print(f"| {label} ({kind}) | {name} | {param:.3g} | {loss:.3g} | {log_gap:.3g} | "
                  f"{stats['nfev']} | {time.perf_counter() - start:.1f} |", flush=True)


if __name__ == "__main__":
    main()
