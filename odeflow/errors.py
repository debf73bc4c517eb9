"""Exceptions raised by odeflow.

Every error caused by what a user passed in is a :class:`ValidationError`, a
subclass of :class:`ValueError`, whose message names the offending field and
value. A solver that fails raises :class:`SolveError`, carrying scipy's message
and statistics.
"""

from __future__ import annotations

import re

#: numpy scalar reprs (``np.float64(0.5)``, ``np.int64(3)``) inside a message.
_NUMPY_SCALAR = re.compile(r"np\.(?:float|int|uint|complex|bool|str)_?\d*\(([^()]*)\)")


def plain_numbers(text: str) -> str:
    """``text`` with numpy scalar reprs shown as plain numbers (``np.float64(0.5)`` -> ``0.5``)."""
    return _NUMPY_SCALAR.sub(r"\1", text)


class ValidationError(ValueError):
    """Invalid user input; the message names the field and the value.

    Parameters
    ----------
    field : str
        Dotted name of the offending field, e.g. ``"classes[1].probs"``.
    message : str
        Why the value is invalid; numpy scalars in it are shown as plain numbers.

    Attributes
    ----------
    field : str
    reason : str
        The message without the field name.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.reason = plain_numbers(str(message))
        super().__init__(f"{field}: {self.reason}")


class SolveError(RuntimeError):
    """An ODE solve that did not reach the end of its time span.

    Parameters
    ----------
    message : str
        scipy's own message, prefixed with what was being solved.
    stats : dict
        Solver statistics (method, nfev, njev, status, ...) up to the failure.
    """

    def __init__(self, message: str, stats: dict | None = None):
        self.stats = dict(stats or {})
        super().__init__(message)


class SweepStopped(RuntimeError):
    """A sweep stopped by a failure of its backend or of its store, not of a point.

    A worker that died, a dask worker killed with no retries left, a scheduler
    gone, a store that cannot be written (disk full, file-size limit), memory
    exhausted: the sweep stops at once; every point already stored stays there
    and ``--resume`` (``resume=True``) runs the rest.

    Parameters
    ----------
    cause : str
        What failed, e.g. ``"a worker died"``.
    stored, total : int
        Points in the store now, and in the sweep.
    store : str or None
        The store's path (``None``: the sweep kept its points in memory only).

    Attributes
    ----------
    cause, stored, total, store
    """

    def __init__(self, cause: str, stored: int, total: int, store: str | None):
        self.cause, self.stored, self.total, self.store = cause, stored, total, store
        if store is None:
            where = (f"{stored} of {total} points were computed (no store: run it with a "
                     "store to keep them)")
        else:
            where = f"{stored} of {total} points are in {store}; rerun with --resume"
        super().__init__(f"{cause}: {where}")
