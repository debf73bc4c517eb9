"""The paper's synthetic data generator (the authors' ``Dataset2``; ``docs/model.md``).

One generator builds every synthetic set of Sec. 8 of the paper:

- ``num_last`` query tokens, each with ``num_next_per_last`` classes
  (``K = num_last * num_next_per_last``; class ``k`` has query token number
  ``k // num_next_per_last``);
- ``num_common`` tokens common to every class;
- ``num_common_per_last`` tokens shared by the classes of one query token;
- ``num_unique_per_next`` distinct tokens per class.

Unnormalised probabilities are 1 for every common token (global or per
query) and ``linspace(unique_min, unique_max, num_unique_per_next)`` over a
class's distinct tokens (increasing with the token id); each class is then
normalised. Token ids, in order: the common tokens ``[0, num_common)``, the
per-query common blocks, the distinct blocks (class by class), the
``num_last`` query tokens, then the ``K`` next tokens, so

``M = num_common + num_common_per_last * num_last + num_unique_per_next * K
+ num_last + K``.

Classes are visited uniformly (``pi_n = 1/K``).
"""

from __future__ import annotations

import math

import numpy as np

from odeflow.data.checks import as_real_number, check_count
from odeflow.data.model import DataModel, SequenceClass
from odeflow.errors import ValidationError


def sequence_classes(num_last: int, num_next_per_last: int, num_common: int,
                     num_common_per_last: int, num_unique_per_next: int,
                     unique_min: float = 0.1, unique_max: float = 1.0) -> DataModel:
    """Build the data model of the authors' generator (``docs/model.md``, "Data").

    Parameters
    ----------
    num_last : int
        Number of query tokens (``>= 1``).
    num_next_per_last : int
        Classes per query token (``>= 1``).
    num_common : int
        Tokens common to every class (``>= 0``), unnormalised weight 1.
    num_common_per_last : int
        Tokens common to the classes of one query token (``>= 0``), weight 1.
    num_unique_per_next : int
        Distinct tokens per class (``>= 1``).
    unique_min, unique_max : float
        End points of the ``linspace`` of unnormalised distinct-token weights;
        ``0 < unique_min <= unique_max``, finite.

    Returns
    -------
    DataModel
        ``K = num_last * num_next_per_last`` classes, uniform weights; class
        ``k`` has next token ``M - K + k`` and query token
        ``M - K - num_last + k // num_next_per_last``.

    Raises
    ------
    ValidationError
        Naming the field, for a count that is not an integer or below its
        minimum, or a weight range that is not ``0 < unique_min <= unique_max``.
    """
    num_last = check_count(num_last, "num_last", 1)
    num_next_per_last = check_count(num_next_per_last, "num_next_per_last", 1)
    num_common = check_count(num_common, "num_common", 0)
    num_common_per_last = check_count(num_common_per_last, "num_common_per_last", 0)
    num_unique_per_next = check_count(num_unique_per_next, "num_unique_per_next", 1)
    lo = as_real_number(unique_min, "unique_min", "finite and > 0")
    hi = as_real_number(unique_max, "unique_max", "finite and > 0")
    if not (math.isfinite(lo) and lo > 0):
        raise ValidationError("unique_min", f"must be finite and > 0, got {unique_min!r}")
    if not (math.isfinite(hi) and hi >= lo):
        raise ValidationError("unique_max", f"must be finite and >= unique_min = {lo!r}, "
                              f"got {unique_max!r}")

    K = num_last * num_next_per_last
    first_per_last = num_common
    first_unique = first_per_last + num_common_per_last * num_last
    first_query = first_unique + num_unique_per_next * K
    first_next = first_query + num_last
    vocab_size = first_next + K

    ramp = np.linspace(lo, hi, num_unique_per_next)
    common = np.arange(num_common)
    classes = []
    for k in range(K):
        q = k // num_next_per_last
        per_last = first_per_last + q * num_common_per_last + np.arange(num_common_per_last)
        unique = first_unique + k * num_unique_per_next + np.arange(num_unique_per_next)
        tokens = np.concatenate([common, per_last, unique])
        weights = np.concatenate([np.ones(num_common + num_common_per_last), ramp])
        probs = dict(zip(tokens.tolist(), weights.tolist(), strict=True))
        classes.append(SequenceClass(first_next + k, first_query + q, probs, normalize=True))
    return DataModel(vocab_size, classes)
