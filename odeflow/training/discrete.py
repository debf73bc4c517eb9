"""Discrete gradient ascent on the population objective (spec section 6, Lemma 5).

Explicit Euler steps of the Level E vector field (Eqns 3-4),

.. math::

    y_{k+1} = y_k + \\Delta t \\, F(y_k), \\qquad t_k = k \\Delta t,

where ``F = (eta_Y dJ/dY, eta_Z dJ/dZ)`` is :meth:`odeflow.fields.ExactFlow.rhs`.
With ``dt = 1`` these are plain gradient-ascent steps on ``J`` (Eqn 2) with step
sizes ``eta_Y`` and ``eta_Z``, the process whose continuous limit is the flow;
Lemma 5's recursion for the decoder margin is the same discretisation of Eqn 44.
Euler is first order: at a fixed time the distance to the flow is ``O(dt)``.
"""

from __future__ import annotations

import time

import numpy as np

from odeflow.data import validate_positive
from odeflow.fields.exact import ExactFlow
from odeflow.training.common import StepProgress, check_count, diverged, record_steps


def gradient_ascent(data, eta_y: float, eta_z: float, steps: int, dt: float = 1.0,
                    record_every: int | None = None, z0=None, progress: bool | None = None):
    """Run ``steps`` Euler steps of the Level E field from ``Y(0) = 0``.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of the decoder and of the attention logits (Eqns 3-4).
    steps : int
        Number of steps, ``>= 1``; the run ends at ``t = steps * dt``.
    dt : float, default 1
        Time step; ``dt = 1`` is gradient ascent with step sizes ``eta_Y, eta_Z``.
    record_every : int, optional
        Keep the state every this many steps (and always the last one); by
        default about 100 records.
    z0 : optional
        Initial logits ``Z(0)`` (zero by default), as for :func:`odeflow.solve`.
    progress : bool, optional
        Show a progress bar; by default only when stderr is a terminal.

    Returns
    -------
    Trajectory
        Recorded at ``t = k * dt``; ``meta["flow"] == "gradient_ascent"``.

    Raises
    ------
    ValidationError
        For invalid input, naming the field.
    SolveError
        When a step leaves the finite numbers.
    """
    field = ExactFlow(data, eta_y, eta_z, z0=z0)
    steps = check_count(steps, "steps")
    dt = validate_positive(dt, "dt")
    marks = record_steps(steps, record_every)
    y = field.initial_state()
    states = np.empty((marks.size, y.size))
    states[0] = y
    bar = StepProgress(steps, progress, "gradient ascent")
    start = time.perf_counter()
    k = 0
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for r in range(1, marks.size):
                while k < marks[r]:
                    y = y + dt * field.rhs(k * dt, y)
                    k += 1
                states[r] = y
                bar.update(int(marks[r] - marks[r - 1]))
    except FloatingPointError as exc:
        raise diverged("gradient ascent", k, exc) from None
    finally:
        bar.close()
    wall = time.perf_counter() - start
    stats = {"method": "euler", "steps": steps, "rhs_calls": field.nfev, "wall_time": wall,
             "steps_per_second": steps / wall if wall > 0 else float("inf")}
    traj = field.trajectory(marks * dt, states, stats)
    traj.meta.update({"flow": "gradient_ascent", "dt": dt, "steps": steps})
    return traj
