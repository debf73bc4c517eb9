"""Convergence order of the Adam flow to the step-h Adam recursion (docs/optimisers.md).

CF7 item 6 (``derivations/heavy_ball_modified_equation.py``): read staggered
(``Adam(offset=0.5)``) the recursion is the ODE's midpoint rule, second order; read
forward (``offset=0``) first order. This prints the measured orders on Level E of
syn-small from the uniform start of training seed 0 (every gradient on at step 0),
``eta = 0.05``, over ``T`` units of time, for the recursion with step ``h`` (betas
``b^h``, rates ``eta h``, ``T / h`` steps) against the flow of the same recursion
(``odeflow.solve`` with that optimiser, ``rtol = 1e-12``), with the exact steps

- covering a fixed time (``1 / h`` steps: the case the test suite checks), and
- a fixed number of them (``2``, what ``exact_steps="auto"`` takes from this start;
  and ``1``).

Usage: ``python benchmarks/studies/adam_order.py [--T 8]`` (about ten seconds).
"""

from __future__ import annotations

import argparse

import numpy as np

import odeflow
from odeflow.fields import ExactFlow

STEPS = (0.5, 0.25, 0.125, 0.0625, 0.03125)


def errors(data, y0, z0, exact, offset, T, eta=0.05, betas=(0.9, 0.999)) -> np.ndarray:
    """``||theta_flow - theta_recursion||`` at time ``T`` for each step of :data:`STEPS`."""
    out = []
    for h in STEPS:
        K = int(round(T / h))
        k = int(round(1 / h)) if exact == "time 1" else exact
        opt = odeflow.Adam((betas[0] ** h, betas[1] ** h), exact_steps=k, offset=offset)
        field = ExactFlow(data, eta * h, eta * h, start=(y0, z0))
        disc = odeflow.optimizer_steps(field, opt, K, record=K, progress=False)
        flow = odeflow.solve(data, flow="exact", eta_y=eta * h, eta_z=eta * h, start=(y0, z0),
                             optimizer=opt, t_span=(0, K), t_eval=[K], rtol=1e-12, atol=1e-14,
                             progress=False)
        n = field.size
        out.append(np.linalg.norm(flow.y[:n, -1] - disc.y[:n, -1]))
    return np.array(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=float, default=8.0)
    args = parser.parse_args(argv)
    data = odeflow.DataModel.preset("syn-small")
    y0, z0 = odeflow.training_start(data, 0)
    print(f"h = {', '.join(f'{h:g}' for h in STEPS)}; T = {args.T:g}")
    print("| exact steps | offset | errors | orders | forward / staggered |")
    print("|---|---|---|---|---|")
    for exact in ("time 1", 2, 1):
        pair = {off: errors(data, y0, z0, exact, off, args.T) for off in (0.0, 0.5)}
        for off, err in pair.items():
            orders = np.log2(err[:-1] / err[1:])
            ratio = pair[0.0] / pair[0.5]
            print(f"| {exact} | {off:g} | {' '.join(f'{e:.2e}' for e in err)} | "
                  f"{' '.join(f'{o:.2f}' for o in orders)} | "
                  f"{'' if off == 0.0 else ' '.join(f'{r:.0f}' for r in ratio)} |")


if __name__ == "__main__":
    main()
