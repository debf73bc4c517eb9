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
