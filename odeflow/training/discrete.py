"""Discrete gradient ascent on the population objective (Lemma 5, Fig. 8).

Explicit Euler steps of the Level E vector field (Eqns 3-4),

.. math::

    y_{k+1} = y_k + \\Delta t \\, F(y_k), \\qquad t_k = k \\Delta t,

where ``F = (eta_Y dJ/dY, eta_Z dJ/dZ)`` is :meth:`odeflow.fields.ExactFlow.rhs`.
With ``dt = 1`` these are plain gradient-ascent steps on ``J`` (Eqn 2) with step
sizes ``eta_Y`` and ``eta_Z``, the process whose continuous limit is the flow;
Lemma 5's recursion for the decoder margin is the same discretisation of Eqn 44.
Euler is first order: at a fixed time the distance to the flow is ``O(dt)``.

:func:`optimizer_steps` is the deterministic heavy ball or Adam on a
parameter level's exact gradient (``docs/optimisers.md``): the discrete twin of an
optimiser flow (:class:`~odeflow.fields.optimizers.OptimizerFlow`), the paper's
optimiser without minibatch noise. :func:`training_start` draws the ``Y(0),
Z(0)`` a training seed starts from, for flows and twins started there.
"""

from __future__ import annotations

import time

import numpy as np

from odeflow.data import DataModel, validate_positive
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS
from odeflow.fields.exact import ExactFlow
from odeflow.fields.optimizers import GradientDescent, OptimizerFlow
from odeflow.training.api import record_marks
from odeflow.training.common import (
    StepProgress,
    check_count,
    check_seed,
    default_record,
    diverged,
)
from odeflow.training.protocol import initial_state


