"""Hypothesis strategies of invalid inputs for odeflow's own validation tests.

Each strategy draws an input the package must reject, labelled
(:class:`InvalidInput`) with the field its :class:`~odeflow.errors.ValidationError`
must name: bad sequence classes and data models, data-model and ``[run]``
tables of the TOML schema, arbitrary and near-TOML text, and bad arguments of
:func:`odeflow.solve`. They serve ``tests/properties``; the strategies of
valid inputs are public, in :mod:`odeflow.testing` (``docs/testing.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from odeflow.data import DataModel, SequenceClass
from odeflow.testing import data_models, model_tables, probability_vectors

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
            kwargs["start"] = (None, np.zeros(shape))
        elif what == "nonfinite":
            z0 = np.zeros((q, M))
            z0[draw(st.integers(0, q - 1)), draw(st.integers(0, M - 1))] = draw(_NONFINITE)
            kwargs["start"] = (None, z0)
        elif what == "text":
            kwargs["start"] = (None, draw(_not_a_number_text()))
        elif what == "row-length":
            m = int(data.query_tokens[draw(st.integers(0, q - 1))])
            length = draw(st.integers(0, M + 2).filter(lambda n: n != M))
            kwargs["start"] = (None, {m: np.zeros(length)})
            field = f"z0[{m}]"
        else:
            bad = draw(st.integers(-5, M + 5).filter(lambda m: m not in data.query_tokens))
            kwargs["start"] = (None, {bad: np.zeros(M)})
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

