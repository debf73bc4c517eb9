"""Plain gradient steps: ``theta <- theta + rate * g`` (no optimiser state)."""

from __future__ import annotations

import numpy as np

from odeflow.fields.optimizers.base import Optimizer


class GradientDescent(Optimizer):
    """Plain gradient steps (SGD without momentum; explicit Euler on a gradient flow).

    ``theta <- theta + rate g`` with no state; its ODE in step time is the inner
    field itself, ``theta' = F(theta)``, and step ``k`` is flow time ``k``.
    """

    kind = "gradient"
    state_blocks = 0

    def __repr__(self) -> str:
        return "GradientDescent()"

    def step(self, theta, g, state, k, rate) -> None:
        """``theta += rate * g`` in place (``state`` is empty, ``k`` unused)."""
        theta += rate * g

    def ode_rhs(self, s, theta, state, inner, rate) -> np.ndarray:
        """``theta' = F(theta)``, the inner field's right-hand side."""
        return np.asarray(inner.rhs(s, theta), dtype=float)

    def ode_jacobian(self, s, theta, state, inner, rate, dF) -> np.ndarray:
        """``dF``."""
        return np.array(dF, dtype=float)

    def flow_time(self, steps) -> np.ndarray:
        """Step ``k`` is flow time ``k``."""
        return np.asarray(steps, dtype=float).copy()
