"""Shared pieces of the training loops: input checks, default records, progress.

Every check raises :class:`odeflow.errors.ValidationError` naming the field, so a
bad step count or batch size is reported the same way as a bad data model.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from odeflow.data import as_real_number
from odeflow.data.checks import check_count, check_seed, check_seeds  # noqa: F401 (re-exported)
from odeflow.errors import SolveError, ValidationError
from odeflow.fields.optimizers import warmup_flow_time

#: Records kept by default: about this many, evenly spaced in steps.
DEFAULT_RECORDS = 100


def check_fraction(value, field_name: str) -> float:
    """A finite float in ``[0, 1)`` (the heavy-ball momentum coefficient)."""
    x = as_real_number(value, field_name, "finite and in [0, 1)")
    if not (math.isfinite(x) and 0.0 <= x < 1.0):
        raise ValidationError(field_name, f"must be finite and in [0, 1), got {value!r}")
    return x


def default_record(steps: int) -> int:
    """The default of ``record`` (:func:`odeflow.training.record_marks`) of gradient ascent
    and SGD: every ``max(1, steps // DEFAULT_RECORDS)`` steps, about
    :data:`DEFAULT_RECORDS` records."""
    return max(1, steps // DEFAULT_RECORDS)


def warmup_time(steps, momentum: float = 0.0) -> np.ndarray:
    """Flow time of step ``k`` of heavy-ball ascent from a zero velocity:
    ``t_k = sum_{j=1..k} (1 - mu^j)/(1 - mu) = [k - mu (1 - mu^k)/(1 - mu)] / (1 - mu)``
    (the warm-up map, :func:`odeflow.fields.optimizers.warmup_flow_time`; ``t_1 = 1``,
    ``t_10 = 41.4``, ``t_100 = 910`` at ``mu = 0.9``, slope ``1/(1 - mu)`` for large
    ``k``; ``mu = 0`` gives ``t_k = k``)."""
    return warmup_flow_time(steps, momentum)


def warmup_steps(t, momentum: float = 0.0) -> np.ndarray:
    """The inverse of :func:`warmup_time`: the (real) step ``k`` whose flow time is ``t``.

    Newton's method on the increasing, convex map (converges from ``k = t (1 - mu)
    + mu / (1 - mu)``, above the root, monotonically); for plot axes.
    """
    t = np.asarray(t, dtype=float)
    mu = float(momentum)
    if mu == 0.0:
        return t.copy()
    k = np.maximum(t * (1.0 - mu) + mu / (1.0 - mu), 0.0)
    for _ in range(60):
        slope = (1.0 + mu ** k * mu * np.log(mu) / (1.0 - mu)) / (1.0 - mu)
        step = (warmup_time(k, mu) - t) / np.maximum(slope, 1e-300)
        k = k - step
        if np.all(np.abs(step) <= 1e-12 * np.maximum(1.0, np.abs(k))):
            break
    return k


class StepProgress:
    """A tqdm bar over steps; by default shown only when stderr is a terminal."""

    def __init__(self, total: int, enabled: bool | None, desc: str):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="step", leave=False)

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def diverged(process: str, step: int, exc: FloatingPointError) -> SolveError:
    """The error raised when a training loop leaves the finite numbers."""
    return SolveError(f"{process}: floating-point error at step {step}: {exc} "
                      "(learning rates too large?)", {"failed_step": step})