@renamed_keywords({**START_PARTS, "record_every": "record"})
def gradient_ascent(data, eta_y: float, eta_z: float, steps: int, dt: float = 1.0,
                    record=None, start=None, progress: bool | None = None):
    """Run ``steps`` Euler steps of the Level E field from ``start`` (``Y(0) = 0``,
    ``Z(0) = 0`` by default).

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of the decoder and of the attention logits (Eqns 3-4).
    steps : int
        Number of steps, ``>= 1``; the run ends at ``t = steps * dt``.
    dt : float, default 1
        Time step; ``dt = 1`` is gradient ascent with step sizes ``eta_Y, eta_Z``.
    record : int or sequence of int, optional
        Keep the state every this many steps, or at those steps (and always the
        start and the last one); by default about 100 records. Old keyword
        ``record_every=`` (warns).
    start : (y0, z0), optional
        Initial decoder and logits (either None: zero), as for :func:`odeflow.solve`;
        old keywords ``y0=``, ``z0=`` (warn).
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
    field = ExactFlow(data, eta_y, eta_z, start=start)
    steps = check_count(steps, "steps")
    dt = validate_positive(dt, "dt")
    marks = record_marks(record, steps, default=default_record)
    rule = GradientDescent()
    y = np.array(field.initial_state(), dtype=float)
    states = np.empty((marks.size, y.size))
    states[0] = y
    bar = StepProgress(steps, progress, "gradient ascent")
    began = time.perf_counter()
    k = 0
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for r in range(1, marks.size):
                while k < marks[r]:
                    rule.step(y, field.rhs(k * dt, y), [], k + 1, dt)
                    k += 1
                states[r] = y
                bar.update(int(marks[r] - marks[r - 1]))
    except FloatingPointError as exc:
        raise diverged("gradient ascent", k, exc) from None
    finally:
        bar.close()
    wall = time.perf_counter() - began
    stats = {"method": "euler", "steps": steps, "rhs_calls": field.nfev, "wall_time": wall,
             "steps_per_second": steps / wall if wall > 0 else float("inf")}
    traj = field.trajectory(marks * dt, states, stats)
    traj.meta.update({"flow": "gradient_ascent", "dt": dt, "steps": steps})
    return traj


def training_start(data: DataModel, seed: int, init: str = "uniform"):
    """The start ``(Y(0), Z(0))`` of the training run with ``seed`` (Sec. 8, Fig. 6).

    Exactly the draw of :func:`odeflow.training.protocol.train` for that seed
    (``numpy.random.default_rng(seed)``, ``Y`` then ``Z``, entrywise uniform in
    ``[-1/sqrt(M), 1/sqrt(M)]`` for ``init="uniform"``, the paper's Fig. 6
    start; zero for ``init="zero"``), the pair ``start`` of ``odeflow.solve(...,
    start=(Y0, Z0))`` and of the level fields: ``Y0`` of shape ``(M, M)``, ``Z0`` the rows
    of the query tokens in use, ``(q, M)`` (the other rows never enter the model).
    """
    if not isinstance(data, DataModel):
        raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
    Y, Z = initial_state(data, init, np.random.default_rng(check_seed(seed)))
    return Y, Z[data.query_tokens]


@renamed_keywords({"record_every": "record"})
def optimizer_steps(field, optimizer, steps: int, record=1, progress: bool | None = None):
    """The deterministic discrete optimiser on a level's exact gradient (``docs/optimisers.md``).

    Unit steps of the heavy ball (``u_{k+1} = mu u_k + F(theta_k)``, ``theta_{k+1} =
    theta_k + u_{k+1}``, i.e. ``v <- mu v + g``, ``theta <- theta + eta v`` with
    ``u = eta v``) or of Adam (``m_{k+1} = b1 m_k + (1 - b1) g_k``, ``v_{k+1} = b2
    v_k + (1 - b2) g_k^2``, ``theta_{k+1} = theta_k + eta m_hat / (sqrt(v_hat) +
    eps)``, ``m_hat = m_{k+1} / (1 - b1^{k+1})``, ``v_hat = v_{k+1} / (1 -
    b2^{k+1})``) with ``g = field.gradient`` and ``eta = field.rate_vector``:
    PyTorch's ``SGD(momentum)`` / ``Adam`` on the population objective, as the
    paper trains, without minibatch noise. The start is the field's
    (``start=(y0, z0)`` of the level). The steps are the optimiser's own ``step``
    (:meth:`OptimizerFlow.advance`), so only its parameters (``mu``; ``betas``,
    ``eps``) enter; ``start`` and ``modified`` describe the ODE.

    Parameters
    ----------
    field : Field
        A parameter level (``gradient``, ``rate_vector``), e.g.
        ``ExactFlow(data, eta_y, eta_z, start=(y0, z0))``.
    optimizer : odeflow.Momentum or odeflow.Adam
    steps : int
        Number of steps, ``>= 1``.
    record : int, sequence of int or None, default 1
        Keep every this many steps, or those steps (and always the start and the
        last); default every step, None about 100 records. Old keyword
        ``record_every=`` (warns).
    progress : bool, optional
        Progress bar; by default only when stderr is a terminal.

    Returns
    -------
    Trajectory
        The level's result on the step axis (``traj.steps``), with the optimiser's
        state (``traj.velocity`` / ``traj.moments``), as :func:`odeflow.solve`
        returns the optimiser flow; ``meta["flow"]`` is ``"discrete_momentum"``
        or ``"discrete_adam"`` and ``meta["level"]`` the level's flow name;
        ``traj.y`` holds the raw flat states (as a solve's).

    Raises
    ------
    ValidationError
        For invalid input, naming the field (``optimizer`` for a level that has
        no optimiser flow).
    SolveError
        When an iterate leaves the finite numbers.
    """
    flow = OptimizerFlow(field, optimizer)
    steps = check_count(steps, "steps")
    marks = record_marks(record, steps, default=default_record)
    opt = flow.optimizer
    theta, *state = (x.copy() for x in flow.split(flow.rest_state()))
    states = np.empty((marks.size, flow.size))
    states[0] = flow.rest_state()
    bar = StepProgress(steps, progress, f"discrete {opt.kind}")
    began = time.perf_counter()
    k, r = 0, 1
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            for k in range(1, steps + 1):
                flow.advance(k, theta, state)
                if k == marks[r]:
                    states[r] = flow.join(theta, *state)
                    r += 1
                    bar.update(int(marks[r - 1] - marks[r - 2]))
    except FloatingPointError as exc:
        raise diverged(f"discrete {opt.kind}", k, exc) from None
    finally:
        bar.close()
    wall = time.perf_counter() - began
    stats = {"method": f"discrete {opt.kind}", "steps": steps, "wall_time": wall,
             "rhs_calls": steps}
    traj = flow.trajectory(marks.astype(float), states, stats)
    traj.meta.update({"level": traj.meta.get("flow"), "flow": f"discrete_{opt.kind}"})
    traj.attach_solution(states.T)
    return traj
