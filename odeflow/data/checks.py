"""Number and text checks shared by every model family's data layer.

Each turns user input into a float, an array or a parsed TOML document, or
raises :class:`odeflow.errors.ValidationError` naming the field and saying why.
They belong to no model family: the sequence-class models of Scan and Snap
(:mod:`odeflow.data.model`) and the Markov-chain models of the induction-head
family (:mod:`odeflow.data.induction`) both use them.
"""

from __future__ import annotations

import math
import numbers
import operator

import numpy as np

from odeflow.errors import ValidationError


def as_real_array(values, field_name: str) -> np.ndarray:
    """``values`` as a float array; bools, text and complex numbers are refused.

    Raises a :class:`ValidationError` naming ``field_name`` for anything that is
    not real numbers (including integers too large for a float).
    """
    try:
        raw = np.asarray(values)
        if raw.dtype.kind not in "iuf":
            raise TypeError(raw.dtype)
        arr = raw.astype(float)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(field_name, f"must be real numbers, got {values!r:.80}") from exc
    return arr


def parse_toml(text, field_name: str) -> dict:
    """TOML text as a dict; anything that is not TOML text is a ValidationError naming
    ``field_name``: not a string, invalid TOML, or nesting too deep to parse."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    if not isinstance(text, str):
        raise ValidationError(field_name, f"must be text, got {type(text).__name__}")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(field_name, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise ValidationError(field_name, "nested too deeply to parse") from None


def check_count(value, field: str, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer ``>= minimum`` (and ``<= maximum`` when given), or a ValidationError
    naming ``field``.

    The one policy for every count and seed of the package: integers (Python or
    numpy) and floats of integral value (``1e4``, ``np.float64(3.0)``: exact, so
    nothing is rounded) are taken; bools, text, non-integral or non-finite
    floats and anything else are refused.
    """
    if isinstance(value, bool):
        raise ValidationError(field, f"must be an integer, got {value!r:.80}")
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise ValidationError(field, f"must be an integer, got {value!r:.80}")
        number = int(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            raise ValidationError(field, f"must be an integer, got {value!r:.80}") from None
    if number < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ValidationError(field, f"must be <= {maximum}, got {number}")
    return number


def check_seed(value, field: str = "seed") -> int:
    """A seed for :func:`numpy.random.default_rng`: an integer ``>= 0``."""
    return check_count(value, field, minimum=0)


def check_seeds(seeds, field: str = "seeds") -> list[int]:
    """Seeds from a count (``0 .. seeds - 1``) or an iterable of seeds, each checked
    by :func:`check_seed` (ValidationError naming ``field`` or ``field[i]``)."""
    if isinstance(seeds, (numbers.Integral, float)) and not isinstance(seeds, bool):
        return list(range(check_count(seeds, field)))
    if isinstance(seeds, (str, bytes, bool)):
        raise ValidationError(field, f"must be a count or a list of seeds, got {seeds!r:.80}")
    try:
        seeds = list(seeds)
    except TypeError:
        raise ValidationError(field, f"must be a count or a list of seeds, got "
                              f"{seeds!r:.80}") from None
    if not seeds:
        raise ValidationError(field, "needs at least one seed")
    return [check_seed(s, f"{field}[{i}]") for i, s in enumerate(seeds)]


def as_real_number(value, field_name: str, requirement: str = "a number") -> float:
    """``value`` as a float, or a :class:`ValidationError` naming ``field_name``.

    Booleans and text are refused rather than converted; an integer too large
    for a float is reported as not meeting ``requirement``. Infinity and NaN pass
    through: callers check the range they need.
    """
    if isinstance(value, (bool, str, bytes)):
        raise ValidationError(field_name, f"must be a number, got {value!r:.80}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValidationError(field_name, f"must be a number, got {value!r:.80}") from None
    except OverflowError:
        raise ValidationError(field_name, f"must be {requirement}, got an integer too large "
                              "for a float") from None


def validate_finite(value, field_name: str) -> float:
    """A finite float, or a :class:`ValidationError` naming ``field_name``."""
    x = as_real_number(value, field_name, "finite")
    if not math.isfinite(x):
        raise ValidationError(field_name, f"must be finite, got {value!r}")
    return x


def validate_positive(value, field_name: str) -> float:
    """A finite, strictly positive float, or a :class:`ValidationError`.

    Booleans and text are refused rather than converted.
    """
    x = as_real_number(value, field_name, "finite and > 0")
    if not math.isfinite(x) or x <= 0:
        raise ValidationError(field_name, f"must be finite and > 0, got {value!r}")
    return x
