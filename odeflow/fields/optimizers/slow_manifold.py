"""The heavy ball's slow manifold: a first-order phase once its velocity has relaxed.

The heavy-ball ODE of :class:`~odeflow.fields.optimizers.Momentum`,

.. math::

    \\theta' = u, \\qquad u' = a F(\\theta) - b u,

relaxes its velocity at the rate ``b`` (``-ln mu`` with the matched rates) onto an
invariant *slow manifold* ``u = h(theta)``. Written ``c = a / b`` and ``epsilon = a /
b^2`` (the inertia of the heavy ball in flow time ``t = c s``, ``eta / (1 - mu)^2`` with
the plain rates), the invariance equation ``dh . h = a F - b h`` solved order by order in
``epsilon`` (``derivations/heavy_ball_slow_manifold.py``, sympy) gives

.. math::

    h = c\\,[F - \\epsilon\\, F' F
        + \\epsilon^2 (2 F' F' F + F''[F, F]) + O(\\epsilon^3)],

``F'`` the field's Jacobian (its ``jvp``). Past the switch the flow integrates
``theta' = h_1(theta) = c (F - epsilon F' F)`` alone, a first-order field of half the
state with no oscillating modes, on the same step clock.

Switch. At step ``s`` of the heavy-ball ODE, with ``h_1``, the next term ``h_2 = c
epsilon^2 (2 F'F'F + F''[F, F])`` and the loss ``L = -J``:

- ``rho_trunc = |h_2| / |h_1|``, the relative error of the first-order phase's velocity;
- ``rho_fast = |u - h_1 - h_2| / |h_1|``, what of the velocity is not yet on the manifold
  (the decaying oscillation; it leaves a lag of ``rho_fast / b`` steps);
- ``r = |dL/ds| / L = |g . h_1| / |J|``, the loss's relative rate of decay on the manifold.

A velocity too fast by a relative ``rho(s') <= rho(s) (s / s')^2`` for ``s' > s`` (the
late phase of Level E: ``F'`` falls like the loss, ``1/s``, so ``rho_trunc ~ s^-2``) moves
along the path with a lag of at most ``rho_trunc s`` steps, and the velocity not yet on the
manifold adds ``rho_fast / b``; at a relative rate of decay at most ``r`` from ``s`` on, the
loss at every later step is then off by a relative

.. math::

    E(s) = r\\, (\\rho_{trunc}\\, s + \\rho_{fast} / b)

at most. The flow switches at the first step of the ODE where the velocity has relaxed
and the switch costs at most ``tol`` of the loss, ``max(E, rho_trunc, rho_fast) <= tol``
(:meth:`SlowManifold.estimate`'s ``"switch"``; an event of the integrator), never on a
step count; where that stays above ``tol`` to the end of the span it never switches and
the result is the heavy-ball ODE's.
"""

from __future__ import annotations

import functools
import math
import time
from types import SimpleNamespace

import numpy as np
from scipy.integrate import solve_ivp
from threadpoolctl import ThreadpoolController

from odeflow.errors import SolveError, ValidationError
from odeflow.fields.base import Field
from odeflow.fields.optimizers.momentum import Momentum

#: Default bound on the switch's relative loss error :math:`E`.
SWITCH_TOLERANCE = 1e-5
#: BLAS threads of both phases (the fields' products are small or sparse; as a solve's).
BLAS_THREADS = 1
#: Bytes of a dense Jacobian up to which the first-order phase runs LSODA with ``c F'``
#: by default; a larger state runs an explicit method (:func:`solve_slow_manifold`).
DENSE_MANIFOLD_BYTES = 64 * 2**20


