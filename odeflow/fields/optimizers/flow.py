"""Optimiser flows: heavy-ball momentum and Adam as ODEs in step time (``docs/optimisers.md``).

A real run does not follow the gradient flow of its level: it follows its
optimiser (SGD with momentum 0.9 in the paper's Figs. 4 and 6, Adam in Fig. 5).
An *optimiser flow* keeps the optimiser's state next to the parameters and runs
in step time ``s`` (one unit per optimiser step). It wraps any
*parameter-level* field, one whose flat state is the parameters themselves
(Level E, Level T; the induction-head levels, whose solver state holds ``ln|c|``,
refuse it: ``optimizer_flows = False``), through a two-part interface:

``inner.gradient(y)``
    ``g(theta)``, the raw gradient that the field follows, on its flat state
    (ascent on ``J`` for Scan and Snap; ``-grad L`` for a field that descends a
    loss), with
``inner.rate_vector``
    the learning rate of every entry of the flat state, so that
    ``inner.rhs(t, y) == inner.rate_vector * inner.gradient(y)`` (``F = eta g``).

The wrapper is sign-agnostic: it uses ``F`` and ``g`` as the inner field
defines them. (Adam's update is odd in ``g``, so Adam ascending ``J`` with
``g = grad J`` is Adam descending ``L = -J``.) Level R and the snap system are
refused (:class:`~odeflow.errors.ValidationError` naming ``optimizer``): their
variables are not the parameters.

Descriptions
------------
Each optimiser's recursion, ODE and Jacobian are documented with its class:
:class:`~odeflow.fields.optimizers.Momentum` (heavy ball) in
:mod:`odeflow.fields.optimizers.momentum`, :class:`~odeflow.fields.optimizers.Adam` in
:mod:`odeflow.fields.optimizers.adam`. :class:`OptimizerFlow` holds what they share:
the flat state, the exact first steps, the offset clock and the result; it calls the
optimiser's ``flow_step``, ``ode_rhs`` and ``ode_jacobian`` and never branches on
its kind.

Time axis. Trajectories of an optimiser flow are on the step axis
(``traj.steps``); the heavy ball also carries the flow time of the warm-up map
(``traj.flow_time``, :meth:`Momentum.flow_time`); Adam has no first-order time
map (``traj.flow_time`` is None): its ODE is the comparison.

Phases. ``Momentum(slow_manifold=tol)`` makes the flow *phased*
(:attr:`OptimizerFlow.phased`): the solver hands its integrator to
:meth:`OptimizerFlow.run_phases`, which integrates the heavy-ball ODE until its velocity
has relaxed onto the slow manifold and the manifold from there
(:mod:`odeflow.fields.optimizers.slow_manifold`).

Jacobian. Each optimiser's, built from the inner field's analytic Jacobian ``dF``;
:meth:`OptimizerFlow.jacobian` returns it dense (every integrator, LSODA included,
takes a dense Jacobian) and :meth:`OptimizerFlow.jac_sparsity` the block pattern for
states too large for a dense one.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse

from odeflow.errors import ValidationError
from odeflow.fields.base import PATTERN_BYTES_LIMIT, Field
from odeflow.fields.optimizers.adam import Adam
from odeflow.fields.optimizers.momentum import Momentum
from odeflow.fields.optimizers.slow_manifold import run_phases

#: Most steps ``Adam(exact_steps="auto")`` takes exactly before it refuses (entries that
#: keep taking their first step so late are not what the ODE start is made for).
AUTO_EXACT_LIMIT = 100
#: The optimisers that have an optimiser flow.
OPTIMIZERS = (Momentum, Adam)
#: Bytes of the raw flat states (``8 x size x points``) at a solve's default output
#: steps (:meth:`OptimizerFlow.default_steps`): however long the span, the default
#: output of an optimiser flow holds at most this many bytes of solver state.
DEFAULT_OUTPUT_BYTES = 64 * 2**20
#: Most default output steps of an optimiser flow that are every whole step; past that,
#: this many a decade of ``1 + k``; the fewest however large the state.
DEFAULT_OUTPUT_POINTS, DEFAULT_PER_DECADE, MIN_OUTPUT_STEPS = 2001, 100, 10
#: The first step of an optimiser flow's integration, in optimiser steps
#: (:meth:`OptimizerFlow.initial_step`).
INITIAL_STEP = 1.0


def check_optimizer(optimizer):
    """``optimizer`` if it is a :class:`Momentum` or :class:`Adam`, else a ValidationError."""
    if not isinstance(optimizer, OPTIMIZERS):
        raise ValidationError("optimizer", "must be odeflow.Momentum(mu) or odeflow.Adam(...), "
                              f"got {optimizer!r:.80}")
    return optimizer


def check_parameter_field(inner: Field) -> None:
    """Refuse a field whose state is not the parameters (no ``gradient``/``rate_vector``)."""
    if not isinstance(inner, Field):
        raise ValidationError("optimizer", f"wraps a Field, got {type(inner).__name__}")
    if not getattr(inner, "optimizer_flows", True):
        name = getattr(inner, "name", type(inner).__name__)
        raise ValidationError("optimizer", f"flow {name!r} has no optimiser flow yet: "
                              "optimiser flows wrap Scan and Snap's parameter levels "
                              "('exact', 'finite_t'); this family has its gradient flow only")
    if not (callable(getattr(inner, "gradient", None)) and hasattr(inner, "rate_vector")):
        name = getattr(inner, "name", type(inner).__name__)
        raise ValidationError("optimizer", f"flow {name!r} has no optimiser flow: its "
                              "variables are not the model's parameters (an optimiser flow "
                              "wraps a parameter-level field such as 'exact' or 'finite_t')")


class OptimizerFlow(Field):
    """An optimiser flow in step time around a parameter-level field (``docs/optimisers.md``).

    Parameters
    ----------
    inner : Field
        A parameter-level field: it has ``gradient(y)`` and ``rate_vector``
        with ``inner.rhs(t, y) == inner.rate_vector * inner.gradient(y)``.
    optimizer : Momentum or Adam

    Notes
    -----
    The solve runs from :attr:`start_step` (``-offset``) with the optimiser at rest,
    so that step ``k`` is the ODE at ``k + offset`` on its own clock
    (:func:`odeflow.solve` does this); for the heavy ball the state at step 0 is then
    not exactly the level's start for ``offset > 0``. Adam with
    ``start="first_step"`` copies its exact steps and integrates from
    :attr:`ode_start` (``exact_steps - offset``). The optimiser's state is read at
    the same clock as ``theta``: with the staggered reading, step ``k``'s velocity
    or moments are the ODE's at ``s = k + offset``, half a step after the
    recursion's ``u_k`` or ``m_k, v_k`` (which sit at ``s = k``).
    Flat state: the inner field's state ``theta`` (``n`` entries), then the
    velocity ``u = eta v`` (heavy ball) or the moments ``m``, ``v`` (Adam), each
    in the inner field's state layout. ``t`` is the step time ``s``. The result
    is the inner field's (a Trajectory on the step axis) with the optimiser's
    state as the series ``velocity`` or ``moment1``, ``moment2``, the heavy
    ball's flow time as the series ``flow_time``, and ``meta["optimizer"]``.
    The optimiser supplies the steps (``flow_step``), the right-hand side
    (``ode_rhs``), the Jacobian (``ode_jacobian``) and the series (``series``).
    """

    def __init__(self, inner: Field, optimizer):
        super().__init__()
        self.optimizer = check_optimizer(optimizer)
        check_parameter_field(inner)
        self.inner = inner
        self.name = inner.name
        self.data = getattr(inner, "data", None)
        self.n = int(inner.size)
        self.rate = np.broadcast_to(np.asarray(inner.rate_vector, dtype=float),
                                    (self.n,)).copy()
        self.has_jacobian = bool(getattr(inner, "has_jacobian", False))
        self.blocks = 1 + optimizer.state_blocks
        self._theta0 = np.asarray(inner.initial_state(), dtype=float)
        self._exact = None  # the exact steps' states (start="first_step"), made on first use
        # steps the recursion takes before the ODE (an int or "auto"; 0 without first_step)
        self._exact_request = optimizer.exact_request
        #: Step ``k`` is the ODE's clock at ``k + offset`` (the optimiser's ``offset``).
        self.offset = float(optimizer.offset)
        self._in_phases = False  # set while run_phases integrates a phased flow

    # ------------------------------------------------------------ state
    @property
    def size(self) -> int:
        return self.blocks * self.n

    def rest_state(self) -> np.ndarray:
        """The optimiser at rest at the level's start (the ODE's clock at 0), flat."""
        return np.concatenate([self._theta0, np.zeros(self.size - self.n)])

    def initial_state(self) -> np.ndarray:
        """The state at :attr:`start_step` (at rest: :meth:`rest_state`)."""
        return self.rest_state()

    @property
    def exact_steps(self) -> int:
        """Steps taken by the recursion before the ODE (``start="first_step"``; else 0);
        ``Adam(exact_steps="auto")`` resolved (:meth:`exact_states` takes them)."""
        if self._exact_request == "auto":
            return len(self.exact_states()) - 1
        return int(self._exact_request)

    @property
    def start_step(self) -> float:
        """The step at which the ODE starts at rest: ``-offset`` (the solve starts there,
        so that step ``k`` is the ODE at ``k + offset`` on its own clock)."""
        return -self.offset

    def split(self, y: np.ndarray) -> tuple[np.ndarray, ...]:
        """Views ``(theta, u)`` or ``(theta, m, v)`` of a flat state."""
        n = self.n
        return tuple(y[i * n:(i + 1) * n] for i in range(self.blocks))

    def advance(self, k: int, theta: np.ndarray, state: list) -> None:
        """Step ``k >= 1`` of the discrete optimiser, in place, on the inner field's
        gradient at ``theta``: the optimiser's :meth:`~odeflow.fields.optimizers.Optimizer.step`
        on this flow's state layout (``state``: ``[u]`` or ``[m, v]``).

        Heavy ball: ``u_k = mu u_{k-1} + F(theta_{k-1})``, ``theta_k = theta_{k-1} + u_k``
        (``u = eta v``). Adam: ``m_k = b1 m_{k-1} + (1 - b1) g``, ``v_k = b2
        v_{k-1} + (1 - b2) g^2``, ``theta_k = theta_{k-1} + eta m_hat / (sqrt(v_hat) +
        eps)`` with the bias corrections ``1 - b^k``. The exact steps of the flow and
        :func:`odeflow.training.optimizer_steps` both take their steps here.
        """
        self.optimizer.flow_step(theta, self.inner.gradient(theta), state, k, self.rate)

    def recursion_step(self, k: int, theta, first, second=None) -> tuple:
        """:meth:`advance` on copies: ``(theta, first, second)`` after step ``k`` (``second``
        is None for the heavy ball)."""
        theta = np.array(theta, dtype=float)
        state = [np.array(x, dtype=float) for x in (first, second) if x is not None]
        self.advance(k, theta, state)
        return theta, state[0], (state[1] if len(state) > 1 else None)

    def join(self, theta, *state) -> np.ndarray:
        """The flat state ``(theta, u)`` or ``(theta, m, v)`` (the inverse of :meth:`split`;
        a trailing None is dropped)."""
        return np.concatenate([theta, *(x for x in state if x is not None)])

    def first_step(self) -> np.ndarray:
        """The exact state after the first optimiser step from the start, flat."""
        return self.exact_states()[1]

    def exact_states(self) -> np.ndarray:
        """The states at steps ``0 .. exact_steps`` of the recursion
        (:meth:`recursion_step`), shape ``(k + 1, size)``; the heavy ball's one step.

        ``Adam(exact_steps="auto")``: step ``j`` is a *first* step of an entry when
        its second moment was 0 before it and is positive after (its gradient is
        nonzero for the first time); the recursion goes on until a step ``j >= 2``
        is no entry's first step, and ``k = j``.

        Raises
        ------
        ValidationError
            Naming ``exact_steps``: ``"auto"`` found entries still taking their first
            step after :data:`AUTO_EXACT_LIMIT` steps.
        """
        if self._exact is None:
            rest = self.rest_state()
            theta, *state = (x.copy() for x in self.split(rest))
            states = [rest]
            auto = self._exact_request == "auto"
            last = AUTO_EXACT_LIMIT if auto else max(int(self._exact_request), 1)
            for k in range(1, last + 1):
                # "auto" (Adam only): a first step turns a zero second moment positive
                before = state[-1].copy() if auto else None
                self.advance(k, theta, state)
                states.append(self.join(theta, *state))
                if auto and k >= 2 and not np.any((before == 0.0) & (state[-1] > 0.0)):
                    break
            else:
                if auto:
                    raise ValidationError("exact_steps", "'auto' found entries taking their "
                                          f"first Adam step after {AUTO_EXACT_LIMIT} steps; "
                                          "give exact_steps as a number")
            self._exact = np.array(states)
        return self._exact

    def _in_first_step(self, s: float) -> bool:
        return s < self.exact_steps

    @property
    def exact_until(self) -> float | None:
        """The step up to which the solution is the recursion's own states, copied (not
        integrated): ``exact_steps`` for Adam with ``start="first_step"``; None otherwise
        (the heavy ball's first step sits on the ODE's offset clock and is integrated).
        :func:`odeflow.solve` starts the ODE at :attr:`ode_start` from
        :meth:`ode_start_state`."""
        if self.optimizer.copies_exact_steps and self.exact_steps > 0:
            return float(self.exact_steps)
        return None

    @property
    def ode_start(self) -> float:
        """The step time at which the ODE after the exact steps starts: ``exact_until -
        offset`` (the ODE's clock ``exact_steps``)."""
        return float(self.exact_until) - self.offset

    def ode_start_state(self) -> np.ndarray:
        """The ODE's state at :attr:`ode_start`: the recursion's ``(theta_k, m_k, v_k)``
        (``k = exact_steps``) with ``theta_k - offset (theta_k - theta_{k-1})`` in place of
        ``theta_k`` (the half-step start of the staggered reading; ``theta_k`` at offset 0)."""
        k = self.exact_steps
        y = self.exact_state_at([k])[0]
        if self.offset:
            states = self.exact_states()
            y[:self.n] -= self.offset * (states[k, :self.n] - states[k - 1, :self.n])
        return y

    def exact_state_at(self, steps) -> np.ndarray:
        """The recursion's states at ``steps`` in ``[0, exact_steps]`` (straight lines
        between them), shape ``(len(steps), size)``."""
        states = self.exact_states()
        s = np.asarray(steps, dtype=float).reshape(-1)
        j = np.clip(np.floor(s).astype(int), 0, len(states) - 2)
        frac = (s - j)[:, None]
        return states[j] + frac * (states[j + 1] - states[j])

    # ------------------------------------------------------------ phases
    @property
    def phased(self) -> bool:
        """Whether the flow is solved in phases (``Momentum(slow_manifold=tol)``): the
        solver then calls :meth:`run_phases` instead of integrating it in one go."""
        return getattr(self.optimizer, "slow_manifold", None) is not None

    @property
    def preferred_method(self) -> str | None:
        """``"DOP853"`` for a phased flow (its ODE phase is not stiff, and the switch needs
        the velocity resolved to its tolerance), else None (the solver's choice)."""
        return "DOP853" if self.phased else None

    @property
    def large_state_method(self) -> str | None:
        """:attr:`preferred_method` for states too large for a dense Jacobian too."""
        return self.preferred_method

    def run_phases(self, t0: float, t_end: float, t_eval, run) -> tuple:
        """``(sol, stats)`` of a phased flow with the solver's integrator ``run`` (a partial
        of :func:`odeflow.solver.integrate.integrate_field` bound to this flow):
        :func:`odeflow.fields.optimizers.slow_manifold.run_phases` at the optimiser's
        ``slow_manifold`` tolerance."""
        if not self.phased:
            raise ValidationError("optimizer", "this optimiser flow has no phases")
        return run_phases(self, t0, t_end, t_eval, run, self.optimizer.slow_manifold)

    # ------------------------------------------------------------ field
    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """``d(theta, state)/ds`` at step ``t`` (the ODE's clock at ``t + offset``)."""
        self.nfev += 1
        if self.phased and not self._in_phases:
            raise ValidationError("optimizer", "Momentum(slow_manifold=...) is solved in "
                                  "phases (OptimizerFlow.run_phases), which this solver "
                                  "does not call; use slow_manifold=None or "
                                  "odeflow.fields.optimizers.slow_manifold.solve_slow_manifold")
        return self._ode_rhs(t + self.offset, y)

    def _ode_rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """The optimiser ODE at ``t`` on its own clock (0 at rest)."""
        if self._in_first_step(t):
            states = self.exact_states()
            j = min(max(int(math.floor(t)), 0), len(states) - 2)
            return states[j + 1] - states[j]
        theta, *state = self.split(y)
        return self.optimizer.ode_rhs(t, theta, state, self.inner, self.rate)

    def jacobian(self, t: float, y: np.ndarray) -> np.ndarray:
        """Analytic Jacobian (module docstring), dense ``(size, size)``."""
        self.njev += 1
        t = t + self.offset
        if self._in_first_step(t):
            return np.zeros((self.size, self.size))
        theta, *state = self.split(y)
        dF = np.asarray(self.inner.jacobian(t, theta))
        return self.optimizer.ode_jacobian(t, theta, state, self.inner, self.rate, dF)

    def jac_sparsity(self):
        """Block pattern of the Jacobian (the inner pattern, or full, in the ``dF`` blocks)."""
        n = self.n
        block = self.inner.jac_sparsity()
        if block is None:
            if 12 * n * n * self.blocks > PATTERN_BYTES_LIMIT:
                return None
            block = np.ones((n, n), dtype=bool)
        block = sparse.csr_matrix(block, dtype=bool)
        eye = sparse.identity(n, dtype=bool, format="csr")
        if self.blocks == 2:
            rows = [[None, eye], [block, eye]]
        else:
            rows = [[block, eye, eye], [block, eye, None], [block, None, eye]]
        return sparse.bmat(rows, format="csr").astype(bool)

    def initial_step(self) -> float:
        """The integrator's first step: one optimiser step, :data:`INITIAL_STEP` (step time).

        The ODE stands for a recursion that moves in unit steps, and wherever that
        recursion is stable its state changes little within one step: the heavy ball's
        damping time is ``1/b`` (about 9.5 steps at ``mu = 0.9``), and its stability
        needs ``eta lambda < 2 (1 + mu)``, an oscillation period of at least about three
        steps; Adam's moments relax over ``1/(1 - beta)`` steps. So one step is the
        ODE's natural first step, where ``solve_ivp``'s own estimate from rest (``u = 0``,
        or Adam's moments at their start) is set by the velocity's derivative against
        ``atol`` and takes about a dozen right-hand sides to grow to the steps the solve
        then keeps. Passed to the one-step methods only
        (:func:`odeflow.solver.options.prepare`); their error control still rejects it,
        and shrinks it, where one step is too large (e.g. at a learning rate near the
        recursion's stability limit).
        """
        return INITIAL_STEP

    def margins(self, y: np.ndarray) -> np.ndarray:
        return self.inner.margins(y[: self.n])

    # ------------------------------------------------------------ results
    def default_steps(self, t0: float, t_end: float,
                      max_points: int = DEFAULT_OUTPUT_POINTS) -> np.ndarray:
        """Output steps of a solve on ``[t0, t_end]`` when none are given.

        Every whole step (and ``t_end``) when they are at most ``P`` steps, else
        :data:`DEFAULT_PER_DECADE` whole steps a decade of ``1 + k``, spaced evenly in
        ``log(1 + k)`` (the dynamics span decades, as the first-order flows' log-spaced
        grid), at most ``P``. ``P = min(max_points, DEFAULT_OUTPUT_BYTES / (8 size))``, at
        least :data:`MIN_OUTPUT_STEPS`: the default output's memory, ``8 size`` bytes a
        step, is bounded by :data:`DEFAULT_OUTPUT_BYTES` (or ten states) whatever the
        horizon.
        """
        fits = DEFAULT_OUTPUT_BYTES // (8 * max(int(self.size), 1))
        points = int(max(MIN_OUTPUT_STEPS, min(int(max_points), fits)))
        first, last = math.ceil(t0), math.floor(t_end)
        if last - first + 1 > points:
            lo, hi = math.log1p(first), math.log1p(last)
            count = min(points, max(MIN_OUTPUT_STEPS, math.ceil(DEFAULT_PER_DECADE * (hi - lo)
                                                                / math.log(10.0))))
            grid = np.unique(np.round(np.expm1(np.linspace(lo, hi, count))))
        else:
            grid = np.arange(first, last + 1, dtype=float)
        if grid.size == 0 or grid[0] > t0:
            grid = np.concatenate([[t0], grid])
        if grid[-1] < t_end:
            grid = np.append(grid, t_end)
        return grid

    def trajectory(self, t, states, stats):
        """The inner field's result on the step axis, with the optimiser's state where
        the optimiser keeps it (:meth:`~odeflow.fields.optimizers.base.Optimizer.keeps_state`)."""
        n = self.n
        traj = self.inner.trajectory(t, states[:, :n], stats)
        blocks = None
        if self.optimizer.keeps_state(len(t), n):
            blocks = [states[:, i * n:(i + 1) * n] for i in range(1, self.blocks)]
        traj.series.update(self.optimizer.series(t, blocks))
        traj.meta.update(self.parameters())
        return traj

    def parameters(self) -> dict:
        return {**self.inner.parameters(), "optimizer": self.optimizer.describe(),
                "time_axis": "step"}


def optimizer_flow(inner: Field, optimizer, t0: float = 0.0) -> OptimizerFlow:
    """The optimiser flow of ``optimizer`` around ``inner`` for a solve from step ``t0``.

    Raises
    ------
    ValidationError
        Naming ``optimizer`` (not an optimiser, or a level whose state is not the
        parameters) or ``t_span`` (an optimiser flow starts at step 0: its
        initial state is the optimiser's at rest and the bias corrections count
        steps from there).
    """
    flow = OptimizerFlow(inner, optimizer)
    if t0 != 0.0:
        raise ValidationError("t_span", f"an optimiser flow starts at step 0, got t0 = {t0!r}")
    return flow
