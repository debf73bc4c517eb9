"""Measure how closely each optimiser ODE follows its discrete optimiser (``docs/optimisers.md``).

Spec section 9, "start and discreteness, measured not fitted": on syn-small, the
optimiser flow (:func:`odeflow.solve` with ``optimizer=``) against the
deterministic discrete optimiser on the same level with the population
gradient at unit steps (:func:`odeflow.optimizer_steps`), same rates, same
start, for each choice of

- start: ``rest`` / ``limit`` (``u(0) = 0``, moments from zero) or ``first_step``
  (the first step taken exactly, the ODE from ``s = 1``);
- heavy ball, reading offset: step ``k`` is the ODE (started at rest) at ``s = k
  + offset`` (``1/2``: the staggered reading of the recursion as the ODE's
  midpoint rule; ``1``: the one-step lag of the spec's ODE under a constant
  gradient), derived in ``derivations/heavy_ball_modified_equation.py``;
- rates: the spec's (heavy ball ``u' = F - (1 - mu) u``; Adam ``1 - b``) or the
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
    its sample-average loss).

Run: ``python docs/make_optimisers.py [--steps 100] [--samples-per-class 64]``;
prints a markdown table (a few minutes on one core).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import odeflow
from odeflow.fields import ExactFlow, FiniteTFlow

MOMENTUM_VARIANTS = [  # (label, Momentum options)
    ("spec ODE, at rest at step 0 (offset 0)", {"modified": False, "offset": 0.0}),
    ("spec ODE, first step exact (offset 0)", {"modified": False, "offset": 0.0,
                                               "start": "first_step"}),
    ("spec ODE, offset 1/2 (default)", {"modified": False, "offset": 0.5}),
    ("spec ODE, offset 1", {"modified": False, "offset": 1.0}),
    ("matched rates, offset 0", {"modified": True, "offset": 0.0}),
    ("matched rates, offset 1/2", {"modified": True, "offset": 0.5}),
]
ADAM_VARIANTS = [
    ("spec rates 1 - b, from the limits", {"modified": False, "start": "limit"}),
    ("spec rates 1 - b, first step exact", {"modified": False, "start": "first_step"}),
    ("matched rates -ln b, from the limits", {"modified": True, "start": "limit"}),
    ("matched rates -ln b, first step exact (default)", {"modified": True,
                                                        "start": "first_step"}),
]


def cases(samples: int):
    """``(label, level factory, solve options, optimiser kind)`` of each measured case."""
    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = odeflow.training_start(data, 0)
    t_opts = {"seq_len": 128, "samples_per_class": samples, "seed": 0}

    def level_e(ey, ez):
        return lambda: ExactFlow(data, ey, ez), {"flow": "exact", "eta_y": ey, "eta_z": ez}

    def level_t(ey, ez):
        return (lambda: FiniteTFlow(data, ey, ez, z0=z0, y0=y0, **t_opts),
                {"flow": "finite_t", "eta_y": ey, "eta_z": ez, "z0": z0, "y0": y0, **t_opts})

    return data, [
        ("E, zero start, eta 1/1", *level_e(1.0, 1.0), "momentum"),
        ("T, uniform start, eta 1/1", *level_t(1.0, 1.0), "momentum"),
        ("T, uniform start, eta 10/1", *level_t(10.0, 1.0), "momentum"),
        ("E, zero start, eta 1/0.1", *level_e(1.0, 0.1), "adam"),
        ("T, uniform start, eta 1/0.1", *level_t(1.0, 0.1), "adam"),
    ]


def distances(data, make_level, options, optimizer, steps):
    """``(param, loss)`` distances of the optimiser flow to the recursion over steps 1..steps."""
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
    return param, np.abs(loss_o[1:] - loss_d[1:]).max(), ode.stats


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--samples-per-class", type=int, default=64)
    args = parser.parse_args(argv)
    data, measured = cases(args.samples_per_class)
    print("| case | ODE, start, reading | param | loss | ODE rhs | s |")
    print("|---|---|---|---|---|---|")
    for label, make_level, options, kind in measured:
        variants = MOMENTUM_VARIANTS if kind == "momentum" else ADAM_VARIANTS
        for name, opts in variants:
            opt = odeflow.Momentum(0.9, **opts) if kind == "momentum" else odeflow.Adam(**opts)
            start = time.perf_counter()
            param, loss, stats = distances(data, make_level, options, opt, args.steps)
            print(f"| {label} ({kind}) | {name} | {param:.3g} | {loss:.3g} | "
                  f"{stats['nfev']} | {time.perf_counter() - start:.1f} |", flush=True)


if __name__ == "__main__":
    main()
