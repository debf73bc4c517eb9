"""Hypothesis strategies for property-based tests of odeflow (and of claims built on it).

The strategies draw *valid* inputs (data models with a controlled token
structure, learning rates spread over decades, initial logits, flat states of
a vector field) and *invalid* inputs of every kind (bad sequence classes, data
models, TOML tables and text, run tables, arguments of :func:`odeflow.solve`),
each invalid input labelled with the field its error must name. The package's
own property suite (``tests/properties``, described in ``docs/testing.md``) is
built on them; they are public so that users can test their own claims, e.g.::

    from hypothesis import given
    from odeflow.testing import data_models, learning_rates

    @given(data=data_models(min_distinct=1), eta=learning_rates())
    def test_my_claim(data, eta):
        ...

Hypothesis is a test extra (``pip install odeflow[test]``); importing this
module without it raises :class:`ImportError`.

All sizes are kept small by default (vocabularies of at most 16 tokens, at most
3 classes) so that every example solves in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ModuleNotFoundError as exc:  # pragma: no cover
    raise ImportError("odeflow.testing needs hypothesis: pip install 'odeflow[test]'") from exc

from odeflow.data import DataModel, SequenceClass

__all__ = [
    "CLOSED_FORM_ARITY",
    "CLI_VERBS",
    "InvalidInput",
    "CLI_FLAGS",
    "cli_argv",
    "cli_flags",
    "cli_verbs",
    "closed_form_calls",
    "corrupted_bytes",
    "tampered_result_arrays",
    "data_models",
    "initial_logits",
    "invalid_data_model_args",
    "invalid_model_tables",
    "invalid_run_tables",
    "invalid_sequence_class_args",
    "invalid_solve_arguments",
    "learning_rate_pairs",
    "learning_rates",
    "model_tables",
    "models_and_logits",
    "probability_vectors",
    "relabel_tokens",
    "state_vectors",
    "sweep_config_texts",
    "toml_documents",
    "toml_values",
]

#: Largest integer TOML allows (64-bit signed).
TOML_INT_MAX = 2**63 - 1


class InvalidInput(NamedTuple):
    """An invalid input and what rejecting it must look like.

    Attributes
    ----------
    value : object
        The input: keyword arguments (a dict) for a constructor or
        :func:`odeflow.solve`, or a table (dict) for the TOML loaders.
    field : str
        The field the :class:`~odeflow.errors.ValidationError` must name: its
        message must start with ``field`` (``"classes[1]"`` also matches
        ``"classes[1].probs: ..."``).
    kind : str
        A short label of the kind of invalidity, ``"<slot>:<what>"``, e.g.
        ``"probs:negative"`` or ``"eta_z:nonfinite"``; lets a test single out
        one kind.
    """

    value: object
    field: str
    kind: str


# --------------------------------------------------------------------- valid inputs
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
    a set of *common* tokens each shared by at least two classes (spec
    section 1), then random ids for the three roles (ids of next, query and
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
        n_common = draw(st.integers(0, max_common))
        for _ in range(n_common):
            members = draw(st.sets(st.integers(0, K - 1), min_size=2, max_size=K))
            groups.append(sorted(members))
    covered = {k for g in groups for k in g}
    n_distinct = [d if (d > 0 or k in covered) else 1 for k, d in enumerate(n_distinct)]
    n_context = sum(n_distinct) + len(groups)
    M = draw(st.integers(max(min_vocab, n_context, K, q, 2),
                         max(max_vocab, n_context, K, q, 2)))
    context_ids = draw(st.permutations(range(M)))[:n_context]
    next_ids = draw(st.permutations(range(M)))[:K]
    query_ids = draw(st.permutations(range(M)))[:q]
    supports: list[list[int]] = [[] for _ in range(K)]
    pos = 0
    for k, d in enumerate(n_distinct):
        supports[k].extend(context_ids[pos:pos + d])
        pos += d
    for g in groups:
        for k in g:
            supports[k].append(context_ids[pos])
        pos += 1
    classes = []
    for k in range(K):
        p = draw(probability_vectors(len(supports[k]), min_ratio))
        as_dense = draw(st.booleans()) if dense is None else dense
        if as_dense:
            probs = np.zeros(M)
            probs[supports[k]] = p
        else:
            probs = dict(zip(supports[k], p.tolist(), strict=True))
        classes.append(SequenceClass(next_ids[k], query_ids[query_of[k]], probs))
    uniform = draw(st.booleans()) if uniform_weights is None else uniform_weights
    weights = None
    if not uniform:
        w = draw(probability_vectors(K, min_ratio=0.3, ties=False))
        weights = w.tolist()
        if draw(st.booleans()):
            weights = dict(zip(next_ids, weights, strict=True))
    return DataModel(M, classes, weights)


def initial_logits(data: DataModel, scale: float = 2.0):
    """Initial logits ``Z(0)`` for :func:`odeflow.solve` (its ``z0=`` argument).

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
    if scale == 0:
        return data, None
    return data, draw(initial_logits(data, scale))


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


# ------------------------------------------------------------------- invalid inputs
def toml_values(max_leaves: int = 6, huge_integers: bool = False, nested: bool = True):
    """Values of every TOML type (what ``tomllib`` can return).

    Parameters
    ----------
    max_leaves : int, default 6
        Size bound of nested arrays and tables.
    huge_integers : bool, default False
        Also draw integers outside TOML's 64-bit range (``tomllib`` accepts
        them).
    nested : bool, default True
        Draw arrays and tables (with scalars only when False).

    Returns
    -------
    SearchStrategy[object]
        Strings, integers, floats (with ``nan``, ``inf``), booleans, dates,
        times, date-times and (if ``nested``) arrays and tables of them.
    """
    bound = 10**400 if huge_integers else TOML_INT_MAX
    scalars = st.one_of(
        st.text(max_size=8),
        st.integers(-bound, bound),
        st.integers(-3, 40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.dates(),
        st.times(),
        st.datetimes(),
    )
    if not nested:
        return scalars
    keys = st.text(min_size=1, max_size=6)
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
        max_leaves=max_leaves)


