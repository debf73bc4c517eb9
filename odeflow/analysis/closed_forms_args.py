"""Arguments and results of the closed forms (:mod:`odeflow.analysis.closed_forms`).

Each closed form validates its arguments with these helpers (real, finite,
in range; a ValidationError naming the argument and the first offending
element otherwise), broadcasts them together (:func:`broadcast`) and returns
through :func:`out`, which refuses a result outside double precision instead
of returning inf or NaN. :func:`guarded` runs a closed form with numpy's
floating-point warnings off, since the formulas handle their own underflow
and overflow.
"""

from __future__ import annotations

import functools

import numpy as np

from odeflow.errors import ValidationError

__all__ = ["BIG", "broadcast", "finite", "guarded", "margin_args", "nonnegative", "out",
           "positive", "require", "to_array", "unit_feature", "vocab", "weight"]

#: Largest finite double, the range every result must fit in.
BIG = float(np.finfo(float).max)


def guarded(function):
    """Run a closed form with floating-point warnings off, whatever ``np.seterr`` says.

    Intermediate underflow and overflow are handled in the formulas; every
    result is checked by :func:`out` (finite, or a ValidationError), so a
    caller's ``np.errstate(all="raise")`` cannot turn them into a raw
    FloatingPointError.
    """
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return function(*args, **kwargs)

    return wrapper


def to_array(name: str, value) -> np.ndarray:
    """``value`` as a real float array; ValidationError naming ``name`` otherwise."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nesting
        raise ValidationError(name, f"must be a number or a rectangular array, got "
                              f"{name}={value!r:.80} ({str(exc).split('.')[0]})") from None
    if arr.dtype == object or arr.dtype.kind == "b" or not np.isrealobj(arr):
        raise ValidationError(name, f"must be real, got {name}={value!r}")
    try:
        arr = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise ValidationError(name, f"must be numeric, got {name}={value!r}") from exc
    return arr


def require(name: str, arr: np.ndarray, ok: np.ndarray, requirement: str) -> None:
    """ValidationError naming ``name`` and the first element of ``arr`` where ``ok`` fails."""
    ok = np.asarray(ok)
    if not np.all(ok):
        bad = arr[~ok] if arr.ndim else arr
        first = np.ravel(bad)[0].item()
        where = ""
        if arr.ndim:
            index = tuple(int(i) for i in np.argwhere(~ok)[0])
            where = f" (first offending element at index {index})"
        raise ValidationError(name, f"must be {requirement}, got {name}={first!r}{where}")


def finite(name: str, value) -> np.ndarray:
    """A finite float array."""
    arr = to_array(name, value)
    require(name, arr, np.isfinite(arr), "finite")
    return arr


def positive(name: str, value) -> np.ndarray:
    """A finite float array ``> 0``."""
    arr = finite(name, value)
    require(name, arr, arr > 0, "> 0")
    return arr


def nonnegative(name: str, value) -> np.ndarray:
    """A finite float array ``>= 0``."""
    arr = finite(name, value)
    require(name, arr, arr >= 0, ">= 0")
    return arr


def vocab(value) -> np.ndarray:
    """A vocabulary size ``M >= 2`` (any real: the closed forms take ``M`` as a number)."""
    arr = finite("M", value)
    require("M", arr, arr >= 2, ">= 2")
    return arr


def weight(value, name: str = "pi") -> np.ndarray:
    """A class weight in ``(0, 1]``."""
    arr = positive(name, value)
    require(name, arr, arr <= 1, "<= 1")
    return arr


def unit_feature(name: str, value) -> np.ndarray:
    """An entry of an l2-normalised feature, in ``(0, 1]``."""
    arr = positive(name, value)
    require(name, arr, arr <= 1, "<= 1 (an entry of an l2-normalised feature)")
    return arr


def broadcast(**arrays) -> list[np.ndarray]:
    """``np.broadcast_arrays`` whose shape mismatch is a ValidationError naming the arguments."""
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        shapes = ", ".join(f"{k}{np.shape(v)}" for k, v in arrays.items())
        raise ValidationError(", ".join(arrays), f"shapes do not broadcast together: {shapes}"
                              ) from None


def out(x: np.ndarray, field: str = "arguments", what: str = "the result", hint: str = "",
         args: dict | None = None):
    """A numpy scalar for 0-d results, the array otherwise; never inf or NaN.

    A result outside double precision is refused with a ValidationError naming
    ``field``, the offending arguments and the representable range.
    """
    x = np.asarray(x, dtype=float)
    bad = ~np.isfinite(x)
    if np.any(bad):
        index = tuple(int(i) for i in np.argwhere(bad)[0]) if x.ndim else ()
        shown = ""
        if args:
            shown = " at " + ", ".join(
                f"{k}={np.asarray(v)[index].item() if np.ndim(v) else np.asarray(v).item()!r}"
                for k, v in args.items())
        raise ValidationError(field, f"{what} is {x[index].item()!r}{shown}: outside double "
                              f"precision (|value| <= {BIG:.4g}){'; ' + hint if hint else ''}")
    return x[()]


def margin_args(t, M, eta_y, pi):
    """``t >= 0``, ``M >= 2``, ``eta_y > 0``, ``pi`` in ``(0, 1]``, validated and broadcast."""
    t = nonnegative("t", t)
    M = vocab(M)
    eta_y = positive("eta_y", eta_y)
    pi = weight(pi)
    return broadcast(t=t, M=M, eta_y=eta_y, pi=pi)

