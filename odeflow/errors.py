"""Exceptions raised by odeflow.

Every error caused by what a user passed in is a :class:`ValidationError`, a
subclass of :class:`ValueError`, whose message names the offending field and
value. A solver that fails raises :class:`SolveError`, carrying scipy's message
and statistics.
"""

from __future__ import annotations

import functools
import re
import sys
import warnings

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


class RenamedWarning(DeprecationWarning):
    """A keyword, config key, sweep parameter or flag given by its old name.

    The old names of one concept (``docs/api.md``, "One name per concept") are
    still taken for one release, with this warning, whose message reads
    ``'length' is now 'seq_len'``.
    """


def renamed(options: dict, renames: dict, stacklevel: int = 3, own_calls: bool = False) -> dict:
    """``options`` with each old name of ``renames`` replaced by its new one.

    Warns :class:`RenamedWarning` for every old name given. A rename ``old ->
    (new, i)`` makes the old value part ``i`` of the pair ``new`` (Scan and
    Snap's ``y0``, ``z0`` -> ``start=(y0, z0)``; the other part None). Giving an
    old name together with its new one is refused.

    Parameters
    ----------
    options : dict
        Keyword arguments (or config keys, sweep parameters) as given.
    renames : dict
        ``{old: new}`` or ``{old: (new, part)}``.
    stacklevel : int
        Passed to :func:`warnings.warn`: 3 points at the caller of the function
        that calls :func:`renamed`.
    own_calls : bool
        Also warn when the caller at ``stacklevel`` is a module of odeflow itself.
        By default such a call is translated silently: the warning is for users'
        code. Front ends that read users' text (``[run]`` keys, flags, sweep
        parameters) warn always.

    Returns
    -------
    dict
        A new dict, each new name in the place of its old one; ``options`` is not
        changed.

    Raises
    ------
    ValidationError
        Naming the old name when the new one is given too.
    """
    out, pairs = {}, {}
    for key, value in options.items():
        if key not in renames:
            out[key] = value
            continue
        name, part = (renames[key], None) if isinstance(renames[key], str) else renames[key]
        if name in options:
            raise ValidationError(key, f"is the old name of {name!r}; give only {name!r}")
        if part is None:
            message = f"{key!r} is now {name!r}"
            out[name] = value
        else:
            parts = sorted((n[1], o) for o, n in renames.items()
                           if not isinstance(n, str) and n[0] == name)
            message = (f"{key!r} is now {name!r}: "
                       f"{name}=({', '.join(o for _, o in parts)})")
            out.setdefault(name, None)          # in the place of its first part
            pairs.setdefault(name, [None, None])[part] = value
        if own_calls or not _package_caller(stacklevel):
            warnings.warn(RenamedWarning(message), stacklevel=stacklevel)
    for name, pair in pairs.items():
        out[name] = tuple(pair)
    return out


def _package_caller(stacklevel: int) -> bool:
    """Whether the frame that :func:`renamed` would warn at (``stacklevel`` counted from
    :func:`renamed`) runs a module of odeflow."""
    try:
        frame = sys._getframe(stacklevel)   # 0: this function, 1: renamed, 2: its caller ...
    except ValueError:                      # the stack is shallower: no caller there
        return False
    name = frame.f_globals.get("__name__", "")
    return name == "odeflow" or name.startswith("odeflow.")


def renamed_keywords(renames: dict):
    """Decorator: the function also takes the old keyword names of ``renames``
    (see :func:`renamed`), warning :class:`RenamedWarning` at its caller.

    The decorated function keeps its signature (:func:`functools.wraps`) and
    carries ``renames`` as its ``renamed`` attribute, so that a front end passing
    options on to it can translate them first.
    """
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **renamed(kwargs, renames, stacklevel=3))
        wrapper.renamed = dict(renames)
        return wrapper
    return decorate


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