def _is_token_like(v) -> bool:
    """True for a value the loaders accept as a token id (a non-negative integral number)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, float):
        return math.isfinite(v) and v.is_integer() and v >= 0
    return v >= 0


def _is_number_text(v) -> bool:
    if not isinstance(v, str):
        return False
    try:
        float(v)
    except ValueError:
        return False
    return True


def _not_a_number_text():
    def is_number(s):
        try:
            float(s)
        except ValueError:
            return False
        return True

    return st.text(max_size=6).filter(lambda s: not is_number(s))


_NONFINITE = st.sampled_from([math.nan, math.inf, -math.inf])
_NON_INTEGER = st.tuples(st.integers(-10**6, 10**6), st.floats(0.01, 0.99)).map(
    lambda p: p[0] + p[1])


def _bad_token_ids():
    """Values no token id may take, with a kind label."""
    return st.one_of(
        st.integers(-10**6, -1).map(lambda v: (v, "negative")),
        _NON_INTEGER.map(lambda v: (v, "non-integer")),
        _NONFINITE.map(lambda v: (v, "nonfinite")),
        st.text(max_size=4).map(lambda v: (v, "text")),
        st.booleans().map(lambda v: (v, "bool")),
        st.just((None, "none")),
        st.lists(st.integers(0, 3), max_size=2).map(lambda v: (v, "array")),
    )


@st.composite
def _bad_probs(draw, base: dict):
    """An invalid ``probs`` value derived from a valid mapping ``base``, with its kind."""
    tokens = list(base)
    values = np.array(list(base.values()))
    kind = draw(st.sampled_from(["sum", "negative", "nonfinite", "empty", "2d", "text",
                                 "bad-key", "negative-key", "scalar"]))
    if kind == "sum":
        factor = draw(st.one_of(st.floats(0.0, 0.99), st.floats(1.01, 1e6)))
        return dict(zip(tokens, (values * factor).tolist(), strict=True)), kind
    if kind == "negative":
        i = draw(st.integers(0, len(tokens) - 1))
        v = values.copy()
        v[i] = -draw(st.floats(1e-6, 10.0))
        return dict(zip(tokens, v.tolist(), strict=True)), kind
    if kind == "nonfinite":
        i = draw(st.integers(0, len(tokens) - 1))
        v = values.copy()
        v[i] = draw(_NONFINITE)
        return dict(zip(tokens, v.tolist(), strict=True)), kind
    if kind == "empty":
        return draw(st.sampled_from([{}, []])), kind
    if kind == "2d":
        return [values.tolist(), values.tolist()], kind
    if kind == "text":
        return dict(zip(tokens, [draw(_not_a_number_text()) for _ in tokens],
                        strict=True)), kind
    if kind == "bad-key":
        key = draw(st.one_of(_NON_INTEGER, _not_a_number_text(), st.just(None)))
        return {key: 1.0}, kind
    if kind == "negative-key":
        return {draw(st.integers(-100, -1)): 1.0}, kind
    return draw(st.one_of(st.floats(), st.none())), kind


@st.composite
def invalid_sequence_class_args(draw):
    """Keyword arguments that :class:`~odeflow.data.SequenceClass` must reject.

    One of ``next_token``, ``query_token`` or ``probs`` is made invalid:
    negative, non-integer, non-finite, textual, boolean or missing token ids;
    probabilities that do not sum to one, are negative, non-finite, empty,
    two-dimensional, textual, keyed by non-token ids, or not an array at all.

    Returns
    -------
    SearchStrategy[InvalidInput]
        ``value`` is a dict of keyword arguments; ``field`` is the argument name.
    """
    support = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True))
    p = draw(probability_vectors(len(support)))
    kwargs = {"next_token": draw(st.integers(0, 9)), "query_token": draw(st.integers(0, 9)),
              "probs": dict(zip(support, p.tolist(), strict=True))}
    target = draw(st.sampled_from(["next_token", "query_token", "probs"]))
    if target == "probs":
        kwargs["probs"], kind = draw(_bad_probs(kwargs["probs"]))
    else:
        kwargs[target], kind = draw(_bad_token_ids())
    return InvalidInput(kwargs, target, f"{target}:{kind}")


@st.composite
def invalid_data_model_args(draw, models=None):
    """Keyword arguments (``vocab_size``, ``classes``, ``weights``) DataModel must reject.

    Starts from a valid model and breaks one thing: the vocabulary size
    (below 2, non-integer, non-finite, textual, boolean, or too small for the
    tokens in use), the class list (empty, not a list, an entry that is not a
    :class:`SequenceClass`, a duplicate next token, a dense ``probs`` of the
    wrong length) or the weights (wrong count, non-positive, not summing to
    one, non-finite, a mapping missing a next token).

    Parameters
    ----------
    models : SearchStrategy[DataModel], optional
        Source of the valid starting models; :func:`data_models` by default.

    Returns
    -------
    SearchStrategy[InvalidInput]
    """
    data = draw(models if models is not None else data_models())
    K, M = data.num_classes, data.vocab_size
    kwargs = {"vocab_size": M, "classes": list(data.classes), "weights": data.weights.tolist()}
    kind = draw(st.sampled_from([
        "vocab_size:small", "vocab_size:non-integer", "vocab_size:nonfinite",
        "vocab_size:text", "vocab_size:bool", "vocab_size:too-small-for-tokens",
        "classes:empty", "classes:not-a-list", "classes:entry", "classes:duplicate",
        "classes:dense-length", "weights:count", "weights:nonpositive", "weights:sum",
        "weights:nonfinite", "weights:mapping"]))
    field = kind.split(":")[0]
    if kind == "vocab_size:small":
        kwargs["vocab_size"] = draw(st.integers(-10, 1))
    elif kind == "vocab_size:non-integer":
        kwargs["vocab_size"] = draw(_NON_INTEGER)
    elif kind == "vocab_size:nonfinite":
        kwargs["vocab_size"] = draw(_NONFINITE)
    elif kind == "vocab_size:text":
        kwargs["vocab_size"] = draw(st.text(max_size=4))
    elif kind == "vocab_size:bool":
        kwargs["vocab_size"] = draw(st.booleans())
    elif kind == "vocab_size:too-small-for-tokens":
        used = max(max(c.next_token, c.query_token, int(c.support[-1])) for c in data.classes)
        if used < 2:
            kwargs["vocab_size"] = 1
        else:
            kwargs["vocab_size"] = draw(st.integers(2, used))
            field = "classes["
    elif kind == "classes:empty":
        kwargs["classes"] = []
    elif kind == "classes:not-a-list":
        kwargs["classes"] = draw(st.sampled_from([data.classes[0], None, 3, {"a": 1}]))
    elif kind == "classes:entry":
        i = draw(st.integers(0, K - 1))
        kwargs["classes"][i] = draw(st.one_of(st.none(), st.integers(), st.text(max_size=3),
                                              st.just(data.classes[i].to_dict())))
        field = f"classes[{i}]"
    elif kind == "classes:duplicate":
        i = draw(st.integers(0, K - 1))
        j = draw(st.integers(0, K))
        kwargs["classes"].insert(j, data.classes[i])
        kwargs["weights"] = None
        field = f"classes[{max(j, i + 1) if j <= i else j}].next_token"
    elif kind == "classes:dense-length":
        i = draw(st.integers(0, K - 1))
        c = data.classes[i]
        extra = draw(st.integers(1, 3))
        probs = np.zeros(max(M + extra, int(c.support[-1]) + 1))
        probs[c.support] = c.support_probs
        if draw(st.booleans()) and int(c.support[-1]) < M - 1:
            probs = probs[: M - 1]
        kwargs["classes"][i] = SequenceClass(c.next_token, c.query_token, probs)
        field = f"classes[{i}].probs"
    elif kind == "weights:count":
        n = draw(st.integers(0, K + 2).filter(lambda n: n != K))
        kwargs["weights"] = [1.0 / n] * n if n else []
    elif kind == "weights:nonpositive":
        i = draw(st.integers(0, K - 1))
        kwargs["weights"][i] = -draw(st.sampled_from([0.0, 0.5, 2.0]))
    elif kind == "weights:sum":
        factor = draw(st.one_of(st.floats(0.01, 0.99), st.floats(1.01, 100.0)))
        kwargs["weights"] = [w * factor for w in kwargs["weights"]]
    elif kind == "weights:nonfinite":
        i = draw(st.integers(0, K - 1))
        kwargs["weights"][i] = draw(_NONFINITE)
    else:  # weights:mapping
        mapping = dict(zip(data.next_tokens.tolist(), kwargs["weights"], strict=True))
        drop = draw(st.sampled_from(sorted(mapping)))
        del mapping[drop]
        if draw(st.booleans()):
            mapping[M + 5] = 0.5
        kwargs["weights"] = mapping
    return InvalidInput(kwargs, field, kind)


@st.composite
def invalid_model_tables(draw, models=None, huge_integers: bool = False):
    """Data-model tables (the TOML schema) that :meth:`DataModel.from_dict` must reject.

    Starts from a valid table (:func:`model_tables`) and breaks one thing:
    removes a required key, adds an unknown key, puts a value of the wrong
    TOML type (string, date, array, table, ...) or out of range where a
    vocabulary size, token id, probability, weight or flag belongs, repeats a
    token or a next token, or gives weights for only some classes. Every
    table stays serialisable with ``tomli_w``, so the same inputs also test
    :meth:`DataModel.from_toml_string` and :func:`odeflow.data.config.parse_config`.

    Parameters
    ----------
    models : SearchStrategy[DataModel], optional
        Source of the valid starting models; :func:`data_models` by default.
    huge_integers : bool, default False
        Let wrong-type values include integers beyond TOML's 64-bit range.

    Returns
    -------
    SearchStrategy[InvalidInput]
    """
    table, data = draw(model_tables(models))
    K, M = data.num_classes, data.vocab_size
    junk = toml_values(huge_integers=huge_integers)
    i = draw(st.integers(0, K - 1))
    entry = table["classes"][i]
    name = f"classes[{i}]"
    kind = draw(st.sampled_from([
        "vocab_size:missing", "vocab_size:type", "vocab_size:small", "classes:missing",
        "classes:type", "classes:empty", "class:type", "class:missing-key", "unknown-key",
        "class:unknown-key", "next_token:bad", "query_token:bad", "next_token:range",
        "next_token:duplicate", "probs:bad-value", "probs:sum", "probs:negative",
        "probs:nonfinite", "tokens:range", "tokens:duplicate", "tokens:type", "probs:length",
        "weight:partial", "weight:nonpositive", "weight:type", "normalize:type"]))
    if kind == "vocab_size:missing":
        del table["vocab_size"]
        field = "vocab_size"
    elif kind == "vocab_size:type":
        table["vocab_size"] = draw(junk.filter(lambda v: not (_is_token_like(v) and v >= 2)))
        field = "vocab_size"
    elif kind == "vocab_size:small":
        table["vocab_size"] = draw(st.integers(-TOML_INT_MAX, 1))
        field = "vocab_size"
    elif kind == "classes:missing":
        del table["classes"]
        field = "classes"
    elif kind == "classes:type":
        table["classes"] = draw(junk.filter(lambda v: not isinstance(v, list)))
        field = "classes"
    elif kind == "classes:empty":
        table["classes"] = []
        field = "classes"
    elif kind == "class:type":
        entry = draw(junk.filter(lambda v: not isinstance(v, dict)))
        table["classes"][i] = entry
        field = name
    elif kind == "class:missing-key":
        key = draw(st.sampled_from(["next_token", "query_token", "probs"]))
        del entry[key]
        entry.pop("tokens", None) if key == "probs" else None
        field = f"{name}.{key}"
    elif kind == "unknown-key":
        key = draw(st.text(min_size=1, max_size=8).filter(
            lambda k: k not in ("vocab_size", "classes", "normalize", "data", "run")))
        table[key] = draw(junk)
        field = key
    elif kind == "class:unknown-key":
        key = draw(st.text(min_size=1, max_size=8).filter(
            lambda k: k not in ("next_token", "query_token", "tokens", "probs", "weight")))
        entry[key] = draw(junk)
        field = f"{name}.{key}"
    elif kind in ("next_token:bad", "query_token:bad"):
        key = kind.split(":")[0]
        entry[key] = draw(junk.filter(lambda v: not _is_token_like(v)))
        field = f"{name}.{key}"
    elif kind == "next_token:range":
        entry["next_token"] = draw(st.integers(M, TOML_INT_MAX))
        field = f"{name}.next_token"
    elif kind == "next_token:duplicate":
        if K < 2:
            table["classes"].append(dict(entry))
            field = "classes[1].next_token"
        else:
            j = draw(st.integers(0, K - 1).filter(lambda j: j != i))
            table["classes"][max(i, j)]["next_token"] = table["classes"][min(i, j)]["next_token"]
            field = f"classes[{max(i, j)}].next_token"
    elif kind == "probs:bad-value":
        entry.pop("tokens", None)
        entry["probs"] = draw(toml_values(nested=False, huge_integers=huge_integers))
        field = f"{name}.probs"
    elif kind in ("probs:sum", "probs:negative", "probs:nonfinite"):
        values = entry["probs"] if isinstance(entry["probs"], list) else list(
            entry["probs"].values())
        nz = [k for k, v in enumerate(values) if v > 0]
        if kind == "probs:sum":
            factor = draw(st.one_of(st.floats(0.0, 0.99), st.floats(1.01, 1e6)))
            values = [v * factor for v in values]
        elif kind == "probs:negative":
            values[draw(st.sampled_from(nz))] = -draw(st.floats(1e-6, 10.0))
        else:
            values[draw(st.sampled_from(nz))] = draw(_NONFINITE)
        if isinstance(entry["probs"], list):
            entry["probs"] = values
        else:
            entry["probs"] = dict(zip(entry["probs"], values, strict=True))
        field = f"{name}.probs"
    elif kind in ("tokens:range", "tokens:duplicate", "tokens:type", "probs:length"):
        support = [int(t) for t in data.classes[i].support]
        entry.pop("probs")
        entry["tokens"] = support
        entry["probs"] = [float(p) for p in data.classes[i].support_probs]
        if kind == "tokens:range":
            j = draw(st.integers(0, len(support) - 1))
            value = draw(st.one_of(st.integers(M, TOML_INT_MAX), st.integers(-TOML_INT_MAX, -1)))
            entry["tokens"][j] = value
            # a negative or unrepresentable id is refused where it is read (tokens[j]);
            # an id in [M, 2**62) is refused by the data model against M (probs)
            field = f"{name}.tokens[{j}]" if value < 0 or value >= 2**62 else f"{name}.probs"
        elif kind == "tokens:duplicate":
            entry["tokens"].append(support[0])
            entry["probs"] = [p / 2 for p in entry["probs"]] + [entry["probs"][0] / 2]
            field = f"{name}.tokens"
        elif kind == "tokens:type":
            entry["tokens"] = draw(junk.filter(lambda v: not isinstance(v, list)))
            field = f"{name}.tokens"
        else:
            extra = draw(st.integers(1, 2))
            if draw(st.booleans()) or len(support) == 1:
                entry["probs"] = entry["probs"] + [0.0] * extra
            else:
                entry["probs"] = entry["probs"][:-1]
            field = f"{name}.probs"
    elif kind == "weight:partial":
        for e in table["classes"]:
            e["weight"] = 1.0 / K
        if K == 1:
            table["classes"].append({"next_token": (entry["next_token"] + 1) % M,
                                     "query_token": entry["query_token"],
                                     "tokens": [int(data.classes[0].support[0])],
                                     "probs": [1.0]})
        else:
            del table["classes"][i]["weight"]
        field = "classes[].weight"
    elif kind == "weight:nonpositive":
        for e in table["classes"]:
            e["weight"] = 1.0 / K
        entry["weight"] = -draw(st.sampled_from([0.0, 0.25, 1.0]))
        field = "weights"
    elif kind == "weight:type":
        for e in table["classes"]:
            e["weight"] = 1.0 / K
        # Booleans and numeric strings are left out: the loader reads them as numbers.
        entry["weight"] = draw(junk.filter(
            lambda v: not isinstance(v, bool) and not _is_number_text(v)
            and (not isinstance(v, (int, float)) or not v > 0
                 or isinstance(v, float) and not math.isfinite(v))))
        field = "weights"
    else:  # normalize:type
        table["normalize"] = draw(junk.filter(lambda v: not isinstance(v, bool)))
        field = "normalize"
    return InvalidInput(table, field, kind)


_RUN_FLOAT_KEYS = ("eta_y", "eta_z", "t_end", "rtol", "atol")
_RUN_TEXT_KEYS = ("flow", "method")


@st.composite
def invalid_run_tables(draw, huge_integers: bool = False):
    """``[run]`` tables that :func:`odeflow.data.config.parse_config` must reject.

    A learning rate, ``t_end`` or tolerance that is zero, negative,
    non-finite or not a number; a ``flow`` or ``method`` that is not a
    string; or an unknown key.

    Parameters
    ----------
    huge_integers : bool, default False
        Let non-numbers include integers beyond TOML's 64-bit range.

    Returns
    -------
    SearchStrategy[InvalidInput]
        ``value`` is the ``run`` table; ``field`` is ``"run.<key>"``.
    """
    kind = draw(st.sampled_from(["number:nonpositive", "number:nonfinite", "number:type",
                                 "text:type", "unknown-key"]))
    if kind.startswith("number"):
        key = draw(st.sampled_from(_RUN_FLOAT_KEYS))
        if kind == "number:nonpositive":
            value = draw(st.one_of(st.floats(max_value=0.0, allow_nan=False),
                                   st.integers(-TOML_INT_MAX, 0)))
        elif kind == "number:nonfinite":
            value = draw(_NONFINITE)
        else:
            value = draw(st.one_of(
                _not_a_number_text(), st.dates(), st.times(), st.datetimes(),
                st.lists(toml_values(nested=False), max_size=2),
                st.dictionaries(st.text(min_size=1, max_size=3),
                                toml_values(nested=False), max_size=2)))
            if huge_integers:
                value = draw(st.one_of(st.just(value), st.integers(TOML_INT_MAX + 1, 10**400)))
    elif kind == "text:type":
        key = draw(st.sampled_from(_RUN_TEXT_KEYS))
        value = draw(toml_values().filter(lambda v: not isinstance(v, str)))
    else:
        key = draw(st.text(min_size=1, max_size=8).filter(
            lambda k: k not in _RUN_FLOAT_KEYS + _RUN_TEXT_KEYS))
        value = draw(toml_values())
    return InvalidInput({key: value}, f"run.{key}", f"run:{kind}")


@st.composite
def toml_documents(draw, huge_integers: bool = False, nested: bool = True):
    """Arbitrary TOML text and near-TOML text around the data-model schema.

    Mixes three sources: any unicode text; text assembled from lines of the
    schema (``vocab_size = ...``, ``[[classes]]``, ``next_token = ...``,
    ``[run]``, ...) with values of any TOML type and random junk lines; and
    valid documents of :func:`model_tables` with one line dropped or
    duplicated.

    Parameters
    ----------
    huge_integers : bool, default False
        Let values include integers beyond TOML's 64-bit range.
    nested : bool, default True
        Let values include arrays and tables of any depth (scalars and flat
        arrays of scalars only when False).

    Returns
    -------
    SearchStrategy[str]
    """
    import tomli_w

    def literal(value) -> str:
        text = tomli_w.dumps({"x": value}, multiline_strings=False)
        _, _, rest = text.partition("= ")
        if not rest:  # a table rendered as [x]
            return "{}"
        return rest.strip()

    values = toml_values(max_leaves=4, huge_integers=huge_integers, nested=False)
    if nested:
        values = toml_values(max_leaves=4, huge_integers=huge_integers)
    else:
        values = st.one_of(values, st.lists(values, max_size=3))
    keys = st.sampled_from(["vocab_size", "next_token", "query_token", "tokens", "probs",
                            "weight", "normalize", "eta_y", "eta_z", "t_end", "flow",
                            "method", "rtol", "atol", "data", "run", "classes", "x"])
    headers = st.sampled_from(["[[classes]]", "[run]", "[data]", "[[data.classes]]",
                               "[classes]", "[probs]"])

    @st.composite
    def schema_lines(draw2):
        lines = []
        for _ in range(draw2(st.integers(1, 12))):
            choice = draw2(st.integers(0, 9))
            if choice == 0:
                lines.append(draw2(headers))
            elif choice == 1:
                lines.append(draw2(st.text(max_size=12)))
            else:
                value = draw2(values)
                try:
                    lines.append(f"{draw2(keys)} = {literal(value)}")
                except (TypeError, ValueError):
                    lines.append(f"{draw2(keys)} = 0")
        return "\n".join(lines)

    @st.composite
    def damaged_documents(draw2):
        table, _ = draw2(model_tables())
        lines = tomli_w.dumps(table).splitlines()
        i = draw2(st.integers(0, len(lines) - 1))
        if draw2(st.booleans()):
            del lines[i]
        else:
            lines.insert(i, lines[i])
        return "\n".join(lines)

    return draw(st.one_of(st.text(max_size=80), schema_lines(), damaged_documents()))


# ------------------------------------------------------------------ solve arguments
_SOLVE_KINDS = [
    "eta_y:nonpositive", "eta_y:nonfinite", "eta_y:text", "eta_y:none",
    "eta_z:nonpositive", "eta_z:nonfinite", "eta_z:text", "eta_z:none",
    "t_span:shape", "t_span:t0", "t_end:nonpositive", "t_end:nonfinite", "t_end:before-t0",
    "t_eval:order", "t_eval:nonfinite", "t_eval:outside", "t_eval:empty", "t_eval:2d",
    "t_eval:text", "method:unknown", "rtol:nonpositive", "atol:nonfinite", "flow:unknown",
    "flow:unhashable", "z0:shape", "z0:nonfinite", "z0:text", "z0:row-length",
    "z0:unknown-query", "data:type", "beta:negative", "iota:nonpositive",
    "number:huge-int",
]


@st.composite
def invalid_solve_arguments(draw, data: DataModel, kinds: Sequence[str] | None = None):
    """Keyword arguments of :func:`odeflow.solve` that must be rejected before integrating.

    Parameters
    ----------
    data : DataModel
        The (valid) model the other arguments refer to.
    kinds : sequence of str, optional
        Restrict to these kinds (default: all). The kinds are
        ``"<argument>:<what>"``: learning rates ``eta_y``/``eta_z`` that are
        zero, negative, non-finite, text or None; ``t_span`` of the wrong shape or
        with a negative ``t0``; ``t_end`` non-positive, non-finite or before
        ``t0``; ``t_eval`` not increasing, non-finite, outside the span,
        empty, two-dimensional or text; an unknown ``method`` or ``flow``, an
        unhashable ``flow``; non-positive or non-finite tolerances; ``z0`` of
        the wrong shape, non-finite, text, with a row of the wrong length or
        keyed by a token that is no query; ``data`` that is not a DataModel;
        for ``flow="reduced"``, a negative ``beta`` (labelled
        ``"beta:negative-unused"`` when the model has a single class, so that no
        entry of the matrix uses it) or non-positive ``iota``;
        and ``number:huge-int``, a Python integer too large for a float in a
        numeric argument.

    Returns
    -------
    SearchStrategy[InvalidInput]
        ``value`` holds all keyword arguments including ``data``.
    """
    kind = draw(st.sampled_from(list(kinds) if kinds is not None else _SOLVE_KINDS))
    q, M = data.query_tokens.size, data.vocab_size
    kwargs = {"data": data, "t_span": (0.0, 1.0), "t_eval": None}
    slot, what = kind.split(":")
    field = slot
    nonpositive = st.one_of(st.just(0.0), st.floats(max_value=0.0, allow_nan=False),
                            st.integers(-10**6, 0))
    if slot in ("eta_y", "eta_z", "rtol", "atol"):
        kwargs[slot] = draw({"nonpositive": nonpositive, "nonfinite": _NONFINITE,
                             "text": _not_a_number_text(), "none": st.none()}[what])
    elif kind == "t_span:shape":
        kwargs["t_span"] = draw(st.one_of(
            st.sampled_from([None, 1.0, "", "ab", "abc"]),
            st.lists(st.floats(0, 10), max_size=4).filter(lambda v: len(v) != 2)))
    elif kind == "t_span:t0":
        kwargs["t_span"] = (draw(st.one_of(st.floats(max_value=-1e-9, allow_nan=False),
                                           _NONFINITE)), 1.0)
    elif kind == "t_end:nonpositive":
        kwargs["t_span"] = (0.0, draw(nonpositive))
    elif kind == "t_end:nonfinite":
        kwargs["t_span"] = (0.0, draw(_NONFINITE))
    elif kind == "t_end:before-t0":
        t0 = draw(st.floats(1e-3, 1e3))
        kwargs["t_span"] = (t0, t0 * draw(st.floats(0.0, 1.0)))
    elif slot == "t_eval":
        if what == "order":
            kwargs["t_eval"] = [0.0, 0.5, draw(st.floats(0.0, 0.5)), 1.0]
        elif what == "nonfinite":
            kwargs["t_eval"] = [0.0, draw(_NONFINITE), 1.0]
        elif what == "outside":
            kwargs["t_eval"] = draw(st.sampled_from([[0.0, 2.0], [-1.0, 0.5]]))
        elif what == "empty":
            kwargs["t_eval"] = []
        elif what == "2d":
            kwargs["t_eval"] = [[0.0, 1.0]]
        else:
            kwargs["t_eval"] = draw(_not_a_number_text())
    elif kind == "method:unknown":
        kwargs["method"] = draw(st.text(max_size=8).filter(
            lambda s: s not in ("auto", "Radau", "BDF", "LSODA", "RK45", "DOP853", "RK23")))
    elif kind == "flow:unknown":
        kwargs["flow"] = draw(st.one_of(st.none(), st.text(max_size=8)).filter(
            lambda s: s not in ("exact", "reduced", "snap")))
    elif kind == "flow:unhashable":
        kwargs["flow"] = draw(st.sampled_from([[], ["exact"], {}]))
    elif slot == "z0":
        if what == "shape":
            shape = draw(st.tuples(st.integers(0, 3), st.integers(0, M + 2)).filter(
                lambda s: s != (q, M)))
            kwargs["z0"] = np.zeros(shape)
        elif what == "nonfinite":
            z0 = np.zeros((q, M))
            z0[draw(st.integers(0, q - 1)), draw(st.integers(0, M - 1))] = draw(_NONFINITE)
            kwargs["z0"] = z0
        elif what == "text":
            kwargs["z0"] = draw(_not_a_number_text())
        elif what == "row-length":
            m = int(data.query_tokens[draw(st.integers(0, q - 1))])
            kwargs["z0"] = {m: np.zeros(draw(st.integers(0, M + 2).filter(lambda n: n != M)))}
            field = f"z0[{m}]"
        else:
            bad = draw(st.integers(-5, M + 5).filter(lambda m: m not in data.query_tokens))
            kwargs["z0"] = {bad: np.zeros(M)}
    elif kind == "data:type":
        kwargs["data"] = draw(st.one_of(st.none(), st.integers(), st.just(data.to_dict())))
    elif kind == "beta:negative":
        kwargs["flow"] = "reduced"
        kwargs["beta"] = -draw(st.floats(1e-6, 10.0))
        if data.num_classes == 1:  # no pair n != n' for the scalar to fill
            kind = "beta:negative-unused"
    elif kind == "iota:nonpositive":
        kwargs["flow"] = "reduced"
        kwargs["iota"] = draw(st.one_of(nonpositive, _NONFINITE))
    else:  # number:huge-int
        slot = draw(st.sampled_from(["eta_y", "eta_z", "rtol", "atol", "t_end"]))
        big = draw(st.integers(2**1024, 10**400))
        if slot == "t_end":
            kwargs["t_span"] = (0, big)
        else:
            kwargs[slot] = big
        field = slot
    return InvalidInput(kwargs, field, kind)


# ------------------------------------------------------------------- fuzzing
#: Floats a careless or hostile user passes: extremes, subnormals, non-finite.
_EXTREME_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-308, 1e-200, 1e-12, 1.0, 2.0, 1e12, 1e200, 1e299,
                     1.7976931348623157e308, -1.0, math.inf, -math.inf, math.nan]),
    st.floats(-1e3, 1e3))

#: Arity of every public closed form (``odeflow.analysis.closed_forms``).
CLOSED_FORM_ARITY = {"decoder_margin": 4, "speed_control": 4, "speed_control_early": 4,
                     "speed_control_late": 4, "transition_time": 3, "gamma_integral": 4,
                     "relative_gain": 3, "dominant_bounds": 2, "snap_common_logit": 7,
                     "snap_B": 7}


def _closed_form_argument():
    scalar = st.one_of(_EXTREME_FLOATS, st.integers(-10, 10**6), st.booleans(),
                       st.sampled_from(["1", None, 1j]))
    arrays = st.lists(_EXTREME_FLOATS, min_size=0, max_size=3)
    ragged = st.just([1.0, [2.0, 3.0]])
    return st.one_of(_EXTREME_FLOATS, _EXTREME_FLOATS, _EXTREME_FLOATS, scalar, arrays, ragged)


@st.composite
def closed_form_calls(draw):
    """``(name, args)``: a closed form and arguments of every kind (extreme, wrong, ragged).

    Each argument is mostly an extreme float (subnormal, huge, non-finite,
    zero) and sometimes an integer, a bool, text, ``None``, a complex number,
    a short list or a ragged nested list.
    """
    name = draw(st.sampled_from(sorted(CLOSED_FORM_ARITY)))
    args = tuple(draw(_closed_form_argument()) for _ in range(CLOSED_FORM_ARITY[name]))
    return name, args


@st.composite
def corrupted_bytes(draw, original: bytes):
    """A damaged copy of a file's bytes: truncated, bytes flipped or overwritten, junk inserted,
    emptied, or replaced by unrelated content (text, a pickle-like header)."""
    data = bytearray(original)
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "insert", "empty",
                                 "unrelated"]))
    if kind == "truncate":
        return bytes(data[:draw(st.integers(0, max(len(data) - 1, 0)))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        return bytes(data)
    if kind == "overwrite":
        i = draw(st.integers(0, len(data) - 1))
        junk = draw(st.binary(min_size=1, max_size=64))
        data[i:i + len(junk)] = junk
        return bytes(data)
    if kind == "insert":
        i = draw(st.integers(0, len(data)))
        return bytes(data[:i] + draw(st.binary(min_size=1, max_size=64)) + data[i:])
    if kind == "empty":
        return b""
    return draw(st.one_of(st.binary(max_size=256), st.just(b"\x80\x04\x95junk."),
                          st.text(max_size=64).map(str.encode)))


@st.composite
def tampered_result_arrays(draw, arrays: dict, metadata: dict):
    """One structural fault in the arrays or the JSON metadata of a result file.

    Parameters
    ----------
    arrays : dict of str -> ndarray
        The arrays of an intact file (without ``metadata``).
    metadata : dict
        Its metadata record.

    Returns
    -------
    SearchStrategy[dict]
        Arrays to write with ``np.savez`` (``metadata`` as a 0-d text array),
        with one of: an array dropped, added, reshaped, retyped (text, bool,
        complex) or holding a NaN / inf; the metadata not JSON, not an object,
        a key dropped or retyped, an unknown format version, or a data model
        with a changed vocabulary or class.
    """
    import copy
    import json

    out = {k: np.array(v) for k, v in arrays.items()}
    meta = copy.deepcopy(metadata)
    text = None
    names = sorted(out)
    kind = draw(st.sampled_from(["drop", "add", "reshape", "retype", "nonfinite", "json",
                                 "not-object", "drop-key", "retype-key", "version", "vocab",
                                 "class"]))
    name = draw(st.sampled_from(names))
    if kind == "drop":
        del out[name]
    elif kind == "add":
        out[draw(st.sampled_from(["extra", "series__extra", "decoder_lumped"]))] = \
            np.zeros(draw(st.sampled_from([(), (1,), (3, 2), (0,)])))
    elif kind == "reshape":
        value = out[name].ravel()
        shapes = [(value.size,), (1, value.size), (), (0,), (value.size + 1,)]
        shape = draw(st.sampled_from(shapes))
        out[name] = np.resize(value, shape) if shape else np.array(value[:1].sum())
    elif kind == "retype":
        out[name] = draw(st.sampled_from([out[name].astype(str), out[name].astype(bool),
                                          out[name].astype(complex)]))
    elif kind == "nonfinite":
        value = out[name].astype(float)
        if value.size:
            value.flat[draw(st.integers(0, value.size - 1))] = draw(
                st.sampled_from([np.nan, np.inf, -np.inf]))
        out[name] = value
    elif kind == "json":
        text = draw(st.sampled_from(["", "{", "not json", "[1, 2", '{"format": }']))
    elif kind == "not-object":
        text = json.dumps(draw(st.sampled_from([[], 1, "odeflow", None])))
    elif kind == "drop-key":
        meta.pop(draw(st.sampled_from(sorted(meta))), None)
    elif kind == "retype-key":
        meta[draw(st.sampled_from(sorted(meta)))] = draw(st.sampled_from([None, 1, "x", []]))
    elif kind == "version":
        meta["format"] = draw(st.sampled_from(["odeflow-trajectory/2", "odeflow-snap/1", "", 7,
                                               "odeflow-trajectory/0"]))
    elif kind == "vocab":
        meta["data"]["vocab_size"] = draw(st.sampled_from([meta["data"]["vocab_size"] + 1,
                                                           1, 0, -3, "30", 10**30]))
    else:
        classes = meta["data"]["classes"]
        if len(classes) > 1 and draw(st.booleans()):
            classes.pop()
        else:
            classes[0]["query_token"] = int(classes[0]["query_token"]) + 1
    out["metadata"] = np.array(json.dumps(meta) if text is None else text)
    return out


def _verb_parsers() -> dict:
    """The sub-parser of each verb of :func:`odeflow.cli.build_parser`, by verb."""
    import argparse

    from odeflow.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}  # pragma: no cover (the parser always has subcommands)


def cli_verbs() -> tuple[str, ...]:
    """The verbs the ``odeflow`` parser really has (from :func:`odeflow.cli.build_parser`)."""
    return tuple(_verb_parsers())


def cli_flags(verb: str) -> set[str]:
    """The option strings the parser of ``odeflow VERB`` accepts."""
    return {o for a in _verb_parsers()[verb]._actions for o in a.option_strings}


#: Verbs the CLI fuzzers cover: every verb of the real parser (a new command
#: module is picked up here, and ``test_every_verb_has_a_fuzzer`` then asks for
#: its fuzzer and its entry in :data:`CLI_FLAGS`).
CLI_VERBS = cli_verbs()

#: The flags :func:`cli_argv` draws from, per verb (each must exist in the verb's
#: parser: see :func:`cli_flags`).
CLI_FLAGS = {
    "run": ["--t-end", "--eta-y", "--eta-z", "--rtol", "--atol", "--rows", "--flow",
            "--method", "--preset", "--config", "--out"],
    "compare-levels": ["--t-end", "--eta-y", "--eta-z", "--ratios", "--rtol", "--atol",
                       "--preset", "--config"],
    "compare": ["--steps", "--t-end", "--eta-y", "--eta-z", "--seeds", "--batch-size",
                "--seq-len", "--dt", "--run", "--record-every", "--momentum", "--rows",
                "--preset", "--config"],
    "plot": ["--t-end", "--eta-y", "--eta-z", "--dpi", "--flow", "--preset", "--config",
             "--out", "--format"],
    "verify": ["--rtol", "--atol", "--method", "--tolerance", "--t-max", "--seed",
               "--only"],
    # the fuzzers keep --backend serial (no process pool, no dask cluster)
    "sweep": ["--backend", "--scheduler", "--workers", "--batch", "--out", "--resume",
              "--retry-failed", "--rows", "--no-progress"],
    "reproduce": ["--seeds", "--steps", "--out", "--same-start", "--no-progress"],
}

#: Flags without a value.
_SWITCHES = ("--resume", "--retry-failed", "--no-progress", "--same-start")


def _cli_number():
    return st.one_of(
        st.sampled_from(["0", "-1", "1e-3", "0.5", "1", "10", "1e12", "1e300", "5e-324",
                         "inf", "-inf", "nan", "1e999", "abc", "", "99999999999999999999"]),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers(-10**25, 10**25).map(str))


@st.composite
def cli_argv(draw, verb: str, files: dict | None = None):
    """An argument vector for ``odeflow VERB ...`` as a careless or hostile user types it.

    Flags of the verb with values drawn from extreme numbers (``0``, ``inf``,
    ``nan``, ``1e999``, 20-digit integers, subnormals), text and odd lists
    (``0.1,,0.2``); ``files`` maps names to paths the fuzzer prepared (e.g.
    ``{"config": [...], "out": [...]}``: broken configs, directories, ``/``).
    Costly inputs are bounded: ``--t-end`` is at most 10 unless drawn from the
    extreme list; ``reproduce`` draws ``--steps``/``--seeds`` of 1 or 2 or past
    the command's limits. ``sweep`` takes its config from ``files["config"]``
    (see :func:`sweep_config_texts`) and keeps the backend ``serial``.
    """
    files = files or {}
    argv = [verb]
    flags = CLI_FLAGS[verb]
    if verb == "plot":
        argv.append(draw(st.sampled_from(["margin", "entropy", "scan-snap", "levels",
                                          "relative-gain", "attention-map", "all", "nope"])))
    elif verb == "sweep":
        argv.append(draw(st.sampled_from(list(files.get("config") or ["sweep.toml"]))))
    elif verb == "reproduce":
        argv.append(draw(st.sampled_from(["fig4", "fig5", "fig6", "fig7", "FIG4", ""])))
    chosen = draw(st.lists(st.sampled_from(flags), max_size=5, unique=True))
    for flag in chosen:
        key = flag.lstrip("-")
        if flag in _SWITCHES:
            argv.append(flag)
            continue
        if key in files and files[key]:
            value = draw(st.sampled_from(list(files[key])))
        elif key in ("flow",):
            value = draw(st.sampled_from(["exact", "reduced", "snap", "EXACT", "", "sgd"]))
        elif key in ("method",):
            value = draw(st.sampled_from(["auto", "LSODA", "RK23", "Radau", "BDF", "x"]))
        elif key == "run":
            value = draw(st.sampled_from(["sgd", "gradient_ascent", "x"]))
        elif key == "preset":
            value = draw(st.sampled_from(["syn-small", "nope", ""]))
        elif key == "ratios":
            value = draw(st.one_of(st.sampled_from(["0.1,,0.2", ",", "", "1,nan", "inf",
                                                    "0.1,1", "-1", "1e-300,1e300"]),
                                   st.lists(_cli_number(), max_size=3).map(",".join)))
        elif key == "only":
            value = draw(st.sampled_from(["CF1", "cf3", "CF9", ""]))
        elif key == "format":
            value = draw(st.sampled_from(["png", "svg", "gif"]))
        elif key == "backend":
            value = draw(st.sampled_from(["serial", "serial", "SERIAL", ""]))
        elif key == "scheduler":
            value = draw(st.sampled_from(["tcp://127.0.0.1:1", "", "nonsense"]))
        elif verb == "sweep" and key in ("workers", "batch", "rows"):
            value = draw(st.one_of(st.sampled_from(["1", "2", "3"]), _cli_number()))
        elif verb == "reproduce" and key in ("steps", "seeds"):
            # tiny valid counts, or counts past the limits (a valid large count is a
            # long run, not a fuzz case)
            past = "100001" if key == "steps" else "1001"
            value = draw(st.sampled_from(["1", "2", "1", "0", "-3", past,
                                          "99999999999999999999", "1e3", "1.5", "abc", ""]))
        elif key in ("out", "config"):
            value = draw(st.sampled_from(["", "/", ".", "x.toml"]))
        elif key in ("t-end", "t-max", "steps"):
            value = draw(st.one_of(st.sampled_from(["0.01", "0.5", "1", "3", "10"]),
                                   _cli_number()))
        else:
            value = draw(_cli_number())
        argv += [flag, value]
    return argv


#: Sweep task kinds by family (the names of :data:`odeflow.sweep.TASKS`).
_SWEEP_FLOWS = ("exact", "reduced", "snap", "finite_t")
_SWEEP_RUNS = ("gradient_ascent", "sgd", "adam")

#: Raw texts of sweep configs that are not a sweep config at all.
_SWEEP_RAW = ("", "[sweep", "[sweep]\ntask = ", "sweep = 3", "[sweep]\ngrid = 3",
              "[sweep]\nsettings = [1]", "[[sweep]]\ntask = 'exact'",
              "a = " + "[" * 3000 + "]" * 3000, "[sweep]\ntask = 'exact'\n[sweep]\n",
              "[sweep.grid]\neta_y = [" + "[" * 2000 + "]" * 2000 + "]")


@st.composite
def sweep_config_texts(draw) -> str | bytes:
    """Text of a small ``odeflow sweep`` config (TOML), valid or broken.

    Valid configs run in well under a second per point on the serial backend:
    one task, a grid of at most 2 x 2 points, a short horizon (``t_end`` <= 2,
    ``steps`` <= 3, batches of at most 4 sequences of length <= 8), the
    ``syn-small`` preset or a small data model (:func:`data_models`). Broken ones
    have a bad value in the grid or settings, an unknown or empty key (in
    ``[sweep]``, its tables or the top level), a wrong task, a preset beside a
    data model, bad ``store``/``format``/``backend`` entries, invalid or deeply
    nested TOML, or bytes that are not UTF-8 (returned as ``bytes``).
    """
    import tomli_w

    kind = draw(st.sampled_from(["valid"] * 7 + ["bad-value", "unknown-key", "top-level",
                                                 "task", "both-data", "entries", "raw",
                                                 "bytes"]))
    if kind == "raw":
        return draw(st.sampled_from(_SWEEP_RAW))
    if kind == "bytes":
        return draw(st.sampled_from([b"\xff\xfe[sweep]", b"[sweep]\ntask = '\xc3('",
                                     b"\x00\x00\x00"]))
    task = draw(st.sampled_from(_SWEEP_FLOWS + _SWEEP_RUNS))
    flow = task in _SWEEP_FLOWS
    horizon = "t_end" if flow else "steps"
    horizons = [0.1, 0.5, 1.0, 2.0] if flow else [1, 2, 3]
    settings = {horizon: draw(st.sampled_from(horizons))}
    if task in ("sgd", "adam"):
        settings.update(batch_size=draw(st.integers(1, 4)), seq_len=draw(st.integers(2, 8)))
    if task == "finite_t":
        settings.update(seq_len=draw(st.integers(2, 8)),
                        samples_per_class=draw(st.integers(1, 4)))
    names = draw(st.lists(st.sampled_from(["eta_y", "eta_z", horizon]), min_size=1,
                          max_size=2, unique=True))
    grid = {}
    for name in names:
        pool = horizons if name == horizon else [0.5, 1.0, 2.0]
        grid[name] = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2,
                                   unique=True))
        settings.pop(name, None)
    table = {"task": task, "grid": grid, "settings": settings}
    if task in ("finite_t", "sgd", "adam") and draw(st.booleans()):
        table["seeds"] = draw(st.sampled_from([[0], [0, 1]]))
    doc = {}
    if draw(st.booleans()):
        table["preset"] = "syn-small"
    elif draw(st.booleans()):
        model = draw(data_models(max_classes=2, max_vocab=8)).to_dict()
        doc.update({"data": model} if draw(st.booleans()) else model)
    if kind == "bad-value":
        where = draw(st.sampled_from(["grid", "settings", "seeds"]))
        value = draw(st.sampled_from([[], [0], [-1.0], ["a"], [1.0, 1.0], "x", [math.inf],
                                      [math.nan], [True], 0, [[1.0]], {"a": 1}]))
        if where == "seeds":
            table["seeds"] = value
        else:
            table[where][draw(st.sampled_from(["eta_y", "eta_z", horizon, "method"]))] = value
    elif kind == "unknown-key":
        where = draw(st.sampled_from(["sweep", "grid", "settings"]))
        key = draw(st.sampled_from(["", " ", "nope", "eta-y", "seed", "task", "preset"]))
        value = [1.0] if where == "grid" else 1
        (table if where == "sweep" else table[where])[key] = value
    elif kind == "top-level":
        key = draw(st.sampled_from(["", "foo", "data", "run", "sweeps", "vocab_size",
                                    "classes"]))
        doc[key] = draw(st.sampled_from([1, {"x": 1}, {}, "text", [1, 2]]))
    elif kind == "task":
        table["task"] = draw(st.sampled_from(["nope", "", "EXACT", 3, ["exact"]]))
        if draw(st.booleans()):
            table["grid"]["task"] = draw(st.sampled_from([["exact", "sgd"], [], ["nope"],
                                                          "exact", ["exact", "reduced"]]))
    elif kind == "both-data":
        table["preset"] = draw(st.sampled_from(["syn-small", "nope", "", 3]))
        doc.update(draw(data_models(max_classes=1, max_vocab=6)).to_dict())
    else:  # the sweep's own entries (the CLI keeps the serial backend)
        entry = draw(st.sampled_from(["store", "format", "backend", "scheduler", "workers",
                                      "batch"]))
        table[entry] = draw(st.sampled_from({
            "store": ["s.zarr", "adir", "afile", "dangling", "x.nc", "", 5, "sub/s.zarr"],
            "format": ["zarr", "netcdf", "hdf5", 3],
            "backend": ["serial", "processes", "dask", "nope"],
            "scheduler": ["tcp://127.0.0.1:1", "", 3],
            "workers": [1, 0, -2, 2.5, "x"],
            "batch": [1, 2, 0, -1, 10**12, 1.5, "x"]}[entry]))
    doc["sweep"] = table
    return tomli_w.dumps(doc)
