"""Heavy-ball momentum (SGD with momentum, no dampening) and its ODE (``docs/optimisers.md``).

:class:`Momentum` (heavy ball, ``v <- mu v + g``, ``theta <- theta + eta v``):
with ``u = eta v``,

.. math::

    \\theta' = u, \\qquad u' = a F(\\theta) - b u,

the plain rates ``a = 1, b = 1 - mu``, or (``modified=True``)
with the *matched* rates ``b = -ln mu``, ``a = b / (1 - mu)``. The recursion
``u_{k+1} = mu u_k + F(theta_k)``, ``theta_{k+1} = theta_k + u_{k+1}`` uses the
*new* velocity: it is the symplectic, not the forward, Euler step of the ODE,
and read on a staggered grid (``theta_k`` at ``s = k + 1/2``, ``u_k`` at ``s =
k``) it is the ODE's midpoint rule, second order except for the damping term,
which is first order in ``1 - mu``; the matched rates make that term exact for a
constant force (``derivations/heavy_ball_modified_equation.py`` derives both
with sympy). Hence ``offset``: the trajectory at step ``k`` is the ODE, started
at rest, read at ``s = k + offset`` (default ``1/2``: the ODE starts at rest
half a step *before* step 0, so its state at step 0 is not exactly
``theta_0``). ``offset = 0`` with ``u(0) = 0`` lags the recursion by one step
under a constant gradient. The defaults (the half-step reading, the matched
rates when ``mu > 0``) are chosen against the deterministic discrete heavy ball,
never against training runs (``docs/optimisers.md``, ``docs/make_optimisers.py``).

Jacobian of the flow's state ``(theta, u)``: ``[[0, I], [a dF, -b I]]``, with ``dF``
the inner field's.
"""

from __future__ import annotations

import math

import numpy as np

from odeflow.data.checks import as_real_number
from odeflow.errors import ValidationError
from odeflow.fields.optimizers.base import Optimizer, choice, flag, fraction, keep_flag

#: Starts of :class:`Momentum`: ``"rest"`` (``u(0) = 0``) or ``"first_step"``.
MOMENTUM_STARTS = ("rest", "first_step")


def warmup_flow_time(steps, mu: float) -> np.ndarray:
    """Flow time of step ``k`` of heavy ball from rest (the warm-up map, ``docs/optimisers.md``):
    ``t_k = [k - mu (1 - mu^k)/(1 - mu)] / (1 - mu)``, for real ``k >= 0`` too.

    ``k`` heavy-ball steps under a constant gradient move the parameters as
    far as the first-order flow with the same rates does in time ``t_k``
    (``t_1 = 1``, slope ``1/(1 - mu)`` for large ``k``); ``mu = 0`` gives ``t_k = k``.
    """
    mu = fraction(mu, "mu")
    k = np.asarray(steps, dtype=float)
    if mu == 0.0:
        return k.copy()
    return (k + mu * np.expm1(k * math.log(mu)) / (1.0 - mu)) / (1.0 - mu)


