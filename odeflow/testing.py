"""Hypothesis strategies of valid inputs, for property tests of claims built on odeflow.

For the Scan and Snap family: :class:`~odeflow.data.DataModel` objects with a
controlled token structure (:func:`data_models`), their tables
(:func:`model_tables`), learning rates spread over decades, initial logits and
flat states of a vector field; for the induction heads:
:class:`~odeflow.data.induction.InductionData` objects (:func:`induction_models`),
transition kernels, flat parameters ``(c, w, a)`` and group rates of its flows;
for every registered family, :func:`family_data_models` (:data:`DATA_MODELS`: the
hook of those two). Users test their own claims with them, e.g.::

    from hypothesis import given
    from odeflow.testing import data_models, learning_rates

    @given(data=data_models(min_distinct=1), eta=learning_rates())
    def test_my_claim(data, eta):
        ...

Hypothesis is a test extra (``pip install odeflow[test]``; without it, importing
this module raises :class:`ImportError`). Sizes are small by default, so that every
example solves in milliseconds; the guide is ``docs/testing.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ModuleNotFoundError as exc:  # pragma: no cover
    raise ImportError("odeflow.testing needs hypothesis: pip install 'odeflow[test]'") from exc

from odeflow.data import DataModel, SequenceClass
from odeflow.data import induction as ih
from odeflow.data.induction import InductionData
from odeflow.families import data_model_strategies

__all__ = ["data_models", "family_data_models", "induction_kernels", "induction_models",
           "induction_parameters", "induction_rates", "initial_logits", "learning_rate_pairs",
           "learning_rates", "model_tables", "models_and_logits", "probability_vectors",
           "relabel_tokens", "state_vectors"]


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


def learning_rate_pairs(eta_y=(1e-2, 1e1), ratio=(1e-2, 1e2)):
    """Pairs ``(eta_y, eta_z)`` with a controlled ratio ``eta_z / eta_y``.

    Parameters
    ----------
    eta_y : (float, float), default (1e-2, 10)
        Range of the decoder learning rate (log-uniform).
    ratio : (float, float), default (1e-2, 1e2)
        Range of ``eta_z / eta_y`` (log-uniform).

    Returns
    -------
    SearchStrategy[tuple[float, float]]
    """
    return st.tuples(learning_rates(*eta_y), learning_rates(*ratio)).map(
        lambda p: (p[0], p[0] * p[1]))


@st.composite
def data_models(draw, *, min_classes: int = 1, max_classes: int = 3, max_queries: int = 2,
                min_distinct: int = 0, max_distinct: int = 3, common: str = "any",
                max_common: int = 2, min_vocab: int = 2, max_vocab: int = 16,
                uniform_weights: bool | None = None, min_ratio: float = 0.05,
                dense: bool | None = None):
    """Valid :class:`~odeflow.data.DataModel` objects with a controlled token structure.

    The draw fixes ``K`` classes with distinct next tokens, ``q <= K`` query
    tokens (shared when ``q < K``), a number of *distinct* tokens per class and
    a set of *common* tokens each shared by at least two classes (as defined
    in ``docs/model.md``), then random ids for the three roles (ids of next, query and
    contextual tokens may coincide: their roles are separate) and positive
    probabilities.

    Parameters
    ----------
    min_classes, max_classes : int, default 1, 3
        Range of ``K``.
    max_queries : int, default 2
        At most this many query tokens; ``1`` forces one query shared by all.
    min_distinct, max_distinct : int, default 0, 3
        Range of the number of distinct tokens of each class. A class left
        without any token gets one distinct token.
    common : {"any", "none", "single"}, default "any"
        ``"none"``: no common tokens. ``"single"``: exactly one common token,
        in the support of every class (needs ``min_classes >= 2``).
        ``"any"``: up to ``max_common`` common tokens, each shared by a random
        subset of at least two classes.
    max_common : int, default 2
        Largest number of common tokens for ``common="any"``.
    min_vocab, max_vocab : int, default 2, 16
        Range of ``M``; raised to the number of tokens the structure needs.
    uniform_weights : bool, optional
        Force uniform (``True``) or random (``False``) class weights; drawn
        when None.
    min_ratio : float, default 0.05
        Smallest probability ratio within a class before normalisation (see
        :func:`probability_vectors`).
    dense : bool, optional
        Give ``c_{.|n}`` as length-``M`` arrays (``True``) or as mappings
        (``False``); drawn per class when None.

    Returns
    -------
    SearchStrategy[DataModel]
    """
    if common not in ("any", "none", "single"):
        raise ValueError(f"common must be 'any', 'none' or 'single', got {common!r}")
    if common == "single" and min_classes < 2:
        raise ValueError("common='single' needs min_classes >= 2")
    K = draw(st.integers(min_classes, max_classes))
    q = draw(st.integers(1, max(1, min(max_queries, K))))
    query_of = list(range(q)) + draw(st.lists(st.integers(0, q - 1), min_size=K - q,
                                              max_size=K - q))
    n_distinct = draw(st.lists(st.integers(min_distinct, max_distinct), min_size=K, max_size=K))
    groups: list[list[int]] = []
    if common == "single":
        groups = [list(range(K))]
    elif common == "any" and K >= 2:
        for _ in range(draw(st.integers(0, max_common))):
            groups.append(sorted(draw(st.sets(st.integers(0, K - 1), min_size=2, max_size=K))))
    covered = {k for g in groups for k in g}
    n_distinct = [d if (d > 0 or k in covered) else 1 for k, d in enumerate(n_distinct)]
    n_context = sum(n_distinct) + len(groups)
    M = draw(st.integers(max(min_vocab, n_context, K, q, 2),
                         max(max_vocab, n_context, K, q, 2)))
    context_ids = draw(st.permutations(range(M)))[:n_context]
    next_ids = draw(st.permutations(range(M)))[:K]
    query_ids = draw(st.permutations(range(M)))[:q]
    ends = np.cumsum([0, *n_distinct])      # class k's distinct tokens, then the common ones
    supports = [list(context_ids[ends[k]:ends[k + 1]]) for k in range(K)]
    for pos, g in enumerate(groups, start=int(ends[-1])):
        for k in g:
            supports[k].append(context_ids[pos])
    classes = []
    for k in range(K):
        p = draw(probability_vectors(len(supports[k]), min_ratio))
        if draw(st.booleans()) if dense is None else dense:
            probs = np.zeros(M)
            probs[supports[k]] = p
        else:
            probs = dict(zip(supports[k], p.tolist(), strict=True))
        classes.append(SequenceClass(next_ids[k], query_ids[query_of[k]], probs))
    weights = None
    if not (draw(st.booleans()) if uniform_weights is None else uniform_weights):
        weights = draw(probability_vectors(K, min_ratio=0.3, ties=False)).tolist()
        if draw(st.booleans()):
            weights = dict(zip(next_ids, weights, strict=True))
    return DataModel(M, classes, weights)


def initial_logits(data: DataModel, scale: float = 2.0):
    """Initial logits ``Z(0)`` for :func:`odeflow.solve` (``start=(None, z0)``).

    Parameters
    ----------
    data : DataModel
    scale : float, default 2.0
        Entries are drawn from ``[-scale, scale]``.

    Returns
    -------
    SearchStrategy[numpy.ndarray]
        Arrays of shape ``(len(data.query_tokens), data.vocab_size)``.
    """
    shape = (data.query_tokens.size, data.vocab_size)
    return hnp.arrays(np.float64, shape,
                      elements=st.floats(-scale, scale, allow_nan=False, allow_infinity=False))


@st.composite
def models_and_logits(draw, models=None, scale: float = 2.0):
    """Pairs ``(data, z0)`` of a data model and initial logits for it.

    A single strategy (rather than :func:`initial_logits` drawn inside the
    test) so that a test can also be given explicit ``@example`` pairs.

    Parameters
    ----------
    models : SearchStrategy[DataModel], optional
        Source of the models; :func:`data_models` by default.
    scale : float, default 2.0
        Entries of ``z0`` are drawn from ``[-scale, scale]``; ``0`` gives
        ``z0 = None`` (the paper's ``Z(0) = 0``).

    Returns
    -------
    SearchStrategy[tuple[DataModel, numpy.ndarray | None]]
    """
    data = draw(models if models is not None else data_models())
    return data, (None if scale == 0 else draw(initial_logits(data, scale)))


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


def relabel_tokens(data: DataModel, perm: Sequence[int],
                   class_order: Sequence[int] | None = None) -> DataModel:
    """The data model with every token id ``t`` replaced by ``perm[t]``.

    One permutation of the vocabulary is applied to all three roles (next,
    query and contextual tokens). The dynamics are equivariant under it: the
    solution of the relabelled model is the relabelled solution.

    Parameters
    ----------
    data : DataModel
    perm : sequence of int
        A permutation of ``range(data.vocab_size)``.
    class_order : sequence of int, optional
        Also list the classes (with their weights) in this order, a
        permutation of ``range(data.num_classes)``; the order is immaterial
        to the dynamics.

    Returns
    -------
    DataModel
    """
    perm = [int(x) for x in perm]
    order = list(range(data.num_classes)) if class_order is None else [int(i) for i in
                                                                        class_order]
    classes = []
    for i in order:
        c = data.classes[i]
        classes.append(SequenceClass(perm[c.next_token], perm[c.query_token],
                                     {perm[int(t)]: float(p) for t, p in
                                      zip(c.support, c.support_probs, strict=True)}))
    return DataModel(data.vocab_size, classes, [float(data.weights[i]) for i in order])


@st.composite
def model_tables(draw, models=None):
    """Valid data-model tables for :meth:`DataModel.from_dict` in every accepted layout.

    Each class gets its probabilities as ``tokens`` + ``probs`` arrays, as a
    ``probs`` table ``{"token": p}`` or as a dense ``probs`` array; weights are
    given for all classes or for none.

    Parameters
    ----------
    models : SearchStrategy[DataModel], optional
        Source of the models; :func:`data_models` by default.

    Returns
    -------
    SearchStrategy[tuple[dict, DataModel]]
        The table and the model it must load as.
    """
    data = draw(models if models is not None else data_models())
    K = data.num_classes
    give_weights = draw(st.booleans()) or not np.array_equal(data.weights, np.full(K, 1.0 / K))
    classes = []
    for c, w in zip(data.classes, data.weights, strict=True):
        entry = {"next_token": c.next_token, "query_token": c.query_token}
        layout = draw(st.sampled_from(["arrays", "table", "dense"]))
        if layout == "arrays":
            entry["tokens"] = [int(t) for t in c.support]
            entry["probs"] = [float(p) for p in c.support_probs]
        elif layout == "table":
            entry["probs"] = {str(int(t)): float(p)
                              for t, p in zip(c.support, c.support_probs, strict=True)}
        else:
            entry["probs"] = data.probs(c.next_token).tolist()
        if give_weights:
            entry["weight"] = float(w)
        classes.append(entry)
    return {"vocab_size": data.vocab_size, "classes": classes}, data


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


#: The hook of the families whose strategies these are (``Family.data_models``).
DATA_MODELS = {"scan_snap": data_models, "induction": induction_models}


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
