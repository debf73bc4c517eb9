"""Strategies shared by every family: probability vectors, learning rates, flat states,
and the data models of every registered family (:func:`family_data_models`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from odeflow.families import data_model_strategies


def probability_vectors(size: int, min_ratio: float = 0.05, ties: bool = True):
    """Strictly positive probability vectors of a given length.

    Parameters
    ----------
    size : int
        Length of the vector (``>= 1``).
    min_ratio : float, default 0.05
        Smallest entry relative to the largest before normalisation, so every
        probability is at least ``min_ratio / size``.
    ties : bool, default True
        Also draw vectors with repeated values (entries from a small set).

    Returns
    -------
    SearchStrategy[numpy.ndarray]
        Vectors ``p`` with ``p > 0`` and ``|sum(p) - 1| <= 1e-15``.
    """
    free = st.floats(min_value=min_ratio, max_value=1.0, allow_nan=False)
    entries = st.one_of(free, st.sampled_from([min_ratio, 0.5, 1.0])) if ties else free

    def normalise(values):
        w = np.asarray(values, dtype=float)
        return w / w.sum()

    return st.lists(entries, min_size=size, max_size=size).map(normalise)


def learning_rates(min_value: float = 1e-3, max_value: float = 1e2):
    """Learning rates spread log-uniformly over several decades.

    Parameters
    ----------
    min_value, max_value : float
        Range, ``0 < min_value <= max_value``; the exponent is drawn uniformly,
        so each decade gets the same share of examples.

    Returns
    -------
    SearchStrategy[float]
    """
    lo, hi = math.log10(min_value), math.log10(max_value)
    return st.floats(min_value=lo, max_value=hi).map(
        lambda e: float(min(max(10.0**e, min_value), max_value)))


def state_vectors(size: int, scale: float = 2.0):
    """Flat state vectors of a vector field (e.g. ``ExactFlow(...).size`` entries).

    Parameters
    ----------
    size : int
    scale : float, default 2.0
        Entries are drawn from ``[-scale, scale]``.

    Returns
    -------
    SearchStrategy[numpy.ndarray]
    """
    return hnp.arrays(np.float64, (size,),
                      elements=st.floats(-scale, scale, allow_nan=False, allow_infinity=False))


def family_data_models(names: Sequence[str] | None = None):
    """Data models of the families ``names`` (:func:`odeflow.families.data_model_strategies`).

    Parameters
    ----------
    names : sequence of str, optional
        The families (default: every one whose ``strategies`` module has a hook).

    Returns
    -------
    SearchStrategy
    """
    return st.one_of(*data_model_strategies(names))

