"""Strategies of the induction-head family: :class:`~odeflow.data.induction.InductionData`
objects (:func:`induction_models`), transition kernels, flat parameters ``(c, w, a)`` and
group rates of its flows; :data:`DATA_MODELS` is the family's hook (``Family.strategies``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from odeflow.data import induction as ih
from odeflow.data.induction import InductionData
from odeflow.testing.common import learning_rates, probability_vectors


def induction_kernels(vocab_size: int, n_gram: int, min_ratio: float = 0.05):
    """Transition kernels of an n-gram chain (the ``kernel=`` of a point-mass prior).

    Parameters
    ----------
    vocab_size : int
        ``d >= 2``.
    n_gram : int
        ``n >= 2``; row ``r`` is the law of the next token after the context
        ``r = sum_m x_{i-m} d**(n-1-m)`` (``docs/induction.md``).
    min_ratio : float, default 0.05
        Smallest entry of a row relative to its largest (see
        :func:`probability_vectors`): every entry is positive, so the chain on
        contexts is irreducible and its stationary law unique.

    Returns
    -------
    SearchStrategy[numpy.ndarray]
        Arrays of shape ``(d**(n-1), d)`` whose rows sum to 1 within ``1e-15``.
    """
    rows = vocab_size ** (n_gram - 1)
    return st.lists(probability_vectors(vocab_size, min_ratio), min_size=rows,
                    max_size=rows).map(np.stack)


def _largest(low: int, high: int, fits) -> int:
    """The largest ``k`` in ``[low, high]`` with ``fits(k)`` (``low`` if none does)."""
    return max([k for k in range(low, high + 1) if fits(k)] or [low])


@st.composite
def induction_models(draw, *, max_vocab: int = 3, max_n_gram: int = 3, max_heads: int = 2,
                     prior: str | None = None, alpha=(0.5, 10.0), max_kernels: int = 4,
                     init: bool = True):
    """Valid :class:`~odeflow.data.induction.InductionData` objects (induction-head family).

    The draw fixes the vocabulary ``d``, the n-gram order ``n``, the heads
    ``H`` and the selector degree ``1 <= D <= H`` (Chen, Sheen, Wang, Yang
    2024; ``docs/induction.md``), within the size limits of the data model
    (contexts ``d**(n-1)``, windows ``d**(2H-1)`` and their laws), then the
    prior and the initial parameters.

    Parameters
    ----------
    max_vocab, max_n_gram, max_heads : int, default 3, 3, 2
        Largest ``d``, ``n`` and ``H`` (lowered where the size limits require).
    prior : {"dirichlet", "point"}, optional
        Kind of prior; drawn when None. ``"point"`` takes a kernel of
        :func:`induction_kernels`; ``"dirichlet"`` a seeded sample.
    alpha : (float, float), default (0.5, 10)
        Range of the Dirichlet concentration (log-uniform). Below about 0.1 a
        sampled row can hold entries under ``1e-15``, and the stationary law of
        such a chain is refused as not unique in double precision.
    max_kernels : int, default 4
        Largest number of kernels ``N_pi`` of a Dirichlet sample.
    init : bool, default True
        Draw the initial parameters ``w+, w-`` in ``[-5, 5]``, ``a0`` in
        ``[-2, 2]`` and ``c0`` non-zero with ``|c0|`` in ``[1e-3, 1]``; keep the
        defaults of :class:`~odeflow.data.induction.InductionData` when False.

    Returns
    -------
    SearchStrategy[InductionData]
    """
    if prior not in (None, *ih.PRIOR_KINDS):
        raise ValueError(f"prior must be None or one of {list(ih.PRIOR_KINDS)}, got {prior!r}")
    d = draw(st.integers(2, max(2, max_vocab)))
    n = draw(st.integers(2, _largest(2, max_n_gram, lambda k: d ** (k - 1) <= ih.MAX_CONTEXTS)))
    H = draw(st.integers(1, _largest(1, max_heads, lambda k: d ** (2 * k - 1) <= ih.MAX_WINDOWS)))
    D = draw(st.integers(1, H))
    kind = draw(st.sampled_from(ih.PRIOR_KINDS)) if prior is None else prior
    if kind == "point":
        options = {"kernel": draw(induction_kernels(d, n))}
    else:
        room = min(ih.MAX_LAW_ENTRIES // d ** (2 * H), ih.MAX_CHAIN_ENTRIES // d ** (2 * n - 2))
        options = {"alpha": draw(learning_rates(*alpha)),
                   "num_kernels": draw(st.integers(1, max(1, min(max_kernels, room)))),
                   "seed": draw(st.integers(0, 2**32 - 1))}
    if init:
        logits = st.floats(-5.0, 5.0)
        options.update(w_plus=draw(logits), w_minus=draw(logits), a0=draw(st.floats(-2.0, 2.0)),
                       c0=draw(learning_rates(1e-3, 1.0)) * draw(st.sampled_from([1.0, -1.0])))
    return InductionData(d, n, H, D, prior=kind, **options)


@st.composite
def induction_parameters(draw, data: InductionData, flow: str = "population",
                         scale: float = 2.0):
    """Flat parameters ``theta = (c, w, a)`` of an induction-head flow (its ``start=``).

    Parameters
    ----------
    data : InductionData
    flow : {"population", "copier", "finite_l"}, default "population"
        The level; ``"copier"`` has no ``w`` (``theta = (c, a)``).
    scale : float, default 2.0
        ``w`` and ``a`` are drawn from ``[-scale, scale]``; each selector
        coefficient ``c_S`` is 0 or ``+-`` a magnitude in ``[1e-3, scale]``
        (log-uniform), at least one of them non-zero (``p_S = c_S^2 / sum c^2``).

    Returns
    -------
    SearchStrategy[numpy.ndarray]
        Vectors of ``#S + H*H + 1`` numbers (``#S + 1`` for ``"copier"``), in the
        layout of ``docs/induction.md``.
    """
    from odeflow.fields.induction import INDUCTION_FLOWS

    if flow not in INDUCTION_FLOWS:
        raise ValueError(f"flow must be one of {sorted(INDUCTION_FLOWS)}, got {flow!r}")
    n_c = len(data.subsets)
    size = st.one_of(st.just(0.0), learning_rates(1e-3, scale))
    c = np.array(draw(st.lists(size, min_size=n_c, max_size=n_c)))
    if not np.any(c):
        c[draw(st.integers(0, n_c - 1))] = draw(learning_rates(1e-3, scale))
    c *= draw(hnp.arrays(np.float64, n_c, elements=st.sampled_from([1.0, -1.0])))
    entries = st.floats(-scale, scale, allow_nan=False, allow_infinity=False)
    parts = [c]
    if "w" in INDUCTION_FLOWS[flow].groups:
        parts.append(draw(hnp.arrays(np.float64, data.heads ** 2, elements=entries)))
    parts.append(np.array([draw(entries)]))
    return np.concatenate(parts)


def induction_rates(groups: Sequence[str] = ("c", "w", "a"), min_value: float = 1e-2,
                    max_value: float = 1e2):
    """Group learning rates of an induction-head flow (its ``rates=``).

    Parameters
    ----------
    groups : sequence of str, default ("c", "w", "a")
        The flow's parameter groups (``("c", "a")`` for ``flow="copier"``).
    min_value, max_value : float, default 1e-2, 1e2
        Range of each rate (log-uniform).

    Returns
    -------
    SearchStrategy[dict[str, float]]
        Mappings of a non-empty subset of ``groups`` to rates; an omitted group
        is frozen.
    """
    groups = list(groups)
    return st.lists(st.sampled_from(groups), min_size=1, max_size=len(groups),
                    unique=True).flatmap(lambda keys: st.fixed_dictionaries(
                        {k: learning_rates(min_value, max_value) for k in sorted(keys)}))


#: The family's hook (``Family.data_models``): family name -> strategy factory.
DATA_MODELS = {"induction": induction_models}
