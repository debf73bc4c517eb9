"""An induction-head level in parameter coordinates: what an optimiser flow wraps.

The levels of the family (:mod:`odeflow.fields.induction.base`) integrate their
gradient flow with ``l_S = ln|c_S|`` in the selector's slots. An optimiser
(heavy ball, Adam; ``docs/optimisers.md``) steps the parameters themselves,
``theta = (c, w, a)``, and its state (velocity, moments) lives in those
coordinates, so :meth:`InductionField.parameter_level
<odeflow.fields.induction.base.InductionField.parameter_level>` returns
:class:`InductionParameters`: the same loss and rates with ``theta`` as the flat
state, the two-part interface of :class:`~odeflow.fields.optimizers.OptimizerFlow`,

``gradient(theta)``
    ``-grad_theta L`` on the moving groups, 0 on a frozen group (rate 0: the
    optimiser sees no gradient there, as a PyTorch optimiser skips a parameter
    outside its groups, so its velocity or moments stay at rest);
``rate_vector``
    the level's per-entry rates (each group's rate; 0 when frozen),

and the plain gradient flow ``theta' = rate_vector * gradient(theta)``, the
level's flow written in ``c`` instead of ``ln|c|``.

Selector chart. ``c`` itself is the state; its sign is free (a heavy ball or
an Adam step may carry a coefficient through zero, as the discrete optimiser
does, whereas the gradient flow keeps each sign). The loss depends on ``c``
through ``p_S = c_S^2 / sum c^2`` only, so the model is evaluated at ``c / s``
with ``s = max |c_S|`` and ``dL/dc = (dL/dc)(c / s) / s`` (no square of ``c``
leaves the range of doubles). A coefficient below the range of doubles is 0
here (the start's ``start_log_c`` beyond it is lost; a zero coefficient has a
zero gradient and stays 0); absolute error control (``atol``) resolves a
coefficient only down to ``atol``. The result is the level's
:class:`~odeflow.results.induction.InductionTrajectory` with ``c`` signed per
output and ``log_c = ln|c|``; its raw ``y`` holds ``c``, not ``ln|c|``.

Jacobian: none. The induction levels have no analytic Jacobian (implicit
methods difference the right-hand side); :attr:`InductionParameters.has_jacobian`
is False and an optimiser flow around it differences too.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError
from odeflow.fields.base import Field
from odeflow.numerics import log_magnitude


class InductionParameters(Field):
    """An induction-head level with ``theta = (c, w, a)`` as its state (module docstring).

    Parameters
    ----------
    level : odeflow.fields.induction.InductionField
        The level (``population``, ``finite_l`` or ``copier``): its data, loss,
        rates, start and the analytic ``loss_and_gradient``.

    Attributes
    ----------
    rate_vector : ndarray, shape (size,)
        The level's learning rate of each entry (0 on a frozen group).
    """

    has_jacobian = False

    def __init__(self, level):
        super().__init__()
        if not all(hasattr(level, a) for a in ("loss_and_gradient", "to_parameters", "slices",
                                                "rate_vector", "subsets")):
            raise ValidationError("level", f"must be an induction-head level, got "
                                  f"{type(level).__name__}")
        self.level = level
        self.name = level.name
        self.data = level.data
        self.groups = level.groups
        self.slices = level.slices
        self.preferred_method = getattr(level, "preferred_method", None)
        self.rate_vector = level.rate_vector
        self._moving = level.rate_vector > 0
        self._theta0 = level.start

    @property
    def size(self) -> int:
        return self.level.size

    def initial_state(self) -> np.ndarray:
        """The level's :attr:`start` ``theta = (c, w, a)`` (a coefficient whose
        ``start_log_c`` is below the range of doubles is 0 there)."""
        return self._theta0.copy()

    def _model_point(self, theta) -> tuple[np.ndarray, float]:
        """``(theta~, s)``: ``theta`` with ``c / s`` in the selector's slots, ``s = max|c|``.

        Raises
        ------
        ValidationError
            Naming ``c`` when every coefficient is 0 or one is not finite.
        """
        theta = np.array(theta, dtype=float)
        sl = self.slices["c"]
        scale = float(np.max(np.abs(theta[sl])))
        if not (np.isfinite(scale) and scale > 0):
            raise ValidationError("c", f"selector coefficients must be finite and not all 0 "
                                  f"(p_S = c_S^2 / sum c^2), got max |c| = {scale!r}")
        theta[sl] /= scale
        return theta, scale

    def loss(self, theta) -> float:
        """The level's loss at the parameters ``theta``."""
        return self.level.loss(self._model_point(theta)[0])

    def loss_gradient(self, theta) -> np.ndarray:
        """``grad_theta L`` at ``theta`` on every entry (frozen groups too)."""
        point, scale = self._model_point(theta)
        grad = np.array(self.level.loss_and_gradient(point, value=False)[1], dtype=float)
        grad[self.slices["c"]] /= scale
        return grad

    def gradient(self, theta) -> np.ndarray:
        """``-grad_theta L`` on the moving groups, 0 on the frozen ones."""
        return np.where(self._moving, -self.loss_gradient(theta), 0.0)

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """The level's gradient flow in parameters: ``theta' = rate_vector * gradient``."""
        self.nfev += 1
        return self.rate_vector * self.gradient(y)

    def parameters(self) -> dict:
        return {**self.level.parameters(), "coordinates": "parameters"}

    def trajectory(self, t, states, stats):
        """The level's :class:`~odeflow.results.induction.InductionTrajectory` from
        parameter states ``(n, size)``: ``c`` signed per output, ``log_c = ln|c|``,
        ``p_S = softmax(2 ln|c|)`` in log space, the loss at every output."""
        from odeflow.results.induction import InductionTrajectory

        states = np.asarray(states, float)
        n, level = states.shape[0], self.level
        losses = np.array([self.loss(row) for row in states])  # refuses an all-zero c
        c = states[:, self.slices["c"]]
        log_c = log_magnitude(c)
        twice = 2.0 * (log_c - np.max(log_c, axis=1, keepdims=True))
        weights = np.exp(twice)
        weights /= np.sum(weights, axis=1, keepdims=True)
        w = (states[:, self.slices["w"]].reshape(n, level.heads, level.heads)
             if "w" in self.groups else None)
        meta = {**self.parameters(), "schedule": [{"rates": dict(level.rates),
                                                   "t_span": [float(t[0]), float(t[-1])]}]}
        traj = InductionTrajectory(np.asarray(t, float), states[:, self.slices["a"]][:, 0],
                                   level.subsets, weights, w, c, losses, stats=stats,
                                   meta=meta, data=self.data, log_c=log_c)
        # the optimiser flow adds its state's series here (velocity; moments)
        traj.series = {}
        return traj


def join_series(parts, keep) -> dict:
    """The ``series`` of a schedule's parts (each an optimiser flow's: ``velocity`` or
    ``moment1``, ``moment2``, and ``flow_time``) concatenated over the kept outputs
    ``keep`` of each part; ``flow_time`` (each stage's own warm-up map from rest) plus the
    flow time at the end of the stages before. Empty when the parts carry none.

    Raises
    ------
    ValidationError
        Naming ``schedule`` when the parts carry different series.
    """
    series = [getattr(p, "series", None) or {} for p in parts]
    names = set(series[0])
    if any(set(s) != names for s in series):
        raise ValidationError("schedule", "the stages' results carry different series "
                              f"({[sorted(s) for s in series]}): one optimiser for every stage")
    out = {}
    for name in sorted(names):
        if any(s[name] is None for s in series):
            continue
        pieces, offset = [], 0.0
        for s, k in zip(series, keep, strict=True):
            values = np.asarray(s[name], dtype=float)
            if name == "flow_time":
                values = values + offset
                offset = float(values[-1])
            pieces.append(values[k])
        out[name] = np.concatenate(pieces)
    return out