class Momentum(Optimizer):
    """Heavy-ball momentum (SGD with momentum, no dampening): an optimiser description.

    Parameters
    ----------
    mu : float
        Momentum coefficient in ``[0, 1)`` (0.9 in the paper).
    start : {"rest", "first_step"}, default "rest"
        ``"rest"``: ``u = 0`` at the ODE's start;
        ``"first_step"``: the first heavy-ball step taken exactly on ``[0, 1]``
        of the ODE's clock (``theta_1 = theta_0 + F_0``, ``u_1 = F_0``; a straight
        line in between), the ODE from there.
    offset : float, default 0.5
        Step ``k`` of the trajectory is the ODE at ``s = k + offset``, ``offset``
        in ``[0, 1]`` (module docstring; the half-step of the staggered reading).
    modified : bool, optional
        The matched rates ``b = -ln mu``, ``a = b / (1 - mu)`` instead of the plain
        ``a = 1``, ``b = 1 - mu`` (needs ``mu > 0``). Default: the matched rates
        when ``mu > 0``, the plain ones at ``mu = 0`` (where ``-ln mu`` has no value).
        With the half-step reading the matched rates make the recursion the ODE's
        midpoint rule to second order under a constant force (CF7,
        ``derivations/heavy_ball_modified_equation.py``), and at the paper's unit
        steps they follow the deterministic discrete heavy ball closer than the
        plain rates, on every Fig. 6 cell and in the Fig. 4 loss
        (``docs/optimisers.md``, ``python docs/make_optimisers.py --grid``).
    keep_state : bool, optional
        Whether a flow's result keeps the velocity (the series ``velocity``, ``n``
        doubles per output step): True always, False never, None (default) while it
        takes at most :data:`~odeflow.fields.optimizers.base.KEEP_STATE_BYTES`
        (:meth:`~odeflow.fields.optimizers.base.Optimizer.keeps_state`). Output only:
        the dynamics, ``describe()`` and equality do not depend on it.
    slow_manifold : float, optional
        Solve in two phases (:mod:`odeflow.fields.optimizers.slow_manifold`): the ODE
        until its velocity has relaxed and the switch's error estimate is at most this
        (a relative error of the loss, e.g. ``1e-5``), then the first-order slow
        manifold ``theta' = c (F - epsilon F'F)``. None (default): the ODE throughout,
        the reference. Needs ``mu > 0`` and a level with an ``objective``.

    Raises
    ------
    ValidationError
        Naming ``mu``, ``start``, ``offset``, ``modified``, ``keep_state`` or
        ``slow_manifold``.
    """

    kind = "momentum"
    state_blocks = 1

    def __init__(self, mu: float = 0.9, start: str = "rest", offset: float = 0.5,
                 modified: bool | None = None, keep_state: bool | None = None,
                 slow_manifold: float | None = None):
        self.keep_state = keep_flag(keep_state)
        self.mu = fraction(mu, "mu")
        self.start = choice(start, "start", MOMENTUM_STARTS)
        off = as_real_number(offset, "offset", "in [0, 1]")
        if not 0.0 <= off <= 1.0:
            raise ValidationError("offset", f"must be in [0, 1], got {offset!r}")
        self.offset = off
        self.modified = self.mu > 0.0 if modified is None else flag(modified, "modified")
        if self.modified and self.mu == 0.0:
            raise ValidationError("modified", "the matched rates -ln(mu) need mu > 0")
        self.slow_manifold = None
        if slow_manifold is not None:
            tol = as_real_number(slow_manifold, "slow_manifold", "in (0, 1)")
            if not 0.0 < tol < 1.0 or self.mu == 0.0:
                raise ValidationError("slow_manifold", "must be a tolerance in (0, 1) with "
                                      f"mu > 0, got {slow_manifold!r} at mu = {self.mu!r}")
            self.slow_manifold = tol

    def __repr__(self) -> str:
        return (f"Momentum(mu={self.mu!r}, start={self.start!r}, offset={self.offset!r}, "
                f"modified={self.modified!r}, keep_state={self.keep_state!r}, "
                f"slow_manifold={self.slow_manifold!r})")

    @property
    def exact_request(self) -> int:
        """1 with ``start="first_step"`` (the first step taken exactly), else 0."""
        return 1 if self.start == "first_step" else 0

    def step(self, theta, g, state, k, rate) -> None:
        """Heavy-ball step in place: ``v <- mu v + g``, ``theta <- theta + rate v``.

        ``state = [v]``, the velocity in gradient units (PyTorch's momentum buffer
        for ``g = grad L``, ``rate = -eta``); ``k`` is unused.
        """
        (v,) = state
        v *= self.mu
        v += g
        theta += rate * v

    def flow_step(self, theta, g, state, k, rate) -> None:
        """:meth:`step` on a flow's layout ``[u]``, ``u = rate v`` (the velocity in
        parameter units): the step with the force ``F = rate g`` and unit rate,
        ``u <- mu u + F``, ``theta <- theta + u``."""
        self.step(theta, rate * g, state, k, 1.0)

    def ode_rhs(self, s, theta, state, inner, rate) -> np.ndarray:
        """``theta' = u``, ``u' = a F(theta) - b u`` (:meth:`coefficients`)."""
        (u,) = state
        a, b = self.coefficients()
        n = u.size
        out = np.empty(2 * n)
        out[:n] = u
        force = np.multiply(inner.rhs(s, theta), a, out=out[n:])
        force -= b * u
        return out

    def ode_jacobian(self, s, theta, state, inner, rate, dF) -> np.ndarray:
        """``[[0, I], [a dF, -b I]]``, dense."""
        n = theta.size
        a, b = self.coefficients()
        J = np.zeros((2 * n, 2 * n))
        diag = np.arange(n)
        J[diag, n + diag] = 1.0
        J[n:, :n] = a * dF
        J[n + diag, n + diag] = -b
        return J

    def series(self, steps, state) -> dict:
        """``flow_time`` (the warm-up map of ``steps``) and, unless ``state`` is None,
        ``velocity`` (``u``)."""
        out = {"flow_time": self.flow_time(steps)}
        if state is not None:
            out["velocity"] = np.ascontiguousarray(state[0])
        return out

    def coefficients(self) -> tuple[float, float]:
        """``(a, b)`` of ``u' = a F - b u``."""
        if not self.modified:
            return 1.0, 1.0 - self.mu
        b = -math.log(self.mu)
        return b / (1.0 - self.mu), b

    def flow_time(self, steps) -> np.ndarray:
        """The warm-up map :func:`warmup_flow_time` at ``mu``."""
        return warmup_flow_time(steps, self.mu)

    def describe(self) -> dict:
        """JSON-able description (saved with trajectories as ``meta["optimizer"]``)."""
        out = {"kind": self.kind, "mu": self.mu, "start": self.start, "offset": self.offset,
               "modified": self.modified}
        if self.slow_manifold is not None:
            out["slow_manifold"] = self.slow_manifold
        return out