def directional(inner, theta: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``F'(theta) v``: the field's ``jvp`` where it has one, else a central difference
    of its ``rhs`` (step ``6e-6 (1 + |theta|) / |v|``)."""
    if callable(getattr(inner, "jvp", None)):
        return np.asarray(inner.jvp(theta, v), dtype=float)
    size = float(np.linalg.norm(v))
    if size == 0.0:
        return np.zeros_like(theta)
    h = 6e-6 * (1.0 + float(np.linalg.norm(theta))) / size
    return (inner.rhs(0.0, theta + h * v) - inner.rhs(0.0, theta - h * v)) / (2.0 * h)


class SlowManifold(Field):
    """The heavy ball's slow manifold around a parameter-level field (module docstring):
    the first-order phase as a field on the parameters, ``theta' = h_1(theta)``.

    Parameters
    ----------
    inner : Field
        A parameter-level field with ``rhs`` (``F``) and ``objective`` (``J``).
    optimizer : Momentum
        Its rates ``(a, b)`` (:meth:`Momentum.coefficients`) give ``c = a/b``,
        ``epsilon = a/b^2``.

    Raises
    ------
    ValidationError
        Naming ``optimizer`` (not a heavy ball, or ``mu = 0``: no velocity to relax) or
        ``flow`` (a field without an ``objective``, which the switch's estimate needs).
    """

    def __init__(self, inner, optimizer):
        if not isinstance(optimizer, Momentum) or optimizer.mu == 0.0:
            raise ValidationError("optimizer", "the slow manifold is the heavy ball's "
                                  f"(Momentum with mu > 0), got {optimizer!r:.80}")
        if not callable(getattr(inner, "objective", None)):
            raise ValidationError("flow", f"flow {getattr(inner, 'name', '?')!r} has no "
                                  "objective, which the switch's error estimate needs")
        super().__init__()
        self.inner, self.name = inner, getattr(inner, "name", "")
        self.has_jacobian = bool(getattr(inner, "has_jacobian", False))
        a, b = optimizer.coefficients()
        self.b, self.c, self.epsilon = b, a / b, a / (b * b)

    @property
    def size(self) -> int:
        return int(self.inner.size)

    def initial_state(self) -> np.ndarray:
        """The level's start (the phase itself starts from the switch's parameters)."""
        return np.asarray(self.inner.initial_state(), dtype=float)

    def trajectory(self, t, states, stats):
        """The level's result on the step axis."""
        return self.inner.trajectory(t, states, stats)

    def parameters(self) -> dict:
        return {**self.inner.parameters(), "phase": "slow_manifold"}

    def first_order(self, theta: np.ndarray) -> np.ndarray:
        """``h_1 = c (F - epsilon F'F)``: the velocity on the manifold to first order."""
        F = self.inner.rhs(0.0, theta)
        return self.c * (F - self.epsilon * directional(self.inner, theta, F))

    def terms(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(h_1, h_2)``, ``h_2 = c epsilon^2 (2 F'F'F + F''[F, F])`` (``F''`` by a central
        difference of ``F'F`` along ``F``)."""
        inner, eps = self.inner, self.epsilon
        F = inner.rhs(0.0, theta)
        JF = directional(inner, theta, F)
        JJF = directional(inner, theta, JF)
        size = float(np.linalg.norm(F))
        h = 6e-6 * (1.0 + float(np.linalg.norm(theta))) / max(size, 1e-300)
        curv = (directional(inner, theta + h * F, F) - directional(inner, theta - h * F, F)) \
            / (2.0 * h) - JJF  # F''[F, F]: d/dh of F'(theta + h F) F, less F'F'F
        return self.c * (F - eps * JF), self.c * eps * eps * (2.0 * JJF + curv)

    def estimate(self, s: float, theta: np.ndarray, u: np.ndarray) -> dict:
        """The switch's relative loss error ``E`` at step ``s`` of the heavy-ball ODE, its
        parts ``rho_trunc``, ``rho_fast``, ``rate`` (``r``) and the switch criterion
        ``switch = max(E, rho_trunc, rho_fast)`` (module docstring)."""
        h1, h2 = self.terms(theta)
        scale = float(np.linalg.norm(h1))
        if not scale > 0.0:
            return {"E": math.inf, "rho_trunc": math.inf, "rho_fast": math.inf, "rate": 0.0,
                    "switch": math.inf}
        rho_trunc = float(np.linalg.norm(h2)) / scale
        rho_fast = float(np.linalg.norm(u - h1 - h2)) / scale
        J = float(self.inner.objective(theta))
        dJ = float(np.dot(self.inner.gradient(theta), h1))
        rate = abs(dJ / J) if J != 0.0 else math.inf
        E = rate * (rho_trunc * max(s, 0.0) + rho_fast / self.b)
        return {"E": E, "rho_trunc": rho_trunc, "rho_fast": rho_fast, "rate": rate,
                "switch": max(E, rho_trunc, rho_fast)}

    def rhs(self, t: float, theta: np.ndarray) -> np.ndarray:
        """The first-order phase, ``theta' = h_1(theta)``, in step time."""
        self.nfev += 1
        return self.first_order(theta)

    def jacobian(self, t: float, theta: np.ndarray) -> np.ndarray:
        """``c F'``: the leading part of the Jacobian of :meth:`rhs` (for Newton's method)."""
        self.njev += 1
        return self.c * np.asarray(self.inner.jacobian(0.0, theta))


def switch_event(flow, manifold: SlowManifold, tol: float):
    """The switch as a terminal event of ``solve_ivp`` on ``flow``'s state: ``ln(max(E,
    rho_trunc, rho_fast) / tol)``, falling through 0 at the switch (module docstring).

    While ``|u - h_1| > 2 tol |h_1|`` (a lower bound of the criterion, as ``|u - h_1| <=
    (rho_fast + rho_trunc) |h_1|``) it returns that bound's logarithm instead and spares
    the second-order terms; and from such a value ``v`` at step ``s_v`` it predicts ``v -
    b (s - s_v)`` until that reaches 0 (the velocity off the manifold decays at most at the
    rate ``b``, the faster root of ``r^2 + b r = a lambda`` being at least ``-b``), sparing
    the evaluations. Where the ratio falls faster (``|h_1|`` growing) the switch only
    comes later; it is declared only where the criterion is evaluated."""
    n, b = flow.n, manifold.b
    last = {"s": math.inf, "value": 0.0}  # the last bound-based value and its step

    def event(s, y):
        if s >= last["s"]:
            predicted = last["value"] - b * (s - last["s"])
            if predicted > 0.0:
                return predicted
        theta, u = y[:n], y[n:]
        h1 = manifold.first_order(theta)
        bound = float(np.linalg.norm(u - h1)) / max(2.0 * float(np.linalg.norm(h1)), 1e-300)
        if bound > tol:
            last["s"], last["value"] = s, math.log(bound / tol)
            return last["value"]
        return math.log(manifold.estimate(s + flow.offset, theta, u)["switch"] / tol)

    event.terminal, event.direction = True, -1.0
    return event


def manifold_method(n: int) -> str:
    """The first-order phase's method: LSODA (with ``c F'``) while a dense ``n x n``
    Jacobian takes at most :data:`DENSE_MANIFOLD_BYTES`, else DOP853."""
    return "LSODA" if 8 * int(n) ** 2 <= DENSE_MANIFOLD_BYTES else "DOP853"


def run_phases(flow, t0: float, t_end: float, t_eval, run, tol: float = SWITCH_TOLERANCE):
    """The heavy ball's two phases on ``[t0, t_end]`` with the solver's integrator ``run``.

    ``run`` is a :func:`functools.partial` of an integrator with the signature of
    :func:`odeflow.solver.integrate.integrate_field` bound to ``flow`` (as
    :func:`odeflow.solve` makes it): phase 1 is ``run`` with :func:`switch_event` added to
    its events, to ``t_end`` or the switch; phase 2 is its function on the
    :class:`SlowManifold` field (:func:`manifold_method`, analytic ``c F'``) from the
    switch, with the same tolerances and budget.

    Returns
    -------
    (sol, stats)
        ``sol.t``, ``sol.y`` (the flow's flat state; past the switch the velocity is
        ``h_1`` where the optimiser keeps its state, else zero), ``sol.sol = None``;
        ``stats`` phase 1's with the totals ``nfev``, ``njev``, ``nlu``, ``wall_time``,
        ``switch_step`` (None: no switch), ``switch`` (the estimate there) and
        ``manifold`` (phase 2's statistics).

    Raises
    ------
    ValidationError
        Naming ``events`` (the phased solve takes none of its own) or ``optimizer``.
    """
    manifold = SlowManifold(flow.inner, flow.optimizer)
    options = dict(run.keywords)
    if options.get("kwargs", {}).get("events"):
        raise ValidationError("events", "a slow-manifold solve takes no events")
    options["kwargs"] = {**options.get("kwargs", {}),
                         "events": [switch_event(flow, manifold, tol)]}
    options["dense_output"] = False
    t_eval = np.asarray(t_eval, dtype=float)
    flow._in_phases = True  # a phased flow's rhs refuses to be integrated in one go
    try:
        first, stats = run.func(flow, **options, t0=t0, t_end=t_end,
                                t_eval=t_eval[t_eval <= t_end])
    finally:
        flow._in_phases = False
    n, stats["switch_step"] = flow.n, None
    t_out, y_out = first.t, np.asarray(first.y, dtype=float).reshape(flow.size, -1)
    if first.status == 1:
        s0, y0 = float(first.t_events[0][0]), np.asarray(first.y_events[0][0], dtype=float)
        stats["switch_step"] = s0
        stats["switch"] = manifold.estimate(s0 + flow.offset, y0[:n], y0[n:])
        method = manifold_method(n)
        second, later = run.func(
            manifold, **{**options, "method": method, "what": f"{options.get('what', '')} "
                         "slow manifold", "kwargs": {"jac": manifold.jacobian}
                         if method == "LSODA" else {}},
            t0=s0, t_end=t_end, t_eval=t_eval[t_eval > s0], y0=y0[:n])
        theta = np.asarray(second.y, dtype=float).reshape(n, -1)
        keep = flow.optimizer.keeps_state(len(t_eval), n)
        u = np.array([manifold.first_order(x) for x in theta.T]).T if keep else 0.0 * theta
        t_out = np.concatenate([t_out, second.t])
        y_out = np.hstack([y_out, np.vstack([theta, u.reshape(n, -1)])])
        stats["manifold"] = later
        for key in ("nfev", "njev", "nlu", "wall_time"):
            stats[key] = stats.get(key, 0) + later.get(key, 0)
    return SimpleNamespace(t=t_out, y=y_out, sol=None, t_events=None, y_events=None), stats


def _scipy_integrate(field, t0, t_end, t_eval, method, rtol, atol, kwargs, y0=None, **_):
    """``(solve_ivp's result, statistics)`` on ``field``: the integrator of
    :func:`solve_slow_manifold` (the signature :func:`run_phases` calls)."""
    start = time.perf_counter()
    sol = solve_ivp(field.rhs, (t0, t_end), field.initial_state() if y0 is None else y0,
                    method=method, t_eval=t_eval, rtol=rtol, atol=atol, **kwargs)
    stats = {"method": method, "rtol": rtol, "atol": atol, "nfev": int(sol.nfev),
             "njev": int(sol.njev), "nlu": int(sol.nlu), "status": int(sol.status),
             "wall_time": time.perf_counter() - start}
    if sol.status < 0:
        raise SolveError(f"{type(field).__name__} ({method}) failed: {sol.message}", stats)
    return sol, stats


def solve_slow_manifold(flow, t_end: float, t_eval=None, rtol: float = 1e-8,
                        atol: float = 1e-10, tol: float = SWITCH_TOLERANCE,
                        method: str = "DOP853"):
    """A heavy-ball optimiser flow in two phases, its ODE then its slow manifold
    (:func:`run_phases` with ``scipy.integrate.solve_ivp`` as the integrator).

    Parameters
    ----------
    flow : OptimizerFlow
        A heavy-ball flow (``Momentum``) around a parameter level with ``objective``.
    t_end : float
        Last step.
    t_eval : array_like, optional
        Output steps in ``[0, t_end]``; :meth:`OptimizerFlow.default_steps` by default.
    rtol, atol : float
        Tolerances of both phases.
    tol : float, default :data:`SWITCH_TOLERANCE`
        The switch happens where ``max(E, rho_trunc, rho_fast)`` (module docstring) is at
        most this.
    method : str, default "DOP853"
        The heavy-ball phase's method of ``solve_ivp`` (analytic Jacobian for an implicit
        one). Before the switch the ODE is not stiff (its oscillations are resolved, as
        the recursion's unit steps resolve them); an implicit method factors the dense
        ``2n x 2n`` Newton matrix and back-substitutes in it at every step.

    Returns
    -------
    Trajectory
        The flow's result (:meth:`OptimizerFlow.trajectory`) with :func:`run_phases`'s
        statistics.
    """
    steps = flow.default_steps(0.0, t_end) if t_eval is None else np.asarray(t_eval, float)
    jac = {"jac": flow.jacobian} if method in ("LSODA", "BDF", "Radau") else {}
    run = functools.partial(_scipy_integrate, flow, method=method, rtol=rtol, atol=atol,
                            kwargs=jac)
    with ThreadpoolController().limit(limits=BLAS_THREADS, user_api="blas"):
        sol, stats = run_phases(flow, flow.start_step, t_end, steps, run, tol)
    return flow.trajectory(sol.t, sol.y.T, stats)
