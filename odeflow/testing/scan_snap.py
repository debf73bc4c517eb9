"""Strategies of the Scan and Snap family: :class:`~odeflow.data.DataModel` objects with a
controlled token structure (:func:`data_models`), their tables (:func:`model_tables`),
rate pairs, initial logits and relabellings; :data:`DATA_MODELS` is the family's hook
(``Family.strategies``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from odeflow.data import DataModel, SequenceClass
from odeflow.testing.common import learning_rates, probability_vectors


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
    if common not in ("any", "none", "single") or common == "single" and min_classes < 2:
        raise ValueError(f"common must be 'any', 'none' or 'single' (this one with "
                         f"min_classes >= 2), got {common!r}, min_classes={min_classes}")
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
    classes = [SequenceClass(next_ids[k], query_ids[query_of[k]],
                             _class_probs(draw, M, supports[k], min_ratio, dense))
               for k in range(K)]
    return DataModel(M, classes, _class_weights(draw, next_ids, uniform_weights))


def _class_weights(draw, next_ids: list, uniform: bool | None):
    """The class weights: None (uniform), a list or a mapping by next token (``uniform``
    drawn when None)."""
    if draw(st.booleans()) if uniform is None else uniform:
        return None
    weights = draw(probability_vectors(len(next_ids), min_ratio=0.3, ties=False)).tolist()
    return dict(zip(next_ids, weights, strict=True)) if draw(st.booleans()) else weights


def _class_probs(draw, M: int, support: list, min_ratio: float, dense: bool | None):
    """One class's ``c_{.|n}`` on ``support``: a length-``M`` array or a mapping (drawn
    when ``dense`` is None)."""
    p = draw(probability_vectors(len(support), min_ratio))
    if draw(st.booleans()) if dense is None else dense:
        probs = np.zeros(M)
        probs[support] = p
        return probs
    return dict(zip(support, p.tolist(), strict=True))


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


#: The family's hook (``Family.data_models``): family name -> strategy factory.
DATA_MODELS = {"scan_snap": data_models}
