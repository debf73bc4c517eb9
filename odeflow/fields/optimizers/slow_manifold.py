"""The heavy ball's slow manifold: a first-order phase once its velocity has relaxed.

The heavy-ball ODE of :class:`~odeflow.fields.optimizers.Momentum`,

.. math::

    \\theta' = u, \\qquad u' = a F(\\theta) - b u,

relaxes its velocity at the rate ``b`` (``-ln mu`` with the matched rates) onto an
invariant *slow manifold* ``u = h(theta)``. Written ``c = a / b`` and ``epsilon = a /
b^2`` (the inertia of spec section 9 in flow time ``t = c s``, ``eta / (1 - mu)^2`` with
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

import math
import time

import numpy as np
from scipy.integrate import solve_ivp
from threadpoolctl import ThreadpoolController

from odeflow.errors import ValidationError
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


class SlowManifold:
    """The heavy ball's slow manifold around a parameter-level field (module docstring).

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
        self.inner = inner
        a, b = optimizer.coefficients()
        self.b, self.c, self.epsilon = b, a / b, a / (b * b)

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
        return self.first_order(theta)

    def jacobian(self, t: float, theta: np.ndarray) -> np.ndarray:
        """``c F'``: the leading part of the Jacobian of :meth:`rhs` (for Newton's method)."""
        return self.c * np.asarray(self.inner.jacobian(0.0, theta))


def solve_slow_manifold(flow, t_end: float, t_eval=None, rtol: float = 1e-8,
                        atol: float = 1e-10, tol: float = SWITCH_TOLERANCE,
                        method: str = "DOP853", manifold_method: str | None = None):
    """A heavy-ball optimiser flow in two phases: its ODE, then its slow manifold.

    Parameters
    ----------
    flow : OptimizerFlow
        A heavy-ball flow (``Momentum``) around a parameter level with ``objective``.
    t_end : float
        Last step.
    t_eval : array_like, optional
        Output steps in ``[0, t_end]``; :meth:`OptimizerFlow.default_steps` by default.
    rtol, atol : float
        Tolerances of both phases (``scipy.integrate.solve_ivp``).
    tol : float, default :data:`SWITCH_TOLERANCE`
        The switch happens where ``max(E, rho_trunc, rho_fast)`` (module docstring) is at
        most this.
    method : str, default "DOP853"
        The heavy-ball phase's method of ``solve_ivp`` (analytic Jacobian for an implicit
        one). Before the switch the ODE is not stiff (its oscillations are resolved, as
        the recursion's unit steps resolve them); an implicit method factors the dense
        ``2n x 2n`` Newton matrix and back-substitutes in it at every step.
    manifold_method : str, optional
        The first-order phase's (``c F'`` as its Jacobian for an implicit method). By
        default LSODA while a dense ``n x n`` Jacobian takes at most
        :data:`DENSE_MANIFOLD_BYTES`, else DOP853.

    Returns
    -------
    Trajectory
        The flow's result (:meth:`OptimizerFlow.trajectory`; the velocity past the switch,
        where the optimiser keeps it, is ``h_1``), with ``stats["switch_step"]`` (None:
        no switch), ``stats["switch"]`` (the estimate there) and each phase's counts.
    """
    with ThreadpoolController().limit(limits=BLAS_THREADS, user_api="blas"):
        return _two_phases(flow, t_end, t_eval, rtol, atol, tol, method, manifold_method)


def _two_phases(flow, t_end, t_eval, rtol, atol, tol, method, manifold_method):
    """:func:`solve_slow_manifold`'s two integrations (its arguments, in order)."""
    manifold = SlowManifold(flow.inner, flow.optimizer)
    t0 = flow.start_step
    steps = flow.default_steps(0.0, t_end) if t_eval is None else np.asarray(t_eval, float)
    jac = {"jac": flow.jacobian} if method in ("LSODA", "BDF", "Radau") else {}

    def event(s, y):
        theta, u = y[:flow.n], y[flow.n:]
        h1 = manifold.first_order(theta)
        # |u - h_1| <= (rho_fast + rho_trunc) |h_1| <= 2 switch |h_1|: a cheap lower bound
        bound = float(np.linalg.norm(u - h1)) / max(2.0 * float(np.linalg.norm(h1)), 1e-300)
        if bound > tol:
            return math.log(bound / tol)
        return math.log(manifold.estimate(s + flow.offset, theta, u)["switch"] / tol)

    event.terminal, event.direction = True, -1.0
    start = time.perf_counter()
    first = solve_ivp(flow.rhs, (t0, t_end), flow.initial_state(), method=method,
                      t_eval=steps[steps <= t_end], rtol=rtol, atol=atol, events=event, **jac)
    if first.status < 0:
        raise ValidationError("t_span", f"the heavy-ball phase failed: {first.message}")
    stats = {"method": method, "rtol": rtol, "atol": atol, "ode_nfev": int(first.nfev),
             "ode_njev": int(first.njev), "ode_nlu": int(first.nlu), "switch_step": None}
    t_out, y_out = first.t, np.asarray(first.y, dtype=float).reshape(flow.size, -1)
    if first.status == 1:
        s0, y0 = float(first.t_events[0][0]), first.y_events[0][0]
        stats["switch_step"] = s0
        stats["switch"] = manifold.estimate(s0 + flow.offset, y0[:flow.n], y0[flow.n:])
        rest = steps[steps > s0]
        if manifold_method is None:
            dense = 8 * flow.n**2 <= DENSE_MANIFOLD_BYTES
            manifold_method = "LSODA" if dense else "DOP853"
        jac2 = {"jac": manifold.jacobian} if manifold_method in ("LSODA", "BDF", "Radau") else {}
        second = solve_ivp(manifold.rhs, (s0, t_end), y0[:flow.n], method=manifold_method,
                           t_eval=rest, rtol=rtol, atol=atol, **jac2)
        if not second.success:
            raise ValidationError("t_span", f"the slow-manifold phase failed: {second.message}")
        keep = flow.optimizer.keeps_state(len(steps), flow.n)
        u = (np.array([manifold.first_order(th) for th in second.y.T]).T if keep
             else np.zeros_like(second.y))  # not kept: the trajectory drops it
        t_out = np.concatenate([first.t, second.t])
        y_out = np.hstack([y_out, np.vstack([second.y.reshape(flow.n, -1),
                                             u.reshape(flow.n, -1)])])
        stats.update({"manifold_method": manifold_method, "manifold_nfev": int(second.nfev),
                      "manifold_njev": int(second.njev), "manifold_nlu": int(second.nlu)})
    stats["wall_time"] = time.perf_counter() - start
    stats["nfev"] = stats["ode_nfev"] + stats.get("manifold_nfev", 0)
    stats["nlu"] = stats["ode_nlu"] + stats.get("manifold_nlu", 0)
    return flow.trajectory(t_out, y_out.T, stats)
