"""Exceptions raised by odeflow.

Every error caused by what a user passed in is a :class:`ValidationError`, a
subclass of :class:`ValueError`, whose message names the offending field and
value. A solver that fails raises :class:`SolveError`, carrying scipy's message
and statistics.
"""

from __future__ import annotations

import functools
import re
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


def renamed(options: dict, renames: dict, stacklevel: int = 3, quiet=()) -> dict:
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
    quiet : collection of str
        Old names translated without a warning: those a module of the package
        still passes (``docs/api.md`` lists them), so that the package's own
        calls do not warn.

    Returns
    -------
    dict
        A new dict; ``options`` is not changed.

    Raises
    ------
    ValidationError
        Naming the old name when the new one is given too.
    """
    out, pairs = dict(options), {}
    for old, new in renames.items():
        if old not in out:
            continue
        name, part = (new, None) if isinstance(new, str) else new
        if name in out:
            raise ValidationError(old, f"is the old name of {name!r}; give only {name!r}")
        value = out.pop(old)
        if part is None:
            message = f"{old!r} is now {name!r}"
            out[name] = value
        else:
            parts = sorted((n[1], o) for o, n in renames.items()
                           if not isinstance(n, str) and n[0] == name)
            message = (f"{old!r} is now {name!r}: "
                       f"{name}=({', '.join(o for _, o in parts)})")
            pairs.setdefault(name, [None, None])[part] = value
        if old not in quiet:
            warnings.warn(RenamedWarning(message), stacklevel=stacklevel)
    for name, pair in pairs.items():
        out[name] = tuple(pair)
    return out


def renamed_keywords(renames: dict, quiet=()):
    """Decorator: the function also takes the old keyword names of ``renames``
    (see :func:`renamed`), warning :class:`RenamedWarning` at its caller (except
    for the names in ``quiet``).

    The decorated function keeps its signature (:func:`functools.wraps`) and
    carries ``renames`` and ``quiet`` as its ``renamed`` and ``renamed_quiet``
    attributes, so that a front end passing options on to it can translate them
    first.
    """
    quiet = frozenset(quiet)

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **renamed(kwargs, renames, stacklevel=3, quiet=quiet))
        wrapper.renamed = dict(renames)
        wrapper.renamed_quiet = quiet
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
